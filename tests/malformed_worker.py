"""Run corpus cases in this process through click's CliRunner; one JSON line per case.

Started by ``tests/test_malformed_corpus.py`` as a subprocess with its address space limited
(``RLIMIT_AS``), so a case that blows up memory fails alone instead of taking the test run
with it; each case also has a wall-clock alarm. Usage::

    python tests/malformed_worker.py ROOT OUT.jsonl CASE_ID...
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import signal
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

from click.testing import CliRunner
from malformed_corpus import Case, _valid_files, build_corpus

from moesim.cli import main

TIMEOUT_S = 10


class CaseTimeout(Exception):
    """The case ran past its time."""


def _alarm(signum: int, frame: object) -> None:
    raise CaseTimeout(f"over {TIMEOUT_S} s")


def prepare(case: Case, folder: Path) -> list[object]:
    """Write the case's files into ``folder``; returns handles to keep open (locks)."""
    folder.mkdir(parents=True)
    for name, data in {**_valid_files(), **case.files}.items():
        (folder / name).write_bytes(data)
    os.mkfifo(folder / "fifo")
    (folder / "emptydir").mkdir()
    (folder / "link.json").symlink_to(folder / "s.yaml")
    keep: list[object] = []
    if case.special.startswith("lock:"):
        results = folder / case.special.split(":", 1)[1]
        lock = open(f"{results}.lock", "a+")  # noqa: SIM115 - held for the case
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(
            json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "started": "corpus"})
        )
        lock.flush()
        keep.append(lock)
    return keep


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.name: p.read_bytes()
        for p in folder.iterdir()
        if p.is_file() and p.name != "fifo" and not p.is_symlink()
    }


def run_case(case: Case, root: Path) -> dict[str, object]:
    folder = root / case.id
    keep = prepare(case, folder)
    before = snapshot(folder)
    argv = [a.replace("{d}", str(folder)) for a in case.argv]
    signal.signal(signal.SIGALRM, _alarm)
    os.chdir(folder)
    start = time.monotonic()
    leaked = tempfile.TemporaryFile()  # noqa: SIM115 - fd 2 too: an import-bound stream
    saved_fd = os.dup(2)
    os.dup2(leaked.fileno(), 2)
    signal.alarm(TIMEOUT_S)
    try:
        res = CliRunner().invoke(main, argv, catch_exceptions=True)
    finally:
        signal.alarm(0)
        sys.__stderr__.flush()
        os.dup2(saved_fd, 2)
        os.close(saved_fd)
    seconds = time.monotonic() - start
    leaked.seek(0)
    stray = leaked.read().decode("utf-8", "replace")
    after = snapshot(folder)
    exc = res.exception
    trace = ""
    if exc is not None and not isinstance(exc, SystemExit):
        trace = "".join(traceback.format_exception(*res.exc_info))[-2000:]  # type: ignore[misc]
    for handle in keep:
        handle.close()  # type: ignore[attr-defined]
    return {
        "id": case.id,
        "exit_code": res.exit_code,
        "stderr": stray + res.stderr,
        "seconds": seconds,
        "stdout_tail": res.stdout[-300:],
        "traceback": trace,
        "changed": sorted(n for n, data in before.items() if after.get(n) != data),
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }


def main_worker(root: str, out: str, ids: list[str]) -> None:
    wanted = set(ids)
    cases = [c for c in build_corpus() if c.id in wanted]
    with open(out, "w") as f:
        for case in cases:
            try:
                row = run_case(case, Path(root))
            except BaseException as exc:  # the harness itself failed on this case
                row = {
                    "id": case.id,
                    "exit_code": -1,
                    "stderr": "",
                    "seconds": 0.0,
                    "traceback": repr(exc)[:2000],
                    "changed": [],
                    "stdout_tail": "",
                    "maxrss_kib": 0,
                }
            f.write(json.dumps(row) + "\n")
            f.flush()


if __name__ == "__main__":
    main_worker(sys.argv[1], sys.argv[2], sys.argv[3:])
