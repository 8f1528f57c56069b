"""Placement report: where each layout group lands on a fabric (span, slowest link class)."""

from __future__ import annotations

import time
from collections import deque
from functools import cache

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moesim import topologies as topo
from moesim.errors import ConfigError, FabricError
from moesim.parallel.layout import ParallelLayout
from moesim.parallel.placement import SPANS, GroupPlacement, place, placement_table


@cache
def _preset(name: str) -> nx.DiGraph:
    return topo.load_preset(name)


def _by_kind(entries: list[GroupPlacement]) -> dict[str, GroupPlacement]:
    return {p.kind: p for p in entries}


# --- acceptance criteria -------------------------------------------------------------------


def test_ep8_tp1_on_hgx_stays_in_nvlink() -> None:
    # 8 HGX H800 hosts: EP groups are 8 consecutive ranks = one host = one NVLink domain.
    ep = _by_kind(place(ParallelLayout(tp=1, ep=8, dp=64), _preset("rail-h800-64")))["ep"]
    assert ep == GroupPlacement("ep", 8, 8, "nvlink", "nvlink", 200.0, 1, 1)


def test_ep8_on_rail_tree_built_here_stays_in_nvlink() -> None:
    g = topo.rail_fat_tree(4, gpu="H100", hosts_per_su=4)
    ep = _by_kind(place(ParallelLayout(ep=8, dp=32), g))["ep"]
    assert (ep.span, ep.slowest_tier, ep.slowest_bw_GBps, ep.count) == ("nvlink", "nvlink",
                                                                         450.0, 4)


def test_ep16_on_hgx_crosses_scale_out() -> None:
    # Ranks 0..15 = hosts 0 and 1; h0/gpu0 -> h1/gpu1 is rail 0 -> rail 1: via a spine.
    ep = _by_kind(place(ParallelLayout(ep=16, dp=64), _preset("rail-h800-64")))["ep"]
    assert ep.span in ("leaf", "spine") and ep.slowest_tier in ("nic", "leaf_spine")
    assert ep == GroupPlacement("ep", 16, 4, "spine", "nic", 50.0, 2, 2)


def test_ep64_on_one_nvl72_rack_stays_in_nvlink() -> None:
    ep = _by_kind(place(ParallelLayout(ep=64, dp=64), _preset("nvl72-gb200")))["ep"]
    # 64 GPUs = 16 compute trays of 4, all on the rack's NVSwitch fabric.
    assert ep == GroupPlacement("ep", 64, 1, "nvlink", "nvlink", 900.0, 1, 16)


def test_dp_of_tp8_layout_on_hgx_crosses_scale_out() -> None:
    # tp=8 fills a host; DP group {0, 8, 16, ...} is GPU 0 of every host: one rail leaf.
    dp = _by_kind(place(ParallelLayout(tp=8, dp=8), _preset("rail-h800-64")))["dp"]
    assert dp == GroupPlacement("dp", 8, 8, "leaf", "nic", 50.0, 8, 8)


def test_layout_larger_than_fabric_raises() -> None:
    with pytest.raises(ConfigError, match="layout") as err:
        place(ParallelLayout(ep=8, dp=128), _preset("rail-h800-64"))
    assert err.value.field == "layout"
    assert "needs 128 GPUs" in err.value.problem and "has 64" in err.value.problem


def test_first_gpu_offset_counts_against_the_fabric() -> None:
    with pytest.raises(ConfigError, match="layout"):
        place(ParallelLayout(dp=64), _preset("rail-h800-64"), first_gpu=1)
    with pytest.raises(ConfigError, match="first_gpu"):
        place(ParallelLayout(dp=8), _preset("rail-h800-64"), first_gpu=-1)


# --- exact placements on small fabrics -----------------------------------------------------


def test_first_gpu_offset_shifts_groups_across_hosts() -> None:
    g = topo.rail_fat_tree(2, hosts_per_su=2)
    # GPUs 4..11: the EP group straddles h0/gpu4..7 and h1/gpu0..3 (different rails).
    ep = _by_kind(place(ParallelLayout(ep=8, dp=8), g, first_gpu=4))["ep"]
    assert (ep.span, ep.domains_per_group, ep.hosts_per_group) == ("spine", 2, 2)


def test_oversubscribed_leaf_makes_leaf_spine_slowest() -> None:
    # 4 NIC links (200 GB/s) per rail leaf, 50 GB/s of uplink: 12.5 GB/s per GPU.
    res = _by_kind(place(ParallelLayout(tp=2, ep=16, dp=16), _preset("rail-h100-4x-4to1")))
    assert (res["ep"].span, res["ep"].slowest_tier, res["ep"].slowest_bw_GBps) == (
        "spine", "leaf_spine", 12.5)
    # EDP pairs {r, r+16}: same local GPU, hosts 0/2: same rail leaf, NIC-bound.
    assert (res["edp"].span, res["edp"].slowest_tier, res["edp"].slowest_bw_GBps) == (
        "leaf", "nic", 50.0)
    assert res["tp"].slowest_bw_GBps == 450.0


def test_fat_tree_levels() -> None:
    # k=4: 2 hosts per edge switch, 4 per pod, 16 in all; one GPU per host.
    res = _by_kind(place(ParallelLayout(ep=2, dp=4, pp=4), topo.fat_tree(4)))
    assert [(k, p.span, p.size) for k, p in res.items()] == [
        ("ep", "leaf", 2), ("dp", "spine", 4), ("edp", "spine", 2), ("pp", "core", 4)]
    assert {p.slowest_tier for p in res.values()} == {"nic"}
    assert res["pp"].domains_per_group == 4


def test_three_tier_spine_oversubscription_shows_at_core() -> None:
    # 4 SUs of 2 two-GPU hosts, 2 SUs per pod, spines 2:1 towards the cores:
    # 50 GB/s NIC x 1 (leaf 1:1) x 1/2 = 25 GB/s per GPU across pods.
    g = topo.rail_fat_tree(8, gpus_per_host=2, hosts_per_su=2, tiers=3, sus_per_pod=2,
                           spine_oversubscription=2.0)
    pp = _by_kind(place(ParallelLayout(tp=2, pp=8), g))["pp"]
    assert (pp.span, pp.slowest_tier, pp.slowest_bw_GBps) == ("core", "spine_core", 25.0)


def test_multi_plane_cross_plane_pairs_are_forwarded() -> None:
    g = topo.multi_plane_fat_tree(4, hosts_per_leaf=2)
    res = _by_kind(place(ParallelLayout(tp=2, ep=16, dp=16), g))
    assert (res["ep"].span, res["ep"].forwarded) == ("leaf", True)
    assert (res["edp"].span, res["edp"].forwarded) == ("spine", False)  # same plane
    assert "*" in placement_table(list(res.values()))


def test_islands_without_scale_out_raise_fabric_error() -> None:
    with pytest.raises(FabricError, match="no path"):
        place(ParallelLayout(dp=16), topo.hgx_node("H100", hosts=2))


def test_only_kinds_above_one_reported_in_order() -> None:
    res = place(ParallelLayout(tp=2, cp=2, ep=2, etp=2, dp=2, pp=2), _preset("rail-h800-64"))
    assert [p.kind for p in res] == ["tp", "cp", "ep", "etp", "dp", "edp", "pp"]
    assert [p.size * p.count for p in res] == [16] * 7
    assert place(ParallelLayout(), _preset("hgx-h100")) == []


def test_placement_table_exact() -> None:
    table = placement_table(place(ParallelLayout(tp=8, dp=8), _preset("rail-h800-64")))
    assert table == "\n".join([
        "kind  size  count  span    slowest  GB/s  domains  hosts",
        "tp       8      8  nvlink  nvlink    200        1      1",
        "dp       8      8  leaf    nic        50        8      8",
        "edp     64      1  spine   nic        50        8      8",
    ])


def test_4096_gpu_preset_under_two_seconds() -> None:
    g = _preset("rail-h200-4096")
    start = time.process_time()
    res = _by_kind(place(ParallelLayout(tp=1, ep=64, pp=16, dp=256), g))
    assert time.process_time() - start < 2.0
    # 64 ranks = 8 hosts of one SU (rails differ): spine; PP stride 256 ranks = one SU, and
    # 16 stages cover 16 SUs in 4 pods: core.
    assert [(k, p.span) for k, p in res.items()] == [
        ("ep", "spine"), ("dp", "spine"), ("edp", "leaf"), ("pp", "core")]


# --- against a brute-force reference -------------------------------------------------------

_SMALL = topo.rail_fat_tree(8, gpus_per_host=2, hosts_per_su=2, tiers=3, sus_per_pod=2)


def _pair_level(g: nx.DiGraph, a: str, b: str) -> int:
    """Lowest switch tier bound under which b is reachable from a, no GPU in transit."""
    for level in (0, 1, 2, 3):
        seen, queue = {a}, deque([a])
        while queue:
            u = queue.popleft()
            for v in g.successors(u):
                d = g.nodes[v]
                if v == b:
                    return level
                if v not in seen and d["kind"] != "gpu" and d.get("tier", -1) <= level:
                    seen.add(v)
                    queue.append(v)
    return 99


@cache
def _small_level(a: int, b: int) -> int:
    names = {d["gpu"]: n for n, d in _SMALL.nodes(data=True) if d["kind"] == "gpu"}
    return _pair_level(_SMALL, names[a], names[b])


@settings(max_examples=40, deadline=None)
@given(tp=st.sampled_from([1, 2]), cp=st.sampled_from([1, 2]), pp=st.sampled_from([1, 2, 4]),
       dp=st.sampled_from([1, 2, 4]), ep=st.sampled_from([1, 2, 4, 8]),
       first=st.integers(0, 4))
def test_span_matches_pairwise_brute_force(tp: int, cp: int, pp: int, dp: int, ep: int,
                                           first: int) -> None:
    world = tp * cp * pp * dp
    if world % (ep * pp) or world + first > 16:
        return
    layout = ParallelLayout(tp=tp, cp=cp, pp=pp, dp=dp, ep=ep)
    for p in place(layout, _SMALL, first_gpu=first):
        worst = max(_small_level(a + first, b + first)
                    for grp in layout.groups(p.kind) for a in grp for b in grp if a < b)
        assert p.span == SPANS[worst + 1]
        assert p.size * p.count == world
        assert 1 <= p.domains_per_group <= p.size
        assert (p.span == "nvlink") == (p.domains_per_group == 1)
        assert p.slowest_bw_GBps == (450.0 if p.span == "nvlink" else 50.0)
