"""Compute data types the hardware model knows, and their sizes.

GEMMs read inputs in the compute dtype and write BF16 outputs in both cases: FP8 training
recipes (DeepSeek-V3 §3.3, Transformer Engine) keep GEMM outputs in BF16.
"""

from __future__ import annotations

from moesim.errors import ConfigError

DTYPES: tuple[str, ...] = ("bf16", "fp8")

_INPUT_BYTES: dict[str, int] = {"bf16": 2, "fp8": 1}

#: Bytes per element of a GEMM output (BF16 for both dtypes).
OUTPUT_BYTES = 2


def check_dtype(dtype: str, field: str = "dtype") -> str:
    """Return ``dtype`` lower-cased, or raise ConfigError naming the allowed ones."""
    key = dtype.lower() if isinstance(dtype, str) else None
    if key not in _INPUT_BYTES:
        raise ConfigError(field, f"unknown {dtype!r}; allowed: {', '.join(DTYPES)}")
    return key


def input_bytes(dtype: str) -> int:
    """Bytes per element of GEMM/attention inputs in ``dtype``."""
    return _INPUT_BYTES[check_dtype(dtype)]
