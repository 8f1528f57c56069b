"""Registry and YAML presets, including the 4096-GPU default design fabric."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from moesim.topologies import (
    TOPOLOGIES,
    TopologyError,
    build,
    equal_cost_paths,
    hgx_node,
    load_preset,
    preset_names,
    register,
    registry,
    summarize,
)

PRESETS = ["fat-tree-k8", "hgx-b200", "hgx-h100", "hgx-h200", "hgx-h800", "mpft-h800",
           "nvl72-gb200", "rail-h100-4x-4to1", "rail-h100-64", "rail-h200-4096", "rail-h800-64"]


def test_builders_registered_by_name() -> None:
    assert list(TOPOLOGIES) == ["hgx_node", "rail_fat_tree", "nvl72", "multi_plane_fat_tree",
                                "fat_tree"]
    assert build("fat_tree", k=4).number_of_nodes() == 16 * 2 + 20


def test_duplicate_registration_is_an_error() -> None:
    with pytest.raises(TopologyError, match="duplicate name 'nvl72'"):
        register("nvl72", hgx_node)
    register("test-only-hgx", hgx_node)
    try:
        assert build("test-only-hgx").graph["family"] == "hgx"
    finally:
        del TOPOLOGIES["test-only-hgx"]


def test_build_errors_name_field() -> None:
    with pytest.raises(TopologyError, match=r"^topology: unknown 'torus'; allowed: hgx_node"):
        build("torus")
    with pytest.raises(TopologyError, match=r"^fat_tree\.pods: unknown key .*allowed: k, "):
        build("fat_tree", pods=4)


def test_preset_names_and_all_presets_build() -> None:
    assert preset_names() == PRESETS
    for name in PRESETS:
        if name == "rail-h200-4096":
            continue  # built in its own test
        g = load_preset(name)
        assert g.graph["name"] == name
        assert equal_cost_paths(g, 0, 1) == 1


def test_preset_contents() -> None:
    s = summarize(load_preset("rail-h100-4x-4to1"))
    assert (s["gpus"], s["switches"]["leaf"], s["oversubscription"]["leaf"]) == (32, 8, 4.0)
    s = summarize(load_preset("rail-h800-64"), bisection=False)
    assert (s["gpus"], s["hosts"]) == (64, 8)
    s = summarize(load_preset("mpft-h800"), bisection=False)
    assert (s["gpus"], s["switches"]["leaf"], s["switches"]["spine"]) == (2048, 64, 32)
    s = summarize(load_preset("nvl72-gb200"))
    assert (s["gpus"], s["nvlink_domain_size"]) == (72, 72)
    assert summarize(load_preset("fat-tree-k8"))["bisection_GBps"] == 64 * 50.0


def test_overrides() -> None:
    g = load_preset("rail-h800-64", fabric="roce", name="mine")
    assert g.graph["fabric"] == "roce" and g.graph["name"] == "mine"
    assert g.edges["h0/nic0", "leaf.r0.su0"]["latency_ns"] == 800.0
    with pytest.raises(TopologyError) as err:
        load_preset("rail-h800-64", host=16)
    assert err.value.field == "rail-h800-64.host"
    assert "allowed: hosts, gpu, gpus_per_host" in err.value.problem


def test_unknown_preset_lists_names() -> None:
    with pytest.raises(TopologyError, match=r"^preset: unknown 'dgx'; allowed: fat-tree-k8, "):
        load_preset("dgx")


@pytest.mark.parametrize(
    ("text", "field"),
    [("builder: fat_tree\nparams: {k: 4}\nunits: GB/s\n", "preset bad.units"),
     ("builder: torus\n", "preset bad.builder"),
     ("builder: fat_tree\nparams: {k: 4, radix: 8}\n", "preset bad.params.radix"),
     ("- fat_tree\n", "preset bad")],
)
def test_bad_preset_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str,
                          field: str) -> None:
    (tmp_path / "bad.yaml").write_text(text)
    monkeypatch.setattr(registry, "PRESET_DIR", tmp_path)
    with pytest.raises(TopologyError) as err:
        load_preset("bad")
    assert err.value.field == field


def test_yaml_is_loaded_safely(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "evil.yaml").write_text("builder: !!python/object/apply:os.system ['true']\n")
    monkeypatch.setattr(registry, "PRESET_DIR", tmp_path)
    with pytest.raises(Exception, match="could not determine a constructor"):
        load_preset("evil")


def test_design_fabric_4096_builds_fast() -> None:
    start = time.perf_counter()
    g = load_preset("rail-h200-4096")
    elapsed = time.perf_counter() - start
    assert elapsed < 3.0, f"building 4096 GPUs took {elapsed:.2f} s"
    s = summarize(g)
    assert (s["gpus"], s["hosts"], s["nics"]) == (4096, 512, 4096)
    assert s["switches"] == {"nvswitch": 512, "leaf": 128, "spine": 128, "core": 64}
    assert s["cables"] == {"nic": 4096, "leaf_spine": 4096, "spine_core": 4096}
    assert s["oversubscription"] == {"leaf": 1.0, "spine": 1.0}
    assert s["bisection_GBps"] == pytest.approx(2048 * 50.0)
    assert equal_cost_paths(g, "h0/gpu0", "h1/gpu0") == 1
    assert equal_cost_paths(g, "h0/gpu0", "h1/gpu1") == 32  # spines in the pod
    assert equal_cost_paths(g, "h0/gpu0", "h511/gpu7") == 64  # 32 spines x 2 cores per group
