"""The published phases of DeepSeek-V3's 2048 x H800 training step, against moesim's stages.

DeepSeek's "Insights into DeepSeek-V3: Scaling Challenges and Reflections on Hardware for AI
Architectures" (ISCA '25; arXiv:2505.09343v2, Table 4, "Training metric comparison between
MPFT and MRFT networks") times one step of the 2048-GPU pre-training run on its multi-plane
fat tree (MPFT column): 19.926 s, made of 1F 1.13 s (forward), bubble 2.06 s, 1B 1.99 s (input
backward), 1W 0.48 s (weight backward), 1F1B 13.95 s (the overlapped forward-backward
phase), opt 0.29 s. The phases sum to 19.90 s. The same step on the single-plane multi-rail
tree (MRFT) took 19.946 s (bubble 2.03, 1F1B 14.00, opt 0.31): "within normal fluctuations and
measurement error", per the authors. The same run's report (arXiv:2412.19437) gives 180K H800
GPU-hours per trillion tokens: 19.926 s x 2048 GPUs over 15360 x 4096 tokens is 180.2K, so
the table and the GPU-hours case describe one step (:func:`gpu_hours_of_step`).

What the phases are is the table's own reading: F, B, W passes as DualPipe runs them, the
1F1B phase with each chunk's all-to-all and pipeline sends overlapped by another chunk's
compute, so a phase's time is the rank's time in those passes whatever bound them. moesim's
counterpart of "1F + 1B + 1W + 1F1B" (17.55 s) is therefore a rank's compute plus its exposed
all-to-all / TP / CP waits; of "bubble" its waits for pipeline inputs; of "opt" its exposed DP
collectives plus its optimizer step. Phase by phase, moesim runs the same schedule
(:func:`moesim.schedule.dualpipe.dualpipe`): "1F", "1B", "1W", "1F1B" are a rank's time in its
F, B, W and FB ops less their waits for pipeline inputs (``StepState.op_kind_s``). The table
names no rank, so each stage is compared.

What the phases are, from the table itself: they add up to the step (19.90 of 19.926 s), so
they are per-step totals of ONE rank's timeline, not one chunk's times (a 4-layer chunk takes
tens of ms: deepseek-ai/profile-data README, "each chunk contains 4 MoE layers"). In
deepseek-ai/DualPipe ``DualPipe.step`` (@bb214e8) rank r of pp = 16 (h = min(r, 15 - r))
runs 23 - h forward-only ops, 23 - h backward-only (input-gradient) ops, 15 - h W ops and
97 + h overlapped F&B pairs of its 120 micro-batches; on the two middle ranks (h = 7) every
F-only op falls in steps 1-2, every W-only op in step 8 and every B-only op in step 6, so
there "1F", "1B", "1W" are the same numbers whether read as op-kind totals or as the
schedule's phases. A rank's "bubble" is then the rest of its step: its waits for pipeline
inputs plus, as the step repeats, the idle after its own last op and optimizer until the
step ends (the next step's first inputs reach it no earlier): :meth:`StagePhases.from_times`
with ``step_s``. (With the table's own middle-rank chunk times, F&B 13.95 / 104 = 134 ms,
B 1.99 / 16 = 124 ms, W 0.48 / 8 = 60 ms, DualPipe's bubble formula (PP/2 - 1)(F&B + B - 3W)
gives 0.55 s: the published 2.06 s is 1.5 s more than the schedule's own bubble.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim.step.state import CATEGORIES

SOURCE = ("DeepSeek-AI, 'Insights into DeepSeek-V3' (ISCA '25, arXiv:2505.09343v2) Table 4, "
          "MPFT column")
STEP_S = 19.926
PHASES_S: dict[str, float] = {"1F": 1.13, "bubble": 2.06, "1B": 1.99, "1W": 0.48,
                              "1F1B": 13.95, "opt": 0.29}
PASS_PHASES = ("1F", "1B", "1W", "1F1B")
OP_KINDS = ("F", "B", "W", "FB")  # moesim's op kinds behind PASS_PHASES, in that order
GLOBAL_TOKENS = 15360 * 4096  # the report's batch after its ramp, 4096-token sequences
GPUS = 2048

# moesim's categories behind each compared quantity
_GROUPS: dict[str, tuple[str, ...]] = {
    "passes": ("compute", "a2a_exposed", "tp_exposed", "cp_exposed"),
    "bubble": ("bubble",),
    "opt": ("dp_exposed", "optimizer"),
}


def published() -> dict[str, float]:
    """The compared quantities as published (seconds): passes, bubble, opt, and each of
    :data:`PASS_PHASES`."""
    return {"passes": sum(PHASES_S[p] for p in PASS_PHASES), "bubble": PHASES_S["bubble"],
            "opt": PHASES_S["opt"], **{p: PHASES_S[p] for p in PASS_PHASES}}


def gpu_hours_of_step(step_s: float = STEP_S) -> float:
    """H800 GPU-hours per trillion tokens of a ``step_s`` step (180.2K for Table 4's)."""
    return step_s * GPUS / 3600 * 1e12 / GLOBAL_TOKENS


@dataclass(frozen=True)
class StagePhases:
    """moesim's counterpart of each published quantity, per pipeline stage (seconds)."""

    stage_s: dict[str, np.ndarray]  # quantity -> [stage]

    @staticmethod
    def from_times(time_s: np.ndarray, kinds_s: np.ndarray | None = None,
                   step_s: float | None = None) -> StagePhases:
        """From a [stage, category] array of one rank per stage (categories in
        :data:`moesim.step.state.CATEGORIES` order) and, if given, its [stage, op kind]
        seconds (:data:`OP_KINDS` order) for the per-phase quantities. With ``step_s`` (the
        step time) a rank that ends before the step does idles the rest of it: that idle
        is bubble, so each stage's quantities add up to the step as the table's do."""
        col = {c: i for i, c in enumerate(CATEGORIES)}
        out = {q: time_s[:, [col[c] for c in cats]].sum(axis=1) for q, cats in _GROUPS.items()}
        if step_s is not None:
            out["bubble"] = out["bubble"] + np.maximum(step_s - time_s.sum(axis=1), 0.0)
        if kinds_s is not None:
            out |= {p: kinds_s[:, i] for i, p in enumerate(PASS_PHASES)}
        return StagePhases(out)

    def errors_pct(self) -> dict[str, np.ndarray]:
        """Per quantity and stage: moesim over published, in percent."""
        pub = published()
        return {q: (v / pub[q] - 1) * 100 for q, v in self.stage_s.items()}

    def line(self) -> str:
        """One line: each quantity published vs moesim's median stage (and the stage range,
        and a middle stage: where DualPipe's op kinds and its schedule phases coincide)."""
        pub, errs = published(), self.errors_pct()
        parts = []
        for q, v in self.stage_s.items():
            e, mid = errs[q], len(v) // 2 - 1
            parts.append(f"{q} {pub[q]:.2f} s vs {float(np.median(v)):.2f} s median stage "
                         f"({float(np.median(e)):+.0f}%; stages {float(v.min()):.2f}.."
                         f"{float(v.max()):.2f}; middle {float(v[mid]):.2f}, "
                         f"{float(e[mid]):+.0f}%)")
        return f"vs {SOURCE} (step {STEP_S} s): " + "; ".join(parts)
