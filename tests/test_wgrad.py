"""The B / W split of the backward (moesim.step.wgrad): the wgrad kernels of the model's GEMMs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

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
