"""Invariants of the engine on random fabrics and flow sets (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_engine_support import leaf_spine, route_of, run_flows

from moesim.engine.maxmin import max_min_rates

REL = 1e-9


# ------------------------------------------------- reference max-min solver
def reference_max_min(routes: list[list[tuple[int, float]]], cap: list[float]) -> list[float]:
    """Textbook progressive filling, one saturated link per step, in plain Python."""
    rate: list[float | None] = [None] * len(routes)
    used = [0.0] * len(cap)
    while any(r is None for r in rate):
        best, best_link = float("inf"), -1
        for link, c in enumerate(cap):
            w = sum(wt for f, r in enumerate(routes) if rate[f] is None for lk, wt in r
                    if lk == link)
            if w > 0 and (c - used[link]) / w < best:
                best, best_link = (c - used[link]) / w, link
        for f, r in enumerate(routes):
            if rate[f] is None and any(lk == best_link for lk, _ in r):
                rate[f] = best
                for lk, wt in r:
                    used[lk] += wt * best
    return [float(r) for r in rate if r is not None]


@st.composite
def incidence(draw: st.DrawFn) -> tuple[list[list[tuple[int, float]]], list[float]]:
    n_links = draw(st.integers(1, 6))
    cap = draw(st.lists(st.floats(1.0, 100.0), min_size=n_links, max_size=n_links))
    weight = st.sampled_from([1.0, 0.5, 0.25]) | st.floats(0.05, 1.0)
    routes = []
    for _ in range(draw(st.integers(1, 8))):
        on = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=n_links,
                           unique=True))
        routes.append([(lk, draw(weight)) for lk in on])
    return routes, cap


def as_padded(routes: list[list[tuple[int, float]]], n_links: int) -> tuple[np.ndarray, ...]:
    hops = max(len(r) for r in routes)
    links = np.full((hops, len(routes)), n_links, dtype=np.int64)
    wts = np.zeros(links.shape)
    for f, r in enumerate(routes):
        for h, (lk, wt) in enumerate(r):
            links[h, f], wts[h, f] = lk, wt
    return links, wts


@settings(max_examples=300, deadline=None)
@given(incidence())
def test_max_min_equals_sequential_progressive_filling(
    case: tuple[list[list[tuple[int, float]]], list[float]],
) -> None:
    routes, cap = case
    links, wts = as_padded(routes, len(cap))
    alloc = max_min_rates(links, wts, np.array(cap))
    assert alloc.rate_Bps == pytest.approx(reference_max_min(routes, cap), rel=REL)
    # Feasible, and max-min: every flow crosses a saturated link where no flow gets more.
    load = np.bincount(links.ravel(), (wts * alloc.rate_Bps).ravel(), len(cap) + 1)[:-1]
    assert np.all(load <= np.array(cap) * (1 + REL))
    for f, r in enumerate(routes):
        assert any(
            load[lk] >= cap[lk] * (1 - REL)
            and all(alloc.rate_Bps[g] <= alloc.rate_Bps[f] * (1 + REL)
                    for g, rg in enumerate(routes) if any(x == lk for x, _ in rg))
            for lk, _ in r
        ), f"flow {f} has no bottleneck link"
    assert alloc.passes <= len(cap)


# ----------------------------------------------------- random fabric + flows
@st.composite
def scenario(draw: st.DrawFn) -> tuple:
    gpus_per_leaf = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    n_gpus = sum(gpus_per_leaf)
    if n_gpus < 2:
        gpus_per_leaf = [*gpus_per_leaf, 1]
        n_gpus += 1
    spines = draw(st.integers(1, 3))
    ups = draw(st.lists(st.sampled_from([10.0, 25.0, 50.0]),
                        min_size=len(gpus_per_leaf) * spines,
                        max_size=len(gpus_per_leaf) * spines))
    graph = leaf_spine(gpus_per_leaf, spines, access_GBps=draw(st.sampled_from([25.0, 100.0])),
                       uplink_GBps=ups, access_ns=draw(st.integers(0, 1000)))
    flows = []
    for _ in range(draw(st.integers(1, 12))):
        src = draw(st.integers(0, n_gpus - 1))
        dst = (src + draw(st.integers(1, n_gpus - 1))) % n_gpus
        flows.append((draw(st.sampled_from([0.0, 0.0, 1e-5, 3e-5])), src, dst,
                      draw(st.floats(1e3, 1e7))))
    mode = draw(st.sampled_from(["ecmp", "dmodk", "spray"]))
    eps = draw(st.sampled_from([0.0, 0.0, 0.05, 0.3]))
    return graph, flows, mode, eps


@settings(max_examples=60, deadline=None)
@given(scenario())
def test_bytes_conserved_capacity_respected_no_flow_beats_idle(case: tuple) -> None:
    graph, flows, mode, eps = case
    net = run_flows(graph, flows, mode=mode, eps=eps)
    fab = net.fabric
    expected = np.zeros(fab.n_links)
    for f in range(net.flows.n):
        links, wts = route_of(net, f)
        np.add.at(expected, links, wts * net.flows["size_bytes"][f])
        first = links[0]
        assert fab.node_kind[fab.link_src[first]] == "gpu"
    assert net.stats.bytes == pytest.approx(expected, rel=REL, abs=1e-6)
    times, util = net.stats.timeline()
    assert np.all(np.diff(times) > 0)
    assert np.all(util <= 1 + REL)
    fl = net.flows
    assert np.all(fl["rem_bytes"] == 0.0)
    assert np.all(fl["finish_s"] >= (fl["start_s"] + fl["ideal_s"]) * (1 - REL))
    assert np.all(fl["finish_s"] == fl["drain_s"] + fl["latency_s"])
    assert np.all(net.stats.busy_s <= fl["drain_s"].max() * (1 + REL))


@settings(max_examples=40, deadline=None)
@given(scenario())
def test_incremental_solves_equal_full_solves(case: tuple) -> None:
    graph, flows, mode, eps = case
    incremental = run_flows(graph, flows, mode=mode, eps=eps)
    full = run_flows(graph, flows, mode=mode, eps=eps, incremental=False)
    assert incremental.flows["finish_s"] == pytest.approx(full.flows["finish_s"], rel=REL)


@pytest.mark.parametrize("weighted", [False, True])
def test_solving_on_the_crossed_links_is_bit_for_bit_the_whole_fabric_solve(
    weighted: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """maxmin.solve renumbers the links the unfrozen flows cross once they are few (from the
    start on a large fabric, or after some passes); rates, bottleneck links, loads and passes
    equal those of a solve that never renumbers."""
    from moesim.engine import maxmin

    rng = np.random.default_rng(15)
    passes = []
    for n_links, n_flows in ((5000, 1), (5000, 7), (5000, 60), (5000, 400), (600, 400)):
        links = rng.integers(0, n_links // 16, size=(4, n_flows)) * 16  # spread over the fabric
        links[3, : n_flows // 3] = n_links  # some shorter routes (padding)
        wts = np.where(links == n_links, 0.0, rng.choice([0.25, 0.5, 1.0], links.shape))
        args = (links, wts if weighted else None, rng.uniform(1.0, 10.0, n_links))
        got = maxmin.solve(*args)
        with monkeypatch.context() as m:
            m.setattr(maxmin, "COMPACT_BELOW", np.inf)  # never renumber
            whole = maxmin.solve(*args)
        assert whole.load_Bps is not None and got.load_Bps is not None
        assert np.array_equal(got.rate_Bps, whole.rate_Bps)
        assert np.array_equal(got.bottleneck_link, whole.bottleneck_link)
        assert np.array_equal(got.load_Bps, whole.load_Bps)
        assert got.passes == whole.passes
        passes.append(whole.passes)
    assert max(passes) > 1  # multi-level cases are among them


@pytest.mark.parametrize("weighted", [False, True])
def test_long_route_sums_are_bit_for_bit_the_hop_by_hop_sums(
    weighted: bool, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """link_sum over many hops (flows standing for many copies) sums by (hop, link) keys:
    every per-link total, and a whole solve's rates, bottlenecks, loads and passes, equal
    those of the hop-by-hop loop (LONG_ROUTES = inf), bit for bit."""
    from moesim.engine import maxmin

    rng = np.random.default_rng(17)
    for n_links, hops, n_flows in ((3000, 200, 30), (40, 64, 50), (800, 17, 300)):
        links = rng.integers(0, n_links, size=(hops, n_flows))
        links[rng.random(links.shape) < 0.6] = n_links  # padding, mixed into the routes
        links[:, : n_flows // 4] = rng.integers(0, 3, size=(hops, n_flows // 4))  # shared
        wts = np.where(links == n_links, 0.0, rng.uniform(0.05, 8.0, links.shape))
        w = wts if weighted else None
        per_flow = rng.uniform(0.0, 1e9, n_flows)
        cap = rng.uniform(1e9, 1e11, n_links)
        got = (maxmin.link_sum(links, w, per_flow, n_links), maxmin.solve(links, w, cap))
        with monkeypatch.context() as m:
            m.setattr(maxmin, "LONG_ROUTES", np.inf)  # the hop-by-hop loop
            loop = (maxmin.link_sum(links, w, per_flow, n_links), maxmin.solve(links, w, cap))
        assert np.array_equal(got[0], loop[0])
        assert np.array_equal(got[1].rate_Bps, loop[1].rate_Bps)
        assert np.array_equal(got[1].bottleneck_link, loop[1].bottleneck_link)
        assert np.array_equal(got[1].load_Bps, loop[1].load_Bps)
        assert got[1].passes == loop[1].passes


def test_unit_weight_solves_are_bit_for_bit_the_weighted_solves() -> None:
    """maxmin.solve with ``weights=None`` runs its own loop (no idle mask, blocked links by
    one bincount, first free links of frozen flows only); rates, bottleneck links, loads and
    passes equal those of the weighted loop given weight 1 on every real hop, bit for bit:
    on fabrics large (renumbered) and small, with shorter routes, a link crossed twice by one
    flow, flows crossing no real link, long routes, and capacities that give many levels."""
    from moesim.engine import maxmin

    rng = np.random.default_rng(21)
    passes = []
    for n_links, hops, n_flows in ((5000, 4, 400), (600, 4, 2000), (40, 4, 300), (12, 2, 50),
                                   (300, 20, 120), (7, 1, 9)):
        links = rng.integers(0, n_links, size=(hops, n_flows))
        links[-1, : n_flows // 3] = n_links  # shorter routes
        links[:, n_flows // 3] = n_links  # a flow on no real link
        if hops > 1:
            links[0, -1] = links[1, -1] = 0  # one flow crossing link 0 twice
        cap = rng.choice([1.0, 2.0, 3.0], n_links) * rng.uniform(1.0, 1.001, n_links)
        unit = maxmin.solve(links, None, cap)
        weighted = maxmin.solve(links, np.where(links == n_links, 0.0, 1.0), cap)
        assert unit.load_Bps is not None and weighted.load_Bps is not None
        assert np.array_equal(unit.rate_Bps, weighted.rate_Bps)
        assert np.array_equal(unit.bottleneck_link, weighted.bottleneck_link)
        assert np.array_equal(unit.load_Bps, weighted.load_Bps)
        assert unit.passes == weighted.passes
        assert np.isinf(unit.rate_Bps[n_flows // 3])
        passes.append(unit.passes)
    assert max(passes) > 3  # multi-level cases are among them
