"""Read a scenario YAML file (safe loader) into a validated :class:`Scenario`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from moesim.errors import ConfigError
from moesim.hardware import get_gpu
from moesim.io import read_yaml, short
from moesim.model import ModelConfig, get_model, model_from_dict
from moesim.router import RouterConfig
from moesim.scenario.checks import (
    check_fabric_params,
    check_seed,
    check_slowdown,
    check_workload_limits,
)
from moesim.scenario.fields import build_plain, check_keys, check_type
from moesim.scenario.schema import FabricSpec, Scenario, WorkloadSpec
from moesim.topologies.deprecated import upgrade_params
from moesim.topologies.errors import TopologyError

TOP_KEYS = [
    "name",
    "description",
    "seed",
    "model",
    "gpu",
    "fabric",
    "workload",
    "router",
    "slow_gpus",
]
FABRIC_KEYS = ["preset", "params", "multipath", "batch_window_rel", "pxn", "derate", "faults"]


def read_yaml_file(path: str | Path, what: str) -> object:
    """The parsed YAML of ``path`` (safe loader, alias budget, size and depth limits:
    :mod:`moesim.io.yaml_read`); any problem raises ConfigError naming ``what``."""
    return read_yaml(path, what)


def load_scenario_file(path: str | Path) -> Scenario:
    """Parse ``path`` (YAML) into a scenario; any bad field raises ConfigError naming it."""
    data = read_yaml_file(path, "scenario")
    return scenario_from_dict(data, default_name=Path(path).stem)


def scenario_from_dict(data: object, default_name: str = "scenario") -> Scenario:
    """Build a scenario from a mapping shaped like the YAML files in ``scenarios/``."""
    top = check_keys(data, TOP_KEYS, "scenario")
    gpu = check_type(top.get("gpu", "H100"), str, "scenario.gpu")
    get_gpu(gpu)
    return Scenario(
        name=check_type(top.get("name", default_name), str, "scenario.name"),
        description=check_type(top.get("description", ""), str, "scenario.description"),
        seed=check_seed(top.get("seed", 0), "scenario.seed"),
        model=model_from_value(top.get("model", "mixtral-8x7b")),
        gpu=gpu,
        fabric=fabric_from_dict(top.get("fabric", {})),
        workload=_workload(top.get("workload", {})),
        router=build_plain(RouterConfig, top.get("router", {}), "router"),
        slow_gpus=slow_gpus_from_dict(top.get("slow_gpus", {})),
    )


def _workload(value: object) -> WorkloadSpec:
    workload = build_plain(WorkloadSpec, value, "workload")
    check_workload_limits(workload)
    return workload


def model_from_value(value: object) -> ModelConfig:
    """A preset name or a mapping of model fields -> ModelConfig."""
    if isinstance(value, str):
        return get_model(value)
    if isinstance(value, Mapping):
        return model_from_dict(value)
    raise ConfigError("scenario.model", "must be a preset name or a mapping of model fields")


def fabric_from_dict(value: object) -> FabricSpec:
    """The ``fabric:`` mapping of a scenario file -> FabricSpec."""
    data = check_keys(value, FABRIC_KEYS, "fabric")
    params = data.get("params", {})
    if not isinstance(params, Mapping):
        raise ConfigError("fabric.params", "must be a mapping of the preset's parameters")
    try:
        params = upgrade_params(params, "fabric.params")  # old GB/s keys -> Gbit/s, with a notice
    except TopologyError as exc:
        raise ConfigError(exc.field, exc.problem) from exc
    check_fabric_params(data.get("preset", FabricSpec.preset), params)
    faults = data.get("faults", [])
    if not isinstance(faults, list) or not all(isinstance(f, Mapping) for f in faults):
        raise ConfigError(
            "fabric.faults", "must be a list of {link: [u, v], kind: degrade|down, factor}"
        )
    plain = {k: v for k, v in data.items() if k not in ("params", "faults")}
    spec = build_plain(FabricSpec, plain, "fabric")
    return FabricSpec(
        preset=spec.preset,
        params=tuple(sorted((str(k), _freeze(v)) for k, v in params.items())),
        multipath=spec.multipath,
        batch_window_rel=spec.batch_window_rel,
        pxn=spec.pxn,
        derate=spec.derate,
        faults=tuple(tuple(sorted((str(k), _freeze(v)) for k, v in f.items())) for f in faults),
    )


def _freeze(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def slow_gpus_from_dict(value: object) -> tuple[tuple[int, float], ...]:
    """``{gpu: factor}`` -> sorted (gpu, factor) pairs."""
    if not isinstance(value, Mapping):
        raise ConfigError(
            "scenario.slow_gpus", "must map GPU index to slowdown factor, e.g. {3: 1.5}"
        )
    out = []
    for gpu, factor in value.items():
        if isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0:
            raise ConfigError(f"slow_gpus.{short(gpu, 20)}", "must be a GPU index >= 0")
        out.append((gpu, check_slowdown(gpu, factor)))
    return tuple(sorted(out))
