"""Faults: degrade scales both directions, down removes both, disconnection is an error."""

from __future__ import annotations

from typing import Any

import pytest

from moesim.topologies import (
    TopologyError,
    apply_faults,
    equal_cost_paths,
    hgx_node,
    multi_plane_fat_tree,
    rail_fat_tree,
)


def test_degrade_scales_both_directions_on_a_copy() -> None:
    g = rail_fat_tree(4, hosts_per_su=4, spines=2)
    h = apply_faults(g, [{"link": ["spine.1", "leaf.r2.su0"], "kind": "degrade",
                          "factor": 0.25}])
    assert g.edges["leaf.r2.su0", "spine.1"]["bw_GBps"] == 100.0  # original untouched
    assert h.edges["leaf.r2.su0", "spine.1"]["bw_GBps"] == 25.0
    assert h.edges["spine.1", "leaf.r2.su0"]["bw_GBps"] == 25.0
    assert h.edges["leaf.r2.su0", "spine.0"]["bw_GBps"] == 100.0
    assert h.number_of_edges() == g.number_of_edges()


def test_down_removes_both_directions() -> None:
    g = rail_fat_tree(4, hosts_per_su=4, spines=2)
    h = apply_faults(g, [{"link": ("leaf.r2.su0", "spine.1"), "kind": "down"}])
    assert not h.has_edge("leaf.r2.su0", "spine.1") and not h.has_edge("spine.1", "leaf.r2.su0")
    assert h.number_of_edges() == g.number_of_edges() - 2
    assert equal_cost_paths(g, "h0/gpu2", "h1/gpu3") == 2
    assert equal_cost_paths(h, "h0/gpu2", "h1/gpu3") == 1


def test_disconnecting_fault_names_the_link() -> None:
    g = rail_fat_tree(4, hosts_per_su=4)  # one spine
    faults: list[dict[str, Any]] = [
        {"link": ("h0/gpu0", "h0/nvsw"), "kind": "degrade", "factor": 0.5},
        {"link": ("leaf.r0.su0", "spine.0"), "kind": "down"},
    ]
    with pytest.raises(TopologyError) as err:
        apply_faults(g, faults)
    assert err.value.field == "faults[1].link"
    assert "leaf.r0.su0 <-> spine.0" in str(err.value) and "disconnects" in str(err.value)
    assert "\n" not in str(err.value)


def test_first_disconnecting_fault_is_blamed() -> None:
    g = rail_fat_tree(4, hosts_per_su=4, spines=2)
    faults = [{"link": ("leaf.r1.su0", "spine.0"), "kind": "down"},
              {"link": ("leaf.r1.su0", "spine.1"), "kind": "down"},
              {"link": ("h3/nic1", "leaf.r1.su0"), "kind": "down"}]
    with pytest.raises(TopologyError, match=r"^faults\[1\]\.link: taking down leaf.r1.su0"):
        apply_faults(g, faults)


def test_nic_and_nvlink_down() -> None:
    with pytest.raises(TopologyError, match=r"h2/nic5 <-> leaf\.r5\.su0"):
        apply_faults(rail_fat_tree(4), [{"link": ("h2/nic5", "leaf.r5.su0"), "kind": "down"}])
    # one host: the NIC path leads nowhere, so losing it disconnects nothing ...
    h = apply_faults(hgx_node(), [{"link": ("h0/gpu3", "h0/nic3"), "kind": "down"}])
    assert h.number_of_edges() == 30
    # ... but losing a GPU's NVLink does
    with pytest.raises(TopologyError, match=r"h0/gpu3 <-> h0/nvsw"):
        apply_faults(hgx_node(), [{"link": ("h0/gpu3", "h0/nvsw"), "kind": "down"}])


def test_pairs_never_connected_are_not_blamed() -> None:
    # different planes of different hosts never meet without PXN; a spine link down is fine
    g = multi_plane_fat_tree(8, hosts_per_leaf=2, spines=2)
    h = apply_faults(g, [{"link": ("leaf.pl3.0", "spine.pl3.1"), "kind": "down"}])
    assert equal_cost_paths(h, "h0/gpu3", "h7/gpu3") == 1


@pytest.mark.parametrize(
    ("fault", "field"),
    [({"link": ("h0/gpu0", "spine.0"), "kind": "down"}, "faults[0].link"),
     ({"link": "h0/gpu0", "kind": "down"}, "faults[0].link"),
     ({"link": ("h0/gpu0", "h0/nvsw"), "kind": "flaky"}, "faults[0].kind"),
     ({"link": ("h0/gpu0", "h0/nvsw"), "kind": "degrade", "factor": 0}, "faults[0].factor"),
     ({"link": ("h0/gpu0", "h0/nvsw"), "kind": "degrade", "factor": 1.5}, "faults[0].factor"),
     ({"link": ("h0/gpu0", "h0/nvsw"), "kind": "degrade"}, "faults[0].factor"),
     ({"link": ("h0/gpu0", "h0/nvsw"), "kind": "down", "factor": 0.5}, "faults[0].factor"),
     ("down", "faults[0]")],
)
def test_bad_faults(fault: object, field: str) -> None:
    with pytest.raises(TopologyError) as err:
        apply_faults(hgx_node(), [fault])  # type: ignore[list-item]
    assert err.value.field == field


def test_same_link_down_twice_is_an_error() -> None:
    g = rail_fat_tree(4, hosts_per_su=4, spines=2)
    down = {"link": ("leaf.r1.su0", "spine.0"), "kind": "down"}
    with pytest.raises(TopologyError, match=r"faults\[1\]\.link: no link"):
        apply_faults(g, [down, down])
