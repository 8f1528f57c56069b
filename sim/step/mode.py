"""How a step is simulated: a :class:`StepMode` strategy that :func:`run_step` takes.

A mode turns a :class:`StepSpec` into a finished :class:`StepState` and the ranks it simulated,
and says whether it can walk the critical path. Two are registered by name (:data:`MODES`):

* :class:`Full`: every rank on one fabric, every collective as flows (the exact reference);
* :class:`Fast`: one representative pipeline, cross-replica collectives timed from whole-fabric
  phase solves (:mod:`moesim.step.fast`).

The interface is small on purpose (runners and the scenario layer build on it)::

    mode = step_mode("fast")            # or Fast(routing_draws=4), or any StepMode
    state, ranks = mode.simulate(spec)
    critical = mode.critical(state)     # CriticalPath or None

Nothing here patches modules or leaves process-wide settings changed: fast mode's options are
fields of its strategy object and of its state. While a mode simulates, the cyclic garbage
collector runs less often (:func:`fewer_gc_passes`, thresholds restored on exit): SimPy events
and engine arrays are allocated by the million and freed by reference counting, so the default
triggers (700 allocations, 10, 10) mostly walk live objects. Measured on the fast 9,216-GPU
benchmark step (a throwaway script, 3 interleaved runs each, shared 2-core machine, load
5-6): default thresholds 4.10 s median, (100k, 10, 10) 3.35-3.37 s, (100k, 50, 1000) 2.82 s,
collector disabled 2.62-2.74 s.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from moesim.errors import ConfigError
from moesim.step.spec import StepSpec
from moesim.step.state import StepState

if TYPE_CHECKING:  # the critical-path walk (10 modules) is imported by full mode when it walks
    from moesim.step.critical import CriticalPath

FAST_PHASES = ("auto", "estimate", "replicas", "fabric")
"""How fast mode times what spans replicas (:class:`Fast`)."""

GC_THRESHOLDS = (100_000, 50, 1000)
"""gc thresholds while a step runs (Python's defaults: 700, 10, 10; module docstring)."""


@runtime_checkable
class StepMode(Protocol):
    """A way to simulate a step (module docstring)."""

    @property
    def name(self) -> str:
        """The mode's registered name (a class attribute of the built-in modes)."""
        ...

    def simulate(self, spec: StepSpec) -> tuple[StepState, list[int]]:
        """The finished state of ``spec`` and the ranks that were simulated."""
        ...

    def critical(self, st: StepState) -> CriticalPath | None:
        """The critical path of the finished ``st``, or None if this mode cannot walk it."""
        ...


@dataclass(frozen=True)
class Full:
    """Every rank, every collective as flows on the whole fabric."""

    name: ClassVar[str] = "full"

    def simulate(self, spec: StepSpec) -> tuple[StepState, list[int]]:
        from moesim.step.simulate import simulate_step

        with fewer_gc_passes():
            return simulate_step(spec), list(range(spec.layout.world_size))

    def critical(self, st: StepState) -> CriticalPath | None:
        from moesim.step.critical import critical_path

        return critical_path(st)


@dataclass(frozen=True)
class Fast:
    """One representative pipeline (:mod:`moesim.step.fast`). ``phases``: how what spans
    replicas is timed: ``"estimate"`` (per-group link-load bound, ring timers over the host's
    or, under ECMP, the stage's ring edges: fast), ``"replicas"`` (the estimates' all-to-alls;
    the representative's flows standing for every replica's copies and the gradient rings as
    flows beside them, each rank of a stage's tail on its own clock: :mod:`moesim.step.ringflows`;
    its cost grows with the replicas' routes), ``"fabric"`` (every group of a stage at once on
    the whole fabric with the max-min engine, each gradient-ring rank on its own clock,
    :mod:`moesim.step.phased`: sees replicas' traffic meeting on uplinks, 5-40x the estimates'
    cost) or ``"auto"`` (the default: ``"fabric"`` where a switch is oversubscribed,
    :func:`moesim.step.phased.oversubscribed`, else ``"replicas"`` where replicas' flows
    collide, :func:`moesim.step.replicas.replicas_collide` (ECMP), else ``"estimate"``).
    ``routing_draws = R`` reuses the routing of the first ``R`` MoE layers cyclically (None:
    every layer drawn, as full mode);
    ``fuse_moe`` runs each MoE layer of the representative as one timeout where nothing in it
    is a flow (:func:`moesim.step.layer_ops._fused_moe`; off: one event per op, same times);
    ``fuse_tp`` times TP / ETP rings in closed form where they have their links to themselves
    (:class:`moesim.collectives.fused_ring.FusedRing`, :func:`moesim.step.fused_layer.rings_alone`;
    off: every chunk a flow, the same times)."""

    name: ClassVar[str] = "fast"
    routing_draws: int | None = None
    fuse_moe: bool = True
    phases: str = "auto"
    fuse_tp: bool = True

    def __post_init__(self) -> None:
        draws = self.routing_draws
        if draws is not None and (isinstance(draws, bool) or not isinstance(draws, int)
                                  or draws < 1):
            raise ConfigError("fast.routing_draws", f"must be a positive integer, got {draws!r}")
        if self.phases not in FAST_PHASES:
            raise ConfigError("fast.phases", f"unknown {self.phases!r}; allowed: "
                              + ", ".join(FAST_PHASES))

    def simulate(self, spec: StepSpec) -> tuple[StepState, list[int]]:
        from moesim.step.fast import simulate_fast
        from moesim.step.phased import simulate_auto, simulate_phased

        with fewer_gc_passes():
            if self.phases == "fabric":
                return simulate_phased(spec, self.routing_draws, fuse_moe=self.fuse_moe)
            if self.phases == "auto":
                return simulate_auto(spec, self.routing_draws, fuse_moe=self.fuse_moe,
                                     fuse_tp=self.fuse_tp)
            return simulate_fast(spec, self.routing_draws, fuse_moe=self.fuse_moe,
                                 fuse_tp=self.fuse_tp, replicas=self.phases == "replicas")

    def critical(self, st: StepState) -> CriticalPath | None:
        return None  # its estimated collectives name no sender


MODES: dict[str, StepMode] = {"full": Full(), "fast": Fast()}
"""The registered modes by name (``step.mode`` in a step scenario)."""


def step_mode(mode: str | StepMode) -> StepMode:
    """``mode`` itself, or the registered mode of that name (ConfigError naming ``step.mode``)."""
    if isinstance(mode, str):
        if mode not in MODES:
            raise ConfigError("step.mode", f"unknown {mode!r}; allowed: " + ", ".join(MODES))
        return MODES[mode]
    if not isinstance(mode, StepMode):
        raise ConfigError("step.mode", f"not a step mode: {mode!r}")
    return mode


@contextmanager
def fewer_gc_passes(thresholds: tuple[int, int, int] = GC_THRESHOLDS) -> Iterator[None]:
    """Raise the collector's thresholds to at least ``thresholds`` inside the block (module
    docstring); the previous thresholds come back on exit, whatever happens."""
    old = gc.get_threshold()
    gc.set_threshold(*(max(new, was) for new, was in zip(thresholds, old, strict=False)))
    try:
        yield
    finally:
        gc.set_threshold(*old)
