"""A whole training step: every micro-batch of every pipeline stage, all ranks on one fabric."""

from __future__ import annotations

from moesim.step.mode import Fast, Full, StepMode
from moesim.step.run import StepResult, run_step, simulate_step
from moesim.step.spec import DEFAULT_FABRIC, StepSpec

__all__ = ["DEFAULT_FABRIC", "Fast", "Full", "StepMode", "StepResult", "StepSpec", "run_step",
           "simulate_step"]
