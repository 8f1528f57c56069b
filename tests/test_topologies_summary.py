"""Closed forms: switch/link counts, bisection bandwidth, oversubscription per tier."""

from __future__ import annotations

import pytest

from moesim.topologies import (
    bisection_GBps,
    fat_tree,
    hgx_node,
    multi_plane_fat_tree,
    nvl72,
    rail_fat_tree,
    summarize,
)


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_k_ary_fat_tree_closed_forms(k: int) -> None:
    b = 50.0
    s = summarize(fat_tree(k, link_gbit=b * 8))
    assert s["gpus"] == s["hosts"] == s["nics"] == k**3 // 4
    assert s["switches"] == {"leaf": k * k // 2, "spine": k * k // 2, "core": k * k // 4}
    assert sum(s["switches"].values()) == 5 * k * k // 4
    assert s["links"] == {t: k**3 // 4 for t in ("pcie", "nic", "leaf_spine", "spine_core")}
    assert s["cables"] == {t: k**3 // 4 for t in ("nic", "leaf_spine", "spine_core")}
    assert s["bisection_GBps"] == pytest.approx(k**3 / 8 * b)
    assert s["oversubscription"] == {"leaf": 1.0, "spine": 1.0}
    assert s["nvlink_domain_size"] == 1 and s["nvlink_domains"] == k**3 // 4


@pytest.mark.parametrize("o", [1.0, 2.0, 4.0])
def test_two_tier_rail_closed_forms(o: float) -> None:
    # 2 SUs x 4 hosts x 8 rails = 64 GPUs, 4 spines: every leaf has 4 NIC links (200 GB/s)
    # and 200/o GB/s of uplink, 50/o per spine.
    g = rail_fat_tree(8, hosts_per_su=4, oversubscription=o, spines=4)
    s = summarize(g)
    assert (s["gpus"], s["hosts"], s["nics"]) == (64, 8, 64)
    assert s["switches"] == {"nvswitch": 8, "leaf": 16, "spine": 4}
    assert s["links"] == {"nvlink": 64, "pcie": 64, "nic": 64, "leaf_spine": 64}
    assert g.edges["leaf.r3.su1", "spine.2"]["bw_GBps"] == 50.0 / o
    assert s["link_bw_GBps"]["leaf_spine"] == pytest.approx(16 * 200.0 / o)
    assert s["cables"]["leaf_spine"] == 64  # one 400G cable per leaf-spine pair (>= 12.5 GB/s)
    assert s["oversubscription"] == {"leaf": pytest.approx(o)}
    # bisection: half the SUs' leaf uplinks = N/2 x 50 / o
    assert s["bisection_GBps"] == pytest.approx(32 * 50.0 / o)


def test_rail_default_spines_and_cables() -> None:
    # 16 leaves x 4 uplink ports at 1:1 = 64 ports = one 64-port spine; 4:1 -> 1 port each
    s = summarize(rail_fat_tree(8, hosts_per_su=4))
    assert s["switches"]["spine"] == 1 and s["cables"]["leaf_spine"] == 64
    s = summarize(rail_fat_tree(8, hosts_per_su=4, oversubscription=4.0))
    assert s["switches"]["spine"] == 1 and s["cables"]["leaf_spine"] == 16


@pytest.mark.parametrize("o", [1.0, 4.0])
def test_single_su_bisection_is_nic_bound(o: float) -> None:
    # one SU: the cut between host halves is their NIC links, whatever the uplinks
    assert bisection_GBps(rail_fat_tree(4, hosts_per_su=4, oversubscription=o)) == 800.0


def test_three_tier_rail_closed_forms() -> None:
    g = rail_fat_tree(16, hosts_per_su=2, tiers=3, sus_per_pod=2, spines=2, cores_per_group=2,
                      oversubscription=2.0, spine_oversubscription=2.0)
    s = summarize(g)
    # 8 SUs x 8 rails = 64 leaves; 4 pods x 2 spines; 2 groups x 2 cores
    assert s["switches"] == {"nvswitch": 16, "leaf": 64, "spine": 8, "core": 4}
    assert s["links"]["leaf_spine"] == 64 * 2 and s["links"]["spine_core"] == 8 * 2
    assert s["oversubscription"] == {"leaf": pytest.approx(2.0), "spine": pytest.approx(2.0)}
    assert s["bisection_GBps"] == pytest.approx(64 * 50.0 / 4)


def test_hgx_nvl72_mpft_summaries() -> None:
    s = summarize(hgx_node("H800"))
    assert s["switches"] == {"nvswitch": 1} and s["links"] == {"nvlink": 8, "pcie": 8}
    assert s["bisection_GBps"] == 4 * 200.0
    s = summarize(nvl72(racks=2, spines=2))
    assert (s["gpus"], s["hosts"], s["nvlink_domains"]) == (144, 36, 2)
    assert s["switches"] == {"nvswitch": 2, "leaf": 8, "spine": 2}
    assert s["bisection_GBps"] == pytest.approx(72 * 50.0)  # racks split: scale-out only
    # one rack: host halves joined by NVLink (36 x 900) and by their NICs (36 x 50)
    assert bisection_GBps(nvl72(racks=1)) == pytest.approx(36 * 900.0 + 36 * 50.0)
    s = summarize(multi_plane_fat_tree(8, hosts_per_leaf=2, spines=3))
    assert s["switches"] == {"nvswitch": 8, "leaf": 32, "spine": 24}
    assert s["links"]["leaf_spine"] == 8 * 4 * 3
    assert s["bisection_GBps"] == pytest.approx(32 * 50.0)


def test_summary_skips_bisection_on_request() -> None:
    assert summarize(fat_tree(4), bisection=False)["bisection_GBps"] is None
