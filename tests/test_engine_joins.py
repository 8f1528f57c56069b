"""Joining flows' solver routes kept per chunk (:mod:`moesim.engine.joins`) change nothing:
runs with the memo and with every join packing its routes afresh agree bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from test_engine_support import leaf_spine

from moesim.engine import joins
from moesim.engine.fabric import fabric_from_graph
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router

GRAPH = leaf_spine([4, 4, 4], 2, access_GBps=50.0, uplink_GBps=[80.0, 60.0, 100.0, 70.0,
                                                                   90.0, 50.0])


def _waves(mode: str, seed: int) -> FlowNetwork:
    """Ranks start all-to-alls (one start per rank, some at the same instant, so a join holds
    several chunks) in waves that reuse the same (source, destination) sets, with sends
    between them."""
    env = simpy.Environment()
    net = FlowNetwork(env, Router(fabric_from_graph(GRAPH), mode), batch_window_rel=0.0)
    rng = np.random.default_rng(seed)
    n = 12

    def rank(r: int) -> simpy.events.ProcessGenerator:
        dst = np.array([d for d in range(n) if d != r])
        for wave in range(4):
            yield env.timeout(float(rng.choice([0.0, 1e-6, 2e-6])))
            gid, done = net.expect(dst.size)
            net.start(np.full(dst.size, r), dst, rng.uniform(1e5, 4e6, dst.size), gid)
            yield done
            if wave % 2:
                yield net.transfer(r, (r + 5) % n, float(rng.uniform(1e5, 1e6)))

    for r in range(n):
        env.process(rank(r))
    env.run()
    return net


@pytest.mark.parametrize("mode", ["ecmp", "dmodk", "spray"])
def test_joins_from_kept_chunk_routes_are_bit_for_bit_the_fresh_ones(
        mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = _waves(mode, 3)
    assert kept._joins._memo  # chunks were kept (and, waves repeating, reused)
    monkeypatch.setattr(joins, "STACK_MOST", -1)  # every join packs all its routes afresh
    fresh = _waves(mode, 3)
    assert not fresh._joins._memo
    n = kept.flows.n
    assert n == fresh.flows.n and kept.solves == fresh.solves
    for col in ("finish_s", "drain_s", "rate_Bps", "bottleneck"):
        assert np.array_equal(kept.flows.col[col][:n], fresh.flows.col[col][:n]), col
