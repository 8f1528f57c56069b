"""Pipeline schedules as data: the ops one pipeline stage runs, in order.

A model cut into ``pp`` stages with ``v`` virtual chunks per stage has ``pp * v``
virtual stages. Chunk ``c`` of stage ``s`` is virtual stage ``c * pp + s``
(Megatron-LM's interleaved layout): a micro-batch's forward walks virtual stages
0, 1, ..., pp*v - 1 and its backward walks them back.

Representation
--------------
* :class:`Pass` is one unit of work: the forward ("F"), backward ("B") or deferred
  weight-gradient ("W") of one micro-batch through one chunk of one stage.
* :class:`Op` is what a stage runs as one step: kind "F", "B" or "W" wraps one pass;
  kind "FB" (DualPipe) runs the forward of micro-batch ``microbatch`` (chunk ``chunk``)
  together with the backward of micro-batch ``bwd_microbatch`` (chunk ``bwd_chunk``), so
  one's compute can hide the other's all-to-all. Both passes of an FB op finish when the op
  does. A "B" op with ``defer_w`` computes only the input gradient (what the previous stage
  waits for); its weight gradient runs later as the "W" op of the same (micro-batch, chunk)
  (zero-bubble split: Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024). Every
  other B computes both.

Which pipeline stage runs a chunk of a virtual stage is the schedule's placement
(:mod:`moesim.schedule.placement`): Megatron's ``c * pp + s``, or DualPipe's mirrored pair.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from moesim.errors import ConfigError

PassKind = Literal["F", "B", "W"]
OpKind = Literal["F", "B", "W", "FB"]

StageOps = tuple["Op", ...]
"""The ordered ops of one stage."""

ScheduleOps = tuple[StageOps, ...]
"""One :data:`StageOps` per pipeline stage, stage 0 first."""


@dataclass(frozen=True, order=True)
class Pass:
    """Forward, backward or weight gradient of one micro-batch through one chunk of a stage."""

    kind: PassKind
    microbatch: int
    chunk: int = 0


@dataclass(frozen=True)
class Op:
    """One step of a stage: a single pass, or (kind "FB") a forward and a backward overlapped.
    ``defer_w`` (kind "B" only): the backward computes the input gradient alone."""

    kind: OpKind
    microbatch: int
    chunk: int = 0
    bwd_microbatch: int | None = None
    bwd_chunk: int | None = None
    defer_w: bool = False

    def __post_init__(self) -> None:
        paired = self.bwd_microbatch is not None and self.bwd_chunk is not None
        if self.kind not in ("F", "B", "W", "FB"):
            raise ConfigError("schedule.op.kind", f"unknown {self.kind!r}; allowed: F, B, W, FB")
        if (self.kind == "FB") != paired:
            raise ConfigError(
                "schedule.op", "kind FB needs bwd_microbatch and bwd_chunk; F, B, W take neither"
            )
        if self.defer_w and self.kind != "B":
            raise ConfigError("schedule.op", f"only a B op defers its W, not {self.kind}")

    def passes(self) -> tuple[Pass, ...]:
        """The passes this op runs, in completion order (FB: forward, then backward)."""
        if self.kind == "FB":
            assert self.bwd_microbatch is not None and self.bwd_chunk is not None
            return (
                Pass("F", self.microbatch, self.chunk),
                Pass("B", self.bwd_microbatch, self.bwd_chunk),
            )
        return (Pass(self.kind, self.microbatch, self.chunk),)


def fwd(microbatch: int, chunk: int = 0) -> Op:
    """Forward of ``microbatch`` through ``chunk``."""
    return Op("F", microbatch, chunk)


def bwd(microbatch: int, chunk: int = 0, defer_w: bool = False) -> Op:
    """Backward of ``microbatch`` through ``chunk`` (``defer_w``: input gradient only)."""
    return Op("B", microbatch, chunk, defer_w=defer_w)


def wgt(microbatch: int, chunk: int = 0) -> Op:
    """The deferred weight gradient of ``microbatch`` through ``chunk``."""
    return Op("W", microbatch, chunk)


def fwd_bwd(f_microbatch: int, b_microbatch: int, f_chunk: int = 0, b_chunk: int = 0) -> Op:
    """Forward of ``f_microbatch`` overlapped with backward of ``b_microbatch`` (DualPipe)."""
    return Op("FB", f_microbatch, f_chunk, b_microbatch, b_chunk)


@dataclass(frozen=True)
class Post:
    """One point-to-point transfer a stage posts at a commit (DualPipe's
    ``_commit_and_wait_comm``): ``send`` the output of pass ``p`` (an F's activations, a B's
    input gradient) to the next virtual stage of its direction, or receive ``p``'s input."""

    send: bool
    p: Pass


StageCommits = tuple[tuple[Post, ...], ...]
"""One stage's commits: entry ``k`` is what it posts (and then waits for, all of it) before
its op ``k``; one more entry after its last op."""
