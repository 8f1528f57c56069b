"""Checks of scenario fields that need more than a type: seeds, fabric sizes, slow GPUs.

Shared by the layer-stack and step scenario loaders (and the CLI's ``--seed``), so a bad
value is refused the same way, naming the field as the user wrote it, before any fabric is
built: ``fabric.params.hosts: 1000000 is over the limit of 16384 hosts``, not a hang.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping

from moesim.errors import ConfigError
from moesim.io import check_limit, short

COUNT_PARAMS = {  # fabric builder parameters that count things -> their limit
    "hosts": "hosts", "racks": "hosts", "planes": "hosts", "hosts_per_leaf": "hosts",
    "hosts_per_su": "hosts", "sus_per_pod": "hosts", "cores_per_group": "fabric_ports",
    "spines": "fabric_ports", "radix": "fabric_ports", "k": "fabric_ports",
    "gpus_per_host": "fabric_ports", "tiers": "fabric_ports",
}


def check_seed(value: object, field: str) -> int:
    """A seed: an integer >= 0 (numpy's SeedSequence takes no negative numbers)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"must be an integer >= 0, got {short(value)}")
    if value < 0:
        raise ConfigError(field, f"must be >= 0, got {value}")
    return value


def check_fabric_params(preset: object, params: Mapping[object, object],
                        field: str = "fabric.params") -> None:
    """Fabric ``params`` overrides: known to the preset's builder, counts whole and bounded."""
    allowed = _builder_params(preset)
    for key, value in params.items():
        if not isinstance(key, str):
            raise ConfigError(f"{field}.{short(key, 30)}", "parameter names are strings")
        where = f"{field}.{key[:40]}"
        if allowed is not None and key not in allowed:
            raise ConfigError(where, f"unknown parameter of preset {short(preset)}; allowed: "
                              + ", ".join(sorted(allowed)))
        if key in COUNT_PARAMS and value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(where, f"must be a positive integer, got {short(value)}")
            check_limit(COUNT_PARAMS[key], value, where)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(where, f"must be a finite number, got {value}")


def check_slow_gpus(slow_gpus: tuple[tuple[int, float], ...], n_gpus: int) -> None:
    """Every slow GPU exists among the ``n_gpus`` GPUs of the fabric (or ranks of the step)."""
    for gpu, _ in slow_gpus:
        if not 0 <= gpu < n_gpus:
            raise ConfigError(f"slow_gpus.{gpu}", f"no such GPU: the fabric has GPUs 0 .. "
                              f"{n_gpus - 1}")


def check_slowdown(gpu: object, factor: object) -> float:
    """One ``slow_gpus`` entry's factor: a finite number >= 1."""
    where = f"slow_gpus.{short(gpu, 20)}"
    if isinstance(factor, bool) or not isinstance(factor, int | float):
        raise ConfigError(where, f"must be a number >= 1, got {short(factor)}")
    if not math.isfinite(factor) or factor < 1:
        raise ConfigError(where, f"slowdown must be a finite number >= 1, got {factor}")
    return float(factor)


def _builder_params(preset: object) -> set[str] | None:
    from moesim.topologies.errors import TopologyError
    from moesim.topologies.registry import TOPOLOGIES, read_preset

    if not isinstance(preset, str):
        return None
    try:
        builder = read_preset(preset)["builder"]
    except TopologyError:
        return None  # an unknown preset is reported by the fabric builder, naming it
    return set(inspect.signature(TOPOLOGIES[builder]).parameters)


def check_count(value: object, kind: str, field: str) -> int:
    """A positive whole count within the limit of ``kind``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"must be a positive integer, got {short(value)}")
    if value < 1:
        raise ConfigError(field, f"must be a positive integer, got {value}")
    check_limit(kind, value, field)
    return value


WORLD_DEGREES = ("tp", "cp", "dp", "pp")
"""The degrees whose product is the world size (``ParallelLayout.world_size``: EP and ETP fold
into tp x cp x dp, vpp splits a stage)."""


def check_layout_limits(layout: object, field: str = "layout") -> None:
    """Each parallel degree, and the world size, within the GPU limit (the stage-split fields
    count layers: the model's layer count bounds them)."""
    from moesim.parallel.layout import DEGREES

    world = 1
    for name in DEGREES:
        value = getattr(layout, name)
        if isinstance(value, int) and not isinstance(value, bool):
            check_limit("gpus", value, f"{field}.{name}")
            if name in WORLD_DEGREES:
                world *= max(value, 1)
    check_limit("gpus", world, field)
