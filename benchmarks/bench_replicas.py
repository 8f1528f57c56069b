"""CPU time of fast mode under ECMP, where the representative's flows stand for every DP
replica's copies (``Fast()`` on a non-oversubscribed ECMP fabric: ``phases="replicas"``,
:mod:`moesim.step.replicas`, :mod:`moesim.step.ringflows`).

Command::

    .venv/bin/python benchmarks/bench_replicas.py --gpus 1024 2048 4096
    .venv/bin/python benchmarks/bench_replicas.py --gpus 2048 --hop-loop   # A/B, see below
    .venv/bin/python benchmarks/bench_replicas.py --phases fabric --gpus 1024 --microbatches 16
    .venv/bin/python benchmarks/bench_replicas.py --phases fabric --gpus 1024 --microbatches 64

The step is ``benchmarks/bench_step.py``'s (moe-1t, PP16 EP64, H800 hosts on the rail fat
tree), with ECMP instead of D-mod-K and ``--microbatches`` (default 8) micro-batches, one
routing draw. A copies route holds every replica's hops (hundreds at dp 128-256), so the
engine's per-link sums over long routes are what grows with the GPUs. ``--hop-loop`` times
them hop by hop, as before ``moesim.engine.maxmin.LONG_ROUTES`` (the same answers, bit for
bit). Each line: GPUs, CPU and wall seconds of one in-process run, the step (repr: compare runs),
the process's peak RSS.
Measured figures: README, "whole-fabric phases".

``--phases fabric`` times ``Fast(phases="fabric")`` instead (whole-fabric phases,
:mod:`moesim.step.phased`, each replica's pipeline input on its own ECMP route beside the
all-to-alls, :mod:`moesim.step.replica_inputs`) on the step of ``bench_step.py``'s
``make_spec(gpus, 0, microbatches, "H200")`` with ECMP: the harness of issue 15's cost
figures (1,024 GPUs: step 7.741295891869336 s with 16 micro-batches, 19.559316357209557 s
with 64).
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import time

from bench_step import make_spec

from moesim.engine import maxmin
from moesim.step import Fast, run_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", type=int, nargs="+", default=[1024, 2048])
    ap.add_argument("--microbatches", type=int, default=8)
    ap.add_argument("--phases", choices=("replicas", "fabric"), default="replicas",
                    help="fabric: Fast(phases='fabric') on the H200 step (docstring)")
    ap.add_argument("--hop-loop", action="store_true",
                    help="per-link sums hop by hop (maxmin.LONG_ROUTES = inf), for an A/B")
    args = ap.parse_args()
    if args.hop_loop:
        maxmin.LONG_ROUTES = float("inf")
    for gpus in args.gpus:
        fabric = args.phases == "fabric"
        spec = (make_spec(gpus, 0, args.microbatches, "H200") if fabric
                else make_spec(gpus, 16384, args.microbatches, "H800"))
        spec = dataclasses.replace(spec, fabric=dataclasses.replace(spec.fabric,
                                                                    multipath="ecmp"))
        mode = Fast(phases="fabric") if fabric else Fast(routing_draws=1)
        t0, w0 = time.process_time(), time.perf_counter()
        res = run_step(spec, mode)
        print(f"{gpus} GPUs ECMP{' hop-loop' if args.hop_loop else ''}"
              f"{' phases fabric' if fabric else ''}, {args.microbatches} micro-batches: "
              f"cpu {time.process_time() - t0:.2f} s, wall {time.perf_counter() - w0:.2f} s, "
              f"step {res.step_time_s!r} s, peak RSS "
              f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB", flush=True)


if __name__ == "__main__":
    main()
