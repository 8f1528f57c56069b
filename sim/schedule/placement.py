"""Which pipeline stage runs each (virtual stage, chunk): the schedule's chunk -> rank map.

A micro-batch walks virtual stages ``0 .. n_virtual - 1`` forward and back. A stage's ops name
a chunk; the placement says which virtual stage that chunk is on that stage, and who runs the
next one.

* ``megatron`` (1F1B, interleaved; Megatron-LM's interleaved layout): chunk ``c`` of stage
  ``s`` is virtual stage ``c * pp + s``; ``pp * v`` virtual stages, each held once.
* ``mirrored`` (DualPipe; DeepSeek-V3 Technical Report, arXiv:2412.19437, sec. 3.2.1 and
  Fig. 5; deepseek-ai/DualPipe ``examples/example_dualpipe.py``: rank ``r`` holds model stages
  ``r`` and ``pp - 1 - r``): the model is cut into ``pp`` virtual stages, each held twice.
  Chunk 0 is the forward direction (micro-batches enter at stage 0, virtual stage ``s`` on
  stage ``s``), chunk 1 the reverse direction (they enter at stage ``pp - 1``: virtual stage
  ``s`` on stage ``pp - 1 - s``). A micro-batch stays in its chunk (direction) throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from moesim.errors import ConfigError

PlacementKind = Literal["megatron", "mirrored"]


@dataclass(frozen=True)
class Placement:
    """The chunk -> rank map of a schedule with ``pp`` stages and ``v`` chunks per stage."""

    kind: PlacementKind
    pp: int
    v: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("megatron", "mirrored"):
            raise ConfigError("schedule.placement", f"unknown {self.kind!r}; allowed: "
                              "megatron, mirrored")
        if self.kind == "mirrored" and self.v != 2:
            raise ConfigError("schedule.placement", f"mirrored holds 2 chunks, got {self.v}")

    @property
    def n_virtual(self) -> int:
        """Distinct virtual stages (model pieces) of the pipeline."""
        return self.pp if self.kind == "mirrored" else self.pp * self.v

    @property
    def copies(self) -> int:
        """How many stages hold each virtual stage's parameters (mirrored: 2)."""
        return 2 if self.kind == "mirrored" else 1

    def vstage(self, stage: int, chunk: int) -> int:
        """The virtual stage that ``chunk`` of ``stage`` runs."""
        if self.kind == "mirrored":
            return stage if chunk == 0 else self.pp - 1 - stage
        return chunk * self.pp + stage

    def owner(self, vstage: int, chunk: int) -> tuple[int, int]:
        """(stage, chunk) running ``vstage`` for a micro-batch whose pass on the
        neighbouring virtual stage was in ``chunk``."""
        if self.kind == "mirrored":
            return (vstage if chunk == 0 else self.pp - 1 - vstage), chunk
        return vstage % self.pp, vstage // self.pp

    def vstages_of(self, stage: int) -> tuple[int, ...]:
        """The virtual stages ``stage`` holds, chunk 0 first."""
        return tuple(self.vstage(stage, c) for c in range(self.v))
