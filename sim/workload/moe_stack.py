"""Replay a stack of MoE layers, forward then backward, on one expert-parallel group.

Each EP rank is a SimPy process walking the same list of phases:

    forward, per layer:  attn -> router -> dispatch a2a -> experts -> combine a2a -> unpermute
    backward, reversed:  combine_bwd a2a -> experts_bwd -> dispatch_bwd a2a -> attn_bwd

Compute phases take the roofline time of that rank (``LayerCosts``); all-to-all
phases start the rank's row of flows and end when everything addressed to it
has arrived. A rank's span of each phase is recorded for the result and the
straggler attribution; the engine below knows nothing of any of this.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import numpy as np
import simpy

from moesim.collectives.alltoall import AllToAll
from moesim.engine.network import FlowNetwork
from moesim.router import RoutingResult
from moesim.workload.costs import LayerCosts, token_bytes
from moesim.workload.dispatchers import get_dispatcher

FORWARD = ("attn", "router", "dispatch", "experts", "combine", "unpermute")
BACKWARD = ("combine_bwd", "experts_bwd", "dispatch_bwd", "attn_bwd")
A2A_PHASES = ("dispatch", "combine", "combine_bwd", "dispatch_bwd")


@dataclass(frozen=True)
class Phase:
    """One step of every rank's program."""

    index: int
    layer: int
    name: str

    @property
    def is_a2a(self) -> bool:
        return self.name in A2A_PHASES

    @property
    def label(self) -> str:
        return f"L{self.layer}.{self.name}"


def phase_list(n_layers: int, backward: bool) -> list[Phase]:
    """The program: every layer forward, then (optionally) every layer backward."""
    names = [(layer, p) for layer in range(n_layers) for p in FORWARD]
    if backward:
        names += [(layer, p) for layer in reversed(range(n_layers)) for p in BACKWARD]
    return [Phase(i, layer, name) for i, (layer, name) in enumerate(names)]


@dataclass(frozen=True)
class WireFormat:
    """Bytes per token copy on the wire for each all-to-all."""

    hidden: int
    dispatch_dtype: str = "fp8"
    combine_dtype: str = "bf16"

    def per_token(self, phase: str) -> float:
        dtype = self.dispatch_dtype if phase == "dispatch" else self.combine_dtype
        return token_bytes(self.hidden, dtype)


@dataclass
class StackTrace:
    """Per (phase, rank) start and end times, and the a2a objects of each phase."""

    phases: list[Phase]
    start_s: np.ndarray
    end_s: np.ndarray
    a2a: dict[int, AllToAll]


ALLTOALL = get_dispatcher("alltoall")
"""Group mode's dispatcher (the only one it accepts)."""


def _a2a_bytes(phase: str, tokens: np.ndarray, wire: WireFormat) -> np.ndarray:
    """[sender, receiver] bytes: dispatch-shaped phases follow tokens, the others its transpose."""
    matrix = tokens if phase in ("dispatch", "combine_bwd") else tokens.T
    return matrix.astype(np.float64) * wire.per_token(phase)


def replay_moe_stack(
    env: simpy.Environment,
    net: FlowNetwork,
    gpus: np.ndarray,
    routings: list[RoutingResult],
    costs: list[LayerCosts],
    wire: WireFormat,
    *,
    dedup: bool,
    backward: bool,
) -> StackTrace:
    """Set up the processes of every rank; run ``env`` afterwards to simulate."""
    phases = phase_list(len(routings), backward)
    n = gpus.size
    trace = StackTrace(
        phases, np.full((len(phases), n), np.nan), np.full((len(phases), n), np.nan), {}
    )
    for ph in phases:
        if ph.is_a2a:
            routing = routings[ph.layer]
            tokens = ALLTOALL.tokens(routing, dedup=dedup, node_ranks=0)
            trace.a2a[ph.index] = AllToAll(net, gpus, _a2a_bytes(ph.name, tokens, wire), ph.index)
    for rank in range(n):
        env.process(_rank_program(env, rank, trace, costs))
    return trace


def _compute_s(phase: Phase, costs: LayerCosts, rank: int) -> float:
    table = {
        "attn": costs.attn_fwd,
        "router": costs.router,
        "experts": costs.experts_fwd,
        "unpermute": costs.unpermute,
        "experts_bwd": costs.experts_bwd,
        "attn_bwd": costs.attn_bwd,
    }
    return float(table[phase.name][rank])


def _rank_program(
    env: simpy.Environment, rank: int, trace: StackTrace, costs: list[LayerCosts]
) -> Generator[simpy.Event, object, None]:
    for ph in trace.phases:
        trace.start_s[ph.index, rank] = env.now
        if ph.is_a2a:
            a2a = trace.a2a[ph.index]
            a2a.send(rank)
            yield a2a.received(rank)
        else:
            yield env.timeout(_compute_s(ph, costs[ph.layer], rank))
        trace.end_s[ph.index, rank] = env.now
