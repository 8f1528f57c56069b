"""What one simulated step produced (:class:`StepResult`) and how it is summarised.

The breakdown is that of the rank that finished last (the step's end): its compute busy time,
its waits in all-to-alls (``a2a_exposed``), for pipeline inputs (``bubble``), in the DP
collectives (``dp_exposed``), in TP and CP collectives (``tp_exposed``, ``cp_exposed``), and
its optimizer time. The categories partition that rank's time, so they sum to ``step_time_s``.

MFU = model FLOPs of the step (3 x forward, :func:`moesim.model.training_flops`, no MTP,
no recomputation) / (step time x GPUs x dense BF16 peak).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from moesim.model import training_flops
from moesim.step.spec import StepSpec
from moesim.step.state import CATEGORIES, StepState

if TYPE_CHECKING:  # full mode's critical path: its walk is imported only where one is walked
    from moesim.step.critical import CriticalPath


@dataclass(frozen=True)
class StepResult:
    """What one simulated step produced."""

    step_time_s: float
    tokens_per_s: float
    mfu: float
    tflops_per_gpu: float
    breakdown_s: MappingProxyType[str, float]
    last_rank: int
    stage_makespan_s: tuple[float, ...]
    engine: MappingProxyType[str, float]
    mode: str = "full"  # "full": every rank simulated; "fast": one representative pipeline
    critical: CriticalPath | None = None  # full mode only (fast mode's estimates name no sender)
    top_link: str = ""  # the link the last rank waited on most (full: on the critical path)

    def to_dict(self) -> dict[str, Any]:
        """Plain types, for JSON."""
        return {
            "step_time_s": self.step_time_s,
            "tokens_per_s": self.tokens_per_s,
            "mfu": self.mfu,
            "tflops_per_gpu": self.tflops_per_gpu,
            "breakdown_s": dict(self.breakdown_s),
            "last_rank": self.last_rank,
            "stage_makespan_s": list(self.stage_makespan_s),
            "engine": dict(self.engine),
            "mode": self.mode,
            "critical_path": self.critical.to_dict() if self.critical else None,
            "top_link": self.top_link,
        }


def summarise(spec: StepSpec, st: StepState, ranks: Iterable[int], mode: str,
              critical: CriticalPath | None = None) -> StepResult:
    """The step's result from the simulated ``ranks`` of ``st`` (all of them in full mode),
    made by mode ``mode`` (its name) with critical path ``critical``."""
    sim = np.asarray(list(ranks), dtype=np.int64)
    step_s = float(st.end_s[sim].max())
    last = int(sim[int(st.end_s[sim].argmax())])
    lay = spec.layout
    flops = training_flops(spec.model, spec.global_tokens, spec.seq_len, include_mtp=False)
    peak = st.plan.gpu.peak_tflops("bf16") * 1e12
    tflops = flops / step_s / lay.world_size / 1e12
    last_op = np.full(lay.world_size, -np.inf)
    last_op[sim] = st.last_op_s[sim]
    per_stage = last_op.reshape(lay.pp, -1).max(axis=1)
    return StepResult(
        step_time_s=step_s,
        tokens_per_s=spec.global_tokens / step_s,
        mfu=tflops * 1e12 / peak,
        tflops_per_gpu=tflops,
        breakdown_s=MappingProxyType(
            {c: float(st.time_s[last, i]) for i, c in enumerate(CATEGORIES)}
        ),
        last_rank=last,
        stage_makespan_s=tuple(float(t) for t in per_stage),
        engine=MappingProxyType({
            "flows": float(st.net.flows.n),
            "solves": float(st.net.solves),
            "batch_window_rel": spec.fabric.batch_window_rel,
        }),
        mode=mode,
        critical=critical,
        top_link=_top_link(critical) if critical else st.top_link(last),
    )


def _top_link(critical: CriticalPath) -> str:
    """The link with the most transfer time on the critical path ("" if none)."""
    links = [c for c in critical.contributors if c.kind == "link"]
    return max(links, key=lambda c: c.time_s).link if links else ""
