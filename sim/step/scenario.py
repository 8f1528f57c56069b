"""A step scenario file (YAML, safe loader) -> a validated :class:`StepScenario`.

The file names the model, GPU and fabric as the layer-stack scenarios do (same ``fabric:``
mapping), plus the parallel layout (Megatron names), the pipeline schedule and the batch::

    name: mixtral-64xh100
    model: mixtral-8x7b
    gpu: H100
    fabric: {preset: rail-h800-64, params: {gpu: H100}, multipath: dmodk}
    layout: {tp: 1, pp: 4, vpp: 8, ep: 8, dp: 16}
    schedule: interleaved
    global_batch: 256        # sequences per step (Megatron --global-batch-size)
    micro_batch_size: 1      # Megatron --micro-batch-size
    seq_len: 4096
    mode: full               # full: every rank; fast: one representative pipeline

``global_batch`` must split into whole micro-batches per data-parallel replica:
micro-batches per pipeline = global_batch / (dp x micro_batch_size), as Megatron computes
its number of micro-batches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from moesim.errors import ConfigError
from moesim.hardware import get_gpu
from moesim.io import check_limit
from moesim.parallel.layout import ParallelLayout
from moesim.router import RouterConfig
from moesim.scenario.checks import check_count, check_layout_limits, check_seed
from moesim.scenario.fields import build_plain, check_keys, check_type
from moesim.scenario.load import (
    fabric_from_dict,
    model_from_value,
    read_yaml_file,
    slow_gpus_from_dict,
)
from moesim.step.run import MODES
from moesim.step.spec import DEFAULT_FABRIC, StepSpec

TOP_KEYS = [
    "name", "description", "seed", "model", "gpu", "fabric", "layout", "schedule",
    "global_batch", "micro_batch_size", "seq_len", "router", "dispatch_dtype",
    "combine_dtype", "grad_reduce_dtype", "compute_dtype", "dispatcher", "dedup", "lm_head",
    "dp_overlap", "fb_overlap", "slow_gpus", "mode", "recompute",
]
FLAGS = ("dedup", "lm_head", "dp_overlap", "fb_overlap")


@dataclass(frozen=True)
class StepScenario:
    """A named step to simulate, and whether to run every rank or one pipeline."""

    name: str
    spec: StepSpec
    mode: str = "full"
    description: str = ""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError("mode", f"unknown {self.mode!r}; allowed: {', '.join(MODES)}")


def load_step_file(path: str | Path) -> StepScenario:
    """Parse ``path`` into a step scenario; a bad field raises ConfigError naming it."""
    data = read_yaml_file(path, "step scenario")
    return step_from_dict(data, default_name=Path(path).stem)


def step_from_dict(data: object, default_name: str = "step") -> StepScenario:
    """Build a step scenario from a mapping shaped like ``scenarios/steps/*.yaml``."""
    top = check_keys(data, TOP_KEYS, "step")
    gpu = check_type(top.get("gpu", "H100"), str, "step.gpu")
    get_gpu(gpu)
    layout = build_plain(ParallelLayout, top.get("layout", {}), "layout")
    check_layout_limits(layout)
    mbs = check_count(top.get("micro_batch_size", 1), "micro_batch_size", "step.micro_batch_size")
    seq_len = check_count(top.get("seq_len", 4096), "seq_len", "step.seq_len")
    check_limit("microbatch_tokens", mbs * seq_len, "step.micro_batch_size")
    try:
        spec = _spec(top, layout, gpu, mbs)
    except ConfigError as exc:
        if exc.field != "schedule.microbatches":
            raise
        raise ConfigError("step.global_batch", f"{exc.problem} (micro-batches per pipeline = "
                          "global_batch / (dp x micro_batch_size))") from None
    return StepScenario(
        name=check_type(top.get("name", default_name), str, "step.name"),
        spec=spec,
        mode=check_type(top.get("mode", "full"), str, "step.mode"),
        description=check_type(top.get("description", ""), str, "step.description"),
    )


def _spec(top: Mapping[str, object], layout: ParallelLayout, gpu: str, mbs: int) -> StepSpec:
    return StepSpec(
        model=model_from_value(top.get("model", "mixtral-8x7b")),
        layout=layout,
        gpu=gpu,
        fabric=fabric_from_dict(top["fabric"]) if "fabric" in top else DEFAULT_FABRIC,
        schedule=check_type(top.get("schedule", "1f1b"), str, "step.schedule"),
        microbatches=_microbatches(top.get("global_batch", layout.dp * mbs), layout.dp, mbs),
        micro_batch_size=mbs,
        seq_len=check_type(top.get("seq_len", 4096), int, "step.seq_len"),
        router=build_plain(RouterConfig, top.get("router", {}), "router"),
        dispatch_dtype=check_type(top.get("dispatch_dtype", "fp8"), str, "step.dispatch_dtype"),
        combine_dtype=check_type(top.get("combine_dtype", "bf16"), str, "step.combine_dtype"),
        grad_reduce_dtype=check_type(top.get("grad_reduce_dtype", "fp32"), str,
                                     "step.grad_reduce_dtype"),
        compute_dtype=check_type(top.get("compute_dtype", "bf16"), str, "step.compute_dtype"),
        dispatcher=check_type(top.get("dispatcher", "alltoall"), str, "step.dispatcher"),
        slow_gpus=slow_gpus_from_dict(top.get("slow_gpus", {})),
        seed=check_seed(top.get("seed", 0), "step.seed"),
        recompute=check_type(top.get("recompute", "auto"), str, "step.recompute"),
        **_flags(top),
    )


def _microbatches(global_batch: object, dp: int, micro_batch_size: int) -> int:
    """Micro-batches per pipeline: global_batch / (dp x micro_batch_size), whole."""
    gbs = check_type(global_batch, int, "step.global_batch")
    check_limit("global_batch", gbs, "step.global_batch")
    per_step = dp * micro_batch_size
    if gbs < 1 or gbs % per_step:
        raise ConfigError("step.global_batch", f"must be a positive multiple of dp x "
                          f"micro_batch_size = {per_step}, got {gbs}")
    check_limit("microbatches", gbs // per_step, "step.global_batch")
    return gbs // per_step


def _flags(top: Mapping[str, object]) -> dict[str, bool]:
    return {k: check_type(top[k], bool, f"step.{k}") for k in FLAGS if k in top}
