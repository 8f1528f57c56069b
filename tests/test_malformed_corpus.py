"""The malformed-input corpus (tests/malformed_corpus.py): every case answers in one line.

Each generated case (499 today, at least 400) must exit with status 2 and exactly one line on
stderr, ``moesim: <field>...`` naming the field its table entry expects, without a traceback, within
10 s and 1 GiB, and leave every file of its folder as it was. The cases run in-process
through click's CliRunner inside two worker processes whose address space is capped at
1 GiB (``RLIMIT_AS``), so a blow-up fails its case instead of the test run. A few hostile
cases also run through the real console entry point (``python -m moesim.cli``).
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from malformed_corpus import build_corpus, entry_point
from malformed_files import YAML_FILES

HERE = Path(__file__).resolve().parent
ONE_GIB = 1 << 30
WORKERS = 2
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ONE_GIB, ONE_GIB))


def shown_lines(stderr: str) -> list[str]:
    """The non-empty stderr lines as a terminal shows them (a progress line rewritten with
    ``\\r`` and then erased shows nothing)."""
    shown = [line.rsplit("\r", 1)[-1].replace("\x1b[2K", "") for line in stderr.split("\n")]
    return [line for line in shown if line.strip()]


def answers(line: str, field: str) -> bool:
    """Whether ``line`` is moesim's one-line answer naming ``field`` (``~x``: contains x;
    ``'--flag'`` or ``-x``: click's message quoting the flag; else the line starts with it)."""
    if field.startswith("~"):
        return line.startswith("moesim: ") and field[1:] in line
    if field.startswith(("'", "-")):
        return line.startswith("moesim: ") and field in line
    return re.match(r"moesim: " + re.escape(field) + r"[:. ]", line) is not None


def test_corpus_covers_every_entry_point() -> None:
    corpus = build_corpus()
    counts = Counter(entry_point(c) for c in corpus)
    assert len(corpus) >= 400, counts
    for entry in ("run", "step", "sweep", "hf", "flag", "design"):
        assert counts[entry] > 0, entry
    commands = {c.argv[0] for c in corpus}
    assert {
        "run",
        "step",
        "sweep",
        "design",
        "plan",
        "place",
        "topo",
        "plot",
        "validate",
        "scenarios",
    } <= commands


def test_every_malformed_input_gets_one_line_and_exit_2(tmp_path: Path) -> None:
    ids = [c.id for c in build_corpus()]
    expected = {c.id: c.field for c in build_corpus()}
    procs = []
    for i in range(WORKERS):
        out = tmp_path / f"w{i}.jsonl"
        procs.append(
            (
                out,
                subprocess.Popen(
                    [
                        sys.executable,
                        str(HERE / "malformed_worker.py"),
                        str(tmp_path / f"w{i}"),
                        str(out),
                        *ids[i::WORKERS],
                    ],
                    preexec_fn=_cap_memory,
                    env=ENV,
                    cwd=tmp_path,
                ),
            )
        )
    for _, proc in procs:
        proc.wait(timeout=600)
    rows = [json.loads(line) for out, _ in procs for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(ids), "a worker died (memory cap?)"
    failures = []
    for r in rows:
        lines = shown_lines(r["stderr"])
        ok = (
            r["exit_code"] == 2
            and not r["traceback"]
            and len(lines) == 1
            and answers(lines[0], expected[r["id"]])
            and r["seconds"] < 10
            and not r["changed"]
            and r["maxrss_kib"] * 1024 < ONE_GIB
        )
        if not ok:
            failures.append(
                f"{r['id']}: exit {r['exit_code']}, {r['seconds']:.1f} s, want "
                f"{expected[r['id']]!r}, got {lines!r} {r['traceback'][-300:]}"
                f"{' changed ' + str(r['changed']) if r['changed'] else ''}"
            )
    assert not failures, f"{len(failures)} of {len(rows)} cases:\n" + "\n".join(failures)


@pytest.mark.parametrize("kind", ["bomb", "devzero", "fifo"])
def test_hostile_inputs_through_the_real_command(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "s.yaml"
    if kind in YAML_FILES:
        path.write_bytes(YAML_FILES[kind])
    elif kind == "fifo":
        os.mkfifo(path)
    argv = {
        "devzero": ["design", "--model", "/dev/zero"],
        "usage": ["place", "hgx-h100", "--tp", "x"],
    }.get(kind, ["run", str(path)])
    res = subprocess.run(
        [sys.executable, "-m", "moesim.cli", *argv],
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=_cap_memory,
        env=ENV,
        check=False,
    )
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith("moesim: "), res.stderr
