"""Finish batching (batch_window_rel = eps) against the exact solve (eps = 0).

The stated, tested bound: every completion time (each receiver's group) of a
batched run is within 2 x eps (relative) of the exact run's. Measured worst
case over 36 random all-to-alls (eps 0.005-0.05, ECMP/D-mod-K/spray): 1.28 x eps;
the bound is not eps itself (a held rate can delay a later drain by more).
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.engine.fabric import fabric_from_graph
from sim.engine.network import FlowNetwork
from sim.engine.routing import Router

FABRIC = fabric_from_graph(
    topologies.rail_fat_tree(2, gpu="H100", hosts_per_su=2, oversubscription=2.0)
)


def _completions(eps: float, sizes: np.ndarray, mode: str) -> np.ndarray:
    env = simpy.Environment()
    net = FlowNetwork(env, Router(FABRIC, mode), batch_window_rel=eps)
    n = sizes.shape[0]
    done = np.zeros(n)
    events = []
    for r in range(n):
        gid, ev = net.expect(n - 1)
        events.append((r, gid, ev))
    gids = np.array([g for _, g, _ in events])
    for r in range(n):
        peers = np.delete(np.arange(n), r)
        net.start(np.full(n - 1, r), peers, sizes[r, peers], gids[peers])
    for r, _, ev in events:
        ev.callbacks.append(lambda _e, r=r: done.__setitem__(r, env.now))
    env.run()
    return done


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    alpha=st.floats(0.0, 1.5),
    eps=st.sampled_from([0.005, 0.02, 0.05]),
    mode=st.sampled_from(["ecmp", "dmodk", "spray"]),
)
def test_batched_completion_times_within_eps(
    seed: int, alpha: float, eps: float, mode: str
) -> None:
    rng = np.random.default_rng(seed)
    n = 16
    p = 1.0 / np.arange(1, n + 1) ** alpha
    sizes = rng.multinomial(2048, rng.permutation(p / p.sum()), size=n).astype(float) * 7168.0 + 1.0
    exact = _completions(0.0, sizes, mode)
    batched = _completions(eps, sizes, mode)
    assert np.all(np.abs(batched - exact) <= 2 * eps * exact)


def test_eps_zero_is_deterministic() -> None:
    sizes = np.random.default_rng(1).integers(1, 10**7, size=(16, 16)).astype(float)
    assert np.array_equal(_completions(0.0, sizes, "ecmp"), _completions(0.0, sizes, "ecmp"))


@pytest.mark.parametrize("eps", [0.01, 0.05])
def test_batching_needs_fewer_solves(eps: float) -> None:
    sizes = np.random.default_rng(2).integers(1, 10**7, size=(16, 16)).astype(float)
    counts = []
    for e in (0.0, eps):
        env = simpy.Environment()
        net = FlowNetwork(env, Router(FABRIC, "ecmp"), batch_window_rel=e)
        gid, _ = net.expect(16 * 15)
        src, dst = np.nonzero(~np.eye(16, dtype=bool))
        net.start(src, dst, sizes[src, dst], gid)
        env.run()
        counts.append(net.solves)
    assert counts[1] < counts[0]
