"""What the group run's trace and saved timeline read besides its evidence: when each rank
started each phase, and the links' load over time.

Filled by the group runner when asked (:func:`moesim.runner.group_evidence.group_timeline`:
``moesim run --trace`` / ``--save-run``, the gallery); the Chrome trace
(:mod:`moesim.results.trace`) and the saved run (:mod:`moesim.results.timeline`) are functions
of the result record, its :class:`~moesim.results.group_record.GroupEvidence` and this. P
phases, R ranks, U links that carried bytes (in link-index order), T load samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from moesim.results.columns import ColumnRecord

DTYPES = {"start_s": ("float64", 2), "link_bytes": ("float64", 1), "times_s": ("float64", 1),
          "util": ("float64", 2)}


@dataclass(frozen=True, eq=False)
class GroupTimeline(ColumnRecord):
    """Phase starts per rank and the used links' utilisation samples (module docstring)."""

    KIND: ClassVar[str] = "group-timeline"
    DTYPES: ClassVar[dict[str, tuple[str, int]]] = DTYPES

    start_s: np.ndarray  # [P, R]
    link_names: tuple[str, ...]  # [U]
    link_tiers: tuple[str, ...]  # [U]
    link_bytes: np.ndarray  # [U]
    times_s: np.ndarray  # [T]: each sample holds until the next
    util: np.ndarray  # [T, U]: load / achievable capacity
