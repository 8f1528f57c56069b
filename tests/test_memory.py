"""Per-GPU memory budget: hand-computed toy layouts, Korthikanti's formula, schedules."""

from __future__ import annotations

import dataclasses

import pytest

from moesim.errors import ConfigError
from moesim.model import ModelConfig, param_counts
from moesim.model.activations import layer_activation_bytes
from moesim.model.presets import DEEPSEEK_V3, MIXTRAL_8X7B
from moesim.parallel.layout import ParallelLayout
from moesim.parallel.memory import (
    GIB,
    WORKSPACE_BYTES,
    fits,
    inflight_chunks,
    stage_params,
    state_memory,
)

# Toy: h=8, 2 layers (dense, MoE), vocab 16, 2 heads of 4, dense FFN 16, 4 experts of 4, top-2.
# Parameters by hand: embedding 16*8 = 128 (and a 128 head); attention 4*8*8 = 256/layer;
# norms 2*8 = 16/layer + final 8; dense FFN 3*8*16 = 384; expert 3*8*4 = 96 (x4 = 384);
# router 8*4 = 32.  Layer 0: 256+16+384 = 656.  Layer 1: 256+16+32 = 304 dense + 384 expert.
# Total 128+128+656+304+8 = 1224 dense + 384 expert = 1608.
TOY = ModelConfig(name="toy", hidden_size=8, num_layers=2, vocab_size=16,
                  num_attention_heads=2, intermediate_size=16, n_routed_experts=4,
                  moe_intermediate_size=4, top_k=2, moe_layers=(False, True))
# Activations, seq 4, micro-batch 1, selective (bytes, by hand from activations.py):
#   dense layer: norms 2*2*4*8 = 128; attention 2*4*(8+8+8+8+8) = 320 + mask 4*8 = 32;
#                FFN input 2*4*8 = 64 + mask 32; SwiGLU 3*2*4*16 = 384       -> 960
#   MoE layer:   128 + 352 + 96; 8 token copies x (in + out) 2*2*8 = 256;
#                experts 3*2*8*4 = 192; router logits fp32 4*4*4 = 64       -> 1088
#   logits fp32 4*4*16 = 256; score term (none) 5*2 heads*4*4 = 160
# All-to-all buffers: tokens/GPU x top_k x (dispatch 2h + combine 2h) x 2 (send + receive).


def test_toy_counts() -> None:
    counts = param_counts(TOY)
    assert (counts.total, counts.dense, counts.expert) == (1608, 1224, 384)


def test_toy_activations_by_hand() -> None:
    kw = dict(seq_len=4, micro_batch_size=1)
    assert layer_activation_bytes(TOY, moe=False, recompute="selective", **kw) == 960
    assert layer_activation_bytes(TOY, moe=True, recompute="selective", **kw) == 1088
    assert layer_activation_bytes(TOY, moe=False, recompute="none", **kw) == 960 + 160
    assert layer_activation_bytes(TOY, moe=True, recompute="full", **kw) == 2 * 4 * 8
    assert layer_activation_bytes(TOY, moe=True, recompute="selective", tp=2, **kw) == 544


def test_korthikanti_formula_for_gpt_layer() -> None:
    # GPT layer: MHA, 4h GeLU MLP -> s*b*h*(34 + 5*a*s/h), divided by t with SP.
    s, b, h, a, t = 64, 2, 32, 4, 2
    gpt = ModelConfig(name="gpt", hidden_size=h, num_layers=1, vocab_size=8,
                      num_attention_heads=a, intermediate_size=4 * h, gated_ffn=False)
    none = layer_activation_bytes(gpt, moe=False, seq_len=s, micro_batch_size=b, tp=t)
    assert none == s * b * h * (34 + 5 * a * s / h) / t
    sel = layer_activation_bytes(gpt, moe=False, seq_len=s, micro_batch_size=b, tp=t,
                                 recompute="selective")
    assert sel == s * b * h * 34 / t
    cp = layer_activation_bytes(gpt, moe=False, seq_len=s, micro_batch_size=b, cp=2)
    assert cp == (s / 2) * b * h * 34 + 5 * a * (s / 2) * s * b


def test_unsharded_is_18_bytes_per_param() -> None:
    lay = ParallelLayout(dp=4, ep=2)  # edp = 2
    bud = state_memory(TOY, lay, seq_len=4, micro_batch_size=1, num_microbatches=4,
                       recompute="selective", distributed_optimizer=False)
    per_gpu = 1224 + 384 / 2
    assert (bud.params_per_gpu_dense, bud.params_per_gpu_expert) == (1224, 192)
    assert bud.weights_bytes + bud.grads_bytes + bud.optimizer_bytes == 18 * per_gpu


def test_distributed_optimizer_over_dp_and_edp() -> None:
    # pp=1, dp=4, ep=2 -> edp=2: dense 6 + 12/4 = 9 B/param, expert 6 + 12/2 = 12 B/param.
    lay = ParallelLayout(dp=4, ep=2)
    bud = state_memory(TOY, lay, seq_len=4, micro_batch_size=1, num_microbatches=4,
                       recompute="selective")
    assert bud.weights_bytes == 2 * (1224 + 192)
    assert bud.grads_bytes == 4 * (1224 + 192)
    assert bud.optimizer_bytes == 12 * (1224 / 4 + 192 / 2)
    assert bud.weights_bytes + bud.grads_bytes + bud.optimizer_bytes == 1224 * 9 + 192 * 12
    assert bud.activations_bytes == 960 + 1088 + 256  # one micro-batch in flight + logits
    assert bud.buffers_bytes == WORKSPACE_BYTES + 2 * 4 * 2 * (2 * 8 + 2 * 8)
    assert bud.total_gib == pytest.approx(bud.total_bytes / GIB)
    fp8 = state_memory(TOY, lay, seq_len=4, micro_batch_size=1, num_microbatches=4,
                       recompute="selective", precision="fp8")
    assert fp8.weights_bytes == 1 * (1224 + 192)  # FP8 params, FP32 master in the optimizer
    assert fp8.buffers_bytes == WORKSPACE_BYTES + 2 * 4 * 2 * (8 + 4 * 8 / 128 + 2 * 8)


def test_pipeline_tp_layout_worst_stage() -> None:
    # pp=2, tp=2, dp=2, ep=4 on 8 ranks -> edp = 1.
    # Stage 0: layer 0 + embedding = 784 dense -> 392/GPU; stage 1: layer 1 + head + final
    # norm = 440 dense -> 220/GPU, 384 expert -> 96/GPU.
    lay = ParallelLayout(tp=2, pp=2, dp=2, ep=4)
    assert stage_params(TOY, lay) == [(784, 0), (440, 384)]
    bud = state_memory(TOY, lay, seq_len=4, micro_batch_size=1, num_microbatches=4,
                       recompute="selective")
    # stage 0: state 392 x (2 + 4) + 12 x 392/2 = 4704; acts 2 in flight x 960/2 = 960
    # stage 1: 316 x 6 + 12 x (220/2 + 96/1) = 4368; acts 1 x 1088/2 + 256/2 = 672
    buffers = WORKSPACE_BYTES + 2 * 2 * 2 * 32
    assert bud.stage_totals_bytes == (4704 + 960 + buffers, 4368 + 672 + buffers)
    assert bud.stage == 0
    assert (bud.params_per_gpu_dense, bud.params_per_gpu_expert) == (392, 0)
    assert bud.optimizer_bytes == 12 * 392 / 2


def test_tied_embedding_copied_to_last_stage() -> None:
    tied = dataclasses.replace(TOY, tie_embeddings=True)
    assert stage_params(tied, ParallelLayout(pp=2, dp=1)) == [(784, 0), (440, 384)]
    assert stage_params(tied, ParallelLayout()) == [(1224 - 128, 384)]


def test_inflight_microbatches() -> None:
    lay = ParallelLayout(pp=4, vpp=2)
    # Megatron warm-up 2(pp-1) + (vpp-1)pp = 10 chunks, +1 = 11 chunks of 1/2 stage = 5.5,
    # = pp (1 + (pp-1)/(pp vpp)) (Korthikanti et al. sec. 4.2.3)
    assert inflight_chunks(lay, "interleaved", 0, 64) == 5.5 == 4 * (1 + 3 / 8)
    assert inflight_chunks(lay, "interleaved", 3, 64) == (4 + 1) / 2
    assert inflight_chunks(lay, "interleaved", 0, 2) == 2.0  # capped at m*vpp chunks
    one = ParallelLayout(pp=4)
    assert [inflight_chunks(one, "1f1b", r, 64) for r in range(4)] == [4, 3, 2, 1]
    assert inflight_chunks(one, "1f1b", 0, 2) == 2
    assert inflight_chunks(one, "dualpipe", 1, 64) == 5


def test_dualpipe_holds_two_stages() -> None:
    lay = ParallelLayout(pp=2, dp=4, ep=2)  # edp = 2
    one = state_memory(TOY, lay, seq_len=4, micro_batch_size=1, num_microbatches=8,
                       recompute="selective")
    dual = state_memory(TOY, lay, seq_len=4, micro_batch_size=1, num_microbatches=8,
                        recompute="selective", schedule="dualpipe")
    dense, expert = 784 + 440, 384 / 2
    assert dual.weights_bytes == 2 * (dense + expert)
    assert dual.optimizer_bytes == 12 * (dense / 8 + expert / 4)  # shards over 2 DP groups
    assert dual.weights_bytes > one.weights_bytes


def test_full_recompute_shrinks_activations() -> None:
    lay = ParallelLayout(tp=1, pp=4, ep=8, dp=16)
    sizes = [state_memory(MIXTRAL_8X7B, lay, seq_len=4096, micro_batch_size=1,
                          num_microbatches=16, recompute=r).activations_bytes
             for r in ("none", "selective", "full")]
    assert sizes[0] > sizes[1] > sizes[2]


def test_mixtral_megatron_layout_fits_h100() -> None:
    # calibration.md: Mixtral 8x7B on 64 H100, TP1 EP8 PP4 VPP8, seq 4096 (Megatron-Core).
    lay = ParallelLayout(tp=1, pp=4, vpp=8, ep=8, dp=16)
    bud = state_memory(MIXTRAL_8X7B, lay, seq_len=4096, micro_batch_size=1,
                       num_microbatches=16, recompute="selective", schedule="interleaved")
    assert fits(bud, 80 * 10**9, 0.05), fits(bud, 80 * 10**9, 0.05).reason


def test_fits_reason() -> None:
    lay = ParallelLayout(tp=1, pp=16, ep=64, dp=64)
    bud = state_memory(DEEPSEEK_V3, lay, seq_len=4096, micro_batch_size=1,
                       num_microbatches=32, recompute="none")
    verdict = fits(bud, 80 * 10**9, 0.1)
    assert not verdict and verdict.need_bytes == bud.total_bytes
    assert "largest: activations" in verdict.reason
    assert f"stage {bud.stage}" in verdict.reason
    with pytest.raises(ConfigError):
        fits(bud, 80e9, 1.0)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"recompute": "some"}, "recompute"),
    ({"precision": "fp4"}, "precision"),
    ({"schedule": "gpipe"}, "schedule"),
    ({"schedule": "interleaved"}, "schedule"),  # vpp = 1
    ({"seq_len": 3}, "seq_len"),  # tp = 2 does not divide
    ({"micro_batch_size": 0}, "micro_batch_size"),
])
def test_state_memory_rejects(kwargs: dict[str, object], field: str) -> None:
    base: dict[str, object] = dict(seq_len=4, micro_batch_size=1, num_microbatches=4)
    base.update(kwargs)
    with pytest.raises(ConfigError) as info:
        state_memory(TOY, ParallelLayout(tp=2, dp=2), **base)  # type: ignore[arg-type]
    assert info.value.field == field
