"""Simulate one training step and report it: step time, tokens/s, MFU and the breakdown.

:func:`run_step` runs a :class:`moesim.step.mode.StepMode` (by name, ``"full"`` or ``"fast"``,
or a mode object such as ``Fast(routing_draws=4)``) and summarises the state it leaves
(:mod:`moesim.step.result`). In full mode ``StepResult.critical`` is the step's critical path
(:mod:`moesim.step.critical`): which stage, micro-batch, rank, expert or link set the step's
end, and by how much. Fast mode (:mod:`moesim.step.fast`) simulates one representative
pipeline instead of every rank (``StepResult.mode`` says which).
"""

from __future__ import annotations

from moesim.step.mode import StepMode, step_mode
from moesim.step.result import StepResult, summarise
from moesim.step.simulate import simulate_ranks, simulate_step
from moesim.step.spec import StepSpec

MODES = ("full", "fast")
"""Names of the registered modes (:data:`moesim.step.mode.MODES`)."""

__all__ = ["MODES", "StepResult", "run_step", "simulate_ranks", "simulate_step", "summarise"]


def run_step(spec: StepSpec, mode: str | StepMode = "full") -> StepResult:
    """Simulate ``spec`` once with ``mode`` and summarise it."""
    strategy = step_mode(mode)
    st, ranks = strategy.simulate(spec)
    return summarise(spec, st, ranks, strategy.name, strategy.critical(st))
