"""Each replica's pipeline input beside the all-to-alls on its route (moesim.step.replica_inputs):
the fair-share drain worked by hand, the phases' flows as link rows, and the replicas' copies on
their own ECMP routes."""

from __future__ import annotations

import numpy as np
import pytest
from fast_fixtures import RAIL32

from moesim.fabric.build import build_graph
from moesim.fabric.spec import FabricSpec
from moesim.fabric.subfabric import GraphIndex
from moesim.step.phases import A2APhases
from moesim.step.replica_inputs import (
    LinkLoad,
    LinkRows,
    ReplicaInputs,
    late_end_s,
    share_drain_s,
)


def _rows(load_Bps: float) -> LinkRows:
    """Four flows on the route's first link from 2 s to 6 s moving ``load_Bps`` in all."""
    return LinkRows(np.array([0]), np.array([4.0]), np.array([load_Bps]), np.array([2.0]),
                    np.array([6.0]), np.array([0]))


CAP = np.array([10.0, 20.0])  # B/s: the route's two links
COPIES = np.array([1.0, 2.0])  # the send alone on link 0, beside one copy of it on link 1


def test_share_drain_by_hand() -> None:
    """100 B from t = 0. Link 1 gives 20 / 2 = 10 B/s throughout. Link 0: 10 B/s alone; from
    2 to 6 s beside four flows. Bottlenecked on it (load 8 B/s of 10): level
    max((10 - 8) / 1, 10 / (4 + 1)) = 2 B/s, so 20 B by 2 s, 8 B more by 6 s, the last 72 B
    at 10 B/s: 13.2 s. Bottlenecked elsewhere (load 2 B/s): level max(8, 2) = 8 B/s, 20 + 32
    B by 6 s, 48 B at 10 B/s: 10.8 s."""
    assert share_drain_s(0.0, 100.0, CAP, COPIES, _rows(8.0)) == pytest.approx(13.2)
    assert share_drain_s(0.0, 100.0, CAP, COPIES, _rows(2.0)) == pytest.approx(10.8)
    # from 3 s: 3 s at 2 B/s (6 B), 94 B at 10 B/s: 15.4 s; from 7 s the flows are gone
    assert share_drain_s(3.0, 100.0, CAP, COPIES, _rows(8.0)) == pytest.approx(15.4)
    assert share_drain_s(7.0, 100.0, CAP, COPIES, _rows(8.0)) == pytest.approx(17.0)
    assert share_drain_s(0.0, 10.0, CAP, COPIES, _rows(8.0)) == pytest.approx(1.0)


def test_link_load_shifts_and_filters() -> None:
    """A phase's rows count from its reference time; :meth:`LinkLoad.on` keeps the rows on
    the asked links still running after the asked time, their links renumbered."""
    load = LinkLoad(8)
    rows = LinkRows(np.array([5, 7, 5]), np.ones(3), np.ones(3), np.array([0.0, 0.0, 1.0]),
                    np.array([1.0, 2.0, 3.0]), np.zeros(3, dtype=np.int64))
    load.add(rows, 10.0)
    got = load.on(np.array([3, 5]), 11.5)
    assert got.link.tolist() == [1]  # link 5, its second row (ends at 13 s)
    assert got.start_s.tolist() == [11.0] and got.end_s.tolist() == [13.0]
    assert load.on(np.array([5]), 13.0).link.size == 0


def test_phase_rows_carry_each_links_bytes() -> None:
    """The rows of a solved phase, each flow at its mean rate from release to drain, move
    exactly the bytes its flows put on every link (each copy counted)."""
    fs = RAIL32
    idx = GraphIndex(build_graph(fs), fs, "H100")
    router = idx.whole()
    groups = np.arange(16).reshape(2, 8)  # two copies of an 8-GPU group
    rng = np.random.default_rng(3)
    size = rng.uniform(1e6, 4e6, (8, 8))
    np.fill_diagonal(size, 0.0)
    offsets = rng.uniform(0.0, 2e-4, 8)
    _, _, rows, finish = A2APhases(0.0).phase(0, router, groups, size, offsets)
    moved = np.bincount(rows.link, weights=rows.load_Bps * (rows.end_s - rows.start_s),
                        minlength=router.fabric.n_links)
    src, dst = np.divmod(np.flatnonzero(~np.eye(8, dtype=bool)), 8)
    rs = router.routes(groups[:, src].ravel(), groups[:, dst].ravel())
    owner = np.repeat(np.tile(size[src, dst], 2), np.diff(rs.ptr))
    want = np.bincount(rs.link, weights=rs.weight * owner, minlength=router.fabric.n_links)
    np.testing.assert_allclose(moved, want, rtol=1e-9, atol=1e-3)
    assert finish.shape == (8,) and (finish > offsets.min()).all()


def test_copies_on_their_own_routes() -> None:
    """Without all-to-all flows each copy drains at its route's capacity over the copies
    sharing its busiest link, plus its latency: the replicas' ECMP collisions, copy by copy."""
    fs = FabricSpec(preset="rail-h800-64", params=(
        ("hosts", 16), ("hosts_per_su", 4), ("oversubscription", 4.0), ("spines", 2)),
        multipath="ecmp")  # the congestion tests' fabric at 128 GPUs: 4 SUs, 4:1 uplinks
    idx = GraphIndex(build_graph(fs), fs, "H800")
    router = idx.whole()
    per, size = 64, 5e7
    inputs = ReplicaInputs(router, per, size)
    gpus = np.arange(per, 2 * per).reshape(2, 32)  # stage 1 (SUs 2, 3), fed by stage 0
    got = inputs.arrivals_s(gpus, 0, np.zeros(32))
    rs = router.routes(gpus.ravel() - per, gpus.ravel())
    copies = np.bincount(rs.link, weights=rs.weight, minlength=router.fabric.n_links)
    assert copies.max() > 1  # the hash stacks some copies on one link
    for c in range(gpus.size):
        mine = rs.link[rs.ptr[c]:rs.ptr[c + 1]]
        rate = float((router.fabric.cap_Bps[mine] / copies[mine]).min())
        assert got.ravel()[c] == pytest.approx(size / rate + rs.latency_s[c])
    late = inputs.arrivals_s(gpus, 0, np.full(32, 1e-3))  # each ep rank's own send time
    np.testing.assert_allclose(late, got + 1e-3)


def test_late_members_bound_against_the_solve() -> None:
    """A phase whose late members release their rows later, timed by the phase solved at
    the members' own offsets with the late rows moved and the link-load bound of
    :func:`late_end_s`, against the phase solved with the delays (the flow engine): within
    2 % (measured -1.4 % .. +0.4 % on 12 draws of 1-11 late members of 32, delays up to twice
    the phase; the 4:1 fabric at 128 GPUs, stage 1's two EP groups)."""
    fs = FabricSpec(preset="rail-h800-64", params=(
        ("hosts", 16), ("hosts_per_su", 4), ("oversubscription", 4.0), ("spines", 2)),
        multipath="ecmp", batch_window_rel=0.02)
    idx = GraphIndex(build_graph(fs), fs, "H800")
    router = idx.whole()
    groups = np.arange(64, 128).reshape(2, 32)
    rng = np.random.default_rng(0)
    for _ in range(4):
        size = rng.uniform(0.5, 1.5, (32, 32)) * 2.5e6
        np.fill_diagonal(size, 0.0)
        phases = A2APhases(0.02)
        end_s, _, rows, _ = phases.phase(0, router, groups, size, np.zeros(32))
        late = np.zeros(32)
        k = int(rng.integers(1, 12))
        late[rng.choice(32, k, replace=False)] = rng.uniform(0.0, 2.0, k) * end_s
        approx = max(end_s, late_end_s(rows.delayed(late), late, router.fabric.cap_Bps))
        exact = phases.phase(0, router, groups, size, late)[0]
        assert approx == pytest.approx(exact, rel=0.02)
        assert approx > end_s  # the late rows decide the end
