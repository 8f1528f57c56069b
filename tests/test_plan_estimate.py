"""Design tool pieces by hand: all-to-all and DP estimates, bill of materials, prices."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from moesim import topologies
from moesim.errors import ConfigError
from moesim.hardware import get_gpu
from moesim.model import get_model, param_counts
from moesim.parallel.layout import ParallelLayout
from moesim.parallel.placement import place
from moesim.plan.bom import bill_of_materials
from moesim.plan.candidates import check_layout
from moesim.plan.estimate import _dp_and_optimizer_s, distinct_ranks, estimate
from moesim.plan.fabric_view import FabricView
from moesim.plan.prices import DEFAULTS, DEFAULTS_FILE, KEYS, Prices, load_prices
from moesim.plan.spec import DesignSpec


def test_a2a_estimate_by_hand() -> None:
    """Mixtral tp1 pp2 ep8 dp32 on 8 x HGX H800: EP8 inside NVLink (200 GB/s x 0.8)."""
    spec = DesignSpec(model="mixtral-8x7b", gpus=64, gpu="H800", fabric="rail-h800-64",
                      global_batch=512)  # one expert per EP rank: top-2 = 2 distinct ranks
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


def test_distinct_ranks_by_hand() -> None:
    """Expected EP ranks a token reaches: one expert per rank = top_k; all on one rank = 1."""
    assert distinct_ranks(8, 2, 8) == pytest.approx(2.0)
    assert distinct_ranks(8, 2, 1) == 1.0
    # 4 experts over 2 ranks, top 2: P(both on one rank) = 2 x C(2,2) / C(4,2) = 1/3
    assert distinct_ranks(4, 2, 2) == pytest.approx(2 * (1 - 1 / 6))
    assert distinct_ranks(4, 2, 2) == pytest.approx(1 / 3 * 1 + 2 / 3 * 2)


def test_dp_rings_counted_once_in_fp32_and_bf16() -> None:
    """Reduce-scatter (FP32 grads) and all-gather (BF16 params): one ring each per step."""
    spec = DesignSpec(model="mixtral-8x7b", gpus=64, gpu="H800", global_batch=512)
    model, gpu = get_model("mixtral-8x7b"), get_gpu("H800")
    cand = check_layout(spec, model, gpu, ParallelLayout(pp=2, ep=8, dp=32))
    view = FabricView(topologies.load_preset("rail-h800-64"), "H800")
    rs_s, ag_s, _ = _dp_and_optimizer_s(model, gpu, cand, view)
    assert rs_s == pytest.approx(2 * ag_s)  # 4 B against 2 B per parameter, same rings


def test_bill_of_materials_by_hand() -> None:
    graph = topologies.load_preset("rail-h800-64")
    model = get_model("mixtral-8x7b")
    bom = bill_of_materials(graph, 64, get_gpu("H800"), model)
    failures = 64 * 419 / (54 * 16384)
    assert bom.failures_per_day == pytest.approx(failures)
    assert bom.checkpoint_interval_min == pytest.approx(
        math.sqrt(2 * 300 * 86400 / failures) / 60)
    assert bom.checkpoint_bytes == param_counts(model).total * 14
    network_kw = (9 * 1700 + bom.optics * 9) / 1e3  # 8 leaves + 1 spine; optics at 9 W
    assert bom.network_power_kw == pytest.approx(network_kw)
    assert bom.power_mw == pytest.approx((64 * 700 * 10200 / 5600 + network_kw * 1e3) * 1.2 / 1e6)
    cables = bom.cables
    assert bom.optics == 2 * cables["nic"] + 2 * cables["leaf_spine"]
    assert bom.cost_usd["hosts"] == 8 * 250_000
    assert bom.cost_usd["total"] == pytest.approx(sum(v for k, v in bom.cost_usd.items()
                                                      if k != "total"))
    assert (bom.hosts, bom.nics) == (8, 64)
    assert bom.spare_hosts >= 1
    mtbf_s = 86400 / failures
    interval_s = math.sqrt(2 * 300 * mtbf_s)
    assert bom.goodput == pytest.approx(1 - 300 / interval_s - (interval_s / 2 + 900) / mtbf_s)


def test_prices_override(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("host_usd: {H800: 100000}\nswitch_usd: 1000\n")
    prices = load_prices(path)
    assert prices.host("H800") == 100000 and prices.host("H200") == 300000
    bom = bill_of_materials(topologies.load_preset("rail-h800-64"), 64, get_gpu("H800"),
                            get_model("mixtral-8x7b"), prices)
    assert bom.cost_usd["hosts"] == 8 * 100000 and bom.prices_source == str(path)
    path.write_text("gpu_usd: 1\n")
    with pytest.raises(ConfigError, match=r"prices\.gpu_usd"):
        load_prices(path)



def test_default_prices_are_the_shipped_table_read_as_a_user_file() -> None:
    """The defaults file names every part of the record, and reading it as a --prices file
    gives the defaults (one format, one set of checks)."""
    assert sorted(DEFAULTS) == sorted(KEYS)
    assert replace(load_prices(DEFAULTS_FILE), source=Prices().source) == Prices()
    assert Prices().host("GB200") == 170000 and Prices().switch_w == 1700

def test_fabric_view_matches_place() -> None:
    graph = topologies.load_preset("rail-h800-64")
    layout = ParallelLayout(tp=2, pp=2, ep=16, dp=16)
    assert FabricView(graph, "H800").place_all(layout) == place(layout, graph)


def test_a2a_legs_nvlink_inside_the_host_nic_across() -> None:
    """EP16 over two HGX H800 hosts: 7 peers over NVLink (200 GB/s x 0.8), 8 over the NIC
    (the slowest class the group crosses); EP8 inside one host: one leg."""
    view = FabricView(topologies.load_preset("rail-h800-64"), "H800")
    lay = ParallelLayout(ep=16, dp=64)
    (peers_in, nvlink), (peers_out, nic) = view.ep_legs(lay)
    assert (peers_in, peers_out) == (7, 8)
    assert nvlink == pytest.approx(200 * 0.8)
    assert nic == view.effective_bw_GBps(lay, "ep") and nic < nvlink
    inside = ParallelLayout(ep=8, dp=64)
    assert view.ep_legs(inside) == ((7, view.effective_bw_GBps(inside, "ep")),)


@pytest.mark.parametrize("ep", [4, 8, 16, 64])
def test_rank_hit_probability_matches_the_router(ep: int) -> None:
    """DeepSeek-V3's group-limited routing (256 experts, top 8 within 4 of 8 groups): the
    formula against the step's router (uniform popularity), de-duplicated tokens per rank."""
    from moesim.plan.estimate import rank_hit_probability
    from moesim.router import RouterConfig, route_tokens
    r = route_tokens(RouterConfig(), tokens_per_rank=4096, n_ranks=ep, n_experts=256, top_k=8,
                     seed=3, layer=0, n_group=8, topk_group=4)
    drawn = r.rank_tokens_dedup.sum() / (4096 * ep)
    assert drawn == pytest.approx(distinct_ranks(256, 8, ep, 8, 4), rel=0.01)
    assert distinct_ranks(256, 8, ep) > distinct_ranks(256, 8, ep, 8, 4)  # groups cut copies
    if ep == 8:  # a rank is a group: chosen with 4/8, then hit unless all 8 miss its 32 of 128
        miss = math.comb(96, 8) / math.comb(128, 8)
        assert rank_hit_probability(256, 8, 8, 8, 4) == pytest.approx([0.5 * (1 - miss)] * 8)


def test_dp_tail_drains_the_backlog_of_the_last_buckets() -> None:
    """One stage: with no backward left after the buckets are freed the whole reduce-scatter
    shows; with a long backward only the last bucket's (the first layer + embedding + head)."""
    from moesim.plan.dp_tail import BF16, ring_s_per_param, stage_buckets, stage_tail_s
    from moesim.plan.stage_cost import LayerPrices
    model = get_model("mixtral-8x7b")
    view = FabricView(topologies.load_preset("rail-h800-64"), "H800")
    lay = ParallelLayout(ep=8, dp=64)
    layers, sizes = stage_buckets(model, lay, 0)
    assert layers[0] == model.num_layers - 1 and layers[-1] == 0
    dense_s, expert_s = ring_s_per_param(lay, view)
    rs = [4 * (d * dense_s + e * expert_s) for d, e in sizes]
    ag = BF16 * sum(d * dense_s + e * expert_s for d, e in sizes)
    prices = (LayerPrices(1.0, 2.0, 0.0, 0.0), LayerPrices(1.0, 2.0, 0.0, 0.0))
    assert stage_tail_s(model, lay, view, 0, prices, "none", 0.0) == pytest.approx(sum(rs) + ag)
    assert stage_tail_s(model, lay, view, 0, prices, "none", 1e3) == pytest.approx(rs[-1] + ag)
