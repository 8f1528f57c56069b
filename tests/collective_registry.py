"""Collective algorithms by name, for the dense (non-expert) dimensions: TP, SP, DP.

Test-side only: the step builds its rings directly (:mod:`moesim.collectives.ring`); this registry
and the tree all-reduce (``collective_tree``) are kept here, with their tests, until a scenario
can choose a dense-collective algorithm.

An algorithm is a factory ``(net, gpus, size_bytes, op, *, reduce_s, tag) -> collective``
where ``op`` is one of :data:`OPS`; the collective is built unstarted and exposes
``start()``, ``start_rank(rank)``, ``done`` and ``rank_done`` (see
:class:`moesim.collectives.ring.RingCollective`). A duplicate name is an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import collective_tree as tree
import numpy as np
import simpy

from moesim.collectives import ring
from moesim.engine.network import FlowNetwork
from moesim.errors import ConfigError

OPS = ("reduce_scatter", "all_gather", "all_reduce")


class Collective(Protocol):
    done: simpy.Event
    rank_done: list[simpy.Event]

    def start(self) -> Collective: ...

    def start_rank(self, rank: int) -> None: ...


class CollectiveFactory(Protocol):
    def __call__(
        self, net: FlowNetwork, gpus: Sequence[int] | np.ndarray, size_bytes: float, op: str,
        *, reduce_s: ring.ReduceTime = 0.0, tag: int = -1,
    ) -> Collective: ...


_ALGORITHMS: dict[str, CollectiveFactory] = {}


def register_algorithm(name: str, factory: CollectiveFactory) -> CollectiveFactory:
    """Add a collective algorithm under ``name``; a duplicate name is an error."""
    if name in _ALGORITHMS:
        raise ConfigError("collective.algorithm", f"algorithm {name!r} is already registered")
    _ALGORITHMS[name] = factory
    return factory


def algorithm_names() -> tuple[str, ...]:
    """Registered algorithm names, in registration order."""
    return tuple(_ALGORITHMS)


def make_collective(
    algorithm: str, net: FlowNetwork, gpus: Sequence[int] | np.ndarray, size_bytes: float,
    op: str, *, reduce_s: ring.ReduceTime = 0.0, tag: int = -1,
) -> Collective:
    """An unstarted ``op`` over ``gpus`` by ``algorithm``; call ``.start()`` to run it."""
    if algorithm not in _ALGORITHMS:
        allowed = ", ".join(_ALGORITHMS)
        raise ConfigError("collective.algorithm", f"unknown {algorithm!r}; allowed: {allowed}")
    if op not in OPS:
        raise ConfigError("collective.op", f"unknown {op!r}; allowed: {', '.join(OPS)}")
    return _ALGORITHMS[algorithm](net, gpus, size_bytes, op, reduce_s=reduce_s, tag=tag)


def _ring(
    net: FlowNetwork, gpus: Sequence[int] | np.ndarray, size_bytes: float, op: str,
    *, reduce_s: ring.ReduceTime = 0.0, tag: int = -1,
) -> Collective:
    n = len(gpus)
    steps = {"reduce_scatter": (n - 1, n - 1), "all_gather": (n - 1, 0),
             "all_reduce": (2 * (n - 1), n - 1)}[op]
    return ring.RingCollective(
        net, gpus, size_bytes, n_steps=steps[0], reduce_steps=steps[1], reduce_s=reduce_s, tag=tag
    )


def _tree(
    net: FlowNetwork, gpus: Sequence[int] | np.ndarray, size_bytes: float, op: str,
    *, reduce_s: ring.ReduceTime = 0.0, tag: int = -1,
) -> Collective:
    if op != "all_reduce":
        raise ConfigError("collective.op", f"algorithm 'tree' has no {op!r}; allowed: all_reduce")
    return tree.TreeAllReduce(net, gpus, size_bytes, reduce_s=reduce_s, tag=tag)


register_algorithm("ring", _ring)
register_algorithm("tree", _tree)
