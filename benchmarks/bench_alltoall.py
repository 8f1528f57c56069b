"""Benchmark of the flow engine: one skewed MoE all-to-all dispatch on a rail-optimized fat tree.

Workload: ``ranks`` GPUs on ``ranks / 8`` HGX hosts (8 GPUs per host, one 400G NIC per GPU),
two-tier rail-optimized fat tree at 1:1 (``moesim.topologies.rail_fat_tree``). Each rank hosts 4
experts; every rank sends its 4096 tokens x top-8 expert picks, drawn by multinomial from a
Zipf(alpha = 1.0) popularity over the experts (a random ranking, so hot experts land on random
ranks). A token carries 7168 bytes of FP8 hidden state plus 7168 / 128 x 4 bytes of scales
(DeepSeek-V3 dispatch: FP8 activations with one FP32 scale per 128 values).

Timed: routing (``Router`` construction and every route) + ``FlowNetwork`` + ``env.run``;
building the graph and the fabric arrays is not timed. Prints the median wall time over
``--repeats`` runs, the number of rate solves, flows, the simulated completion time and, with
``--check`` (default for <= 64 ranks), its error against an exact (eps = 0) run.

    .venv/bin/python benchmarks/bench_alltoall.py --ranks 64 --eps 0.02 --repeats 5
    .venv/bin/python benchmarks/bench_alltoall.py --ranks 256 --eps 0.02 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simpy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from moesim.engine.fabric import Fabric, fabric_from_graph
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import MULTIPATH_MODES, Router
from moesim.topologies import rail_fat_tree

GPUS_PER_HOST = 8
EXPERTS_PER_RANK = 4
TOKENS_PER_RANK = 4096
TOP_K = 8
HIDDEN = 7168
TOKEN_BYTES = HIDDEN + HIDDEN // 128 * 4  # FP8 values + one FP32 scale per 128 values
ZIPF_ALPHA = 1.0


@dataclass(frozen=True)
class RunResult:
    wall_s: float
    completion_s: float
    solves: int
    flows: int


def dispatch_bytes(ranks: int, rng: np.random.Generator) -> np.ndarray:
    """Bytes rank i sends to rank j (ranks x ranks, zero diagonal)."""
    n_experts = ranks * EXPERTS_PER_RANK
    popularity = 1.0 / rng.permutation(np.arange(1, n_experts + 1)) ** ZIPF_ALPHA
    popularity /= popularity.sum()
    picks = rng.multinomial(TOKENS_PER_RANK * TOP_K, popularity, size=ranks)  # ranks x experts
    per_rank = picks.reshape(ranks, ranks, EXPERTS_PER_RANK).sum(axis=2)
    np.fill_diagonal(per_rank, 0)
    return per_rank * float(TOKEN_BYTES)


def build_fabric(ranks: int) -> Fabric:
    if ranks % GPUS_PER_HOST:
        raise SystemExit(f"--ranks must be a multiple of {GPUS_PER_HOST}")
    graph = rail_fat_tree(ranks // GPUS_PER_HOST, gpu="H100")
    return fabric_from_graph(graph)


def simulate(fabric: Fabric, matrix: np.ndarray, eps: float, multipath: str) -> RunResult:
    src, dst = np.nonzero(matrix)
    t0 = time.perf_counter()
    env = simpy.Environment()
    net = FlowNetwork(env, Router(fabric, multipath), batch_window_rel=eps, record_timeline=False)
    gid, done = net.expect(src.size)
    net.start(src, dst, matrix[src, dst], gid)
    env.run(done)
    wall = time.perf_counter() - t0
    return RunResult(wall, float(net.groups.col["finish_s"][gid]), net.solves, int(src.size))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--eps", type=float, default=0.02, help="batch_window_rel")
    ap.add_argument("--multipath", choices=MULTIPATH_MODES, default="dmodk")
    ap.add_argument("--repeats", type=int, default=None, help="default 5 (<= 64 ranks) or 3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--check", action=argparse.BooleanOptionalAction, default=None,
                    help="compare with an exact eps=0 run (default: on for <= 64 ranks)")
    args = ap.parse_args(argv)
    repeats = args.repeats or (5 if args.ranks <= 64 else 3)
    fabric = build_fabric(args.ranks)
    matrix = dispatch_bytes(args.ranks, np.random.default_rng(args.seed))
    runs = [simulate(fabric, matrix, args.eps, args.multipath) for _ in range(repeats)]
    res = runs[0]
    print(f"ranks={args.ranks} multipath={args.multipath} eps={args.eps} "
          f"links={fabric.n_links} flows={res.flows} bytes={matrix.sum():.4g}")
    print(f"wall median {statistics.median(r.wall_s for r in runs):.3f} s over {repeats} runs "
          f"(min {min(r.wall_s for r in runs):.3f}); solves {res.solves}; "
          f"completion {res.completion_s * 1e3:.4f} ms")
    if args.check if args.check is not None else args.ranks <= 64:
        exact = simulate(fabric, matrix, 0.0, args.multipath)
        err = res.completion_s / exact.completion_s - 1.0
        print(f"exact: completion {exact.completion_s * 1e3:.4f} ms, {exact.solves} solves, "
              f"wall {exact.wall_s:.3f} s; error {err:+.3%}")


if __name__ == "__main__":
    main()
