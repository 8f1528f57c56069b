"""Calibration constants: the table matches the module, link fractions match their sources."""

from __future__ import annotations

import pytest

import moesim.calibration as cal
from moesim.errors import ConfigError


def test_table_lists_every_constant_with_its_value_and_source() -> None:
    for name, row in cal.CONSTANTS.items():
        assert row.name == name
        assert row.value == float(getattr(cal, name))
        assert row.unit and row.source and row.kind in ("measured", "assumption")
    upper = {n for n in vars(cal) if n.isupper() and isinstance(getattr(cal, n), int | float)}
    assert upper == set(cal.CONSTANTS)


@pytest.mark.parametrize(
    ("tier", "fabric", "gpu", "expected"),
    [
        ("nvlink", "ib", "H100", 370 / 450),
        ("nvlink", "ib", "h800", 160 / 200),
        ("nvlink", "ib", "GB200", 738.48 / 900),  # HybridEP on GB200, DeepEP PR #420
        ("nic", "ib", "H100", 48.5 / 50),
        ("leaf_spine", "roce", "H100", 24 / 25),
        ("spine_core", "ib", "H100", 48.5 / 50),
        ("pcie", "roce", "H100", 52.8 / 64),
    ],
)
def test_link_fractions(tier: str, fabric: str, gpu: str, expected: float) -> None:
    assert cal.link_achievable_fraction(tier, fabric, gpu) == pytest.approx(expected, rel=1e-15)


def test_link_fractions_are_fractions() -> None:
    fractions = [
        *cal.NVLINK_ACHIEVABLE_FRACTION_BY_GPU.values(),
        *cal.SCALE_OUT_ACHIEVABLE_FRACTION.values(),
        cal.PCIE_ACHIEVABLE_FRACTION,
        cal.HBM_ACHIEVABLE_FRACTION,
        cal.ATTENTION_FWD_EFFICIENCY,
        cal.ATTENTION_BWD_EFFICIENCY,
    ]
    assert all(0 < f <= 1 for f in fractions)
    assert cal.ATTENTION_BWD_EFFICIENCY < cal.ATTENTION_FWD_EFFICIENCY


@pytest.mark.parametrize(
    ("args", "field"),
    [(("ethernet",), "link.tier"), (("nic", "slingshot"), "fabric"),
     (("nvlink", "ib", "V100"), "gpu")],
)
def test_unknown_link_inputs_are_rejected(args: tuple[str, ...], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        cal.link_achievable_fraction(*args)
    assert err.value.field == field
    assert "allowed:" in err.value.problem


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [("H100", 698.6 / 823.9), ("h800", 698.6 / 823.9), ("H200", 698.6 / 823.9),
     ("B200", 1426.4 / 1751.2), ("GB200", 1426.4 / 1751.2)],
)
def test_sustained_fractions(gpu: str, expected: float) -> None:
    """MSMF / MAMF of the same runs, every GPU of the board busy (moesim.calibration)."""
    assert cal.sustained_fraction(gpu) == pytest.approx(expected, rel=1e-15)
    assert 0.8 < cal.sustained_fraction(gpu) < 0.9


def test_every_preset_gpu_has_a_sustained_fraction() -> None:
    from moesim.hardware import GPUS

    for name in GPUS:
        assert 0 < cal.sustained_fraction(name) <= 1


def test_unknown_gpu_has_no_sustained_fraction() -> None:
    with pytest.raises(ConfigError) as err:
        cal.sustained_fraction("MI300X")
    assert err.value.field == "gpu" and "allowed:" in err.value.problem
