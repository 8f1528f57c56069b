"""Whole-process wall time of ``moesim design``: sizing, estimates, simulated candidates.

Commands (issue 14's target: under 60 s with at least 16 candidates simulated)::

    .venv/bin/python benchmarks/bench_design.py                      # the defaults
    .venv/bin/python benchmarks/bench_design.py --max-wall-s 900 -- --gpus 4096
    .venv/bin/python benchmarks/bench_design.py -- --max-tp 1 --max-cp 1

Everything after ``--`` goes to ``moesim design``. The design runs in a child Python process
(interpreter start and imports included) that prints one timestamped line per stage and per
simulated candidate on stderr; the parent measures the child's wall time and prints the
stage timeline, the candidates simulated, and the total. ``--max-wall-s`` stops the child
(SIGKILL of its process group) and reports how far it got: how many candidates were
simulated by then.

Measured (shared 2-core machine, 7 engineers; -j 2):

* 2026-12-03 16:17-16:18, main 1b47636, the defaults, machine idle (load 0.9-1.6), 3 runs
  back to back: 21.4, 16.7, 14.4 s wall (median 16.7 s), 24.6, 25.2, 24.8 CPU s; 1,536 GPUs,
  tp1 pp16 ep8 cp2 dp48, step 20.32 s, 16 simulated.
* 2026-12-03 15:51-15:56, the defaults, the workers started once for both rounds, 3 runs
  back to back: 55.9, 73.6, 81.1 s wall (median 73.6 s), 27.4, 28.2, 27.8 CPU s, load
  5.0-7.5; 1,536 GPUs, 16 simulated (per candidate median 6.2-8.9 s, max 15.1-21.6 s).
* 15:47, the defaults (TP up to 8, CP up to 2; fast mode's fused TP/CP layers,
  candidates extended from two short runs, the count confirmed in simulated days): sized to
  1,536 GPUs (55.8 days by estimate; 1,280: 65.3), confirmed at 57.1 days simulated, 16
  candidates simulated (4 to confirm, then 12), whole process 68.2 s wall, 28.9 CPU s (child
  and workers), load 7.7-7.8; per candidate median 6.6 s, max 18.6 s wall. 15:19 (the code of
  15:15: tasks ordered by their whole micro-batch count): 100.4 s wall, 34.9 CPU s, load 8-9;
  14:47: 107 s, load 6.6-8.5.
* Before (TP1/CP1 only, no extension): 12:48, ``-- --gpus 4096 --max-tp 1 --max-cp 1``: 16
  simulated, 65.6 s (load 12-15); 13:35, the TP/CP defaults: 0 of 16 candidates in 600 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time

CHILD = r"""
import sys, time, json
t0 = time.perf_counter()
from click.testing import CliRunner  # noqa: F401  (the CLI's imports, as moesim pays them)
from moesim.cli.design import SPEC_KEYS
from moesim.plan.design import design
from moesim.plan.record import to_record
from moesim.plan.spec import DesignSpec

def say(line):
    print(f"{time.perf_counter() - t0:8.1f} s  {line}", file=sys.stderr, flush=True)

kw = json.loads(sys.argv[1])
jobs = kw.pop("jobs")
res = design(DesignSpec(**kw), jobs=jobs, say=say)
rec = to_record(res)
say(f"chosen {rec['chosen_gpus']} GPUs, {res.chosen.cand.name}, simulated step "
    f"{rec['simulated_step_s']:.2f} s, {rec['simulated_count']} candidates simulated")
print(json.dumps({"simulated": rec["simulated_count"], "gpus": rec["chosen_gpus"],
                  "step_s": rec["simulated_step_s"], "layout": res.chosen.cand.name,
                  "walls": [c["simulation_wall_s"] for c in rec["candidates"]
                            if c["simulation_wall_s"]]}))
"""


def design_kwargs(argv: list[str]) -> dict[str, object]:
    """``moesim design`` options -> DesignSpec fields (through the CLI's own parser)."""
    from moesim.cli.design import SPEC_KEYS, design

    ctx = design.make_context("design", list(argv))
    params = ctx.params
    out = {k: params[k] for k in SPEC_KEYS}
    out["jobs"] = params["jobs"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-wall-s", type=float, default=1200.0)
    parser.add_argument("design_args", nargs="*")
    args = parser.parse_args()
    kw = design_kwargs(args.design_args)
    load0 = os.getloadavg()[0]
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(kw)],
                             stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, _ = child.communicate(timeout=args.max_wall_s)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        print(f"stopped at --max-wall-s {args.max_wall_s:g} s (see the stage lines above)")
        return
    wall_s = time.perf_counter() - start
    use = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child and its workers
    cpu_s = use.ru_utime + use.ru_stime
    if child.returncode:
        print(f"moesim design failed (exit {child.returncode})")
        return
    res = json.loads(out.strip().splitlines()[-1])
    walls = sorted(res["walls"])
    print(f"whole process {wall_s:.1f} s ({cpu_s:.1f} CPU s, load before/after "
          f"{load0:.1f}/{os.getloadavg()[0]:.1f}); {res['gpus']} GPUs, {res['layout']}, step "
          f"{res['step_s']:.2f} s; {res['simulated']} candidates simulated (fast-mode wall "
          f"per candidate: median {walls[len(walls) // 2]:.1f} s, max {walls[-1]:.1f} s)")


if __name__ == "__main__":
    main()
