"""Attention-core times against hand computations (DeepSeek-V3 MLA shapes)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.hardware import (
    B200,
    H100,
    AttentionShape,
    attention_backward_time_s,
    attention_flops,
    attention_time_s,
)

LAUNCH_S = 3e-6
HOPPER = 698.6 / 823.9  # sustained / burst: H200 MSMF / MAMF, all GPUs of the board busy
BLACKWELL = 1426.4 / 1751.2  # B200, the same
MLA: dict[str, Any] = {"n_heads": 128, "qk_head_dim": 192, "v_head_dim": 128}


def test_causal_flops_hand_value() -> None:
    # 2 x 4096 x 4096 x 128 x (192 + 128) / 2
    assert attention_flops(AttentionShape(tokens=4096, seq_len=4096, **MLA)) == 687_194_767_360
    full = AttentionShape(tokens=4096, seq_len=4096, causal=False, **MLA)
    assert attention_flops(full) == 1_374_389_534_720


def test_forward_time_hand_value() -> None:
    expected = 687_194_767_360 / (989e12 * 0.60 * HOPPER) + LAUNCH_S  # 1.369 ms
    t = attention_time_s(H100, AttentionShape(tokens=4096, seq_len=4096, **MLA))
    assert t == pytest.approx(expected, rel=1e-12)


def test_backward_time_hand_value() -> None:
    expected = 2.5 * 687_194_767_360 / (2250e12 * 0.45 * BLACKWELL) + LAUNCH_S
    t = attention_backward_time_s(B200, AttentionShape(tokens=4096, seq_len=4096, **MLA))
    assert t == pytest.approx(expected, rel=1e-12)


def test_attention_is_slower_than_a_gemm_of_equal_flops() -> None:
    flops = attention_flops(AttentionShape(tokens=4096, seq_len=4096, **MLA))
    t = attention_time_s(H100, AttentionShape(tokens=4096, seq_len=4096, **MLA))
    assert t - LAUNCH_S > flops / (794.5e12 * HOPPER)


def test_tiny_attention_is_memory_or_overhead_bound() -> None:
    tiny = AttentionShape(tokens=1, seq_len=1, n_heads=1, qk_head_dim=64, v_head_dim=64)
    t = attention_time_s(H100, tiny)
    moved = 1 * 1 * (2 * 64 + 2 * 64) * 2
    assert t == pytest.approx(LAUNCH_S + moved / (3350e9 * 0.84), rel=1e-12)


def test_zero_tokens_and_slowdown() -> None:
    assert attention_time_s(H100, AttentionShape(tokens=0, seq_len=4096, **MLA)) == 0.0
    one = attention_time_s(H100, AttentionShape(tokens=4096, seq_len=4096, **MLA))
    two = attention_time_s(H100, AttentionShape(tokens=4096, seq_len=4096, **MLA), slowdown=2)
    assert two == pytest.approx(2 * one, rel=1e-12)


def test_vectorised_over_tokens() -> None:
    got = attention_time_s(H100, AttentionShape(tokens=np.array([0, 2048, 4096]), seq_len=4096,
                                                **MLA))
    assert isinstance(got, np.ndarray)
    assert got[0] == 0.0 and got[1] < got[2]


def test_bad_inputs_are_rejected() -> None:
    with pytest.raises(ConfigError, match=r"attention\.tokens"):
        attention_time_s(H100, AttentionShape(tokens=-1, seq_len=4096, **MLA))
    with pytest.raises(ConfigError, match="dtype"):
        attention_time_s(H100, AttentionShape(tokens=1, seq_len=1, dtype="fp32", **MLA))
