"""The engine harness and the DeepEP / NCCL runners of moesim.validate, on hand-checked cases."""

from __future__ import annotations

import numpy as np
import pytest

from moesim import topologies
from moesim.calibration import (
    IB_ACHIEVABLE_FRACTION,
    KERNEL_LAUNCH_OVERHEAD_S,
    NVLINK_H100_ACHIEVABLE_FRACTION,
    NVLINK_H800_ACHIEVABLE_FRACTION,
)
from moesim.model import get_model, param_counts, training_flops
from moesim.validate.checkpoint import block_scales, checkpoint_elements, fp8_scale_elements
from moesim.validate.deepep import (
    DeepEPSetup,
    internode_flows,
    intranode_flows,
    rank_dedup,
    simulate_deepep,
    token_hits,
)
from moesim.validate.flows import FlowBatch, run_flows, with_loopbacks
from moesim.validate.nccl import GIB, simulate_alltoall, uniform_alltoall
from moesim.validate.phases import PHASES_S, STEP_S, StagePhases, gpu_hours_of_step, published
from moesim.validate.step import megatron_v09_flops, mixtral_spec

NVLINK_LAT_S = 2 * 1665e-9  # gpu -> nvswitch -> gpu (moesim.topologies.constants)
H800_NVL_BPS = 200e9 * NVLINK_H800_ACHIEVABLE_FRACTION


def _batch(src: list[int], dst: list[int], size: list[float]) -> FlowBatch:
    return FlowBatch(np.array(src), np.array(dst), np.array(size, dtype=float))


def test_one_nvlink_flow_is_latency_plus_size_over_achievable_rate() -> None:
    run = run_flows(topologies.load_preset("hgx-h800"), _batch([0], [1], [1.6e8]))
    assert run.time_s == pytest.approx(1.6e8 / H800_NVL_BPS + NVLINK_LAT_S, rel=1e-12)


def test_loopback_flow_shares_the_senders_uplink() -> None:
    graph = with_loopbacks(topologies.load_preset("hgx-h800"))
    # GPU 0 sends 80 MB to GPU 1 and 80 MB to itself (loopback 8): each at half of 160 GB/s.
    run = run_flows(graph, _batch([0, 0], [1, 8], [8e7, 8e7]))
    assert run.time_s == pytest.approx(1.6e8 / H800_NVL_BPS + NVLINK_LAT_S, rel=1e-12)


def test_flows_to_self_and_empty_flows_finish_at_once() -> None:
    run = run_flows(topologies.load_preset("hgx-h800"), _batch([3, 2], [3, 5], [1e9, 0.0]))
    assert run.time_s == 0.0


def test_nccl_single_node_busbw_by_hand() -> None:
    res = simulate_alltoall(1, GIB)
    rate = 450e9 * NVLINK_H100_ACHIEVABLE_FRACTION
    time_s = GIB * 7 / 8 / rate + NVLINK_LAT_S + KERNEL_LAUNCH_OVERHEAD_S
    assert res.time_s == pytest.approx(time_s, rel=1e-9)
    assert res.bus_bw_GBps == pytest.approx(GIB / time_s / 1e9 * 7 / 8, rel=1e-9)
    assert res.nic_bw_GBps == 0.0


def test_nccl_two_nodes_is_nic_bound() -> None:
    # 16 ranks: half of each rank's data leaves the node through (PXN) its rail NIC.
    res = simulate_alltoall(2, GIB)
    nic_s = GIB / 2 / (50e9 * IB_ACHIEVABLE_FRACTION)
    assert res.time_s == pytest.approx(nic_s, rel=2e-3)
    assert res.nic_bw_GBps == pytest.approx(50 * IB_ACHIEVABLE_FRACTION, rel=2e-3)


def test_uniform_alltoall_sizes() -> None:
    b = uniform_alltoall(4, 400.0)
    assert b.src.size == 12 and np.all(b.size_bytes == 100.0) and np.all(b.src != b.dst)


def test_token_bytes() -> None:
    s = DeepEPSetup(ep=8)
    assert s.token_bytes("dispatch") == 7168 * (1 + 4 / 128) == 7392.0
    assert s.token_bytes("combine") == 14336.0


def test_internode_slot_bytes_by_hand() -> None:
    """An FP8 token is 7168 B + 56 fp32 scales = 7392; its internode slot adds an 8-byte
    SourceMeta (7400) and rounds up to 16: 7408. BF16: 14336 + 8 = 14344 -> 14352."""
    s = DeepEPSetup(ep=16)
    assert s.slot_bytes("dispatch") == 7408.0 and s.slot_bytes("combine") == 14352.0


def test_internode_reports_logical_bytes_not_slots() -> None:
    """The links carry 7408-byte slots, but the printed figure's numerator stays the test's
    ``num_rdma_token_sent x hidden x fp8_factor``: 7392 B per (token, node) pair."""
    setup = DeepEPSetup(ep=32, tokens_per_rank=512)
    res = simulate_deepep(setup, "dispatch")
    node_tokens = token_hits(setup).reshape(32, 512, 4, 8).any(axis=3).sum(axis=1)
    assert res.logical_bytes == pytest.approx(node_tokens.sum(axis=1).mean() * 7392.0)


SMALL = DeepEPSetup(ep=16, tokens_per_rank=64)


def test_token_hits_agree_with_route_tokens_dedup() -> None:
    assert np.array_equal(token_hits(SMALL).sum(axis=1), rank_dedup(SMALL))


def test_node_limited_routing_reaches_at_most_four_nodes() -> None:
    setup = DeepEPSetup(ep=64, tokens_per_rank=32)
    nodes_hit = token_hits(setup).reshape(64, 32, 8, 8).any(axis=3).sum(axis=2)
    assert nodes_hit.max() <= 4 and nodes_hit.min() >= 1


def test_internode_flows_conserve_bytes() -> None:
    hits = token_hits(SMALL)
    dedup = hits.sum(axis=1)
    node_tokens = hits.reshape(16, 64, 2, 8).any(axis=3).sum(axis=1)
    batch = internode_flows(dedup, node_tokens, 10.0)
    host = lambda g: g // 8  # noqa: E731
    cross = host(batch.src) != host(batch.dst)
    own = node_tokens[np.arange(16), np.arange(16) // 8]
    assert batch.size_bytes[cross].sum() == pytest.approx((node_tokens.sum() - own.sum()) * 10)
    # every (src rank, dst rank) token is delivered once over NVLink (or stays local)
    assert batch.size_bytes[~cross].sum() == pytest.approx(dedup.sum() * 10)
    # RDMA goes to the rail peer only
    assert np.all(batch.src[cross] % 8 == batch.dst[cross] % 8)


def test_intranode_flows_cover_every_pair() -> None:
    dedup = np.arange(64).reshape(8, 8)
    batch = intranode_flows(dedup, 2.0)
    assert batch.size_bytes.sum() == dedup.sum() * 2.0 and batch.src.size == 64


def test_deepep_intranode_time_is_the_busiest_port() -> None:
    setup = DeepEPSetup(ep=8, tokens_per_rank=256)
    res = simulate_deepep(setup, "dispatch")
    assert res.bw_GBps <= res.bw_no_local_charge_GBps
    # All 8 shares of a rank leave through its uplink (the own share via the loopback); the
    # kernel cannot end before the busiest uplink or downlink drains (+ latency, launch).
    dedup = rank_dedup(setup) * setup.token_bytes("dispatch")
    busiest = max(dedup.sum(axis=1).max(), (dedup.sum(axis=0) - dedup.diagonal()).max())
    bound = busiest / H800_NVL_BPS + NVLINK_LAT_S + KERNEL_LAUNCH_OVERHEAD_S
    assert bound <= res.time_s <= 1.05 * bound



def test_deepep_binding_side_by_ep() -> None:
    """DeepEP #285 (its authors): at EP16 NVLink forwarding is the bottleneck, not RDMA. Here
    a rank forwards ~3.3x its RDMA-logical bytes over NVLink at EP16 (0.5x of them cross its
    NIC), ~2x at EP32 (0.75x on the NIC): NVLink binds at EP16, the NIC at EP32."""
    ep16 = simulate_deepep(DeepEPSetup(ep=16, tokens_per_rank=512), "dispatch")
    ep32 = simulate_deepep(DeepEPSetup(ep=32, tokens_per_rank=512), "dispatch")
    assert ep16.binding_tier == "nvlink" and ep32.binding_tier == "nic"
    assert {t for t, _, _ in ep16.busiest} == {"nvlink", "nic"}
    assert ep16.busiest[0][2] > 0.9 > ep16.busiest[1][2]
    assert ep32.busiest[0][2] > 0.9 > ep32.busiest[1][2]
    # the busiest NVLink port runs at the H800's achievable rate, no faster
    assert ep16.busiest[0][1] == pytest.approx(H800_NVL_BPS / 1e9, rel=0.1)
    assert ep16.busiest[0][1] <= H800_NVL_BPS / 1e9 * (1 + 1e-9)
    # a published figure half the simulated one means each side ran at half its rate
    half = ep16.implied_GBps(ep16.bw_GBps / 2)
    assert half["nvlink"] == pytest.approx(ep16.busiest[0][1] / 2)

# ---- checkpoint element counts (block-FP8 releases) ------------------------------------

KIMI_ATTN_SCALES = 12 * 56 + 96 * 12 + 5 * 56 + 128 * 4 + 56 * 64
"""q_a [1536, 7168], q_b [64*192, 1536], kv_a [576, 7168], kv_b [64*256, 512], o [7168, 8192]:
ceil(out/128) x ceil(in/128) each."""
EXPERT_SCALES = 2 * (16 * 56) + 56 * 16  # gate, up [2048, 7168]; down [7168, 2048]
DENSE_SCALES = 2 * (144 * 56) + 56 * 144  # gate, up [18432, 7168]; down [7168, 18432]


def test_block_scales_by_hand() -> None:
    assert block_scales(128, 128) == 1 and block_scales(129, 128) == 2
    assert block_scales(576, 7168) == 5 * 56


def test_kimi_fp8_scales_by_hand() -> None:
    assert KIMI_ATTN_SCALES == 6200
    hand = 61 * KIMI_ATTN_SCALES + 1 * DENSE_SCALES + 60 * (384 + 1) * EXPERT_SCALES
    assert fp8_scale_elements(get_model("kimi-k2")) == hand == 62_495_192


def test_deepseek_v3_fp8_scales_by_hand() -> None:
    attn = 12 * 56 + 192 * 12 + 5 * 56 + 256 * 4 + 56 * 128  # 128 heads
    # 61 layers + the MTP block; 3 dense layers; 58 MoE layers + the MTP block's MoE
    hand = 62 * attn + 3 * DENSE_SCALES + 59 * (256 + 1) * EXPERT_SCALES
    assert fp8_scale_elements(get_model("deepseek-v3")) == hand == 41_540_496
    cfg = get_model("deepseek-v3")
    counts = param_counts(cfg)
    assert checkpoint_elements(cfg) == counts.total + counts.mtp_stored + hand


def test_gqa_model_scales_cover_every_projection() -> None:
    # Mixtral (not released in FP8; the count is the format's rule): q [4096,4096], k and v
    # [1024, 4096], o [4096, 4096]; experts [14336, 4096] x2 + [4096, 14336].
    attn = 32 * 32 + 2 * 8 * 32 + 32 * 32
    expert = 2 * 112 * 32 + 32 * 112
    assert fp8_scale_elements(get_model("mixtral-8x7b")) == 32 * (attn + 8 * expert)


# ---- the Mixtral step case ---------------------------------------------------------------


def test_megatron_flops_by_hand() -> None:
    # 12 B s L h^2 [ (1 + 8/32 + 4096/4096) * 1 + 14336/4096 * 2 * 1.5 + 32000/(2*32*4096) ]
    b, s, layers, h = 256, 4096, 32, 4096
    bracket = 2.25 + 10.5 + 32000 / (2 * 32 * 4096)
    hand = 12 * b * s * layers * h * h * bracket
    assert megatron_v09_flops(get_model("mixtral-8x7b"), b, s) == pytest.approx(hand, rel=1e-12)
    # vs the causal model FLOPs: the attention core counted twice as large (+4% here)
    causal = training_flops(get_model("mixtral-8x7b"), b * s, s, include_mtp=False)
    router = 3 * 2 * 4096 * 8 * 32 * b * s  # in ours, not in Megatron's
    core = 3 * 2 * 2048 * 32 * 256 * 32 * b * s  # causal attention core (ours)
    assert hand - causal == pytest.approx(core - router, rel=1e-9)


def test_mixtral_spec_matches_the_published_setting() -> None:
    spec = mixtral_spec()
    lay = spec.layout
    assert (lay.tp, lay.pp, lay.vpp, lay.ep, lay.dp, lay.world_size) == (1, 4, 8, 8, 16, 64)
    assert spec.layout.dp * spec.microbatches * spec.micro_batch_size == 256  # global batch
    assert spec.schedule == "interleaved" and spec.seq_len == 4096
    assert (spec.dispatch_dtype, spec.combine_dtype) == ("bf16", "bf16")
    graph = topologies.load_preset(spec.fabric.preset)
    assert sum(1 for _, d in graph.nodes(data=True) if d.get("kind") == "gpu") == 64


# ---- DeepSeek-V3 2048 x H800: the published step phases (Insights Table 4) ---------------


def test_published_phases_are_one_step_and_the_gpu_hours_case() -> None:
    """Table 4's phases add up to its step (19.90 of 19.926 s), and that step is the report's
    180K GPU-hours per trillion tokens: 19.926 x 2048 / 3600 x 1e12 / (15360 x 4096)."""
    assert sum(PHASES_S.values()) == pytest.approx(STEP_S, rel=0.002)
    assert gpu_hours_of_step() == pytest.approx(180.2e3, rel=1e-3)
    assert gpu_hours_of_step() == pytest.approx(180e3, rel=0.002)
    assert published() == pytest.approx({"passes": 17.55, "bubble": 2.06, "opt": 0.29,
                                         "1F": 1.13, "1B": 1.99, "1W": 0.48, "1F1B": 13.95})


def test_stage_phases_by_hand() -> None:
    # categories: compute, a2a_exposed, tp_exposed, bubble, dp_exposed, optimizer, cp_exposed
    times = np.array([[10.0, 2.0, 0.5, 4.0, 0.2, 0.1, 0.0],
                      [15.0, 2.55, 0.0, 2.06, 0.28, 0.01, 0.0]])
    ph = StagePhases.from_times(times)
    assert ph.stage_s["passes"].tolist() == pytest.approx([12.5, 17.55])
    assert ph.stage_s["bubble"].tolist() == [4.0, 2.06]
    assert ph.stage_s["opt"].tolist() == pytest.approx([0.3, 0.29])
    assert ph.errors_pct()["passes"][1] == pytest.approx(0.0, abs=1e-9)
    assert "bubble 2.06 s vs 3.03 s median stage" in ph.line()
    kinds = np.array([[1.13, 1.99, 0.48, 13.95], [0.5, 1.0, 0.24, 10.0]])  # F, B, W, FB ops
    by_kind = StagePhases.from_times(times, kinds)
    assert by_kind.stage_s["1W"].tolist() == [0.48, 0.24]
    assert by_kind.errors_pct()["1F1B"][1] == pytest.approx((10.0 / 13.95 - 1) * 100)
    assert "1F 1.13 s vs 0.81 s median stage" in by_kind.line()


def test_stage_phases_add_up_to_the_step() -> None:
    """Table 4's phases add up to its step, so a rank that ends before the step idles the
    rest of it as bubble (the next step's inputs reach it no earlier): each stage's passes +
    bubble + opt is the step, as published."""
    times = np.array([[10.0, 2.0, 0.5, 4.0, 0.2, 0.1, 0.0],     # ends at 16.8 s
                      [15.0, 2.55, 0.0, 2.06, 0.28, 0.01, 0.0],  # ends at 19.9 s
                      [15.0, 2.55, 0.0, 2.386, 0.28, 0.01, 0.0]])  # ends the step
    kinds = np.array([[1.0, 2.0, 0.5, 9.0], [1.13, 1.99, 0.48, 13.95], [1.13, 1.99, 0.48, 13.95]])
    ph = StagePhases.from_times(times, kinds, step_s=20.226)
    assert ph.stage_s["bubble"].tolist() == pytest.approx([4.0 + 3.426, 2.06 + 0.326, 2.386])
    total = ph.stage_s["passes"] + ph.stage_s["bubble"] + ph.stage_s["opt"]
    assert total.tolist() == pytest.approx([20.226] * 3)
    assert ph.stage_s["1F1B"].tolist() == [9.0, 13.95, 13.95]  # the op kinds do not move
    assert "middle 7.43, +260%" in ph.line()  # stage pp/2 - 1 = 0 of 3: 7.426 vs 2.06 s
