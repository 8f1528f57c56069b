"""Roofline GEMM / grouped GEMM / elementwise times, checked against hand computations.

Hand constants: H100 MAMF 794.5 TFLOP/s bf16 (1402.6 fp8) held at the sustained fraction
698.6 / 823.9 (H200 MSMF / MAMF, all GPUs of the board busy) = 673.7 TFLOP/s bf16, 132 SMs,
HBM 3350 GB/s at an achievable fraction 0.84, launch overhead 3 us, smallest SM work unit
2 x 128 x 256 x 256 = 16,777,216 FLOPs, minimum 64 rows.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moesim.errors import ConfigError
from moesim.hardware import (
    GPUS,
    H100,
    GemmShape,
    GpuSpec,
    gemm_backward_time_s,
    gemm_efficiency,
    gemm_flops,
    gemm_time_s,
    grouped_gemm_backward_time_s,
    grouped_gemm_time_s,
    memory_bound_time_s,
)

LAUNCH_S = 3e-6
SUSTAINED = 698.6 / 823.9
H100_BF16 = 794.5e12 * SUSTAINED  # 673.7 TFLOP/s
H100_HBM = 3350e9 * 0.84


def test_large_square_bf16_gemm_runs_at_sustained_mamf() -> None:
    flops = 2 * 8192**3  # 1,099,511,627,776
    assert gemm_flops(GemmShape(8192, 8192, 8192)) == flops
    expected = flops / H100_BF16 + LAUNCH_S  # 1.635 ms (1.387 ms at the burst MAMF)
    assert gemm_time_s(H100, GemmShape(8192, 8192, 8192)) == pytest.approx(expected, rel=1e-12)
    assert expected == pytest.approx(1.635119e-3, rel=1e-6)
    assert gemm_efficiency(H100, GemmShape(8192, 8192, 8192)) == pytest.approx(
        794.5 * SUSTAINED / 989, rel=1e-12)


def test_large_fp8_gemm_runs_at_sustained_fp8_mamf() -> None:
    expected = 2 * 8192**3 / (1402.6e12 * SUSTAINED) + LAUNCH_S
    t = gemm_time_s(H100, GemmShape(8192, 8192, 8192, "fp8"))
    assert t == pytest.approx(expected, rel=1e-12)


def test_tiny_gemm_is_overhead_bound() -> None:
    # 16 rows pay for 64; 32,768 FLOPs fit one SM: 32768 x 132 / 673.7e12 = 6.42 ns.
    expected = LAUNCH_S + 2 * 64 * 16 * 16 * 132 / H100_BF16
    t = gemm_time_s(H100, GemmShape(16, 16, 16))
    assert t == pytest.approx(expected, rel=1e-12)
    assert LAUNCH_S < t < 1.01 * LAUNCH_S


def test_one_token_gemm_is_memory_bound() -> None:
    # Reads X (1 x 7168) and W (7168 x 4096) in bf16, writes Y (1 x 4096) in bf16.
    moved = (7168 + 7168 * 4096) * 2 + 4096 * 2
    assert moved == 58_742_784
    expected = moved / H100_HBM + LAUNCH_S  # 23.87 us
    assert gemm_time_s(H100, GemmShape(1, 4096, 7168)) == pytest.approx(expected, rel=1e-12)
    # Compute side: 64 padded rows, 3.76 GFLOP at the sustained MAMF = 5.6 us, well below.
    assert expected / 4 > 2 * 64 * 4096 * 7168 / H100_BF16
    eff = gemm_efficiency(H100, GemmShape(1, 4096, 7168))
    assert eff == pytest.approx(794.5 * SUSTAINED / 989 / 64)


def test_no_work_launches_no_kernel() -> None:
    assert gemm_time_s(H100, GemmShape(0, 4096, 7168)) == 0.0
    assert gemm_time_s(H100, GemmShape(128, 0, 7168)) == 0.0
    assert gemm_efficiency(H100, GemmShape(0, 4096, 7168)) == 0.0
    assert grouped_gemm_time_s(H100, GemmShape(np.zeros(8), 4096, 7168)) == 0.0
    assert grouped_gemm_backward_time_s(H100, GemmShape(np.zeros(8), 4096, 7168)) == 0.0
    assert memory_bound_time_s(H100, 0) == 0.0


def test_slowdown_two_doubles_time() -> None:
    for t in (
        lambda s: gemm_time_s(H100, GemmShape(4096, 4096, 4096), slowdown=s),
        lambda s: gemm_time_s(H100, GemmShape(1, 4096, 7168), slowdown=s),
        lambda s: grouped_gemm_time_s(H100, GemmShape([100, 0, 3000], 4096, 7168), slowdown=s),
        lambda s: memory_bound_time_s(H100, 1e9, slowdown=s),
        lambda s: gemm_backward_time_s(H100, GemmShape(512, 4096, 7168), slowdown=s),
    ):
        assert t(2.0) == pytest.approx(2.0 * t(1.0), rel=1e-12)


@pytest.mark.parametrize("bad", [0.5, 0.0, -1.0, float("nan"), float("inf"), True, "2"])
def test_bad_slowdown_is_rejected(bad: object) -> None:
    with pytest.raises(ConfigError) as err:
        gemm_time_s(H100, GemmShape(128, 128, 128), slowdown=bad)  # type: ignore[arg-type]
    assert err.value.field == "slowdown"


def test_bad_dims_and_dtype_are_rejected() -> None:
    with pytest.raises(ConfigError, match=r"gemm\.m"):
        gemm_time_s(H100, GemmShape(-1, 128, 128))
    with pytest.raises(ConfigError, match="dtype"):
        gemm_time_s(H100, GemmShape(128, 128, 128, "int8"))
    with pytest.raises(ConfigError, match=r"gemm\.m.*tokens per expert must be 1-D"):
        grouped_gemm_time_s(H100, GemmShape([[1, 2], [3, 4]], 128, 128))
    with pytest.raises(ConfigError, match=r"gemm\.m"):
        GemmShape([1, -2], 128, 128)


def test_gemm_is_vectorised() -> None:
    m = np.array([0, 1, 63, 64, 1000, 8192])
    got = gemm_time_s(H100, GemmShape(m, 4096, 7168))
    assert isinstance(got, np.ndarray)
    want = np.array([gemm_time_s(H100, GemmShape(int(x), 4096, 7168)) for x in m], dtype=np.float64)
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=1e-15)


def test_backward_is_twice_forward_when_compute_bound() -> None:
    fwd = gemm_time_s(H100, GemmShape(8192, 4096, 7168))
    # dgrad (8192, 7168, 4096) and wgrad (7168, 4096, 8192): same FLOPs, both compute-bound.
    bwd = gemm_backward_time_s(H100, GemmShape(8192, 4096, 7168))
    assert bwd == pytest.approx(2 * fwd, rel=1e-12)


# ---- grouped GEMM: router skew becomes a straggler ------------------------------------

K, N = 7168, 4096  # hidden, fused gate+up of a 2048-wide expert
X = 1024  # tokens per expert on a cold rank


def _expert_flops_s(tokens: float) -> float:
    return 2 * tokens * N * K / H100_BF16


def test_grouped_gemm_hand_value() -> None:
    # 4 experts x 1024 tokens: 2.4e11 FLOPs -> 357 us compute vs 116 us of HBM.
    expected = 4 * _expert_flops_s(X) + LAUNCH_S
    assert grouped_gemm_time_s(H100, GemmShape([X] * 4, N, K)) == pytest.approx(expected, rel=1e-12)


def test_hot_rank_is_the_straggler() -> None:
    per_rank = [[4 * X] * 4, [X] * 4, [X] * 4, [X] * 4]  # rank loads 4x, x, x, x
    times = [grouped_gemm_time_s(H100, GemmShape(r, N, K)) for r in per_rank]
    balanced = grouped_gemm_time_s(H100, GemmShape([1.75 * X] * 4, N, K))  # same 7x in total
    assert max(times) > balanced
    # compute-bound: the hot rank takes exactly 4x the work time of a cold one
    assert (times[0] - LAUNCH_S) == pytest.approx(4 * (times[1] - LAUNCH_S), rel=1e-12)
    assert (max(times) - LAUNCH_S) == pytest.approx(4 / 1.75 * (balanced - LAUNCH_S), rel=1e-12)


def test_grouped_gemm_scales_linearly_when_compute_bound() -> None:
    base = grouped_gemm_time_s(H100, GemmShape([X, 2 * X, 0, 3 * X], N, K)) - LAUNCH_S
    for factor in (2, 3, 8):
        tokens = [factor * X, factor * 2 * X, 0, factor * 3 * X]
        scaled = grouped_gemm_time_s(H100, GemmShape(tokens, N, K))
        assert scaled - LAUNCH_S == pytest.approx(factor * base, rel=1e-12)


def test_split_inside_a_rank_does_not_matter_when_compute_bound() -> None:
    skewed = grouped_gemm_time_s(H100, GemmShape([4 * X, X, X, X], N, K))
    even = grouped_gemm_time_s(H100, GemmShape([1.75 * X] * 4, N, K))
    assert skewed == pytest.approx(even, rel=1e-12)


def test_grouped_gemm_has_one_launch() -> None:
    one = grouped_gemm_time_s(H100, GemmShape([X], N, K))
    assert one == pytest.approx(gemm_time_s(H100, GemmShape(X, N, K)), rel=1e-12)
    assert grouped_gemm_time_s(H100, GemmShape([X] * 4, N, K)) < 4 * one


def test_grouped_backward_is_twice_forward_when_compute_bound() -> None:
    fwd = grouped_gemm_time_s(H100, GemmShape([4 * X, 2 * X], N, K))
    bwd = grouped_gemm_backward_time_s(H100, GemmShape([4 * X, 2 * X], N, K))
    assert bwd == pytest.approx(2 * fwd, rel=1e-12)


def test_memory_bound_hand_value() -> None:
    moved = 4096 * 7168 * 2 * 2  # read + write a bf16 [4096, 7168] activation
    expected = moved / H100_HBM + LAUNCH_S
    assert memory_bound_time_s(H100, moved) == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(
        memory_bound_time_s(H100, np.array([0.0, moved])), [0.0, expected], rtol=1e-12
    )


def test_wgrad_accumulating_into_fp32_main_grad_hand_value() -> None:
    """An expert backward of 512 tokens (7168 x 2048): dgrad writes BF16; the wgrad reads and
    writes the fp32 main_grad (8 B per weight-gradient element, not 2), which turns it from
    compute-bound into memory-bound."""
    m, n, k = 512, 2048, 7168
    flops_s = 2.0 * m * n * k / H100_BF16
    dgrad = max(flops_s, ((m * n + n * k) * 2 + m * k * 2) / H100_HBM) + LAUNCH_S
    for out_bytes, memory_bound in ((2.0, False), (8.0, True)):
        wgrad_hbm = ((k * m + m * n) * 2 + k * n * out_bytes) / H100_HBM
        assert (wgrad_hbm > flops_s) == memory_bound
        got = gemm_backward_time_s(H100, GemmShape(m, n, k, "bf16", out_bytes))
        assert got == pytest.approx(dgrad + max(flops_s, wgrad_hbm) + LAUNCH_S, rel=1e-9)
    assert GemmShape(m, n, k).wgrad_out_bytes == 2.0  # the default: a fresh BF16 output


# ---- properties -----------------------------------------------------------------------

gpus = st.sampled_from(list(GPUS.values()))
gpu_dtypes = st.sampled_from([(g, d) for g in GPUS.values() for d in ("bf16", "fp8")
                              if d == "bf16" or g.has_fp8])  # Ampere has no FP8 rate
dims = st.integers(min_value=1, max_value=65536)
rows = st.integers(min_value=0, max_value=200_000)


@settings(max_examples=200, deadline=None)
@given(gpu_dtypes, rows, rows, dims, dims)
def test_efficiency_and_time_monotone_in_m(
    gd: tuple[GpuSpec, str], m1: int, m2: int, n: int, k: int
) -> None:
    g, dtype = gd
    lo, hi = sorted((m1, m2))
    small, large = GemmShape(lo, n, k, dtype), GemmShape(hi, n, k, dtype)
    assert gemm_efficiency(g, small) <= gemm_efficiency(g, large)
    assert gemm_time_s(g, small) <= gemm_time_s(g, large)
    assert 0.0 <= gemm_efficiency(g, large) <= g.mamf_fraction(dtype)


@settings(max_examples=100, deadline=None)
@given(gpus, st.lists(st.integers(0, 20_000), min_size=1, max_size=16), st.integers(0, 15),
       st.integers(1, 5000))
def test_more_tokens_never_finish_sooner(
    g: GpuSpec, tokens: list[int], idx: int, extra: int
) -> None:
    more = list(tokens)
    more[idx % len(more)] += extra
    fewer, most = GemmShape(tokens, N, K), GemmShape(more, N, K)
    assert grouped_gemm_time_s(g, fewer) <= grouped_gemm_time_s(g, most)
    assert grouped_gemm_backward_time_s(g, fewer) <= grouped_gemm_backward_time_s(g, most)


@settings(max_examples=100, deadline=None)
@given(gpu_dtypes, rows, dims, dims)
def test_time_at_least_roofline(gd: tuple[GpuSpec, str], m: int, n: int, k: int) -> None:
    g, dtype = gd
    t = gemm_time_s(g, GemmShape(m, n, k, dtype))
    if m == 0:
        assert t == 0.0
        return
    assert t >= 2 * m * n * k / (g.mamf_tflops(dtype) * 1e12) + LAUNCH_S - 1e-15
