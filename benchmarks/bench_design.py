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

Measured (shared 2-core machine, 7 engineers; load 5-14; -j 2):

* 2026-12-03 12:26, ``-- --max-tp 1 --max-cp 1`` (the defaults without TP and CP): sized to
  1,792 GPUs, 11 candidates fit and all 11 simulated, 71 s wall (chosen tp1 pp16 ep8 dp112,
  17.71 s simulated step, 20.47 s estimated).
* 12:48, ``-- --gpus 4096 --max-tp 1 --max-cp 1 -j 2``: 16 simulated (median 5.3 s, max
  13.9 s each), whole process 65.6 s (load 12-15).
* 13:03, the same after the step began to run the memory plan's recompute (fid) and the tasks
  are submitted longest first: 16 simulated (median 7.1 s, max 16.4 s), 69.6 s (load 11-12),
  chosen step 11.49 s (full recompute simulated; 9.19 s before).
* 13:35, the defaults after fast mode's fused TP rings (issue 15, 13:16): sized to 1,536 GPUs
  in 12.1 s, then 0 of 16 candidates simulated by 600 s (stopped; load 8-9).
* 12:27, the defaults: sized to 1,280 GPUs in 15.3 s (3 counts estimated), then 1 of 16
  candidates simulated after 629 s; stopped at ``--max-wall-s 1200``. The top 16 by estimate
  are mostly tp2/tp4/cp2 layouts with ~410 micro-batches, whose TP/CP collectives fast mode
  runs as flows.
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
