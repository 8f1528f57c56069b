"""GPU specifications: datasheet numbers, measured matmul ceilings, and the presets.

Units: TFLOP/s = 1e12 FLOP/s, dense (no sparsity); GB/s = 1e9 B/s; NVLink bandwidth is
per GPU, one direction. ``hbm_gib`` is the datasheet capacity ("80 GB" parts carry 80 GiB
of HBM); ``hbm_reported_mib`` is what ``nvidia-smi`` reports as memory.total, the part a
framework can allocate from.

The presets' numbers are the data file ``sim/hardware/gpus.yaml`` (each GPU's basis in its
``source``). Sources (copied here; the project reads nothing else at run time):

* Dense BF16/FP8 peaks, HBM size and bandwidth, NVLink: NVIDIA datasheets as tabulated in
  stas00/ml-engineering ``compute/accelerator/README.md``.
* MAMF ("maximum achievable matmul FLOPS", best large-GEMM throughput measured with
  ml-engineering's mamf-finder): same README. H100 BF16 794.5 (80.3%), FP8 1402.6 (70.9%);
  H200 FP8 1453.4; B200 1745 / 3432.5; GB200 1822 / 3615.6.
* H800: NVLink 400 GB/s bidirectional (200 per direction) and 132 SMs, DeepSeek-V3
  technical report §3.5 and "Insights into DeepSeek-V3" (ISCA'25) §4.
* SM counts: H100 SXM 132 (Hopper whitepaper); B200 148; A100 SXM 108 (Ampere whitepaper).
* A100 SXM4 80GB: BF16 312 dense, HBM2e 80 GB at 2039 GB/s, NVLink3 600 GB/s bidirectional
  (300 per direction) in an 8-GPU HGX NVSwitch node, 400 W; BF16 MAMF 271.2 (86.9%, torch
  2.6.0+cu126, same README). Ampere has no FP8 tensor cores: ``fp8_tflops`` and
  ``mamf_fp8_tflops`` are ``None`` and every FP8 precision is refused on it
  (:func:`moesim.hardware.precision.check_precision_gpu`). A800: A100 with NVLink cut to
  400 GB/s bidirectional (200 per direction), as H800 is to H100.
* Board power (``tdp_w``) and ``hbm_reported_mib``: the power cap and memory.total that
  ``nvidia-smi`` prints on these parts (H100/H800 700 W, 81559 MiB; H200 700 W,
  143771 MiB; B200 1000 W, 183359 MiB; GB200 1200 W, 189471 MiB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from pathlib import Path

from moesim.errors import ConfigError
from moesim.hardware.dtypes import check_dtype
from moesim.io import read_yaml

TFLOPS = 1e12
BYTES_PER_GB = 1e9


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. Validated when built; use :func:`dataclasses.replace` to vary it."""

    name: str
    bf16_tflops: float
    fp8_tflops: float | None
    hbm_gib: float
    hbm_bw_GBps: float
    nvlink_bw_GBps: float
    nvlink_domain: int
    sm_count: int
    mamf_bf16_tflops: float
    mamf_fp8_tflops: float | None
    tdp_w: float
    source: str
    hbm_reported_mib: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("gpu.name", f"must be a non-empty string, got {self.name!r}")
        self._check_fp8_pair()
        for f in fields(self):
            if f.name in ("name", "source", "hbm_reported_mib") or getattr(self, f.name) is None:
                continue
            _check_positive(f"gpu.{f.name}", getattr(self, f.name))
        for f_name in ("nvlink_domain", "sm_count"):
            value = getattr(self, f_name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"gpu.{f_name}", f"must be an integer >= 1, got {value!r}")
        for dtype in ("bf16", "fp8") if self.has_fp8 else ("bf16",):
            if self.mamf_tflops(dtype) > self.peak_tflops(dtype):
                raise ConfigError(
                    f"gpu.mamf_{dtype}_tflops",
                    f"must be <= {dtype}_tflops ({self.peak_tflops(dtype)}), "
                    f"got {self.mamf_tflops(dtype)}",
                )
        self._check_reported_mib()

    def _check_fp8_pair(self) -> None:
        if (self.fp8_tflops is None) != (self.mamf_fp8_tflops is None):
            raise ConfigError("gpu.mamf_fp8_tflops", "must be null exactly when fp8_tflops is "
                              f"(no FP8 tensor cores), got {self.mamf_fp8_tflops!r} with "
                              f"fp8_tflops {self.fp8_tflops!r}")

    @property
    def has_fp8(self) -> bool:
        """Whether the GPU has FP8 tensor cores (Hopper and later; not Ampere)."""
        return self.fp8_tflops is not None

    def _check_reported_mib(self) -> None:
        mib = self.hbm_reported_mib
        if mib is None:
            return
        limit_mib = self.hbm_gib * 1024
        if isinstance(mib, bool) or not isinstance(mib, int) or not 0 < mib <= limit_mib:
            raise ConfigError(
                "gpu.hbm_reported_mib",
                f"must be an integer in (0, {limit_mib:g}] (hbm_gib x 1024), got {mib!r}",
            )

    def peak_tflops(self, dtype: str = "bf16") -> float:
        """Dense datasheet peak in TFLOP/s for ``dtype`` ("bf16" or "fp8")."""
        if check_dtype(dtype) == "bf16":
            return self.bf16_tflops
        return self._fp8(self.fp8_tflops)

    def mamf_tflops(self, dtype: str = "bf16") -> float:
        """Measured best large-GEMM throughput (MAMF) in TFLOP/s for ``dtype``."""
        if check_dtype(dtype) == "bf16":
            return self.mamf_bf16_tflops
        return self._fp8(self.mamf_fp8_tflops)

    def _fp8(self, value: float | None) -> float:
        if value is None:
            raise ConfigError("gpu.fp8_tflops", f"{self.name} has no FP8 tensor cores; "
                              "use bf16")
        return value

    def mamf_fraction(self, dtype: str = "bf16") -> float:
        """MAMF / peak: the ceiling of the GEMM efficiency curve."""
        return self.mamf_tflops(dtype) / self.peak_tflops(dtype)

    @property
    def hbm_bytes(self) -> int:
        """Allocatable HBM: the reported memory.total if known, else the datasheet GiB."""
        if self.hbm_reported_mib is not None:
            return self.hbm_reported_mib * 2**20
        return int(self.hbm_gib * 2**30)

    @property
    def hbm_bw_bytes_per_s(self) -> float:
        return self.hbm_bw_GBps * BYTES_PER_GB

    @property
    def nvlink_bw_bytes_per_s(self) -> float:
        return self.nvlink_bw_GBps * BYTES_PER_GB


def _check_positive(field: str, value: object) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) <= 0:  # type: ignore[arg-type]
        raise ConfigError(field, f"must be a number > 0, got {value!r}")


GPUS_FILE = Path(__file__).with_name("gpus.yaml")
"""The presets' numbers, one entry a GPU (``name: {field: value, ..., source: ...}``)."""


def _presets() -> dict[str, GpuSpec]:
    table = read_yaml(GPUS_FILE, "gpu presets")
    if not isinstance(table, dict):
        raise ConfigError("gpu presets", f"{GPUS_FILE} must map GPU names to their fields")
    return {name: GpuSpec(name=name, **row) for name, row in table.items()}


_PRESETS = _presets()
H100, H800, H200 = _PRESETS["H100"], _PRESETS["H800"], _PRESETS["H200"]
B200, GB200 = _PRESETS["B200"], _PRESETS["GB200"]
A100, A800 = _PRESETS["A100"], _PRESETS["A800"]

GPUS: dict[str, GpuSpec] = {}


def register_gpu(spec: GpuSpec) -> GpuSpec:
    """Add ``spec`` to :data:`GPUS` under its upper-cased name; a duplicate is an error."""
    key = spec.name.upper()
    if key in GPUS:
        raise ConfigError("gpu.name", f"duplicate {spec.name!r}; already registered")
    GPUS[key] = spec
    return spec


for _spec in _PRESETS.values():
    register_gpu(_spec)


def get_gpu(name: str) -> GpuSpec:
    """The registered GPU called ``name`` (any case).

    >>> get_gpu("h100").sm_count
    132
    """
    key = name.upper() if isinstance(name, str) else name
    if key not in GPUS:
        raise ConfigError("gpu", f"unknown {name!r}; allowed: {', '.join(GPUS)}")
    return GPUS[key]
