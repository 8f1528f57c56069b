"""One malformed input of the corpus (:class:`Case`), and the helpers every entry point's
table uses: mutation markers and values, YAML dumping, setting a dotted path."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml

DROP = object()  # a mutation that removes the key
BIG = 10**9
INF, NAN = float("inf"), float("nan")


@dataclass(frozen=True)
class Case:
    """One malformed input: argv (``{d}``: the case's folder), its files, the expected field."""

    id: str
    argv: tuple[str, ...]
    field: str
    files: dict[str, bytes] = field(default_factory=dict)
    special: str = ""  # "fifo:NAME" | "lock:NAME" | "symlink:LINK->TARGET"
    hostile: bool = False  # run where a hang or a blow-up cannot hurt (limited subprocess)


def yaml_bytes(data: object) -> bytes:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode()


def set_path(base: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    data = copy.deepcopy(base)
    node = data
    keys = path.split(".")
    for key in keys[:-1]:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    if value is DROP:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value
    return data
