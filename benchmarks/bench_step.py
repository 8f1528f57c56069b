"""Wall time of one simulated 1T-class training step, full mode and fast mode.

Commands (documented in the fast-mode docstring, :mod:`sim.step.fast`)::

    .venv/bin/python benchmarks/bench_step.py --mode fast --gpus 9216 --repeats 5
    .venv/bin/python benchmarks/bench_step.py --mode full --gpus 1024 --max-wall-s 300

The step: ``moe-1t`` (Kimi K2 shape: 61 layers, 384 experts, top-8), DeepSeek-like layout
PP16, EP64 across hosts, TP1, ZeRO-1 DP (the distributed optimizer the step models), 1F1B,
sequences of 4096 tokens, micro-batch 1, ``--global-batch`` sequences (default 16384, Kimi
K2's 67M-token batch) rounded down to a multiple of dp; H800 HGX hosts on a rail-optimized
3-tier fat tree (``rail-h200-4096`` preset re-sized to ``gpus / 8`` hosts), D-mod-K routing,
2 % finish batching. ``--microbatches`` overrides the count (full mode needs few).
Each repeat is a cold run (fabric, plan and routes rebuilt). ``--max-wall-s`` stops the
full-mode run (SIGALRM) and reports how far it got.

Measured on the 2-core dev machine (shared with other jobs, load average about 0.7):

* fast, 9,216 GPUs (1,152 hosts, dp 576, 28 micro-batches), ``--routing-draws 1``
  (default): 1.74 s median of 5 (first repeat of a process 2.0-2.5 s), step 8.535 s, MFU
  0.174, measured before the TP/CP, critical-path and elementwise-kernel work merged.
  After it (2026-12-03, fp32 gradient reduce-scatter: step 8.621 s, MFU 0.173) three runs of
  5 gave medians 3.61, 4.20 and 4.59 s (min 2.96 s) while the same machine's
  ``bench_alltoall.py --ranks 64`` moved between 0.30 and 0.52 s: noisy, but above the 2 s
  target either way. Sub-fabrics cut from link arrays instead of networkx subgraphs, graph
  edges added in bulk, cached single-pair routes and per-group all-to-all caches (same step,
  8.621283003554717 s, bit for bit), measured back to back against the previous code on the
  shared machine (load average about 1), median (min) of 5: 3.63 (3.47) -> 3.08 (2.85),
  3.69 (3.55) -> 3.08 (3.06), 2.96 (2.79) -> 2.73 (2.62), 3.11 (3.09) -> 2.60 (2.51),
  2.86 (2.78) -> 2.63 (2.59) s. Where the time goes now (one run, about 2.8 s): fabric graph
  0.3 s (networkx), link arrays and the pipeline's sub-fabric 0.14 s, per-host sub-fabrics
  0.12 s, the plan 0.27 s (expert costs and one routing draw), state 0.1 s, the SimPy run
  (27 k events, 861 rate solves, A2A-timer routes about 0.25 s) 1.8 s: still above the 2 s
  target. ``--routing-draws 4``: 2.3 s, step 8.554 s; ``0`` (all 60 MoE layers drawn, as
  full mode): 22.6 s, step 8.544 s (both before this work). So reusing one draw moves the
  step time by 0.1 %.
* full, 1,024 GPUs, 61 layers, 1 micro-batch: not done after 240 s (``--max-wall-s
  240``). ``--layers 16 --microbatches 1`` (15 MoE layers, about 1.2 M flows): 173-180 s,
  step 1.293 s (fast mode on the same: 3.2 s wall, step 0.967 s). On 2026-12-03, with fp32
  gradient reduce-scatters and in-order ring sends: 259 s wall (the machine shared with
  another job), step 1.119 s; fast mode 0.78 s wall, step 1.034 s (-7.6 %, sim.step.fast).
  Full mode grows with flows, about (MoE layers x micro-batches x 4 x
  ep(ep - 1) per EP group) + the DP rings' ``(n - 1) n`` per item, so the default 16
  micro-batches x 61 layers at 1,024 GPUs is about 60x the 16-layer run: hours.
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import statistics
import time
from types import FrameType

from sim.layout import ParallelLayout
from sim.model import get_model
from sim.scenario.schema import FabricSpec
from sim.step import StepSpec, run_step
from sim.step.fast import run_fast_step

PP, EP = 16, 64


def make_spec(gpus: int, global_batch: int, microbatches: int | None, gpu: str,
              layers: int | None = None) -> StepSpec:
    """The benchmark step on ``gpus`` GPUs (module docstring); ``layers`` cuts the model to
    its first ``layers`` decoder layers (for timing smaller full-mode runs)."""
    dp = gpus // PP
    model = get_model("moe-1t")
    if layers:
        model = dataclasses.replace(model, num_layers=layers,
                                    moe_layers=model.moe_layers[:layers])
    fabric = FabricSpec(preset="rail-h200-4096", params=(("hosts", gpus // 8), ("gpu", gpu)),
                        multipath="dmodk", batch_window_rel=0.02)
    m = microbatches or max(1, global_batch // dp)
    return StepSpec(model=model, layout=ParallelLayout(pp=PP, ep=EP, dp=dp),
                    gpu=gpu, fabric=fabric, microbatches=m, seq_len=4096)


class WallCap(Exception):
    """The full-mode run hit ``--max-wall-s``."""


def _alarm(_sig: int, _frame: FrameType | None) -> None:
    raise WallCap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("fast", "full"), default="fast")
    ap.add_argument("--gpus", type=int, default=9216)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--global-batch", type=int, default=16384)
    ap.add_argument("--microbatches", type=int, default=None)
    ap.add_argument("--routing-draws", type=int, default=1,
                    help="fast mode: distinct routings reused cyclically (0 = every layer)")
    ap.add_argument("--gpu", default="H800")
    ap.add_argument("--layers", type=int, default=None,
                    help="cut the model to its first N layers (N >= 16; scaling runs)")
    ap.add_argument("--max-wall-s", type=float, default=300.0)
    args = ap.parse_args()
    spec = make_spec(args.gpus, args.global_batch, args.microbatches, args.gpu, args.layers)
    print(f"{args.mode}: {args.gpus} GPUs, {spec.layout}, {spec.microbatches} micro-batches, "
          f"{spec.model.num_layers} layers")
    walls = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        if args.mode == "fast":
            res = run_fast_step(spec, routing_draws=args.routing_draws or None)
        else:
            signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, args.max_wall_s)
            try:
                res = run_step(spec)
            except WallCap:
                print(f"full mode: stopped at --max-wall-s {args.max_wall_s:.0f} s")
                return
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        walls.append(time.perf_counter() - t0)
        print(f"  wall {walls[-1]:.2f} s  step {res.step_time_s:.3f} s  MFU {res.mfu:.3f}  "
              + " ".join(f"{k}={v:.3f}" for k, v in res.breakdown_s.items() if v))
    print(f"median {statistics.median(walls):.2f} s  min {min(walls):.2f} s  "
          f"({dataclasses.asdict(spec.layout)})")


if __name__ == "__main__":
    main()
