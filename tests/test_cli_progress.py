"""Progress on stderr: drawn on a terminal (a pseudo-terminal here), never into a pipe."""

from __future__ import annotations

import fcntl
import itertools
import os
import pty
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time

import pytest

from moesim.runner.specs import step_spec
from moesim.scenario import load_scenario_file
from moesim.scenarios import resolve
from moesim.step.loop import run_reporting, watching
from moesim.step.run import run_step

STEP = [sys.executable, "-m", "moesim.cli", "step", "mixtral-64xh100", "--mode", "fast",
        "--microbatches", "4"]


def run_on_pty(args: list[str], deadline_s: float = 600.0) -> tuple[int, str, str]:
    """Run ``args`` with stderr on a pseudo-terminal (100 columns) and stdout on a pipe;
    (status, stdout, what the terminal got). Reads the terminal until the child is gone."""
    main_fd, tty_fd = pty.openpty()
    fcntl.ioctl(tty_fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    with tempfile.TemporaryFile("w+") as out:
        env = {**os.environ, "MOESIM_PROGRESS_DELAY_S": "0"}  # a bar however fast the machine
        proc = subprocess.Popen(args, stdout=out, stderr=tty_fd, text=True, env=env)
        os.close(tty_fd)
        seen, start = b"", time.monotonic()
        while time.monotonic() - start < deadline_s:
            if select.select([main_fd], [], [], 1.0)[0]:
                try:
                    chunk = os.read(main_fd, 65536)
                except OSError:  # EIO: the child is gone and the terminal drained
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=60)
        os.close(main_fd)
        out.seek(0)
        return code, out.read(), seen.decode(errors="replace")


def test_step_progress_on_a_terminal_and_not_in_a_pipe() -> None:
    code, out, tty = run_on_pty(STEP)
    assert code == 0 and "step time" in out.lower(), (out, tty)
    assert "step mixtral-64xh100 (fast)" in tty and "backward pass" in tty, tty
    assert "100%" in tty, tty
    code, _, quiet_tty = run_on_pty([*STEP, "--quiet"])
    assert code == 0 and quiet_tty == "", quiet_tty
    piped = subprocess.run(STEP, capture_output=True, text=True, check=True)
    assert piped.stderr == "", piped.stderr


def test_watching_does_not_change_the_result() -> None:
    spec = step_spec(load_scenario_file(resolve("mixtral-64xh100")))
    from dataclasses import replace

    spec = replace(spec, microbatches=4)
    calls: list[tuple[float, float]] = []
    with watching(lambda d, t: calls.append((d, t))):
        watched = run_step(spec, "fast")
    assert watched.to_dict() == run_step(spec, "fast").to_dict()
    assert calls[0][0] == 0 and calls[-1][0] == calls[-1][1] > 0
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(calls))


def test_reporting_loop_ends_like_run() -> None:
    import simpy

    env = simpy.Environment()
    done: dict[tuple[int, int], int] = {}

    def proc(i: int):  # type: ignore[no-untyped-def]
        yield env.timeout(i)
        done[(i, 0)] = 1

    for i in range(5):
        env.process(proc(i))
    seen: list[float] = []
    run_reporting(env, done, 5, lambda d, t: seen.append(d))
    assert env.now == 4 and seen[-1] == 5 and sum(done.values()) == 5
    with pytest.raises(ZeroDivisionError):
        env.process((lambda: (yield env.timeout(1)) or 1 / 0)())
        run_reporting(env, done, 5, lambda d, t: None)


def test_elapsed_ticker_on_a_terminal() -> None:
    """Commands without a fraction to report show the time elapsed (here: a 4096-GPU fabric's
    bisection, about 2 s)."""
    args = [sys.executable, "-m", "moesim.cli", "topo", "rail-h200-4096"]
    code, out, tty = run_on_pty(args)
    assert code == 0 and "bisection" in out and "topo rail-h200-4096 [00:0" in tty, tty
    assert subprocess.run(args, capture_output=True, text=True, check=True).stderr == ""
