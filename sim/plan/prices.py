"""The price and power table behind a design's bill of materials; users override it in YAML.

Every figure is an ASSUMPTION for budgeting, not a quote: street prices move by tens of
percent with volume and date. Each entry says where its order of magnitude comes from.
Override any of them with ``moesim design --prices FILE.yaml`` (a mapping of the keys below
to numbers; an unknown key is refused with the allowed ones).

==========================  =========  =====================================================
key                         default    basis (assumption)
==========================  =========  =====================================================
host_usd.H100               250000     8-GPU HGX H100 server, 2024 street price order
                                       (press reports of USD 25-30k per H100 plus chassis)
host_usd.H800               250000     as H100 (same board, export-limited NVLink)
host_usd.H200               300000     8-GPU HGX H200 server, 2025 order of magnitude
host_usd.B200               450000     8-GPU HGX B200 server, 2025 order of magnitude
host_usd.GB200              170000     one 4-GPU compute tray: an NVL72 rack (18 trays,
                                       NVLink switches, power shelves) at ~USD 3M, 2025 order
nic_usd                     2000       ConnectX-7 400G adapter (800G: x2, same table)
switch_usd                  30000      64-port 400G switch (Quantum-2 QM9700 class)
transceiver_usd             1000       one 400G OSFP optic; two per switch-side cable
cable_usd                   150        one fibre run per link
switch_w                    1700       QM9700 maximum with optics (datasheet, 1,720 W)
transceiver_w               9          400G OSFP optic (typical 8-9 W)
electricity_usd_per_kwh     0.08       industrial tariff order of magnitude
==========================  =========  =====================================================

800G NICs and switch ports (``--nic-gbit 800``) cost :data:`FAST_PORT_FACTOR` times the
400G figures (assumption).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType

from moesim.errors import ConfigError
from moesim.io import read_yaml

FAST_PORT_FACTOR = 2.0
HOST_USD = MappingProxyType({"H100": 250_000.0, "H800": 250_000.0, "H200": 300_000.0,
                             "B200": 450_000.0, "GB200": 170_000.0})


@dataclass(frozen=True)
class Prices:
    """USD and watts per part (module docstring for the basis of each)."""

    host_usd: Mapping[str, float] = field(default_factory=lambda: dict(HOST_USD))
    nic_usd: float = 2000.0
    switch_usd: float = 30000.0
    transceiver_usd: float = 1000.0
    cable_usd: float = 150.0
    switch_w: float = 1700.0
    transceiver_w: float = 9.0
    electricity_usd_per_kwh: float = 0.08
    source: str = "moesim defaults (assumptions, sim/plan/prices.py)"

    def host(self, gpu: str) -> float:
        if gpu not in self.host_usd:
            raise ConfigError("prices.host_usd", f"no host price for {gpu}; add host_usd.{gpu} "
                              "to the prices file")
        return float(self.host_usd[gpu])


KEYS = [f.name for f in fields(Prices) if f.name != "source"]


def load_prices(path: str | Path | None) -> Prices:
    """The defaults, with the numbers of the YAML file ``path`` over them."""
    if path is None:
        return Prices()
    data = read_yaml(path, "prices")
    if not isinstance(data, dict):
        raise ConfigError("prices", f"{path} must be a mapping of {', '.join(KEYS)}")
    out: dict[str, object] = {}
    for key, value in data.items():
        if key not in KEYS:
            raise ConfigError(f"prices.{key}", f"unknown key; allowed: {', '.join(KEYS)}")
        if key == "host_usd":
            out[key] = {**HOST_USD, **_numbers(value, "prices.host_usd")}
        else:
            out[key] = _number(value, f"prices.{key}")
    return replace(Prices(), source=str(path), **out)  # type: ignore[arg-type]


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(name, f"must be a number >= 0, got {value!r}")
    return float(value)


def _numbers(value: object, name: str) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ConfigError(name, "must map a GPU name to a price in USD, e.g. {H200: 300000}")
    return {str(k): _number(v, f"{name}.{k}") for k, v in value.items()}
