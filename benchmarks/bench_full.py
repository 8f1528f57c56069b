"""Wall time of full mode (every rank, every collective as flows) on the issue-15 targets.

Commands (run from the repository root)::

    .venv/bin/python benchmarks/bench_full.py --case cut1024
    .venv/bin/python benchmarks/bench_full.py --case step256 --max-wall-s 600

* ``cut1024``: the 1,024-GPU step of ``benchmarks/bench_step.py`` (moe-1t, PP16 EP64 DP64,
  H800 hosts on the ``rail-h200-4096`` rail fat tree re-sized to 128 hosts, D-mod-K, 2 %
  finish batching) cut to its first 16 layers (15 MoE) and one micro-batch. Target: < 30 s.
* ``step256``: the whole moe-1t model (61 layers, 60 MoE) on 256 GPUs, PP4 EP64 DP64 (EP
  across the 8 hosts of a stage), same fabric re-sized to 32 hosts, ``--microbatches`` of
  them (default 8: one sequence of 4096 tokens each per DP rank). Target: < 10 min.

``--max-wall-s`` stops a run (SIGALRM) and prints how far it got: backward passes done of
the step's total (:func:`moesim.step.loop.watching`), and the wall time that pace implies for
the whole step. Each repeat is a cold run (fabric, plan and routes rebuilt). Figures and
history: ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

from bench_step import WallCap, make_spec, wall_cap

from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.scenario.schema import FabricSpec
from moesim.step import StepSpec, run_step
from moesim.step.loop import watching


def step256(microbatches: int) -> StepSpec:
    """The whole moe-1t step on 256 GPUs (module docstring)."""
    fabric = FabricSpec(preset="rail-h200-4096", params=(("hosts", 32), ("gpu", "H800")),
                        multipath="dmodk", batch_window_rel=0.02)
    return StepSpec(model=get_model("moe-1t"), layout=ParallelLayout(pp=4, ep=64, dp=64),
                    gpu="H800", fabric=fabric, microbatches=microbatches, seq_len=4096)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=("cut1024", "step256"), default="cut1024")
    ap.add_argument("--microbatches", type=int, default=8, help="step256 only")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--max-wall-s", type=float, default=900.0)
    args = ap.parse_args()
    if args.case == "cut1024":
        spec = make_spec(1024, 16384, 1, "H800", 16)
    else:
        spec = step256(args.microbatches)
    print(f"full: {args.case}, {spec.layout.world_size} GPUs, {spec.layout}, "
          f"{spec.microbatches} micro-batches, {spec.model.num_layers} layers")
    walls: list[float] = []
    for _ in range(args.repeats):
        seen = [0.0, 1.0]

        def progress(done: float, total: float, seen: list[float] = seen) -> None:
            seen[:] = [done, total]

        t0, c0 = time.perf_counter(), time.process_time()
        try:
            with wall_cap(args.max_wall_s), watching(progress):
                res = run_step(spec)
        except WallCap:
            wall = time.perf_counter() - t0
            frac = seen[0] / seen[1] if seen[1] else 0.0
            print(f"  stopped at --max-wall-s {args.max_wall_s:.0f} s: {seen[0]:.0f} of "
                  f"{seen[1]:.0f} backward passes ({frac:.1%}); at that pace the step would "
                  f"take about {wall / frac:.0f} s" if frac else "  stopped before any pass")
            return
        walls.append(time.perf_counter() - t0)
        print(f"  wall {walls[-1]:.2f} s  cpu {time.process_time() - c0:.2f} s  "
              f"step {res.step_time_s:.6f} s  top link {res.top_link or '-'}  "
              + " ".join(f"{k}={v:.3f}" for k, v in res.breakdown_s.items() if v))
    print(f"median {statistics.median(walls):.2f} s  min {min(walls):.2f} s  "
          f"({dataclasses.asdict(spec.layout)})")


if __name__ == "__main__":
    main()
