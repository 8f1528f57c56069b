"""Tensor-parallel (sequence-parallel) collectives and context-parallel ring attention.

TP with sequence parallelism (Megatron-Core): a rank holds ``seq / (tp * cp)`` tokens between
blocks; before the attention block (and a dense FFN, and shared experts) the TP group
all-gathers the bf16 hidden states, after it reduce-scatters the output (ring collectives
of ``plan.tp_bytes``, the gathered buffer, over the rank's TP group). The backward mirrors it
(the reduce-scatter's gradient is an all-gather and vice versa), so every TP-sharded block is
all-gather -> compute -> reduce-scatter in both passes. Megatron's TP communication overlap
(``--tp-comm-overlap``) is off by default, so the waits are exposed (``tp_exposed``).
Transformer Engine's backward all-gather of the saved input shard (for the weight gradient,
overlapped with the data-gradient GEMM) is not simulated.

CP as Transformer Engine's ring attention (``AttnFuncWithCPAndKVP2P``): in ``cp`` steps each CP
rank computes ``1/cp`` of its attention core while sending the K/V chunk it holds to its ring
successor (``cp - 1`` sends); it waits for its predecessor's chunk before the next step
(``cp_exposed``: what the compute did not hide). The backward passes K/V and the accumulated
dK/dV along the same ring: ``cp - 1`` steps of twice the forward bytes (the final dK/dV hop
home is not simulated).

ETP (expert-tensor parallelism, Megatron's ``MoEAlltoAllTokenDispatcher`` with an expert-TP
group): after the dispatch all-to-all the ETP group all-gathers the tokens its members
received, each member runs ``1/etp`` of every local expert's FFN on all of them, and
reduce-scatters the outputs before the combine all-to-all (backward: the same around
``combine_bwd`` / ``dispatch_bwd``). These waits are booked as ``tp_exposed``.
"""

from __future__ import annotations

import simpy

from moesim.collectives.p2p import send
from moesim.step.groups import group
from moesim.step.state import TP_TAG, StepState

__all__ = ["CP_TAG", "TP_TAG", "cp_arrival", "cp_send", "tp_collective"]

CP_TAG = -3  # flow tag of the ring-attention K/V sends


def tp_collective(
    st: StepState, rank: int, kind: str, key: tuple[object, ...], over: str = "tp",
    size_bytes: float | None = None,
) -> simpy.Event:
    """``rank`` joins ring ``kind`` ("ag" or "rs") of ``key`` over its ``over`` group ("tp", or
    "etp" for the expert-TP rings) of ``size_bytes`` (default: ``plan.tp_bytes``); the event
    fires when ``rank`` is done."""
    members = group(st.spec.layout, over, rank)
    full = (over, kind, members[0], *key)
    if full not in st.tp_rings:
        size = st.plan.tp_bytes if size_bytes is None else size_bytes
        st.tp_rings[full] = st.tp_ring(members, size, kind)
    ring, local = st.tp_rings[full], members.index(rank)
    ring.start_rank(local)
    return ring.rank_done[local]


def cp_arrival(st: StepState, key: tuple[object, ...], rank: int) -> simpy.Event:
    """Fires when ring-attention step ``key`` has delivered its K/V chunk to ``rank``."""
    full = (*key, rank)
    if full not in st.cp_mail:
        st.cp_mail[full] = st.env.event()
    return st.cp_mail[full]


def cp_send(st: StepState, rank: int, key: tuple[object, ...], size_bytes: float) -> None:
    """Send ``rank``'s current K/V chunk of step ``key`` to its CP ring successor."""
    members = group(st.spec.layout, "cp", rank)
    succ = members[(members.index(rank) + 1) % len(members)]
    box = cp_arrival(st, key, succ)

    def arrived(_: simpy.Event) -> None:
        box.succeed()

    send(st.net, rank, succ, size_bytes, tag=CP_TAG).callbacks.append(arrived)
