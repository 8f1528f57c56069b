"""CPU time of fast mode under ECMP, where the representative's flows stand for every DP
replica's copies (``Fast()`` on a non-oversubscribed ECMP fabric: ``phases="replicas"``,
:mod:`moesim.step.replicas`, :mod:`moesim.step.ringflows`).

Command::

    .venv/bin/python benchmarks/bench_replicas.py --gpus 1024 2048 4096
    .venv/bin/python benchmarks/bench_replicas.py --gpus 2048 --hop-loop   # A/B, see below

The step is ``benchmarks/bench_step.py``'s (moe-1t, PP16 EP64, H800 hosts on the rail fat
tree), with ECMP instead of D-mod-K and ``--microbatches`` (default 8) micro-batches, one
routing draw. A copies route holds every replica's hops (hundreds at dp 128-256), so the
engine's per-link sums over long routes are what grows with the GPUs. ``--hop-loop`` times
them hop by hop, as before ``moesim.engine.maxmin.LONG_ROUTES`` (the same answers, bit for
bit). Each line: GPUs, CPU seconds of one in-process run, the step (repr: compare runs).
Measured figures: README, "whole-fabric phases".
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from bench_step import make_spec

from moesim.engine import maxmin
from moesim.step import Fast, run_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--hop-loop", action="store_true",
                    help="per-link sums hop by hop (maxmin.LONG_ROUTES = inf), for an A/B")
    args = ap.parse_args()
    if args.hop_loop:
        maxmin.LONG_ROUTES = float("inf")
    for gpus in args.gpus:
        spec = make_spec(gpus, 16384, args.microbatches, "H800")
        spec = dataclasses.replace(spec, fabric=dataclasses.replace(spec.fabric,
                                                                    multipath="ecmp"))
        t0 = time.process_time()
        res = run_step(spec, Fast(routing_draws=1))
        print(f"{gpus} GPUs ECMP{' hop-loop' if args.hop_loop else ''}: "
              f"cpu {time.process_time() - t0:.2f} s, step {res.step_time_s!r} s", flush=True)


if __name__ == "__main__":
    main()
