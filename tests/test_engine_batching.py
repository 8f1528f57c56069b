"""Finish batching (batch_window_rel = eps) against the exact solve (eps = 0).

The stated, tested bound (see ``moesim.engine.network``): on a single all-to-all wave every
completion group (each receiver's, or each sender's) of a batched run finishes within
eps x (its duration) of the exact run. Also: eps = 0 runs repeat bit for bit, and the
incremental solver (only the flows a change can reach) matches full re-solves.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine_support import add_gpu, add_link, leaf_spine

from moesim import topologies
from moesim.engine.fabric import Fabric, fabric_from_graph
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router

FABRIC = fabric_from_graph(
    topologies.rail_fat_tree(2, gpu="H100", hosts_per_su=2, oversubscription=2.0)
)


def _network(fabric: Fabric, mode: str, eps: float, incremental: bool = True
             ) -> tuple[simpy.Environment, FlowNetwork]:
    env = simpy.Environment()
    net = FlowNetwork(env, Router(fabric, mode), batch_window_rel=eps)
    net.rates.incremental = incremental
    return env, net


def _completions(eps: float, sizes: np.ndarray, mode: str, by: str = "dst",
                 fabric: Fabric = FABRIC, incremental: bool = True) -> np.ndarray:
    """All-to-all with ``sizes[src, dst]`` bytes; completion time of each rank's group."""
    env, net = _network(fabric, mode, eps, incremental)
    n = sizes.shape[0]
    gids = np.array([net.expect(n - 1)[0] for _ in range(n)])
    src, dst = np.nonzero(~np.eye(n, dtype=bool))
    net.start(src, dst, sizes[src, dst], gids[dst if by == "dst" else src])
    env.run()
    return net.groups["finish_s"].copy()


def _zipf_sizes(seed: int, alpha: float, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n + 1) ** alpha
    picks = rng.multinomial(2048, rng.permutation(p / p.sum()), size=n)
    return picks.astype(float) * 7168.0 + 1.0


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), alpha=st.floats(0.0, 1.5),
       eps=st.sampled_from([0.005, 0.02, 0.05]), mode=st.sampled_from(["ecmp", "dmodk", "spray"]))
def test_batched_completion_times_within_eps(seed: int, alpha: float, eps: float,
                                             mode: str) -> None:
    sizes = _zipf_sizes(seed, alpha, 16)
    exact = _completions(0.0, sizes, mode)
    batched = _completions(eps, sizes, mode)
    assert np.all(np.abs(batched - exact) <= eps * exact)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), eps=st.sampled_from([0.01, 0.1, 0.2]),
       mode=st.sampled_from(["ecmp", "dmodk", "spray"]), by=st.sampled_from(["src", "dst"]))
def test_sender_and_receiver_groups_on_a_leaf_spine(seed: int, eps: float, mode: str,
                                                    by: str) -> None:
    rng = np.random.default_rng(seed)
    leaves, per, spines = (int(x) for x in rng.integers(2, 4, size=3))
    uplinks = rng.choice([10.0, 25.0, 50.0], leaves * spines).tolist()
    graph = leaf_spine([per] * leaves, spines, access_GBps=50.0, uplink_GBps=uplinks)
    fabric = fabric_from_graph(graph)
    n = leaves * per
    sizes = rng.zipf(1.5, (n, n)).astype(float) * 1e5 * rng.random((n, n)) + 1.0
    exact = _completions(0.0, sizes, mode, by, fabric)
    batched = _completions(eps, sizes, mode, by, fabric)
    assert np.all(np.abs(batched - exact) <= eps * exact)


def test_a_late_group_beside_a_long_flow_keeps_its_own_window() -> None:
    # One 10 GB/s link. A long flow runs from t=0; at t=1 s flows of 1 MB and 2 MB start.
    # Exact: three flows at 1/3 each until the 1 MB one drains at 1 + 3e-4 s; the 2 MB one
    # has 1 MB left at 1/2: drains at 1 + 5e-4 s. A window measured from t=0 (eps x 1 s)
    # would drain both at the stale 1/3 rate: 1 + 6e-4 s, a 20% error on a 5e-4 s group.
    g = nx.DiGraph()
    add_link(g, add_gpu(g, 0), add_gpu(g, 1), 10.0)
    env, net = _network(fabric_from_graph(g), "ecmp", eps=0.1)
    net.transfer(0, 1, 1e12)

    def late() -> simpy.events.ProcessGenerator:
        yield env.timeout(1.0)
        gid, done = net.expect(2)
        net.start([0, 0], [1, 1], [1e6, 2e6], gid)
        yield done

    env.run(env.process(late()))
    assert env.now == pytest.approx(1.0 + 5e-4, rel=1e-12)


def test_eps_zero_is_deterministic() -> None:
    sizes = np.random.default_rng(1).integers(1, 10**7, size=(16, 16)).astype(float)
    assert np.array_equal(_completions(0.0, sizes, "ecmp"), _completions(0.0, sizes, "ecmp"))


@pytest.mark.parametrize("mode", ["ecmp", "spray"])
@pytest.mark.parametrize("eps", [0.0, 0.05])
def test_incremental_solves_match_full_solves(mode: str, eps: float) -> None:
    sizes = _zipf_sizes(3, 1.2, 16)
    full = _completions(eps, sizes, mode, incremental=False)
    assert _completions(eps, sizes, mode) == pytest.approx(full, rel=1e-9)


@pytest.mark.parametrize("eps", [0.01, 0.05])
def test_batching_needs_fewer_solves(eps: float) -> None:
    sizes = np.random.default_rng(2).integers(1, 10**7, size=(16, 16)).astype(float)
    counts = []
    for e in (0.0, eps):
        env, net = _network(FABRIC, "ecmp", e)
        gid, _ = net.expect(16 * 15)
        src, dst = np.nonzero(~np.eye(16, dtype=bool))
        net.start(src, dst, sizes[src, dst], gid)
        env.run()
        counts.append(net.solves)
    assert counts[1] < counts[0]
