"""Fast-mode steps whose cost is pipeline sends: the ModelZoo PP32 x VPP3 case and SimAI's shape.

Commands (figures in benchmarks/README.md)::

    .venv/bin/python benchmarks/bench_sends.py --case zoo --repeats 1
    .venv/bin/python benchmarks/bench_sends.py --case simai --repeats 3
    .venv/bin/python benchmarks/bench_sends.py --case zoo --microbatches 64 --repeats 3

``zoo``: the out-of-sample validation case "qwen3-235b-a22b 256x H100 BF16 alltoall TP2 PP32
VPP3 EP8 (ModelZoo)" (:mod:`moesim.validate.zoo`) as ``moesim validate`` runs it (fast mode,
512 micro-batches of an interleaved schedule over 96 virtual stages: 194,560 pipeline sends);
``--microbatches`` cuts it for quicker runs. ``simai``: SimAI's example layout
(``benchmarks/bench_step.py --shape simai``: TP2 EP16 PP12 VPP8 GA24 on 9,216 GPUs), every MoE
layer routed. Each line prints wall and CPU seconds (on the shared machine CPU is the steadier
of the two), the step time (``repr``: a speed change must not move it) and the flow engine's
counts: flows, rate solves, and how many sends ran alone on their links (closed form,
:mod:`moesim.engine.solo`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_step import simai_spec

from moesim.engine.network import FlowNetwork
from moesim.step import StepSpec, run_step
from moesim.step.mode import Fast
from moesim.validate.step import bridge_spec
from moesim.validate.zoo import ZOO_CASES

ZOO = next(c for c in ZOO_CASES if "PP32 VPP3" in c.name)


def _spec(case: str, microbatches: int | None) -> StepSpec:
    spec = bridge_spec(ZOO) if case == "zoo" else simai_spec(9216, "H800")
    return spec if microbatches is None else dataclasses.replace(spec, microbatches=microbatches)


def _count_alone() -> list[int]:
    """Counts [sends, sends run alone] from here on: FlowNetwork.start_one wrapped (or, in
    code from before it, single-flow calls of FlowNetwork.start: for before / after runs)."""
    counts = [0, 0]
    name = "start_one" if hasattr(FlowNetwork, "start_one") else "start"
    inner = getattr(FlowNetwork, name)

    def counted(self: FlowNetwork, *args: Any, **kw: Any) -> Any:
        before = len(self._solos.flows)
        out = inner(self, *args, **kw)
        if name == "start_one" or len(args[0]) == 1:
            counts[0] += 1
            counts[1] += len(self._solos.flows) > before
        return out

    setattr(FlowNetwork, name, counted)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=("zoo", "simai"), default="zoo")
    ap.add_argument("--microbatches", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    mode = Fast(routing_draws=None)  # every MoE layer routed, as validate and the CLI do
    walls, cpus = [], []
    counts = _count_alone()
    for _ in range(args.repeats):
        counts[:] = [0, 0]
        spec = _spec(args.case, args.microbatches)
        t0, c0 = time.perf_counter(), time.process_time()
        res = run_step(spec, mode)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        eng = res.engine
        print(f"  {args.case} ({spec.microbatches} micro-batches): wall {walls[-1]:.2f} s  "
              f"cpu {cpus[-1]:.2f} s  step {res.step_time_s!r} s  flows {eng['flows']:.0f}  "
              f"solves {eng['solves']:.0f}  sends {counts[0]} ({counts[1]} alone)", flush=True)
    print(f"median wall {statistics.median(walls):.2f} s  cpu {statistics.median(cpus):.2f} s  "
          f"(load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
