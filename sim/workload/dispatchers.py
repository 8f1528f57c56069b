"""The MoE token dispatchers by name: what each moves, from which rank to which.

A dispatcher turns a layer's routing into the tokens each EP rank sends each EP rank in a
dispatch (the other three all-to-alls of a layer follow it, :mod:`moesim.step.plan`). Each is
modelled from its kernels' source; none has a tuned efficiency of its own (the links' rates are
the fabric's):

``alltoall``
    Megatron's alltoall token dispatcher over one NCCL all-to-all: a token once per destination
    rank with ``dedup`` (else once per routed expert), over whatever path the fabric routes.
``deepep``
    DeepEP V1 normal kernels: a token once per destination node over RDMA to its rail peer,
    which forwards it over NVLink to each rank there that needs it
    (:func:`moesim.workload.deepep.hierarchical_tokens`). A "node" is at most
    :data:`moesim.calibration.DEEPEP_NVL_PEERS` (8) EP ranks: DeepEP V1 groups ranks by
    ``rank / NUM_MAX_NVL_PEERS`` whatever the NVLink domain, so on an NVL72 rack it forwards
    within runs of 8.
``deepep-ll``
    DeepEP low-latency kernels (csrc/kernels/internode_ll.cu @005dcc9d): one message per
    (token, routed expert), no per-rank or per-node de-duplication, written straight into the
    expert's rank: an NVLink copy when the peer is P2P-reachable, else an RDMA put from the
    sender's NIC to the receiver's (no forwarding). A dispatch message carries a header
    (:data:`moesim.calibration.LL_MESSAGE_HEADER_BYTES`) before the hidden state and scales;
    combine sends each expert's BF16 output row back (no header) and the source rank reduces.
``hybridep``
    NVIDIA's HybridEP (deepseek-ai/DeepEP hybrid_ep branch; deep_ep/hybrid_ep_buffer.py
    @017a5202, csrc/hybrid_ep/internode.cu @0237ba62): ranks grouped by NVLink domain
    (``NVLINK_DOMAIN_SIZE`` / the EP group's rank stride: 8 on HGX, the rack on NVL72); a token
    goes once per other domain over RDMA (``rdma_to_attn_map``, one row per token and remote
    domain, each local rank on its own NIC to the same local rank there), then once per
    destination rank inside the domain over NVLink with TMA (``sparse_to_dense_map``, one
    column per rank of the domain). The same two legs as ``deepep`` with the whole NVLink
    domain as the node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim.calibration import DEEPEP_NVL_PEERS, LL_MESSAGE_HEADER_BYTES
from moesim.errors import ConfigError
from moesim.registry import Registry
from moesim.router import RoutingResult
from moesim.workload.deepep import hierarchical_tokens


@dataclass(frozen=True)
class Dispatcher:
    """One dispatcher: how a layer's routing becomes tokens per (sender, receiver) EP rank."""

    name: str
    forwards: bool  # two legs: once per node over RDMA, then NVLink inside the node
    node_cap: int = 0  # most EP ranks per forwarding node (0: the whole NVLink domain)
    per_expert: bool = False  # one copy per routed expert whatever ``dedup`` says
    header_bytes: int = 0  # per dispatch-shaped message (dispatch, combine_bwd)

    def node_ranks(self, domain_ranks: int) -> int:
        """EP ranks per forwarding node given ``domain_ranks`` EP ranks per NVLink domain
        (0 when the dispatcher does not forward)."""
        if not self.forwards:
            return 0
        if self.node_cap and domain_ranks > self.node_cap:
            if domain_ranks % self.node_cap:
                raise ConfigError("step.dispatcher", f"{self.name} forwards among runs of "
                                  f"{self.node_cap} ranks: {domain_ranks} EP ranks per NVLink "
                                  f"domain is not a multiple")
            return self.node_cap
        return domain_ranks

    def tokens(self, routing: RoutingResult, *, dedup: bool, node_ranks: int) -> np.ndarray:
        """float [ep, ep]: tokens each EP rank sends each EP rank in one dispatch."""
        if self.forwards:
            return hierarchical_tokens(routing.rank_tokens_dedup, routing.node_tokens_dedup,
                                       node_ranks)
        per_rank = routing.rank_tokens_dedup if dedup and not self.per_expert else \
            routing.rank_tokens
        return np.asarray(per_rank, dtype=float)


DISPATCHER_REGISTRY = Registry[Dispatcher]("step.dispatcher", "dispatcher")
for _d in (Dispatcher("alltoall", forwards=False),
           Dispatcher("deepep", forwards=True, node_cap=DEEPEP_NVL_PEERS),
           Dispatcher("deepep-ll", forwards=False, per_expert=True,
                      header_bytes=LL_MESSAGE_HEADER_BYTES),
           Dispatcher("hybridep", forwards=True)):
    DISPATCHER_REGISTRY.add(_d.name, _d)

DISPATCHER_NAMES: tuple[str, ...] = tuple(DISPATCHER_REGISTRY.names())
"""Every dispatcher's name, in registration order."""


def get_dispatcher(name: str, field: str = "step.dispatcher") -> Dispatcher:
    """The dispatcher called ``name``; ConfigError naming ``field`` and the allowed names."""
    if name not in DISPATCHER_NAMES:
        raise ConfigError(field, f"unknown {name!r}; allowed: {', '.join(DISPATCHER_NAMES)}")
    return DISPATCHER_REGISTRY.lookup(name)
