"""Memory-bound kernels added to each MoE layer's costs (moesim.workload.elementwise), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from moesim.calibration import HBM_ACHIEVABLE_FRACTION, KERNEL_LAUNCH_OVERHEAD_S
from moesim.hardware import get_gpu
from moesim.model import get_model
from moesim.router import RouterConfig, route_tokens
from moesim.workload.costs import LayerShape, attention_block_s, layer_costs
from moesim.workload.elementwise import (
    extra_bwd_bytes,
    extra_fwd_bytes,
    permute_bytes,
    rope_bytes,
    with_elementwise,
)

H100 = get_gpu("H100")
HBM_BPS = 3350e9 * HBM_ACHIEVABLE_FRACTION
MIXTRAL = LayerShape(get_model("mixtral-8x7b"), tokens_per_rank=4096, seq_len=4096)


def _kernel_s(size_bytes: float) -> float:
    return size_bytes / HBM_BPS + KERNEL_LAUNCH_OVERHEAD_S


def test_mixtral_bytes_by_hand() -> None:
    m, h = 4096, 4096
    assert rope_bytes(MIXTRAL) == 2 * m * (32 + 8) * 128 * 2  # q and k heads, read + write
    assert permute_bytes(MIXTRAL) == 2 * m * 2 * h * 2  # top-2 copies, read + write
    assert extra_fwd_bytes(MIXTRAL) == (rope_bytes(MIXTRAL), 4 * m * h * 2)
    assert extra_bwd_bytes(MIXTRAL) == (rope_bytes(MIXTRAL),) + (permute_bytes(MIXTRAL),) * 2


def test_mla_rotates_only_the_rope_dims() -> None:
    shape = LayerShape(get_model("deepseek-v3"), tokens_per_rank=1024, seq_len=4096)
    assert rope_bytes(shape) == 2 * 1024 * (128 + 1) * 64 * 2  # 128 query heads + 1 shared key


def test_tp_gathers_tokens_and_splits_heads() -> None:
    shape = LayerShape(get_model("mixtral-8x7b"), tokens_per_rank=1024, seq_len=4096, tp=4)
    assert rope_bytes(shape) == 2 * 4096 * (32 + 8) // 4 * 128 * 2
    assert permute_bytes(shape) == 2 * 1024 * 2 * 4096 * 2  # own tokens only


def test_layer_costs_include_the_kernels() -> None:
    routing = route_tokens(RouterConfig(), tokens_per_rank=4096, n_ranks=8, n_experts=8,
                           top_k=2, seed=0, layer=0)
    slow = np.array([1.0] * 7 + [2.0])
    costs = layer_costs(MIXTRAL, H100, routing, slow)
    fwd = _kernel_s(rope_bytes(MIXTRAL)) + _kernel_s(4 * 4096 * 4096 * 2)
    bwd = _kernel_s(rope_bytes(MIXTRAL)) + 2 * _kernel_s(permute_bytes(MIXTRAL))
    base_fwd = attention_block_s(MIXTRAL, H100, 1.0, False)
    base_bwd = attention_block_s(MIXTRAL, H100, 1.0, True)
    assert costs.attn_fwd == pytest.approx((base_fwd + fwd) * slow, rel=1e-12)
    assert costs.attn_bwd == pytest.approx((base_bwd + bwd) * slow, rel=1e-12)
    added = with_elementwise(costs, MIXTRAL, H100, slow)
    assert added.attn_fwd - costs.attn_fwd == pytest.approx(fwd * slow, rel=1e-12)
    assert added.attn_bwd - costs.attn_bwd == pytest.approx(bwd * slow, rel=1e-12)
    assert np.array_equal(added.experts_fwd, costs.experts_fwd)  # only attn_* change
    # Mixtral: ~78 us forward and ~130 us backward per layer and micro-batch on H100.
    assert fwd == pytest.approx(83.5e-6, rel=0.01) and bwd == pytest.approx(134.2e-6, rel=0.01)
