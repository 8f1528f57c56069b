"""Hostile files for every reader: binary, UTF-16, Latin-1, alias bombs, deep nesting,
oversized; the ones that could hang or blow up run in a limited subprocess."""

from __future__ import annotations

import json

from malformed_hf import HF

# hostile files for every reader: name -> (bytes, expected problem is the reader's field)
_BOMB = (
    "\n".join(
        ["l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
        + [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    )
    + "\n"
)
YAML_FILES: dict[str, bytes] = {
    "binary": bytes(range(256)) * 4,
    "utf16": "name: x\nseed: 1\n".encode("utf-16"),
    "latin1": "name: café\n".encode("latin-1"),
    "empty": b"",
    "list": b"- 1\n- 2\n",
    "scalar": b"just words\n",
    "syntax": b"name: [unclosed\n",
    "tabs": b"a:\n\t- 1\n",
    "bomb": _BOMB.encode(),
    "recursive": b"a: &a [1, *a]\n",
    "deep": b"[" * 5000 + b"]" * 5000,
    "deep_blocks": "".join("  " * i + f"k{i}:\n" for i in range(60)).encode() + b"  " * 60 + b"x\n",
    "big": b"# " + b"x" * (2 << 20) + b"\n",
    "nul": b"name: a\0b\n",
    "aliases": ("a: &a 1\nb: [" + ", ".join(["*a"] * 200) + "]\n").encode(),
}
JSON_FILES: dict[str, bytes] = {
    "binary": bytes(range(256)) * 4,
    "utf16": json.dumps(HF).encode("utf-16"),
    "latin1": b'{"model_type": "caf\xe9"}',
    "empty": b"",
    "list": b"[1, 2]",
    "scalar": b"3",
    "syntax": b'{"hidden_size": }',
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "deep_obj": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "big": b" " * (2 << 20) + b"{}",
    "nan": b'{"hidden_size": NaN}',
    "trailing": json.dumps(HF).encode() + b" garbage",
}
HOSTILE_FILES = {"bomb", "deep", "deep_blocks", "big", "deep_obj"}
