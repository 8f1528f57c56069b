"""Design tool pieces by hand: all-to-all estimate, composition, BOM, fabric trimming."""

from __future__ import annotations

import math

import pytest

from moesim import topologies
from moesim.hardware import get_gpu
from moesim.model import get_model, param_counts
from moesim.parallel.layout import ParallelLayout
from moesim.parallel.placement import place
from moesim.plan.bom import bill_of_materials
from moesim.plan.candidates import check_layout
from moesim.plan.estimate import estimate
from moesim.plan.evaluate import EpSim, composed_step_s, ep_scenario, sim_fabric_params, simulate_ep
from moesim.plan.fabric_view import FabricView
from moesim.plan.spec import DesignSpec


def test_a2a_estimate_by_hand() -> None:
    """Mixtral tp1 pp2 ep8 dp32 on 8 x HGX H800: EP8 inside NVLink (200 GB/s x 0.8)."""
    spec = DesignSpec(model="mixtral-8x7b", gpus=64, gpu="H800", fabric="rail-h800-64",
                      global_batch=512)
    model, gpu = get_model("mixtral-8x7b"), get_gpu("H800")
    cand = check_layout(spec, model, gpu, ParallelLayout(pp=2, ep=8, dp=32))
    assert cand.fits and cand.num_microbatches == 16
    est = estimate(spec, model, gpu, cand, FabricView(topologies.load_preset("rail-h800-64"),
                                                      "H800"))
    copies = 4096 * 2 * 7 / 8  # tokens x top_k x share sent off-rank
    wire = (4096 + 4096 / 128 * 4) + 3 * 2 * 4096  # FP8 dispatch + three BF16 passes
    per_layer = copies * wire / (200e9 * 0.8)
    assert est.a2a_s == pytest.approx(per_layer * 16 * 16)  # 16 MoE layers x 16 micro-batches
    assert est.moe_layers == 16 and est.tokens_per_rank == 4096


def test_composed_step_by_hand() -> None:
    sim = EpSim(ep=8, tokens_per_rank=1, a2a_s=0.005, experts_s=0.010, experts_fwd_s=0.004,
                expert_ratio=1.0, rank_ratio=1.0, fabric_gpus=8, wall_s=0.0)
    # (0.015 - 0.010) s x 4 layers per micro-batch, over 8 micro-batches + 3 bubble slots
    assert composed_step_s(10.0, 0.010, 4, 8, 4, 1, sim) == pytest.approx(10.22)
    assert composed_step_s(10.0, 0.010, 4, 8, 4, 3, sim) == pytest.approx(10.0 + 0.02 * 9)
    full = composed_step_s(10.0, 0.010, 4, 8, 4, 1, sim, full_recompute=True)
    assert full == pytest.approx(10.0 + 0.009 * 4 * 11)


def test_bill_of_materials_by_hand() -> None:
    graph = topologies.load_preset("rail-h800-64")
    model = get_model("mixtral-8x7b")
    bom = bill_of_materials(graph, 64, get_gpu("H800"), model)
    failures = 64 * 419 / (54 * 16384)
    assert bom.failures_per_day == pytest.approx(failures)
    assert bom.checkpoint_interval_min == pytest.approx(
        math.sqrt(2 * 300 * 86400 / failures) / 60)
    assert bom.checkpoint_bytes == param_counts(model).total * 14
    assert bom.power_mw == pytest.approx(64 * 700 * 10200 / 5600 * 1.2 / 1e6)
    assert (bom.hosts, bom.nics) == (8, 64)
    assert bom.spare_hosts >= 1


def test_sim_fabric_trimmed_to_the_sus_of_the_group() -> None:
    assert sim_fabric_params("rail-h200-4096", 64) == (("hosts", 32),)
    assert sim_fabric_params("rail-h200-4096", 300) == (("hosts", 64),)
    assert sim_fabric_params("rail-h200-4096", 4096) == ()
    assert sim_fabric_params("hgx-h100", 8) == ()


def test_fabric_view_matches_place() -> None:
    graph = topologies.load_preset("rail-h800-64")
    layout = ParallelLayout(tp=2, pp=2, ep=16, dp=16)
    assert FabricView(graph, "H800").place_all(layout) == place(layout, graph)


def test_ep_across_nodes_costs_more_all_to_all() -> None:
    """EP inside vs across the NVLink domain, same tokens per rank, on the engine."""
    model = get_model("deepseek-v3")
    runs = {ep: simulate_ep(ep_scenario(model, "H800", "rail-h800-64", ep=ep, etp=1,
                                        tokens_per_rank=1024, seq_len=4096))
            for ep in (8, 32)}
    assert runs[32].a2a_s > 3 * runs[8].a2a_s
