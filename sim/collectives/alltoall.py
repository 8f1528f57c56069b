"""All-to-all as flows: one flow per (sender, receiver) pair, sized by a byte matrix.

Each receiver owns a completion group that fires when the last byte of the
last flow addressed to it has arrived; senders start their row of flows when
they reach the collective, so a late sender delays exactly the receivers it
sends to, as in a real (barrier-free) NCCL/DeepEP all-to-all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from moesim.engine.network import FlowNetwork


@dataclass
class AllToAll:
    """One all-to-all among ``gpus`` (rank i on GPU ``gpus[i]``)."""

    net: FlowNetwork
    gpus: np.ndarray
    size_bytes: np.ndarray  # [sender rank, receiver rank]
    tag: int

    def __post_init__(self) -> None:
        n = self.gpus.size
        self.groups, self.events = self.net.expect_many(n, n - 1)

    def route_all(self) -> None:
        """Build the routes of every (sender, receiver) pair now, in one router call: one
        breadth-first search per block of receivers (:mod:`moesim.engine.paths`) instead of
        one per sender as the senders arrive. Routes depend only on their pair, so the
        flows are routed exactly as without it."""
        n = self.gpus.size
        src, dst = np.divmod(np.flatnonzero(~np.eye(n, dtype=bool)), n)
        if src.size:
            self.net.router.routes(self.gpus[src], self.gpus[dst])

    def send(self, rank: int) -> None:
        """Rank ``rank`` starts its flows to every other rank now."""
        peers = np.delete(np.arange(self.gpus.size), rank)
        self.net.start(
            np.full(peers.size, self.gpus[rank]),
            self.gpus[peers],
            self.size_bytes[rank, peers],
            self.groups[peers],
            self.tag,
        )

    def received(self, rank: int) -> simpy.Event:
        """Fires when everything addressed to ``rank`` has arrived (value: last flow id)."""
        return self.events[rank]
