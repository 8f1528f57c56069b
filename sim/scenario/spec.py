"""The one scenario: model + hardware + fabric + layout + router + schedule + workload.

A scenario says *what* to simulate; ``mode`` says with which simulator:

* ``full``: every rank of the layout runs its pipeline stage's schedule on one fabric
  (:func:`moesim.step.run_step`), with the step's critical path;
* ``fast``: one representative pipeline with real flows, the rest bounded
  (:mod:`moesim.step.fast`);
* ``group``: one EP group's MoE layers replayed (:mod:`moesim.runner.group`), plus the two
  counterfactuals (balanced router, uncongested core) that straggler attribution divides the
  step by. Only a layout that *is* one EP group (``pp = tp = cp = etp = 1``, ``dp = ep``) and
  one micro-batch runs in this mode; it simulates ``workload.layers`` MoE layers (attention,
  router, dispatch, experts, combine, and the backward with the all-to-alls reversed), with no
  embedding, LM head, DP gradient reduction or optimizer.

The one-EP-group study is thus the same scenario as a whole step with ``pp = 1``, ``dp = ep``
and a few layers; the same file runs in ``full`` mode too (the whole step of that cut model,
its DP tail and LM head included; :func:`moesim.runner.specs.step_spec` builds its input).

>>> from moesim.model import get_model
>>> s = Scenario(name="demo", model=get_model("mixtral-8x7b"), mode="group",
...              layout=ParallelLayout(ep=8, dp=8), workload=Workload(layers=2))
>>> (s.group_spec().ep, s.group_spec().workload.layers, s.cut_model().num_layers)
(8, 2, 2)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from moesim.errors import ConfigError
from moesim.io import check_limit
from moesim.model import ModelConfig
from moesim.parallel.layout import ParallelLayout
from moesim.scenario.schema import GroupSpec, GroupWorkload, Placement, Setting
from moesim.workload.costs import WIRE_DTYPES
from moesim.workload.dispatchers import get_dispatcher

SCENARIO_VERSION = 2
MODES = ("full", "fast", "group")
GROUP_ONLY_LAYOUT = ("tp", "pp", "vpp", "cp", "etp")


@dataclass(frozen=True)
class Workload:
    """The batch and what moves on the wire.

    ``global_batch`` sequences per step (Megatron ``--global-batch-size``; None: one
    micro-batch per pipeline), ``micro_batch_size`` sequences of ``seq_len`` tokens per
    micro-batch. ``layers``: simulate only the first N MoE layers of the model (None: every
    layer); ``backward``: group mode may leave the backward out (the whole step always has it);
    ``tokens_per_rank``: group mode only, tokens per EP rank when not ``micro_batch_size x
    seq_len`` (a part of a sequence; the whole step derives them from the layout).
    """

    global_batch: int | None = None
    micro_batch_size: int = 1
    seq_len: int = 4096
    layers: int | None = None
    dispatch_dtype: str = "fp8"
    combine_dtype: str = "bf16"
    dedup: bool = True
    backward: bool = True
    grad_reduce_dtype: str = "fp32"
    compute_dtype: str = "bf16"
    dispatcher: str = "alltoall"
    lm_head: bool = True
    dp_overlap: bool = True
    fb_overlap: bool = True
    recompute: str = "auto"  # activation recompute (moesim.step.spec RECOMPUTE): auto | none | ...
    tokens_per_rank: int | None = None
    mtp_layers: int = 0  # MTP modules trained (moesim.step.mtp; <= the model's)

    def __post_init__(self) -> None:
        for name in ("micro_batch_size", "seq_len", "global_batch", "layers", "tokens_per_rank"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ConfigError(f"workload.{name}", f"must be a positive integer, got "
                                  f"{value!r}")
        if isinstance(self.mtp_layers, bool) or not isinstance(self.mtp_layers, int) or (
                self.mtp_layers < 0):
            raise ConfigError("workload.mtp_layers", f"must be a non-negative integer, got "
                              f"{self.mtp_layers!r}")
        for name in ("dispatch_dtype", "combine_dtype"):
            if getattr(self, name) not in WIRE_DTYPES:
                raise ConfigError(f"workload.{name}", f"unknown {getattr(self, name)!r}; "
                                  f"allowed: {', '.join(WIRE_DTYPES)}")
        get_dispatcher(self.dispatcher, "workload.dispatcher")

    def microbatches(self, dp: int) -> int:
        """Micro-batches per pipeline: global_batch / (dp x micro_batch_size), whole."""
        per_step = dp * self.micro_batch_size
        gbs = per_step if self.global_batch is None else self.global_batch
        if gbs < 1 or gbs % per_step:
            raise ConfigError("workload.global_batch", f"must be a positive multiple of dp x "
                              f"micro_batch_size = {per_step}, got {gbs}")
        check_limit("microbatches", gbs // per_step, "workload.global_batch")
        return gbs // per_step


@dataclass(frozen=True)
class Scenario(Setting):
    """One scenario of the one language (see the module docstring): the setting (name, model,
    GPU, fabric, router, slowed GPUs, seed, description) and how it is laid out and run."""

    layout: ParallelLayout = field(default_factory=ParallelLayout)
    schedule: str = "1f1b"
    workload: Workload = field(default_factory=Workload)
    placement: Placement = field(default_factory=Placement)
    mode: str = "full"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError("mode", f"unknown {self.mode!r}; allowed: {', '.join(MODES)}")
        if self.mode == "group":
            self.group_spec()  # full and fast: moesim.runner.specs.step_spec checks the rest

    def cut_model(self) -> ModelConfig:
        """The model, cut to ``workload.layers`` MoE layers when set."""
        n = self.workload.layers
        if n is None:
            return self.model
        if not 1 <= n <= self.model.n_moe_layers:
            raise ConfigError("workload.layers", f"must be in [1, {self.model.n_moe_layers}] "
                              f"(model {self.model.name}'s MoE layers), got {n}")
        return dataclasses.replace(self.model, num_layers=n, moe_layers=(True,) * n)

    def group_spec(self) -> GroupSpec:
        """The one EP group's layer stack of this scenario (group mode)."""
        lay, wl = self.layout, self.workload
        for name in GROUP_ONLY_LAYOUT:
            if getattr(lay, name) != 1:
                raise ConfigError(f"layout.{name}", "mode group simulates one EP group: "
                                  f"{name} must be 1 (use mode full or fast)")
        if lay.dp != lay.ep:
            raise ConfigError("layout.dp", f"mode group simulates one EP group: dp must equal "
                              f"ep = {lay.ep}, got {lay.dp}")
        if wl.microbatches(lay.dp) != 1:
            raise ConfigError("workload.global_batch", "mode group replays one micro-batch: "
                              "leave it out or set dp x micro_batch_size")
        for name, allowed in (("compute_dtype", ("bf16",)), ("dispatcher", ("alltoall",)),
                              ("recompute", ("auto", "none")), ("mtp_layers", (0,))):
            if getattr(wl, name) not in allowed:
                raise ConfigError(f"workload.{name}", f"mode group models "
                                  f"{' or '.join(map(str, allowed))} "
                                  "only (use mode full or fast)")
        if self.schedule != "1f1b":
            raise ConfigError("schedule", "mode group replays the layers in order: 1f1b")
        return GroupSpec(
            name=self.name, model=self.model, gpu=self.gpu, fabric=self.fabric, ep=lay.ep,
            workload=GroupWorkload(
                layers=self.model.n_moe_layers if wl.layers is None else wl.layers,
                tokens_per_rank=wl.tokens_per_rank or wl.micro_batch_size * wl.seq_len,
                seq_len=wl.seq_len, dispatch_dtype=wl.dispatch_dtype,
                combine_dtype=wl.combine_dtype, dedup=wl.dedup, backward=wl.backward),
            placement=self.placement, router=self.router, slow_gpus=self.slow_gpus,
            seed=self.seed, description=self.description,
        )
