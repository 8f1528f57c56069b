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
* DualPipe: DeepSeek-AI, "DeepSeek-V3 Technical Report" (arXiv:2412.19437), sec. 3.2.1,
  Fig. 5 and Table 2; the per-rank order is that of deepseek-ai/DualPipe
  ``dualpipe/dualpipe.py`` (``DualPipe.step``, commit bb214e8), read and re-stated here.
  ``pp`` ranks (even), each holding two mirrored chunks (:mod:`moesim.schedule.placement`,
  ``mirrored``): chunk 0 carries micro-batches ``0 .. m/2 - 1`` from stage 0 forward, chunk 1
  carries ``m/2 .. m - 1`` from stage ``pp - 1`` (``m`` even, ``m >= 2 pp``). Rank ``r``
  with ``h = min(r, pp - 1 - r)``, ``H = pp / 2``; its "near" chunk is the direction it
  sits early in (chunk 0 on the first half of the ranks, chunk 1 on the second), "far" the
  other. In order: (1) ``2 (H - h - 1)`` near forwards; (2) ``h + 1`` pairs near F, far F;
  (3) ``H - h - 1`` times far B (input gradient only), one deferred W, far F; (4)
  ``m/2 - pp + h + 1`` times FB(near F, far B) and FB(far F, near B) (the middle ranks run
  their first near F and far B apart, not overlapped, as the source does); (5)
  ``H - h - 1`` times far B, FB(far F, near B); (6) ``h + 1`` pairs far B, near B, the
  second half of them deferring their W (from the ``(h+1)//2``-th pair: from its far B
  when ``h`` is odd, from its near B when even); (7) ``H - h - 1`` times W, near B (deferred);
  (8) ``h + 1`` W. Deferred W run first-in first-out. Every backward outside (3), (6), (7),
  and every backward inside an FB op, computes its weight gradient at once. The builder
  (:mod:`moesim.schedule.dualpipe`) also gives the point-to-point transfers each rank posts
  together before each op, as the source batches them.
"""

from __future__ import annotations

from collections.abc import Callable

from moesim.errors import ConfigError
from moesim.schedule.ops import Op, ScheduleOps, StageOps, bwd, fwd


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


def check_dualpipe(name: str, pp: int, m: int, v: int) -> None:
    """DualPipe's own asserts: an even number of ranks, an even number of micro-batches, at
    least two per rank; one layout chunk per stage (the schedule makes the two mirrored)."""
    check_one_chunk(name, pp, m, v)
    if pp % 2:
        raise ConfigError("schedule.pp", f"{name} needs an even pp, got {pp}")
    if m % 2 or m < 2 * pp:
        raise ConfigError("schedule.microbatches", f"{name} needs an even number of "
                          f"micro-batches, at least 2 * pp = {2 * pp}, got {m}")
