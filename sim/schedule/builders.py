"""The shipped schedules: plain functions ``(pp, m, v) -> ops per stage`` and their input checks.

Each builder assumes its check passed. Sources of the orderings:

* 1F1B (PipeDream-Flush): Narayanan et al., "Memory-Efficient Pipeline-Parallel
  DNN Training", ICML 2021; Megatron-LM ``forward_backward_pipelining_without_interleaving``:
  stage ``s`` runs ``min(pp - s - 1, m)`` warm-up forwards, then alternates one
  forward and one backward, then drains the remaining backwards.
* Interleaved 1F1B: Narayanan et al., "Efficient Large-Scale Language Model Training
  on GPU Clusters Using Megatron-LM", SC 2021; Megatron-LM
  ``forward_backward_pipelining_with_interleaving``: virtual micro-batch ``k`` of a
  stage is chunk ``(k mod pp*v) // pp`` of micro-batch ``(k // (pp*v)) * pp + k mod pp``
  (backwards walk the chunks in reverse); warm-up is ``(pp - s - 1) * 2 + (v - 1) * pp``.
  Megatron requires ``m % pp == 0``.
* DualPipe-style: a simplification of DeepSeek-V3's DualPipe (DeepSeek-AI, "DeepSeek-V3
  Technical Report", 2024, sec. 3.2.1). Kept: the steady state pairs one micro-batch's
  forward with an earlier micro-batch's backward as one FB op, so their compute and
  all-to-all overlap. Not modelled: DualPipe feeds micro-batches from both ends of
  the pipeline (each rank holds two mirrored chunks and twice the parameters), which
  also shrinks the bubble, and its finer split of backward into input- and
  weight-gradient parts. Stage ``s`` runs ``min(pp - s, m)`` warm-up forwards (one
  more than 1F1B, so even the last stage has an earlier backward to pair with), then
  FB(i + warm-up, i), then drains the remaining backwards. An FB op can start only
  when both inputs are there, so without overlap this order is slower than 1F1B for
  pp > 1 (pp=4, m=8, f=3, b=6: 117 s vs 99 s); with the all-to-all hidden
  (FB = 6 s instead of 9 s) it is faster (90 s). With bidirectional feeding the real
  DualPipe does not pay that price.
"""

from __future__ import annotations

from collections.abc import Callable

from moesim.errors import ConfigError
from moesim.schedule.ops import Op, ScheduleOps, StageOps, bwd, fwd, fwd_bwd


def check_one_chunk(name: str, pp: int, m: int, v: int) -> None:
    """Schedules without virtual stages need ``v == 1``."""
    if v != 1:
        raise ConfigError("schedule.virtual_stages", f"{name} needs 1 chunk per stage, got {v}")


def check_interleaved(name: str, pp: int, m: int, v: int) -> None:
    """Megatron's rule: ``v > 1`` and the micro-batch count a multiple of ``pp``."""
    if v < 2:
        raise ConfigError("schedule.virtual_stages", f"{name} needs at least 2 chunks, got {v}")
    if m % pp != 0:
        raise ConfigError(
            "schedule.microbatches",
            f"{name} needs a multiple of pp={pp} micro-batches, got {m}",
        )


def _one_f_one_b_order(total: int, warmup: int, f: Callable[[int], Op],
                       b: Callable[[int], Op]) -> StageOps:
    """One stage's 1F1B order over its ``total`` forwards ``f(k)`` and backwards ``b(k)``:
    ``warmup`` forwards, then forward/backward pairs, then the remaining backwards."""
    ops: list[Op] = [f(k) for k in range(warmup)]
    for i in range(total - warmup):
        ops += [f(i + warmup), b(i)]
    ops += [b(k) for k in range(total - warmup, total)]
    return tuple(ops)


def _one_f_one_b_stage(stage: int, pp: int, m: int) -> StageOps:
    return _one_f_one_b_order(m, min(pp - stage - 1, m), fwd, bwd)


def one_f_one_b(pp: int, m: int, v: int) -> ScheduleOps:
    """1F1B (PipeDream-Flush), one chunk per stage."""
    return tuple(_one_f_one_b_stage(s, pp, m) for s in range(pp))


def _virtual(k: int, pp: int, v: int, forward: bool) -> tuple[int, int]:
    """(micro-batch, chunk) of a stage's ``k``-th forward (or backward) in Megatron's order."""
    group = pp * v
    chunk = (k % group) // pp
    microbatch = (k // group) * pp + k % pp
    return microbatch, chunk if forward else v - 1 - chunk


def _interleaved_stage(stage: int, pp: int, m: int, v: int) -> StageOps:
    total = m * v
    warmup = min((pp - stage - 1) * 2 + (v - 1) * pp, total)

    def f(k: int) -> Op:
        return fwd(*_virtual(k, pp, v, True))

    def b(k: int) -> Op:
        return bwd(*_virtual(k, pp, v, False))

    return _one_f_one_b_order(total, warmup, f, b)


def interleaved(pp: int, m: int, v: int) -> ScheduleOps:
    """Interleaved 1F1B with ``v`` virtual chunks per stage (Megatron-LM)."""
    return tuple(_interleaved_stage(s, pp, m, v) for s in range(pp))


def _dualpipe_stage(stage: int, pp: int, m: int) -> StageOps:
    warmup = min(pp - stage, m)
    ops: list[Op] = [fwd(i) for i in range(warmup)]
    ops += [fwd_bwd(i + warmup, i) for i in range(m - warmup)]
    ops += [bwd(i) for i in range(m - warmup, m)]
    return tuple(ops)


def dualpipe(pp: int, m: int, v: int) -> ScheduleOps:
    """DualPipe-style 1F1B whose steady state overlaps F(i + warm-up) with B(i)."""
    return tuple(_dualpipe_stage(s, pp, m) for s in range(pp))
