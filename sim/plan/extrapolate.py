"""A candidate's fast-mode step at its many micro-batches from two short runs (affine in m).

A design's candidates run hundreds of micro-batches per step (moe-1t at 1,792 GPUs: 146 for
dp 112, 293 for dp 56, 1,170 for dp 14), and fast mode's cost grows with them (pipeline sends
and layer passes per micro-batch). With one routing draw reused (the design's default) every
micro-batch costs the same, so a pipeline schedule reaches a periodic steady state once
every stage has started: each further micro-batch adds the same period to every stage,
and the step (and each category of its breakdown) is affine in the micro-batch count ``m``.
So the design runs the step at ``m_lo`` and ``m_hi`` micro-batches past the warm-up
(:func:`probe_counts`: ``pp + 2`` and ``2 pp + 2``; interleaved: ``2 pp`` and ``3 pp``, the
multiples of ``pp`` Megatron needs) and extends the line to ``m``.

Error bound, measured against the full fast-mode step (the steady state is not exactly
periodic: pipeline sends of neighbouring stages can meet on the fabric, and stages of unequal
layer counts settle slowly): moe-1t at 1,792 H200, tp2 pp16 ep8 dp56 (293 micro-batches)
18.3594 s vs 18.3571 s (+0.012 %); tp1 pp16 ep8 dp112 (146) +0.09 % (from 18/34: the
slope over 40..146 differs by 0.14 %). The stated bound is 0.5 % of the step, tested in
``tests/test_plan_extrapolate.py``; the fast path's own band (``moesim.results.band``) is
wider. Used only when ``m`` is more than twice ``m_hi`` (else the whole step runs), and with a
routing drawn per layer (``routing_draws`` 0) never: the micro-batches then differ.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from moesim.step.spec import StepSpec

BOUND_REL = 0.005  # stated error bound of the extrapolated step (module docstring)


def probe_counts(spec: StepSpec) -> tuple[int, int] | None:
    """(m_lo, m_hi) to run for ``spec``, or None when its whole step is as cheap."""
    pp = spec.layout.pp
    lo, hi = (2 * pp, 3 * pp) if spec.layout.vpp > 1 else (pp + 2, pp + 4)
    return (lo, hi) if spec.microbatches > 2 * hi else None


def at_microbatches(spec: StepSpec, m: int) -> StepSpec:
    return dataclasses.replace(spec, microbatches=m)


def extend(lo: dict[str, Any], hi: dict[str, Any], m_lo: int, m_hi: int, m: int
           ) -> dict[str, Any]:
    """The step record (``StepResult.to_dict``) at ``m`` micro-batches from those at
    ``m_lo`` and ``m_hi``: step, breakdown and stage makespans on their lines; throughput,
    MFU and TFLOP/s for the tokens of ``m`` in that step; the rest as at ``m_hi``."""
    frac = (m - m_hi) / (m_hi - m_lo)

    def line(a: float, b: float) -> float:
        return float(b + (b - a) * frac)

    out = dict(hi)
    out["step_time_s"] = line(lo["step_time_s"], hi["step_time_s"])
    out["breakdown_s"] = {k: line(lo["breakdown_s"].get(k, 0.0), v)
                          for k, v in hi["breakdown_s"].items()}
    out["stage_makespan_s"] = [line(a, b) for a, b in zip(lo["stage_makespan_s"],
                                                         hi["stage_makespan_s"], strict=True)]
    scale = (m / m_hi) * hi["step_time_s"] / out["step_time_s"]
    for key in ("tokens_per_s", "mfu", "tflops_per_gpu"):
        if hi.get(key) is not None:
            out[key] = float(hi[key]) * scale
    out["critical_path"] = None
    out["extrapolated_from_microbatches"] = [m_lo, m_hi]
    return out
