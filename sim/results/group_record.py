"""What straggler attribution reads of a group-mode run: the evidence part of its record.

:func:`moesim.results.attribution.attribute` is a function of this record alone; the group
runner (:mod:`moesim.runner.group_evidence`) fills it from the simulated run and its two
counterfactuals. Shapes: P phases, R EP ranks, Y replayed layers, L links at most on a route.

* the phases' names, layers and whether each is an all-to-all; per (phase, rank) when the
  rank finished it (``end_s``), and when the last rank finished each phase in the two
  counterfactuals (``balanced_ends_s``, ``uncongested_ends_s``);
* per rank its GPU's name and compute slowdown; per (layer, rank) the token copies its
  experts took (``rank_load``) and its three heaviest experts (``hot_experts``, -1 padded);
* per (all-to-all phase, rank): the bytes it received and sent (others, not itself) and the
  local rank that sent its last-arriving flow (``last_sender``);
* per all-to-all phase, for the rank that finished it last (the one attribution charges):
  its last-arriving flow's route (``last_links``: rows of ``link_names`` / ``link_tiers``,
  -1 padded) and each route link's mean utilisation while that flow ran (``last_util``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from moesim.results.columns import ColumnRecord

DTYPES = {
    "layer": ("int64", 1), "is_a2a": ("bool", 1), "end_s": ("float64", 2),
    "balanced_ends_s": ("float64", 1), "uncongested_ends_s": ("float64", 1),
    "slowdown": ("float64", 1), "rank_load": ("int64", 2), "hot_experts": ("int64", 3),
    "into_bytes": ("float64", 2), "out_bytes": ("float64", 2), "last_sender": ("int64", 2),
    "last_links": ("int64", 2), "last_util": ("float64", 2),
}


@dataclass(frozen=True, eq=False)
class GroupEvidence(ColumnRecord):
    """One group run and its counterfactuals, as attribution reads them (module docstring)."""

    KIND: ClassVar[str] = "group"
    DTYPES: ClassVar[dict[str, tuple[str, int]]] = DTYPES

    phase: tuple[str, ...]  # [P] phase name (attn, dispatch, ...)
    layer: np.ndarray  # [P]
    is_a2a: np.ndarray  # [P]
    end_s: np.ndarray  # [P, R]: the actual run
    balanced_ends_s: np.ndarray  # [P]: T[p] of the balanced-router run
    uncongested_ends_s: np.ndarray  # [P]: T[p] of the uncongested-core run
    gpu: tuple[str, ...]  # [R] GPU names
    slowdown: np.ndarray  # [R]
    rank_load: np.ndarray  # [Y, R]
    hot_experts: np.ndarray  # [Y, R, 3]
    into_bytes: np.ndarray  # [P, R] (0 outside all-to-alls)
    out_bytes: np.ndarray  # [P, R]
    last_sender: np.ndarray  # [P, R]: local rank (the rank itself when nothing arrived)
    last_links: np.ndarray  # [P, L]: of the phase's last rank
    last_util: np.ndarray  # [P, L]
    link_names: tuple[str, ...]
    link_tiers: tuple[str, ...]
