"""GPU presets carry their datasheet numbers; the registry resolves and rejects names."""

from __future__ import annotations

import dataclasses

import pytest

from moesim.errors import ConfigError
from moesim.hardware import GPUS, H100, GpuSpec, get_gpu, register_gpu

# name: (bf16, fp8, HBM GiB, HBM GB/s, NVLink GB/s per direction, domain, SMs,
#        MAMF bf16, MAMF fp8, W, nvidia-smi MiB)
DATASHEET = {
    "H100": (989, 1979, 80, 3350, 450, 8, 132, 794.5, 1402.6, 700, 81559),
    "H800": (989, 1979, 80, 3350, 200, 8, 132, 794.5, 1402.6, 700, 81559),
    "H200": (989, 1979, 141, 4800, 450, 8, 132, 794.5, 1453.4, 700, 143771),
    "B200": (2250, 4500, 180, 8000, 900, 8, 148, 1745.0, 3432.5, 1000, 183359),
    "GB200": (2500, 5000, 186, 8000, 900, 72, 148, 1822.0, 3615.6, 1200, 189471),
    "A100": (312, None, 80, 2039, 300, 8, 108, 271.2, None, 400, None),
    "A800": (312, None, 80, 2039, 200, 8, 108, 271.2, None, 400, None),
}


@pytest.mark.parametrize("name", sorted(DATASHEET))
def test_preset_equals_datasheet(name: str) -> None:
    g = get_gpu(name)
    got = (
        g.bf16_tflops, g.fp8_tflops, g.hbm_gib, g.hbm_bw_GBps, g.nvlink_bw_GBps,
        g.nvlink_domain, g.sm_count, g.mamf_bf16_tflops, g.mamf_fp8_tflops, g.tdp_w,
        g.hbm_reported_mib,
    )
    assert got == DATASHEET[name]
    assert g.name == name
    assert g.source


def test_registry_holds_exactly_the_presets() -> None:
    assert list(GPUS) == ["H100", "H800", "H200", "B200", "GB200", "A100", "A800"]


def test_get_gpu_is_case_insensitive() -> None:
    assert get_gpu("h100") is H100
    assert get_gpu("Gb200").nvlink_domain == 72


def test_unknown_gpu_names_the_allowed_ones() -> None:
    with pytest.raises(ConfigError) as err:
        get_gpu("V100")
    assert err.value.field == "gpu"
    assert err.value.problem == ("unknown 'V100'; allowed: H100, H800, H200, B200, GB200, A100, "
                                 "A800")


def test_ampere_has_no_fp8_rate() -> None:
    a100 = get_gpu("A100")
    assert not a100.has_fp8 and H100.has_fp8
    assert a100.peak_tflops("bf16") == 312 and a100.mamf_fraction("bf16") == 271.2 / 312
    for ask in (a100.peak_tflops, a100.mamf_tflops):
        with pytest.raises(ConfigError) as err:
            ask("fp8")
        assert err.value.field == "gpu.fp8_tflops"
        assert err.value.problem == "A100 has no FP8 tensor cores; use bf16"


def test_fp8_rates_are_null_together() -> None:
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(H100, fp8_tflops=None)
    assert err.value.field == "gpu.mamf_fp8_tflops"


def test_duplicate_registration_is_an_error() -> None:
    with pytest.raises(ConfigError, match="duplicate"):
        register_gpu(dataclasses.replace(H100, name="h100"))


def test_derived_quantities() -> None:
    assert H100.hbm_bytes == 81559 * 2**20
    assert dataclasses.replace(H100, hbm_reported_mib=None).hbm_bytes == 80 * 2**30
    assert H100.hbm_bw_bytes_per_s == 3.35e12
    assert H100.nvlink_bw_bytes_per_s == 450e9
    assert H100.peak_tflops("fp8") == 1979
    assert H100.mamf_tflops("BF16") == 794.5
    assert H100.mamf_fraction("bf16") == 794.5 / 989


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"bf16_tflops": 0.0}, "gpu.bf16_tflops"),
        ({"hbm_bw_GBps": -1.0}, "gpu.hbm_bw_GBps"),
        ({"tdp_w": float("nan")}, "gpu.tdp_w"),
        ({"sm_count": 132.5}, "gpu.sm_count"),
        ({"nvlink_domain": 0}, "gpu.nvlink_domain"),
        ({"mamf_bf16_tflops": 990.0}, "gpu.mamf_bf16_tflops"),
        ({"hbm_reported_mib": 80 * 1024 + 1}, "gpu.hbm_reported_mib"),
        ({"name": " "}, "gpu.name"),
    ],
)
def test_invalid_spec_is_rejected(change: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        dataclasses.replace(H100, **change)  # type: ignore[arg-type]
    assert err.value.field == field


def test_unknown_dtype_is_rejected() -> None:
    with pytest.raises(ConfigError) as err:
        H100.peak_tflops("fp4")
    assert err.value.problem == "unknown 'fp4'; allowed: bf16, fp8"


def test_spec_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        H100.sm_count = 1  # type: ignore[misc]
    assert isinstance(H100, GpuSpec)
