"""A flow alone on an idle network is timed in closed form (moesim.engine.solo): the same
times, rates and link counters as the rate-solver path, on random mixes of isolated and
overlapping transfers."""

from __future__ import annotations

import numpy as np
import pytest
import simpy

from moesim.collectives.p2p import send
from moesim.engine.fabric import fabric_from_graph
from moesim.engine.flowtable import FLOW_COLUMNS
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.fabric.build import build_graph
from moesim.scenario.schema import FabricSpec

RAIL = FabricSpec(preset="rail-h800-64", params=(("hosts", 4), ("gpus_per_host", 4)))
"""16 GPUs on 4 hosts: NVLink, PCIe-NIC relays (implied links) and a leaf/spine tier."""


def _run(mode: str, eps: float, seed: int, solo: bool, monkeypatch: pytest.MonkeyPatch,
         timeline: bool = True, one: bool = False) -> FlowNetwork:
    """Four processes, each sending 12 transfers of random size after random gaps, and one
    sending ring steps of 2 or 4 flows at once: some start alone on their links, some on top
    of others (the gaps are of the order of a transfer). ``one``: the transfers are
    point-to-point sends (:func:`moesim.collectives.p2p.send`, ``FlowNetwork.start_one``)."""
    with monkeypatch.context() as m:
        if not solo:
            m.setattr(FlowNetwork, "_alone_pairs", lambda self, net: None)
        env = simpy.Environment()
        net = FlowNetwork(env, Router(fabric_from_graph(build_graph(RAIL)), mode),
                          batch_window_rel=eps, record_timeline=timeline)
        rng = np.random.default_rng(seed)

        def sender(src: int) -> simpy.events.ProcessGenerator:
            for _ in range(12):
                yield env.timeout(float(rng.exponential(1e-4)) * int(rng.integers(0, 2)))
                dst = int(rng.integers(0, 16))
                dst, size = dst if dst != src else (src + 5) % 16, float(rng.uniform(1e5, 2e6))
                yield send(net, src, dst, size) if one else net.transfer(src, dst, size)

        def pairs() -> simpy.events.ProcessGenerator:
            """Ring steps of a 4-GPU group: 4 flows at once, or 2 opposite ones, on links
            no two of them share (each GPU sends one and receives one)."""
            ring = [1, 2, 9, 10]
            for k in range(10):
                yield env.timeout(float(rng.exponential(1e-4)))
                n = 4 if k % 2 else 2
                gid, done = net.expect(n)
                src = ring[:n]
                net.start(src, [ring[(i + 1) % n] for i in range(n)],
                          rng.uniform(1e5, 2e6, n), gid)
                yield done

        for src in (0, 3, 6, 13):
            env.process(sender(src))
        env.process(pairs())
        env.run()
        return net


@pytest.mark.parametrize("mode", ["dmodk", "spray"])
@pytest.mark.parametrize("eps", [0.0, 0.05])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_solo_path_matches_the_solver_path(mode: str, eps: float, seed: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Solo flows' link samples: every link (timeline kept) or only theirs (seed 2: no
    timeline, as steps run); the peaks are the same either way."""
    fast = _run(mode, eps, seed, True, monkeypatch, timeline=seed != 2)
    slow = _run(mode, eps, seed, False, monkeypatch)
    assert fast.solves < slow.solves  # some transfers did run alone
    for col in ("start_s", "drain_s", "finish_s", "rate_Bps", "size_bytes"):
        np.testing.assert_allclose(fast.flows[col], slow.flows[col], rtol=1e-9, err_msg=col)
    np.testing.assert_array_equal(fast.flows["bottleneck"], slow.flows["bottleneck"])
    np.testing.assert_allclose(fast.stats.bytes, slow.stats.bytes, rtol=1e-9, atol=1e-3)
    np.testing.assert_allclose(fast.stats.peak_util, slow.stats.peak_util, rtol=1e-12)
    np.testing.assert_array_equal(fast.stats.peak_flows, slow.stats.peak_flows)
    if eps > 0:
        # The solver path ends a batch of drains at the batch's end and charges each link
        # busy until then; solo flows end at their own drains, as eps = 0 would.
        late = slow.stats.busy_s - fast.stats.busy_s
        assert (late >= -1e-15).all() and late.max() <= eps * slow.stats.busy_s.max()
        return
    np.testing.assert_allclose(fast.stats.busy_s, slow.stats.busy_s, rtol=1e-9, atol=1e-15)
    if seed == 2:
        assert not fast.stats.sample_t
        return
    t_fast, u_fast = fast.stats.timeline()
    t_slow, u_slow = slow.stats.timeline()
    np.testing.assert_allclose(t_fast, t_slow, rtol=1e-9)
    np.testing.assert_allclose(u_fast, u_slow, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(("mode", "eps", "seed"), [("dmodk", 0.0, 0), ("spray", 0.05, 1)])
def test_start_one_is_start_of_one_flow(mode: str, eps: float, seed: int,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Point-to-point sends through ``start_one`` (route and lone rate looked up per pair)
    give every flow, link counter and sample bit for bit what ``start`` gives them, alone or
    overlapping."""
    one = _run(mode, eps, seed, True, monkeypatch, one=True)
    ref = _run(mode, eps, seed, True, monkeypatch)
    assert one.flows.n == ref.flows.n and one.solves == ref.solves > 0
    for col in FLOW_COLUMNS:
        if col != "pair_ptr":  # a pair's route is stored once
            np.testing.assert_array_equal(one.flows[col], ref.flows[col], err_msg=col)
    for fid in range(ref.flows.n):
        args = [(int(n.flows["pair_ptr"][fid]), int(n.flows["pair_len"][fid])) for n in (one, ref)]
        for a, b in zip(one.pairs.route(*args[0]), ref.pairs.route(*args[1]), strict=True):
            np.testing.assert_array_equal(a, b)
    for counter in ("bytes", "busy_s", "peak_util", "peak_flows"):
        np.testing.assert_array_equal(getattr(one.stats, counter), getattr(ref.stats, counter))
    for a, b in zip(one.stats.timeline(), ref.stats.timeline(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_lone_flow_skips_the_solver_and_a_second_one_joins_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One transfer alone: no solve. A second one that starts while it runs: the first
    joins the active set as of its start; both then share the link."""
    env = simpy.Environment()
    net = FlowNetwork(env, Router(fabric_from_graph(build_graph(RAIL)), "dmodk"))
    first = net.transfer(0, 4, 1e6)
    env.run(first)
    assert net.solves == 0 and net.flows["rem_bytes"][0] == 0.0
    t0 = env.now

    def later() -> simpy.events.ProcessGenerator:
        yield env.timeout(5e-6)
        yield net.transfer(1, 4, 1e6)

    env.process(later())
    third = net.transfer(2, 4, 1e6)
    env.run(third)
    assert net.solves >= 1
    assert net.flows["start_s"][1] == t0 and net.flows["start_s"][2] == t0 + 5e-6


def _beside(solo: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[FlowNetwork, list[bool]]:
    """Two transfers into GPU 4 (solved: they share its link); while they run, 8 -> 12
    starts on links of its own, then 9 -> 12 joins it on GPU 12's link. Returns the network
    and, per transfer, whether it started alone beside solved flows."""
    with monkeypatch.context() as m:
        if not solo:
            m.setattr(FlowNetwork, "_alone_pairs", lambda self, net: None)
        env = simpy.Environment()
        net = FlowNetwork(env, Router(fabric_from_graph(build_graph(RAIL)), "dmodk"))
        beside: list[bool] = []

        def send(delay_s: float, src: int, dst: int, size: float
                 ) -> simpy.events.ProcessGenerator:
            yield env.timeout(delay_s)
            done = net.transfer(src, dst, size)
            fid = len(net.flows["src"]) - 1
            beside.append(net.active.n > 0 and fid in net._solos.flows)
            yield done

        gid, _ = net.expect(2)
        net.start([0, 1], [4, 4], [2e6, 3e6], gid)  # one call: solved together from the start
        for args in ((2e-5, 8, 12, 1e6), (3e-5, 9, 12, 1e6)):
            env.process(send(*args))
        env.run()
        return net, beside


def test_a_flow_alone_on_its_links_skips_the_solver_beside_solved_flows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """8 -> 12 runs in closed form while the two flows into GPU 4 are solved elsewhere; when
    9 -> 12 comes, it joins the solver part-drained; every time equals the solver path's."""
    fast, beside = _beside(True, monkeypatch)
    slow, never = _beside(False, monkeypatch)
    assert beside == [True, False] and not any(never)
    assert fast.solves < slow.solves
    for col in ("drain_s", "finish_s", "rate_Bps"):
        np.testing.assert_allclose(fast.flows[col], slow.flows[col], rtol=1e-12, err_msg=col)
    np.testing.assert_allclose(fast.stats.bytes, slow.stats.bytes, rtol=1e-9, atol=1e-3)
    np.testing.assert_allclose(fast.stats.busy_s, slow.stats.busy_s, rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(fast.stats.peak_util, slow.stats.peak_util, rtol=1e-12)
