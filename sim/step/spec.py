"""What one simulated training step is: model, GPU, fabric, parallel layout, schedule, batch.

Version-1 scope (checked here, so a spec that validates is one :func:`sim.step.run_step` can
simulate): ``tp == cp == etp == 1`` (TP/sequence-parallel and context-parallel collectives are
not simulated yet); every rank of the layout runs on GPU ``rank`` of the fabric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from sim.errors import ConfigError
from sim.layout import ParallelLayout
from sim.model import ModelConfig
from sim.router import RouterConfig
from sim.scenario.schema import FabricSpec
from sim.schedule import build_schedule
from sim.schedule.ops import ScheduleOps
from sim.workload.costs import WIRE_DTYPES

DEFAULT_FABRIC = FabricSpec(preset="hgx-h100", multipath="dmodk", batch_window_rel=0.02)
"""D-mod-K routing (InfiniBand fat trees route by destination) and 2% finish batching, as the
shipped scenarios use."""

UNSUPPORTED_DEGREES = ("tp", "cp", "etp")


@dataclass(frozen=True)
class StepSpec:
    """One training step of ``model`` on ``fabric`` under ``layout`` and ``schedule``.

    ``microbatches`` per pipeline (per DP replica), each of ``micro_batch_size`` sequences of
    ``seq_len`` tokens. ``layout.vpp`` is the schedule's virtual-stage count (interleaved).
    """

    model: ModelConfig
    layout: ParallelLayout
    gpu: str = "H100"
    fabric: FabricSpec = DEFAULT_FABRIC
    schedule: str = "1f1b"
    microbatches: int = 1
    micro_batch_size: int = 1
    seq_len: int = 4096
    router: RouterConfig = field(default_factory=RouterConfig)
    dispatch_dtype: str = "fp8"
    combine_dtype: str = "bf16"
    dedup: bool = True
    lm_head: bool = True  # simulate the LM-head GEMMs on the last virtual stage
    dp_overlap: bool = True  # reduce-scatter each layer's grads after its last backward
    fb_overlap: bool = True  # FB ops (dualpipe) overlap one pass's a2a with the other's compute
    slow_gpus: tuple[tuple[int, float], ...] = ()  # (rank = GPU, factor >= 1) on every kernel
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("microbatches", "micro_batch_size", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"step.{name}", f"must be a positive integer, got {value!r}")
        for name in ("dispatch_dtype", "combine_dtype"):
            if getattr(self, name) not in WIRE_DTYPES:
                raise ConfigError(f"step.{name}", f"unknown {getattr(self, name)!r}; allowed: "
                                  + ", ".join(WIRE_DTYPES))
        for degree in UNSUPPORTED_DEGREES:
            if getattr(self.layout, degree) != 1:
                raise ConfigError(f"layout.{degree}", f"{degree} > 1 not simulated yet; "
                                  "allowed: 1")
        self.layout.validate(self.model)
        for gpu, factor in self.slow_gpus:
            if not 0 <= gpu < self.layout.world_size:
                raise ConfigError(f"slow_gpus.{gpu}", "must be a rank in [0, "
                                  f"{self.layout.world_size})")
            if not factor >= 1:
                raise ConfigError(f"slow_gpus.{gpu}", f"slowdown must be >= 1, got {factor}")
        self.ops()  # schedule constraints (ConfigError from sim.schedule)

    @property
    def tokens_per_microbatch(self) -> int:
        """Tokens one rank holds per micro-batch (tp = cp = 1)."""
        return self.micro_batch_size * self.seq_len

    @property
    def global_tokens(self) -> int:
        """Tokens of the whole step: every DP replica's micro-batches."""
        return self.layout.dp * self.microbatches * self.tokens_per_microbatch

    def slowdown(self) -> np.ndarray:
        """Per-rank factor on every kernel's time (the roofline's ``slowdown`` is linear)."""
        factor = np.ones(self.layout.world_size)
        for gpu, f in self.slow_gpus:
            factor[gpu] = f
        return factor

    def ops(self) -> ScheduleOps:
        """Ordered ops of each pipeline stage."""
        return build_schedule(self.schedule, self.layout.pp, self.microbatches, self.layout.vpp)

    def check_fabric(self, n_gpus: int) -> None:
        """ConfigError unless the fabric has a GPU for every rank."""
        if self.layout.world_size > n_gpus:
            raise ConfigError("layout", f"world size {self.layout.world_size} needs more GPUs "
                              f"than fabric {self.fabric.preset!r} has ({n_gpus})")
