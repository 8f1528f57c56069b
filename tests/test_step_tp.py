"""The whole step with tensor (sequence) parallelism and context parallelism (ring attention)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.hardware import get_gpu
from moesim.hardware.attention import AttentionShape, attention_flops
from moesim.model import ModelConfig, get_model, training_flops
from moesim.parallel.layout import ParallelLayout
from moesim.step import StepSpec, run_step, simulate_step
from moesim.step.groups import dense_dp_group
from moesim.step.plan import build_plan, route_layer
from moesim.step.spec import DEFAULT_FABRIC
from moesim.step.state import CATEGORIES
from moesim.step.tpcp import CP_TAG, TP_TAG
from moesim.workload.costs import LayerShape, attention_block_s, attention_core_s, ffn_s

SEQ = 1024
# hgx-h100 preset: GPU <-> NVSwitch links of 450 GB/s per direction, 1665 ns each; a GPU-to-GPU
# path is two hops. Without derating and finish batching the engine is exact.
NVLINK_BPS, PATH_LATENCY_S = 450e9, 2 * 1665e-9
EXACT = dataclasses.replace(DEFAULT_FABRIC, derate=False, batch_window_rel=0.0)


def _moe(layers: int = 2) -> ModelConfig:
    return dataclasses.replace(get_model("mixtral-8x7b"), num_layers=layers,
                               moe_layers=(True,) * layers)


def _dense(layers: int = 2) -> ModelConfig:
    """Mixtral's attention with a dense 14336-wide FFN in every layer: no all-to-all."""
    return dataclasses.replace(get_model("mixtral-8x7b"), num_layers=layers,
                               moe_layers=(False,) * layers, intermediate_size=14336)


def _spec(layout: ParallelLayout, **kw: object) -> StepSpec:
    base: dict[str, object] = dict(model=_moe(), layout=layout, seq_len=SEQ)
    base.update(kw)
    return StepSpec(**base)  # type: ignore[arg-type]


def _ring_s(size_bytes: float, n: int) -> float:
    """Uncongested ring all-gather / reduce-scatter: (n - 1) steps of size/n (module ring)."""
    return (n - 1) * (size_bytes / n / NVLINK_BPS + PATH_LATENCY_S)


@pytest.mark.parametrize("tp", [2, 4])
def test_tp_exposed_is_the_ring_time_of_every_all_gather_and_reduce_scatter(tp: int) -> None:
    """Dense layers, pp = 1, DP after the step: only the TP rings use the fabric during the
    schedule. Per layer and micro-batch: attention and FFN each all-gather and reduce-scatter
    the gathered bf16 hidden states (seq x hidden x 2 B) forward and backward = 8 rings."""
    layers, m = 2, 2
    spec = _spec(ParallelLayout(tp=tp, dp=8 // tp), model=_dense(layers), microbatches=m,
                 fabric=EXACT, dp_overlap=False)
    st = simulate_step(spec)
    size = SEQ * spec.model.hidden_size * 2
    assert st.plan.tp_bytes == size
    expected = layers * m * 8 * _ring_s(size, tp)
    tp_col = CATEGORIES.index("tp_exposed")
    np.testing.assert_allclose(st.time_s[:, tp_col], expected, rtol=1e-6)
    r = run_step(spec)
    assert r.breakdown_s["tp_exposed"] == pytest.approx(expected, rel=1e-6)
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    flows = st.net.flows
    tagged = flows["tag"] == TP_TAG
    assert flows["size_bytes"][tagged].sum() == pytest.approx(
        layers * m * 8 * spec.layout.world_size * (tp - 1) * size / tp)


def test_tp_splits_attention_and_ffn_compute() -> None:
    """tp = 2: the attention block and dense FFN run on the gathered (whole-sequence) tokens
    with half the heads / columns: half the FLOPs, and the plan costs what the cost functions
    say for that shape."""
    model, gpu = _dense(), get_gpu("H100")
    one = build_plan(_spec(ParallelLayout(dp=8), model=model)).layers[0]
    two = build_plan(_spec(ParallelLayout(tp=2, dp=4), model=model)).layers[0]
    shape = LayerShape(model, SEQ // 2, SEQ, tp=2)
    assert shape.gathered_tokens == SEQ
    ffn = model.intermediate_size
    assert two.ffn_fwd_s == ffn_s(shape, gpu, ffn, 1.0, False)
    assert two.dense_fwd_s == attention_block_s(shape, gpu, 1.0, False) + two.ffn_fwd_s
    assert two.dense_bwd_s == attention_block_s(shape, gpu, 1.0, True) + two.ffn_bwd_s
    assert two.core_fwd_s == attention_core_s(shape, gpu, 1.0, False)
    heads = model.num_attention_heads
    full = attention_flops(AttentionShape(tokens=SEQ, seq_len=SEQ, n_heads=heads,
                                          qk_head_dim=128, v_head_dim=128))
    half = attention_flops(AttentionShape(tokens=SEQ, seq_len=SEQ, n_heads=heads // 2,
                                          qk_head_dim=128, v_head_dim=128))
    assert half == full / 2
    # Time: half the FLOPs; smaller GEMMs run at most a little less efficiently.
    for a, b in ((two.dense_fwd_s, one.dense_fwd_s), (two.ffn_bwd_s, one.ffn_bwd_s),
                 (two.core_fwd_s, one.core_fwd_s)):
        assert 0.5 <= a / b < 0.6


def test_tp_mfu_counts_the_same_model_flops() -> None:
    spec = _spec(ParallelLayout(tp=2, ep=4, dp=4), microbatches=2)
    assert spec.tokens_per_microbatch == SEQ // 2
    assert spec.global_tokens == 4 * 2 * SEQ
    r = run_step(spec)
    flops = training_flops(spec.model, 4 * 2 * SEQ, SEQ, include_mtp=False)
    assert r.tflops_per_gpu == pytest.approx(flops / r.step_time_s / 8 / 1e12)
    assert r.tokens_per_s == pytest.approx(4 * 2 * SEQ / r.step_time_s)
    assert r.breakdown_s["tp_exposed"] > 0
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-9)


def test_ep_group_spanning_tp_ranks_routes_each_ranks_shard() -> None:
    """tp = 2, ep = 4: EP group {0,1,2,3} holds two TP groups; each rank routes its own
    seq / tp tokens. Deterministic."""
    spec = _spec(ParallelLayout(tp=2, ep=4, dp=4), microbatches=2)
    assert spec.layout.group_of("ep", 0) == (0, 1, 2, 3)
    assert spec.layout.group_of("tp", 0) == (0, 1)
    routing = route_layer(spec, 0)
    np.testing.assert_array_equal(routing.rank_tokens.sum(axis=1), SEQ // 2 * spec.model.top_k)
    a, b = run_step(spec), run_step(spec)
    assert a.step_time_s == b.step_time_s
    assert a.breakdown_s == b.breakdown_s
    assert a.breakdown_s["a2a_exposed"] > 0 and a.breakdown_s["tp_exposed"] > 0


def test_cp_moves_each_ranks_kv_around_the_ring() -> None:
    """cp = 2: every rank sends its K/V chunk (seq/2 tokens x 8 kv heads x 128 x (K, V) x 2 B)
    to its CP peer once per layer forward and twice the bytes (K/V and dK/dV) backward."""
    layers, m = 2, 2
    spec = _spec(ParallelLayout(cp=2, dp=4), model=_dense(layers), microbatches=m,
                 fabric=EXACT, dp_overlap=False)
    st = simulate_step(spec)
    chunk = SEQ // 2 * 8 * 128 * 2 * 2
    assert st.plan.cp_kv_bytes == chunk
    flows = st.net.flows
    cp_flows = flows["tag"] == CP_TAG
    world = spec.layout.world_size
    assert flows["size_bytes"][cp_flows].sum() == layers * m * world * (1 + 2) * chunk
    src, dst = flows["src"][cp_flows], flows["dst"][cp_flows]
    np.testing.assert_array_equal(dst, src ^ 1)  # CP groups {0,1}, {2,3}, ...
    # Exposed: per ring step, the K/V transfer less the half of the core it overlaps.
    layer = st.plan.layers[0]
    fwd = max(0.0, chunk / NVLINK_BPS + PATH_LATENCY_S - layer.core_fwd_s / 2)
    bwd = max(0.0, 2 * chunk / NVLINK_BPS + PATH_LATENCY_S - layer.core_bwd_s / 2)
    cp_col = CATEGORIES.index("cp_exposed")
    np.testing.assert_allclose(st.time_s[:, cp_col], layers * m * (fwd + bwd), rtol=1e-6)
    r = run_step(spec)
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-9)


def test_cp_splits_the_causal_attention_core() -> None:
    """Load-balanced ring attention: each CP rank does 1/cp of the sequence's core FLOPs."""
    model = _dense()
    shape = LayerShape(model, SEQ // 2, SEQ, cp=2)
    assert shape.gathered_tokens == SEQ // 2
    qk = dict(n_heads=model.num_attention_heads, qk_head_dim=128, v_head_dim=128)
    half = AttentionShape(tokens=SEQ // 2, seq_len=SEQ, **qk)
    whole = AttentionShape(tokens=SEQ, seq_len=SEQ, **qk)
    assert attention_flops(half) == attention_flops(whole) / 2
    core = build_plan(_spec(ParallelLayout(cp=2, dp=4), model=model)).layers[0].core_fwd_s
    assert core == attention_core_s(shape, get_gpu("H100"), 1.0, False)


def test_tp_and_cp_with_pipeline_send_shards_to_the_same_coordinates() -> None:
    """tp = 2, cp = 2, pp = 2: activations of seq / (tp * cp) tokens go from each rank to the
    rank with the same tp, cp, dp coordinates on the next stage."""
    spec = _spec(ParallelLayout(tp=2, cp=2, pp=2, ep=2), microbatches=2)
    st = simulate_step(spec)
    h = spec.model.hidden_size
    assert st.plan.act_bytes == 2 * SEQ // 4 * h
    flows = st.net.flows
    p2p = (flows["tag"] == -1) & (flows["size_bytes"] == st.plan.act_bytes)
    src, dst = flows["src"][p2p], flows["dst"][p2p]
    assert src.size == 2 * 2 * 4  # (F + B) x micro-batches x ranks per stage
    np.testing.assert_array_equal(np.abs(dst - src), 4)  # next stage, same tp/cp/dp
    r = run_step(spec)
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    assert r.breakdown_s["tp_exposed"] > 0 and r.breakdown_s["cp_exposed"] >= 0


def test_cp_ranks_share_the_dense_gradient_reduction() -> None:
    """CP ranks hold the same dense parameters: Megatron reduces and shards them over DP x CP.
    cp = 2, dp = 4 then has the optimizer shard of dp = 8 (experts: edp = 2 in both)."""
    lay = ParallelLayout(tp=2, cp=2, dp=2)
    assert dense_dp_group(lay, 0) == (0, 2, 4, 6) and dense_dp_group(lay, 1) == (1, 3, 5, 7)
    cp = run_step(_spec(ParallelLayout(cp=2, ep=4, dp=4)))
    dp = run_step(_spec(ParallelLayout(ep=4, dp=8)))
    assert cp.breakdown_s["optimizer"] == pytest.approx(dp.breakdown_s["optimizer"], rel=1e-12)


def test_dense_params_per_gpu_are_the_tp_shard() -> None:
    one = build_plan(_spec(ParallelLayout(ep=8, dp=8)))
    two = build_plan(_spec(ParallelLayout(tp=2, ep=4, dp=4)))
    model = _moe()
    replicated = 2 * model.hidden_size + model.hidden_size * model.n_routed_experts
    dense1, dense2 = one.layer_params[0][0], two.layer_params[0][0]
    assert dense2 == (dense1 - replicated) // 2 + replicated
    assert two.layer_params[0][1] == 2 * one.layer_params[0][1]  # experts over ep = 4, not 8


def test_etp_gathers_the_dispatched_tokens_over_the_expert_tp_group() -> None:
    """etp = 2, ep = 4 on 8 GPUs: strided EP groups {0,2,4,6}, {1,3,5,7}; ETP groups {0,1}, ...
    Each rank all-gathers what its dispatch (and combine_bwd) brought over its ETP pair and
    reduce-scatters what combine (and dispatch_bwd) takes away: with etp = 2 every rank sends
    each token copy it received or sends once more. No dedup: T x top_k copies per rank."""
    layers, lay = 2, ParallelLayout(etp=2, ep=4, dp=8)
    spec = _spec(lay, model=_moe(layers), dedup=False)
    assert lay.group_of("ep", 0) == (0, 2, 4, 6) and lay.group_of("etp", 0) == (0, 1)
    st = simulate_step(spec)
    h, copies = spec.model.hidden_size, 8 * SEQ * spec.model.top_k  # all 8 ranks' copies
    fp8, bf16 = h + h / 128 * 4, 2 * h  # dispatch in fp8 (one fp32 scale per 128), rest bf16
    etp_flows = st.net.flows["tag"] == TP_TAG  # tp = 1: only the expert-TP rings
    assert st.net.flows["size_bytes"][etp_flows].sum() == pytest.approx(
        layers * copies * (fp8 + 3 * bf16))
    r = run_step(spec)
    assert r.breakdown_s["tp_exposed"] > 0
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    # Same routing as etp = 1, ep = 4: each rank runs twice the tokens through half the
    # columns (same FLOPs) and holds half the expert parameters.
    one = build_plan(_spec(ParallelLayout(ep=4, dp=8), model=_moe(layers), dedup=False))
    two = st.plan
    moe1, moe2 = one.layers[0].moe, two.layers[0].moe
    assert moe1 is not None and moe2 is not None
    np.testing.assert_allclose(moe2.experts_fwd, moe1.experts_fwd, rtol=1e-3)
    assert two.layer_params[0][1] * 2 == one.layer_params[0][1]


@pytest.mark.parametrize(
    "layout, kw, field",
    [
        (ParallelLayout(tp=3, ep=8, dp=8), {}, "layout.tp"),  # 32 heads
        (ParallelLayout(etp=3, dp=3), {}, "layout.etp"),  # moe_intermediate_size 14336
        (ParallelLayout(tp=2, dp=4), {"seq_len": 1025}, "step.seq_len"),
        (ParallelLayout(cp=2, dp=4), {"seq_len": 1026}, "step.seq_len"),  # 2*cp chunks
    ],
)
def test_bad_tp_cp_specs_name_the_field(layout: ParallelLayout, kw: dict[str, object],
                                        field: str) -> None:
    with pytest.raises(ConfigError) as err:
        _spec(layout, **kw)
    assert err.value.field == field
