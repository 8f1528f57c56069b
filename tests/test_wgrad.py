"""The B / W split of the backward (moesim.step.wgrad): the wgrad kernels of the model's GEMMs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.hardware import GemmShape, gemm_backward_time_s, get_gpu
from moesim.hardware.roofline import gemm_wgrad_time_s
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.step import StepSpec
from moesim.step.plan import build_plan


def test_wgrad_of_a_compute_bound_gemm_is_half_its_backward() -> None:
    # dgrad [m, n] @ [n, k] and wgrad [k, m] @ [m, n]: the same 2 m n k FLOPs
    gpu, shape = get_gpu("H100"), GemmShape(8192, 8192, 8192, "bf16")
    assert gemm_wgrad_time_s(gpu, shape) == pytest.approx(
        gemm_backward_time_s(gpu, shape) / 2, rel=1e-9)


def _spec(schedule: str) -> StepSpec:
    model = dataclasses.replace(get_model("deepseek-v3"), num_layers=4,
                                moe_layers=(False, True, True, True), mtp_layers=0)
    return StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8, pp=2), seq_len=1024,
                    schedule=schedule, microbatches=4, compute_dtype="fp8-block",
                    recompute="none")


def test_split_layers_add_up_to_the_backward() -> None:
    """B (input gradient) + W = the whole backward, per layer and EP rank; the attention core's
    backward (no weights) stays in B. (W can exceed half: at 1024 tokens the wgrad kernels also
    read and write the fp32 main_grad, GemmShape.wgrad_out_bytes.)"""
    plan = build_plan(_spec("dualpipe"))
    assert len(plan.input_grad_layers) == len(plan.layers) == 4
    for whole, part in zip(plan.layers, plan.input_grad_layers, strict=True):
        assert whole.wgrad_s is not None
        if whole.moe is None:
            bwd, rest = whole.dense_bwd_s, part.dense_bwd_s
        else:
            assert part.moe is not None
            bwd = whole.moe.attn_bwd + whole.moe.experts_bwd + whole.ffn_bwd_s
            rest = part.moe.attn_bwd + part.moe.experts_bwd + part.ffn_bwd_s
        np.testing.assert_allclose(rest + whole.wgrad_s, bwd, rtol=1e-12)
        assert np.all(whole.wgrad_s > 0.2 * bwd)
        assert np.all(whole.wgrad_s < bwd - whole.core_bwd_s)
    assert 0 < plan.head_wgrad_s < plan.head_bwd_s
    plain = build_plan(_spec("1f1b"))  # no W ops: nothing split
    assert plain.input_grad_layers == () and plain.layers[1].wgrad_s is None


def test_fp8_block_wgrad_rate_is_deepgemms_measured_median() -> None:
    """FP8_BLOCK_WGRAD_FRACTION is DeepGEMM's measured wgrad TFLOPS on H800 (PR #95's nine
    DeepSeek-V3 shapes, median 986) over the model's sustained H800 FP8 rate (its literal
    1189.29 is that rate); with it, the model's wgrad of those nine shapes has their median
    (within 2%: the model's sm-fill / padding of each shape), and every shape's within 12%."""
    from moesim.calibration import FP8_BLOCK_WGRAD_FRACTION
    from moesim.calibration.kernels import FP8_BLOCK_WGRAD_TFLOPS_H800
    from moesim.hardware.roofline import sustained_tflops

    h800 = get_gpu("H800")
    assert sustained_tflops(h800, "fp8") == pytest.approx(1189.29, abs=0.005)
    assert FP8_BLOCK_WGRAD_FRACTION == 986.0 / 1189.29
    # (M, N) the weight, K the tokens: DeepGEMM's D[M, N] += A[M, K] B[N, K]^T
    shapes = [(7168, 2112, 4096), (1536, 24576, 4096), (512, 32768, 4096), (16384, 7168, 4096),
              (7168, 4096, 4096), (2048, 7168, 4096), (7168, 2112, 8192), (1536, 24576, 8192),
              (512, 32768, 8192)]
    model = []
    for m_w, n_w, tokens in shapes:  # the forward GEMM Y[tokens, n] = X[tokens, m_w] W
        shape = GemmShape(tokens, n_w, m_w, "fp8", 8.0, FP8_BLOCK_WGRAD_FRACTION)
        model.append(2 * m_w * n_w * tokens / float(gemm_wgrad_time_s(h800, shape)) / 1e12)
    assert float(np.median(model)) == pytest.approx(986.0, rel=0.02)
    np.testing.assert_allclose(model, FP8_BLOCK_WGRAD_TFLOPS_H800, rtol=0.12)


def test_only_fp8_block_wgrads_are_slower() -> None:
    """A compute-bound wgrad takes 1 / rate as long; dgrad and forward do not change, and
    layers of other precisions get rate 1 (their plans are unchanged)."""
    from moesim.calibration import FP8_BLOCK_WGRAD_FRACTION
    from moesim.workload.shape import LayerShape

    gpu, rate = get_gpu("H800"), FP8_BLOCK_WGRAD_FRACTION
    plain, blockwise = (GemmShape(8192, 8192, 8192, "fp8", 2.0, r) for r in (1.0, rate))
    ratio = float(gemm_wgrad_time_s(gpu, blockwise)) / float(gemm_wgrad_time_s(gpu, plain))
    assert 1.0 / rate * 0.99 < ratio < 1.0 / rate  # (the launch overhead is not slowed)
    assert float(gemm_backward_time_s(gpu, blockwise)) == pytest.approx(
        float(gemm_backward_time_s(gpu, plain)) + float(gemm_wgrad_time_s(gpu, blockwise))
        - float(gemm_wgrad_time_s(gpu, plain)), rel=1e-12)
    model = get_model("deepseek-v3")
    rates = {dt: LayerShape(model, 4096, 4096, dt).wgrad_rate
             for dt in ("bf16", "fp8-cs", "fp8-block")}
    assert rates == {"bf16": 1.0, "fp8-cs": 1.0, "fp8-block": rate}
    with pytest.raises(ConfigError, match="wgrad_rate"):
        GemmShape(1, 1, 1, "fp8", 2.0, 0.0)
