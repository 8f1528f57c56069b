"""DeepEP normal-kernel dispatch/combine on H800, simulated as one all-to-all on the engine.

Setup (deepseek-ai/DeepEP README, legacy V1 "Normal kernels" table, and its
``tests/test_intranode.py`` / ``tests/test_internode.py``): 8 H800 per node on NVLink
(~160 GB/s achievable), one CX7 400 Gb/s NIC per GPU; 4096 tokens per rank, hidden 7168,
top-8 of 256 experts, experts contiguous on ranks. Routing: intranode plain top-8;
internode node-limited, the experts split into ``n_group`` = number of nodes groups and
each token limited to ``min(nodes, 4)`` of them (the tests' ``num_topk_groups``).
Dispatch in FP8: 1 byte per element + one fp32 scale per 128 (``fp8_factor = (1 + 4/128)
/ 2`` of BF16); combine in BF16.

How DeepEP moves a token (its design, README and kernels):

* intranode: a token goes once to every rank that hosts one of its experts, over NVLink;
* internode: a token goes once per destination NODE over RDMA, to the GPU with the same
  local index there (the rail peer), which forwards it over NVLink to every GPU of its
  node that hosts one of the token's experts. The simulator has no multi-hop flows, so
  the runner builds the two legs as separate flows, started together: the kernels are
  chunked (RDMA chunks of 4-32 tokens of a 4096-token batch) and pipelined, so the legs
  overlap almost entirely (assumption: perfect overlap, no pipeline fill).
* combine is the same traffic reversed, in BF16: forwarders reduce the node's expert
  outputs of a token before sending one copy back over RDMA.
* internode, a token travels in a slot (csrc/kernels/internode.cu @008e399e,
  ``get_num_bytes_per_token``): its bytes, one ``SourceMeta`` and its top-k indices and
  weights, rounded up to 16 bytes; the RDMA puts and the forwarder's copies move whole slots.
  The published figures come from the tests' tuning loops, which time a cached dispatch
  ("must without top-k staffs") and a combine given no weights: no top-k bytes, so a slot is
  7,408 B for an FP8 token (7,392 logical) and 14,352 for a BF16 one (14,336). Intranode
  kernels keep each field in its own buffer (not read here: charged at the logical bytes).

What DeepEP reports (the tests' tuning lines): bandwidth = logical bytes / kernel time,
where logical bytes COUNT THE RANK'S TRAFFIC TO ITSELF (intranode: ``recv_x`` bytes, all
tokens received incl. from itself; internode: ``num_rdma_token_sent`` = (token, node)
pairs incl. its own node). The DeepEP README says so: "the results are logical
bandwidth ... [it] actually contains local rank traffic".

Local copies. DeepEP's kernels move the rank's share for itself through the same
SM-driven send path (every token is written into the destination's buffer by the
sending warps, whichever rank that is), and its authors put the achievable NVLink peak at
~160 GB/s (DeepEP #16) and call the 153-158 GB/s *logical* intranode figures, and the
>140 GB/s logical NVLink rate of EP16, the NVLink bottleneck (DeepEP #285). So the model
charges local copies to the GPU's NVLink-side budget, via loopback endpoints
(:func:`moesim.validate.flows.with_loopbacks`). Without that charge (local copies free)
the model predicts ~20-28% more for intranode and EP16 - reported as ``detail`` of each
case, so the assumption stays visible.

Which side binds (:attr:`DeepEPResult.busiest`): the fabric tier whose busiest link is
nearest its achievable rate over the kernel. With the benchmark's routing a rank's NVLink
forwarding carries ~3.3x its RDMA-logical bytes at EP16 (2 nodes: a token reaches both, and
the own node's half never crosses RDMA) and ~2x at EP32/EP64, against 0.5x / 0.75x / 0.875x
of them on its NIC: the model binds on NVLink at EP16 and on the NIC at EP32 and EP64 -
DeepEP's authors say the same of their EP16 figure ("when the RDMA bandwidth reaches 43
GB/s, the NVLink bandwidth will exceed 140 GB/s, making NVLink the bottleneck",
deepseek-ai/DeepEP #285). ``implied_GBps`` scales the simulated per-tier rates to the
published kernel time: what the published figure means on each side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim import topologies
from moesim.calibration import (
    DEEPEP_SOURCE_META_BYTES,
    DEEPEP_TOKEN_ALIGN_BYTES,
    KERNEL_LAUNCH_OVERHEAD_S,
)
from moesim.router import UNIFORM, assign_experts, route_tokens
from moesim.validate.flows import FlowBatch, FlowRun, run_flows, with_loopbacks
from moesim.workload.deepep import hierarchical_tokens

GPUS_PER_NODE = 8
FP8_SCALE_BLOCK = 128
FP32_BYTES = 4
BF16_BYTES = 2
MAX_TOPK_GROUPS = 4  # tests/test_internode.py: num_topk_groups = min(num_nodes, 4)


@dataclass(frozen=True)
class DeepEPSetup:
    """One DeepEP benchmark configuration (defaults: the README's)."""

    ep: int
    tokens_per_rank: int = 4096
    hidden: int = 7168
    top_k: int = 8
    n_experts: int = 256
    seed: int = 0

    @property
    def nodes(self) -> int:
        return max(1, self.ep // GPUS_PER_NODE)

    def token_bytes(self, kernel: str) -> float:
        """Bytes of one token: FP8 + fp32 scale per 128 (dispatch) or BF16 (combine)."""
        if kernel == "dispatch":
            return self.hidden * (1 + FP32_BYTES / FP8_SCALE_BLOCK)
        return float(self.hidden * BF16_BYTES)

    def slot_bytes(self, kernel: str) -> float:
        """Bytes an internode kernel moves per token: the token, one ``SourceMeta``, no
        top-k fields (the tuning loops' cached dispatch and weightless combine), rounded up
        to 16 (module doc)."""
        raw = self.token_bytes(kernel) + DEEPEP_SOURCE_META_BYTES
        return float(-(-raw // DEEPEP_TOKEN_ALIGN_BYTES) * DEEPEP_TOKEN_ALIGN_BYTES)


@dataclass(frozen=True)
class DeepEPResult:
    """Simulated kernel time and the bandwidth DeepEP would print for it."""

    time_s: float
    logical_bytes: float  # per rank, mean: the numerator DeepEP uses
    bw_GBps: float
    bw_no_local_charge_GBps: float  # the same with local copies free (see module doc)
    busiest: tuple[tuple[str, float, float], ...] = ()
    """(tier, busiest link's GB/s over the kernel, its utilisation of the achievable rate)
    for the NVLink and NIC tiers, binding tier first."""

    @property
    def binding_tier(self) -> str:
        """The tier whose busiest link is nearest its achievable rate: the bottleneck."""
        return self.busiest[0][0] if self.busiest else ""

    def implied_GBps(self, published_GBps: float) -> dict[str, float]:
        """Each tier's busiest-link rate at the kernel time the published figure implies."""
        return {tier: rate * published_GBps / self.bw_GBps for tier, rate, _ in self.busiest}


def _routing(setup: DeepEPSetup) -> dict[str, int]:
    """The routing of the benchmark's tokens: uniform, group-limited across nodes."""
    nodes = setup.nodes
    n_group, topk_group = (nodes, min(nodes, MAX_TOPK_GROUPS)) if nodes > 1 else (1, 1)
    return dict(tokens_per_rank=setup.tokens_per_rank, n_ranks=setup.ep,
                n_experts=setup.n_experts, top_k=setup.top_k, seed=setup.seed, layer=0,
                n_group=n_group, topk_group=topk_group)


def token_hits(setup: DeepEPSetup) -> np.ndarray:
    """bool [rank, token, dst rank]: the token has >= 1 expert on dst rank."""
    experts = assign_experts(UNIFORM, **_routing(setup))
    dst = experts // (setup.n_experts // setup.ep)
    hits = np.zeros((setup.ep, setup.tokens_per_rank, setup.ep), dtype=bool)
    r = np.arange(setup.ep)[:, None, None]
    t = np.arange(setup.tokens_per_rank)[None, :, None]
    hits[r, t, dst] = True
    return hits


def rank_dedup(setup: DeepEPSetup) -> np.ndarray:
    """int64 [src, dst]: distinct tokens src sends to dst, from ``route_tokens``."""
    return np.asarray(route_tokens(UNIFORM, **_routing(setup)).rank_tokens_dedup)


def _pairs(size: np.ndarray) -> FlowBatch:
    src, dst = np.indices(size.shape)
    return FlowBatch(src.ravel(), dst.ravel(), size.ravel().astype(np.float64))


def _loop(batch: FlowBatch, n_gpus: int) -> FlowBatch:
    """Redirect flows to oneself to the loopback endpoint (g -> g + N)."""
    dst = np.where(batch.src == batch.dst, batch.dst + n_gpus, batch.dst)
    return FlowBatch(batch.src, dst, batch.size_bytes)


def _reverse(batch: FlowBatch, n_gpus: int) -> FlowBatch:
    """The same flows the other way round (combine); loopbacks stay loopbacks."""
    loop = batch.dst >= n_gpus
    src = np.where(loop, batch.src, batch.dst)
    dst = np.where(loop, batch.dst, batch.src)
    return FlowBatch(src, dst, batch.size_bytes)


def intranode_flows(dedup: np.ndarray, token_bytes: float) -> FlowBatch:
    """Dispatch flows of one node: every (src, dst) rank pair, sized by distinct tokens."""
    return _pairs(dedup * token_bytes)


def internode_flows(dedup: np.ndarray, node_tokens: np.ndarray, token_bytes: float) -> FlowBatch:
    """Dispatch flows: RDMA to the rail peer per (src rank, dst node), then NVLink forwarding
    (:func:`moesim.workload.deepep.hierarchical_tokens`; the forwarder's own share is a local
    copy, charged as a loopback).

    ``node_tokens[s, m]``: distinct tokens of rank s with an expert on node m.
    """
    flows = _pairs(hierarchical_tokens(dedup, node_tokens, GPUS_PER_NODE) * token_bytes)
    some = flows.size_bytes > 0
    return FlowBatch(flows.src[some], flows.dst[some], flows.size_bytes[some])


BOTTLENECK_TIERS = ("nvlink", "nic")


def busiest_links(run: FlowRun, time_s: float) -> tuple[tuple[str, float, float], ...]:
    """(tier, GB/s, utilisation) of the busiest link of each of :data:`BOTTLENECK_TIERS`
    over ``time_s``, most utilised first."""
    rows = []
    for tier in BOTTLENECK_TIERS:
        on = run.fabric.tier == tier
        if not on.any():
            continue
        rate = run.link_bytes[on] / time_s
        i = int(np.argmax(rate / run.fabric.cap_Bps[on]))
        rows.append((tier, float(rate[i]) / 1e9, float(rate[i] / run.fabric.cap_Bps[on][i])))
    return tuple(sorted(rows, key=lambda r: -r[2]))


def simulate_deepep(setup: DeepEPSetup, kernel: str) -> DeepEPResult:
    """Simulate one DeepEP ``kernel`` ("dispatch" or "combine") and its reported bandwidth."""
    tb = setup.token_bytes(kernel)
    dedup = rank_dedup(setup)
    if setup.nodes == 1:
        graph = topologies.load_preset("hgx-h800")
        batch = intranode_flows(dedup, tb)
        logical = dedup.sum(axis=0).mean() * tb  # tokens received, incl. from itself
    else:
        graph = topologies.load_preset("rail-h800-64", hosts=setup.nodes)
        hits = token_hits(setup)
        node_tokens = hits.reshape(setup.ep, setup.tokens_per_rank, setup.nodes,
                                   GPUS_PER_NODE).any(axis=3).sum(axis=1)
        batch = internode_flows(dedup, node_tokens, setup.slot_bytes(kernel))
        logical = node_tokens.sum(axis=1).mean() * tb  # (token, node) pairs, incl. own node
    n_gpus = setup.ep
    charged = _loop(batch, n_gpus)
    if kernel == "combine":
        charged = _reverse(charged, n_gpus)
        batch = _reverse(batch, n_gpus)
    run = run_flows(with_loopbacks(graph), charged)
    time_s = run.time_s + KERNEL_LAUNCH_OVERHEAD_S
    free_s = run_flows(graph, batch).time_s + KERNEL_LAUNCH_OVERHEAD_S
    logical = float(logical)
    return DeepEPResult(time_s=time_s, logical_bytes=logical, bw_GBps=logical / time_s / 1e9,
                        bw_no_local_charge_GBps=logical / free_s / 1e9,
                        busiest=busiest_links(run, time_s))
