"""The price and power table behind a design's bill of materials; users override it in YAML.

The defaults are the data file ``sim/plan/prices.yaml`` (:data:`DEFAULTS_FILE`): one entry a
key, with where its order of magnitude comes from beside it. Every figure is an ASSUMPTION for
budgeting, not a quote: street prices move by tens of percent with volume and date.
``moesim design --prices FILE.yaml`` reads a file of the same shape over them (any subset of
the keys; an unknown key is refused with the allowed ones); both pass the same checks (numbers
>= 0). 800G NICs and switch ports (``--nic-gbit 800``) cost :data:`FAST_PORT_FACTOR` times the
400G figures (assumption).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from moesim.errors import ConfigError
from moesim.io import read_yaml

FAST_PORT_FACTOR = 2.0
DEFAULTS_FILE = Path(__file__).with_name("prices.yaml")


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(name, f"must be a number >= 0, got {value!r}")
    return float(value)


def _numbers(value: object, name: str) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ConfigError(name, "must map a GPU name to a price in USD, e.g. {H200: 300000}")
    return {str(k): _number(v, f"{name}.{k}") for k, v in value.items()}


def _table(path: str | Path, keys: list[str] | None) -> dict[str, Any]:
    """The checked numbers of the prices file ``path`` (``keys``: the keys it may hold)."""
    data = read_yaml(path, "prices")
    if not isinstance(data, dict):
        raise ConfigError("prices", f"{path} must be a mapping of {', '.join(keys or [])}")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if keys is not None and key not in keys:
            raise ConfigError(f"prices.{key}", f"unknown key; allowed: {', '.join(keys)}")
        out[key] = (_numbers if key == "host_usd" else _number)(value, f"prices.{key}")
    return out


DEFAULTS: Mapping[str, Any] = MappingProxyType(_table(DEFAULTS_FILE, None))
HOST_USD: Mapping[str, float] = MappingProxyType(DEFAULTS["host_usd"])


@dataclass(frozen=True)
class Prices:
    """USD and watts per part; each default is :data:`DEFAULTS_FILE`'s (its basis is there)."""

    host_usd: Mapping[str, float] = field(default_factory=lambda: dict(HOST_USD))
    nic_usd: float = DEFAULTS["nic_usd"]
    switch_usd: float = DEFAULTS["switch_usd"]
    transceiver_usd: float = DEFAULTS["transceiver_usd"]
    cable_usd: float = DEFAULTS["cable_usd"]
    switch_w: float = DEFAULTS["switch_w"]
    transceiver_w: float = DEFAULTS["transceiver_w"]
    electricity_usd_per_kwh: float = DEFAULTS["electricity_usd_per_kwh"]
    source: str = "moesim defaults (assumptions, sim/plan/prices.yaml)"

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
    out = _table(path, KEYS)
    if "host_usd" in out:
        out["host_usd"] = {**HOST_USD, **out["host_usd"]}
    return replace(Prices(), source=str(path), **out)
