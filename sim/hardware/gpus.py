"""GPU specifications: datasheet numbers, measured matmul ceilings, and the presets.

Units: TFLOP/s = 1e12 FLOP/s, dense (no sparsity); GB/s = 1e9 B/s; NVLink bandwidth is
per GPU, one direction. ``hbm_gib`` is the datasheet capacity ("80 GB" parts carry 80 GiB
of HBM); ``hbm_reported_mib`` is what ``nvidia-smi`` reports as memory.total, the part a
framework can allocate from.

Sources (copied here; the project reads nothing else at run time):

* Dense BF16/FP8 peaks, HBM size and bandwidth, NVLink: NVIDIA datasheets as tabulated in
  stas00/ml-engineering ``compute/accelerator/README.md``.
* MAMF ("maximum achievable matmul FLOPS", best large-GEMM throughput measured with
  ml-engineering's mamf-finder): same README. H100 BF16 794.5 (80.3%), FP8 1402.6 (70.9%);
  H200 FP8 1453.4; B200 1745 / 3432.5; GB200 1822 / 3615.6.
* H800: NVLink 400 GB/s bidirectional (200 per direction) and 132 SMs, DeepSeek-V3
  technical report §3.5 and "Insights into DeepSeek-V3" (ISCA'25) §4.
* SM counts: H100 SXM 132 (Hopper whitepaper); B200 148.
* Board power (``tdp_w``) and ``hbm_reported_mib``: the power cap and memory.total that
  ``nvidia-smi`` prints on these parts (H100/H800 700 W, 81559 MiB; H200 700 W,
  143771 MiB; B200 1000 W, 183359 MiB; GB200 1200 W, 189471 MiB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from moesim.errors import ConfigError
from moesim.hardware.dtypes import check_dtype

TFLOPS = 1e12
BYTES_PER_GB = 1e9


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model. Validated when built; use :func:`dataclasses.replace` to vary it."""

    name: str
    bf16_tflops: float
    fp8_tflops: float
    hbm_gib: float
    hbm_bw_GBps: float
    nvlink_bw_GBps: float
    nvlink_domain: int
    sm_count: int
    mamf_bf16_tflops: float
    mamf_fp8_tflops: float
    tdp_w: float
    source: str
    hbm_reported_mib: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("gpu.name", f"must be a non-empty string, got {self.name!r}")
        for f in fields(self):
            if f.name in ("name", "source", "hbm_reported_mib"):
                continue
            _check_positive(f"gpu.{f.name}", getattr(self, f.name))
        for f_name in ("nvlink_domain", "sm_count"):
            value = getattr(self, f_name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ConfigError(f"gpu.{f_name}", f"must be an integer >= 1, got {value!r}")
        for dtype in ("bf16", "fp8"):
            if self.mamf_tflops(dtype) > self.peak_tflops(dtype):
                raise ConfigError(
                    f"gpu.mamf_{dtype}_tflops",
                    f"must be <= {dtype}_tflops ({self.peak_tflops(dtype)}), "
                    f"got {self.mamf_tflops(dtype)}",
                )
        self._check_reported_mib()

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
        return self.bf16_tflops if check_dtype(dtype) == "bf16" else self.fp8_tflops

    def mamf_tflops(self, dtype: str = "bf16") -> float:
        """Measured best large-GEMM throughput (MAMF) in TFLOP/s for ``dtype``."""
        return self.mamf_bf16_tflops if check_dtype(dtype) == "bf16" else self.mamf_fp8_tflops

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


_ML_ENG = "stas00/ml-engineering compute/accelerator/README.md"

H100 = GpuSpec(
    name="H100", bf16_tflops=989.0, fp8_tflops=1979.0,
    hbm_gib=80.0, hbm_reported_mib=81559, hbm_bw_GBps=3350.0,
    nvlink_bw_GBps=450.0, nvlink_domain=8, sm_count=132,
    mamf_bf16_tflops=794.5, mamf_fp8_tflops=1402.6, tdp_w=700.0,
    source=f"H100 SXM datasheet and MAMF via {_ML_ENG}; NVLink4 900 GB/s bidirectional, "
    "8-GPU HGX NVSwitch node; 700 W and 81559 MiB from nvidia-smi",
)

H800 = GpuSpec(
    name="H800", bf16_tflops=989.0, fp8_tflops=1979.0,
    hbm_gib=80.0, hbm_reported_mib=81559, hbm_bw_GBps=3350.0,
    nvlink_bw_GBps=200.0, nvlink_domain=8, sm_count=132,
    mamf_bf16_tflops=794.5, mamf_fp8_tflops=1402.6, tdp_w=700.0,
    source="H100 silicon with NVLink cut to 400 GB/s bidirectional (DeepSeek-V3 report "
    "§3.5, 132 SMs); MAMF not published: ASSUMED equal to H100's (same GH100 SMs and "
    f"clocks), {_ML_ENG}; 700 W and 81559 MiB from nvidia-smi",
)

H200 = GpuSpec(
    name="H200", bf16_tflops=989.0, fp8_tflops=1979.0,
    hbm_gib=141.0, hbm_reported_mib=143771, hbm_bw_GBps=4800.0,
    nvlink_bw_GBps=450.0, nvlink_domain=8, sm_count=132,
    mamf_bf16_tflops=794.5, mamf_fp8_tflops=1453.4, tdp_w=700.0,
    source=f"H200 SXM datasheet via {_ML_ENG} (141 GB HBM3e, 4.8 TB/s, NVLink 900 GB/s "
    "bidirectional); FP8 MAMF 1453.4 measured; BF16 MAMF ASSUMED equal to H100's 794.5 "
    "(same GH100 compute; the table lists it as ~H100); 700 W, 143771 MiB from nvidia-smi",
)

B200 = GpuSpec(
    name="B200", bf16_tflops=2250.0, fp8_tflops=4500.0,
    hbm_gib=180.0, hbm_reported_mib=183359, hbm_bw_GBps=8000.0,
    nvlink_bw_GBps=900.0, nvlink_domain=8, sm_count=148,
    mamf_bf16_tflops=1745.0, mamf_fp8_tflops=3432.5, tdp_w=1000.0,
    source=f"B200 (HGX) datasheet and MAMF via {_ML_ENG}; NVLink5 1.8 TB/s bidirectional, "
    "8-GPU node; 148 SMs; 1000 W and 183359 MiB from nvidia-smi",
)

GB200 = GpuSpec(
    name="GB200", bf16_tflops=2500.0, fp8_tflops=5000.0,
    hbm_gib=186.0, hbm_reported_mib=189471, hbm_bw_GBps=8000.0,
    nvlink_bw_GBps=900.0, nvlink_domain=72, sm_count=148,
    mamf_bf16_tflops=1822.0, mamf_fp8_tflops=3615.6, tdp_w=1200.0,
    source=f"GB200 per Blackwell GPU, datasheet and MAMF via {_ML_ENG}; 900 GB/s per "
    "direction in a 72-GPU NVL72 NVLink domain; SM count ASSUMED equal to B200's 148 "
    "(same die); 1200 W and 189471 MiB from nvidia-smi",
)

GPUS: dict[str, GpuSpec] = {}


def register_gpu(spec: GpuSpec) -> GpuSpec:
    """Add ``spec`` to :data:`GPUS` under its upper-cased name; a duplicate is an error."""
    key = spec.name.upper()
    if key in GPUS:
        raise ConfigError("gpu.name", f"duplicate {spec.name!r}; already registered")
    GPUS[key] = spec
    return spec


for _spec in (H100, H800, H200, B200, GB200):
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
