"""Read a scenario YAML file (safe loader) into a validated :class:`Scenario`.

The one language (``version: 2``)::

    version: 2
    name: ep8-hot-expert
    description: ...
    seed: 1
    mode: group                  # full | fast | group (moesim.scenario.spec)
    model: mixtral-8x7b          # preset name, or a mapping of model fields
    hardware: {gpu: H100, slow_gpus: {3: 1.5}}
    fabric: {preset: hgx-h100, multipath: ecmp, batch_window_rel: 0.0, pxn: false,
             params: {...}, faults: [...]}
    layout: {tp: 1, pp: 1, vpp: 1, ep: 8, etp: 1, cp: 1, dp: 8}
    # and Megatron's stage-split options (moesim.parallel.stages), e.g.
    # account_for_embedding_in_pipeline_split: true, account_for_loss_in_pipeline_split: true,
    # num_layers_in_first_pipeline_stage: 3, pipeline_model_parallel_layout: "Et*3|(tt|)*29,m|L"
    placement: {first_gpu: 0, gpu_stride: 1}     # group mode only
    router: {kind: hot, hot_experts: 1, hot_factor: 6.0}
    schedule: 1f1b               # 1f1b | interleaved | dualpipe
    workload: {global_batch: 8, micro_batch_size: 1, seq_len: 4096, layers: 4,
               dispatch_dtype: bf16, combine_dtype: bf16, ...}

Every section may be left out (its defaults); a missing fabric key takes FabricSpec's default.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO, cast

from moesim.errors import ConfigError
from moesim.hardware import get_gpu
from moesim.io import check_limit, read_yaml, short
from moesim.model import ModelConfig, get_model, model_from_dict
from moesim.parallel.layout import ParallelLayout
from moesim.router import RouterConfig
from moesim.scenario.checks import (
    check_count,
    check_fabric_params,
    check_layout_limits,
    check_seed,
    check_slowdown,
)
from moesim.scenario.fields import build_plain, check_keys, check_type
from moesim.scenario.legacy import LEGACY_NOTICE, convert, is_legacy
from moesim.scenario.schema import FabricSpec
from moesim.scenario.spec import SCENARIO_VERSION, Placement, Scenario, Workload
from moesim.topologies.deprecated import upgrade_params
from moesim.topologies.errors import TopologyError

TOP_KEYS = ["version", "name", "description", "seed", "mode", "model", "hardware", "fabric",
            "layout", "placement", "router", "schedule", "workload"]
HARDWARE_KEYS = ["gpu", "slow_gpus"]
LIMIT_OF = {"global_batch": "global_batch", "layers": "layers"}  # moesim.io limits by kind

FABRIC_KEYS = ["preset", "params", "multipath", "batch_window_rel", "pxn", "derate", "faults"]


def read_yaml_file(path: str | Path, what: str) -> object:
    """The parsed YAML of ``path`` (safe loader, alias budget, size and depth limits:
    :mod:`moesim.io.yaml_read`); any problem raises ConfigError naming ``what``."""
    return read_yaml(path, what)


def load_scenario_file(path: str | Path, notice: TextIO | None = sys.stderr) -> Scenario:
    """Parse ``path`` (YAML) into a scenario; any bad field raises ConfigError naming it.

    A file of the old languages (no ``version:``) is converted (:mod:`moesim.scenario.legacy`)
    and one line saying so goes to ``notice`` (None: silent)."""
    data = read_yaml_file(path, "scenario")
    scn = scenario_from_dict(data, default_name=Path(path).stem)
    if is_legacy(data) and notice is not None:
        print(f"moesim: {path}: {LEGACY_NOTICE}", file=notice)
    return scn


def scenario_from_dict(data: object, default_name: str = "scenario") -> Scenario:
    """Build a scenario from a mapping shaped like ``scenarios/*.yaml`` (a mapping of the old
    languages, without ``version``, is converted first, silently)."""
    if is_legacy(data):
        data = convert(cast(Mapping[str, Any], data))  # is_legacy: a Mapping
    top = check_keys(data, TOP_KEYS, "scenario")
    version = top.get("version")
    if version != SCENARIO_VERSION:
        raise ConfigError("scenario.version", f"must be {SCENARIO_VERSION}, got {version!r}")
    gpu, slow = hardware_from_dict(top.get("hardware", {}))
    return Scenario(
        name=check_type(top.get("name", default_name), str, "scenario.name"),
        description=check_type(top.get("description", ""), str, "scenario.description"),
        seed=check_seed(top.get("seed", 0), "scenario.seed"),
        mode=check_type(top.get("mode", "full"), str, "scenario.mode"),
        model=model_from_value(top.get("model", "mixtral-8x7b")),
        gpu=gpu,
        slow_gpus=slow,
        fabric=fabric_from_dict(top.get("fabric", {})),
        layout=_layout(top.get("layout", {})),
        placement=_placement(top.get("placement", {})),
        router=build_plain(RouterConfig, top.get("router", {}), "router"),
        schedule=check_type(top.get("schedule", "1f1b"), str, "scenario.schedule"),
        workload=workload_from_dict(top.get("workload", {})),
    )


def hardware_from_dict(value: object) -> tuple[str, tuple[tuple[int, float], ...]]:
    """The ``hardware:`` mapping: GPU preset name and slowed GPUs."""
    data = check_keys(value, HARDWARE_KEYS, "hardware")
    gpu = check_type(data.get("gpu", "H100"), str, "hardware.gpu")
    get_gpu(gpu)
    return gpu, slow_gpus_from_dict(data.get("slow_gpus", {}))


def workload_from_dict(value: object) -> Workload:
    """The ``workload:`` mapping -> Workload (its None-default fields may be null)."""
    data = dict(check_keys(value, [f.name for f in dataclasses.fields(Workload)], "workload"))
    optional: dict[str, Any] = {k: data.pop(k) for k in ("global_batch", "layers",
                                                          "tokens_per_rank") if k in data}
    for key, item in optional.items():
        if item is not None:
            check_count(item, LIMIT_OF.get(key, "tokens_per_rank"), f"workload.{key}")
    for key in ("micro_batch_size", "seq_len"):
        if key in data:
            check_count(data[key], key, f"workload.{key}")
    workload = dataclasses.replace(build_plain(Workload, data, "workload"), **optional)
    check_limit("microbatch_tokens", workload.micro_batch_size * workload.seq_len,
                "workload.micro_batch_size")
    return workload


def _placement(value: object) -> Placement:
    placement = build_plain(Placement, value, "placement")
    for name in ("first_gpu", "gpu_stride"):
        check_limit("gpus", getattr(placement, name), f"placement.{name}")
    return placement


def _layout(value: object) -> ParallelLayout:
    layout = build_plain(ParallelLayout, value, "layout")
    check_layout_limits(layout)
    return layout


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
    check_fabric_params(data.get("preset", FabricSpec.preset), cast(Mapping[Any, object], params))
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
