"""DeepEP low-latency dispatch/combine on H800, simulated as one batch of flows on the engine.

Setup (deepseek-ai/DeepEP docs/legacy.md @0297fc80, "Low-latency kernels with pure RDMA", and
tests/test_low_latency.py @058d696b): H800 nodes of 8 on NVLink, one CX7 400 Gb/s NIC per GPU;
128 tokens per rank, hidden 7168, top-8, FP8 dispatch, BF16 combine. The test draws each
token's experts as the top-8 of random scores (uniform, distinct), 288 experts by default.

How the kernels move a token (csrc/kernels/internode_ll.cu @005dcc9d, the ``deepep-ll``
dispatcher of :mod:`moesim.workload.dispatchers`): one message per (token, routed expert),
written into the expert's rank; over NVLink when the peer is P2P-reachable (the same node),
else as an RDMA put from the sender's NIC to the receiver's. A dispatch message is 16 bytes of
header + 7168 FP8 bytes + 56 fp32 scales = 7,408 bytes; a combine message one BF16 row
(14,336 bytes) back to the token's rank. A selection whose expert sits on the sender itself is
copied by the same warps into its own buffer: charged, as in :mod:`moesim.validate.deepep`, to
the GPU's NVLink-side budget through a loopback endpoint (the detail prints the figure
without that charge).

What DeepEP reports: bandwidth = sum over the rank's tokens of selections x message payload
(``hidden + hidden / 128 * 4 + 16`` for FP8, ``hidden * 2`` for BF16), local selections
included, over the kernel time (bench_kineto of the kernel). The published latency is that
kernel time; it is what each case compares: the simulated time of the last byte, then the
receive phase's HBM pass (below). No launch cost: ``bench_kineto`` (tests/utils.py) reads the
profiler's CUDA time of the kernel itself, from its first instruction to its last, so the host
launch and the gap before the kernel are outside the published figure. Nothing here is
fitted: the rates are the fabric tiers' calibrated achievable fractions, chosen from NCCL and
the DeepSeek-V3 report, and H800's HBM at :data:`moesim.calibration.HBM_ACHIEVABLE_FRACTION`,
not from these figures.

Receive phase (internode_ll.cu @005dcc9d). Both kernels end with a pass over HBM that starts
only once the data it reads has arrived. Dispatch: after a grid-wide sync, the warp group of
each (local expert, source rank) waits for that source's count, which the source sends after
all its messages to the expert, then copies the received messages out of the RDMA buffer into
the packed per-expert tensor (``UNROLLED_WARP_COPY`` of the hidden state, the scales and a
4-byte source index per token): it reads each received message and writes its payload.
Combine: every SM waits for the flags of all experts, a grid sync, then reduces each of the
rank's tokens: it reads the BF16 row of every one of the token's selections and writes one
BF16 row. With the flows sharing the links fairly, a rank's sources finish together, so the
pass is charged after the last byte (assumption: no overlap with the arrivals), at the HBM
rate (a lower bound on the copy: its warps' load latency is not charged), for the rank that
moves the most bytes.

Assumptions (each case lists them): the experts (288, the test's default, where it divides
EP; else 256, DeepSeek-V3's count) only place the selections, uniformly either way; the
test's 10 randomly masked selections of 1,024 per rank (1%) are left out of both the bytes
and the traffic. Not modelled: the per-message RDMA cost of 7-14 KB writes, the count
signals, the grid-wide barriers, the ranks' start skew (each kernel waits for its slowest
peer, DeepEP #71): all make the real kernel slower than its bytes over the links.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim import topologies
from moesim.calibration import LL_MESSAGE_HEADER_BYTES
from moesim.hardware import get_gpu
from moesim.hardware.roofline import hbm_time_s
from moesim.router import UNIFORM, route_tokens
from moesim.validate.deepep import busiest_links
from moesim.validate.flows import FlowBatch, run_flows, with_loopbacks
from moesim.workload.dispatchers import get_dispatcher

GPUS_PER_NODE = 8
FP8_SCALE_BLOCK = 128
FP32_BYTES = 4
BF16_BYTES = 2
SOURCE_INDEX_BYTES = 4  # packed_recv_src_info: one int per received token
EXACT_UP_TO_EP = 32
BATCH_WINDOW_REL = 0.02
"""Finish batching for EP64 and up (65,280 flows at EP256; the exact solve takes minutes):
measured against the exact solve, +0.7% at EP32 and +1.1% at EP64 on the dispatch time
(tests/test_validate_deepep_ll.py checks EP32 within 2%)."""
TEST_EXPERTS = 288  # tests/test_low_latency.py --num-experts default
DSV3_EXPERTS = 256


@dataclass(frozen=True)
class LowLatencySetup:
    """One low-latency benchmark configuration (defaults: the README table's)."""

    ep: int
    tokens_per_rank: int = 128
    hidden: int = 7168
    top_k: int = 8
    seed: int = 0

    @property
    def n_experts(self) -> int:
        """The test's 288 where it divides ep, else DeepSeek-V3's 256 (an assumption)."""
        return TEST_EXPERTS if TEST_EXPERTS % self.ep == 0 else DSV3_EXPERTS

    @property
    def nodes(self) -> int:
        return max(1, self.ep // GPUS_PER_NODE)

    def message_bytes(self, kernel: str) -> float:
        """Bytes of one (token, expert) message: FP8 + scales + header, or one BF16 row."""
        if kernel == "dispatch":
            return (self.hidden + self.hidden / FP8_SCALE_BLOCK * FP32_BYTES
                    + LL_MESSAGE_HEADER_BYTES)
        return float(self.hidden * BF16_BYTES)


@dataclass(frozen=True)
class LowLatencyResult:
    """Simulated kernel time and the bandwidth DeepEP would print for it."""

    time_s: float
    logical_bytes: float  # per rank: selections x message bytes, local ones included
    busiest: tuple[tuple[str, float, float], ...]  # (tier, GB/s, utilisation), binding first
    time_no_local_charge_s: float
    receive_pass_s: float = 0.0  # the HBM pass after the last byte (module doc), in time_s

    @property
    def bw_GBps(self) -> float:
        return self.logical_bytes / self.time_s / 1e9


def selections(setup: LowLatencySetup) -> np.ndarray:
    """float [src, dst]: (token, expert) messages each rank sends each rank (the deepep-ll
    dispatcher's matrix of the benchmark's routing)."""
    routing = route_tokens(UNIFORM, tokens_per_rank=setup.tokens_per_rank, n_ranks=setup.ep,
                           n_experts=setup.n_experts, top_k=setup.top_k, seed=setup.seed,
                           layer=0)
    return get_dispatcher("deepep-ll").tokens(routing, dedup=True, node_ranks=0)


def receive_pass_bytes(setup: LowLatencySetup, sel: np.ndarray, kernel: str) -> np.ndarray:
    """float [rank]: HBM bytes of each rank's receive phase (module doc), from ``sel``
    [src, dst], the (token, expert) messages of the dispatch.

    Dispatch: read each message the rank received, write its payload (hidden + scales) and a
    source index. Combine: read one BF16 row per selection the rank made, write one per token.
    """
    row = setup.message_bytes("combine")
    if kernel == "dispatch":
        msg = setup.message_bytes("dispatch")
        payload = msg - LL_MESSAGE_HEADER_BYTES + SOURCE_INDEX_BYTES
        return np.asarray(sel.sum(axis=0) * (msg + payload), dtype=float)
    return np.asarray(sel.sum(axis=1) * row + setup.tokens_per_rank * row, dtype=float)


def _batch(size: np.ndarray, kernel: str, loop: bool) -> FlowBatch:
    """Flows of ``size`` [src, dst] (combine: reversed); a rank's share for itself to its
    loopback endpoint ``g + ep`` when ``loop``, else left out (free)."""
    ep = size.shape[0]
    pairs = np.indices(size.shape).reshape(2, -1)
    src, dst = (pairs[1], pairs[0]) if kernel == "combine" else (pairs[0], pairs[1])
    nbytes = size.ravel()
    own = src == dst
    keep = (nbytes > 0) & (loop | ~own)
    dst = np.where(own, dst + ep, dst)
    return FlowBatch(src[keep], dst[keep], nbytes[keep])


def simulate_low_latency(setup: LowLatencySetup, kernel: str) -> LowLatencyResult:
    """Simulate one low-latency ``kernel`` ("dispatch" or "combine")."""
    sel = selections(setup)
    size = sel * setup.message_bytes(kernel)
    pass_s = float(hbm_time_s(get_gpu("H800"), receive_pass_bytes(setup, sel, kernel).max()))
    if setup.nodes == 1:
        graph = topologies.load_preset("hgx-h800")
    else:
        graph = topologies.load_preset("rail-h800-64", hosts=setup.nodes)
    eps = 0.0 if setup.ep <= EXACT_UP_TO_EP else BATCH_WINDOW_REL
    run = run_flows(with_loopbacks(graph), _batch(size, kernel, loop=True), batch_window_rel=eps)
    time_s = run.time_s + pass_s
    free_s = time_s  # across nodes the NIC binds: the 1/ep local share changes nothing
    if setup.nodes == 1:
        free_s = run_flows(graph, _batch(size, kernel, loop=False)).time_s + pass_s
    return LowLatencyResult(time_s=time_s, logical_bytes=float(size.sum(axis=1).mean()),
                            busiest=busiest_links(run, time_s), time_no_local_charge_s=free_s,
                            receive_pass_s=pass_s)
