"""What the critical-path walk reads of a full-mode step: the evidence part of its record.

:func:`moesim.results.critical_path.walk` is a function of this record alone; the step's
recorder (:mod:`moesim.step.critical_record`) fills it from the finished state. W ranks,
N spans, G EP groups of E ranks, K MoE layers. Strings (categories, pass kinds, phases,
release names) are stored once in ``strings`` and referenced by their index.

* per rank: when it finished (``end_s``, NaN if not simulated), when its last schedule op
  ended (``last_op_s``), its compute slowdown, its EP coordinate and EP group (a row of
  ``ep_groups``);
* the span table, in the order the ranks recorded them (time order per rank): rank, start,
  end, category, lane (the rank's SimPy process that ran it, -1 for none), what it ran
  (pass kind, micro-batch, virtual stage, layer and phase of its last all-to-all; pass kind -1
  when unknown) and, for a wait, what released it: the sending rank (-1 none), its send
  time, the bottleneck link (a row of ``link_names`` / ``link_tiers``, -1 none), how much
  later than its peers' mean it reached the op, and the collective's name; for an
  all-to-all, instead of the lateness, the all-to-all (a row of ``a2a_send_s``: when each
  member sent) and the sender's place in it;
* per MoE layer: each EP coordinate's token load and its three hottest experts (-1 padded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from moesim.results.columns import ColumnRecord

SPAN_COLUMNS = {
    "rank": "int32", "t0_s": "float64", "t1_s": "float64", "category": "int32", "lane": "int32",
    "pass_kind": "int32", "mb": "int32", "vstage": "int32", "layer": "int32", "phase": "int32",
    "rel_rank": "int32", "rel_send_s": "float64", "rel_link": "int32",
    "rel_excess_s": "float64", "rel_what": "int32", "rel_a2a": "int32", "rel_local": "int32",
}
DTYPES = {
    **{name: (dtype, 1) for name, dtype in SPAN_COLUMNS.items()},
    "end_s": ("float64", 1), "last_op_s": ("float64", 1), "slowdown": ("float64", 1),
    "ep_coord": ("int64", 1), "ep_group": ("int64", 1), "ep_groups": ("int64", 2),
    "a2a_send_s": ("float64", 2), "moe_layers": ("int64", 1), "rank_load": ("int64", 2),
    "hot_experts": ("int64", 3),
}


@dataclass(frozen=True, eq=False)
class WalkRecord(ColumnRecord):
    """One finished step as the critical-path walk reads it (module docstring)."""

    KIND: ClassVar[str] = "walk"
    DTYPES: ClassVar[dict[str, tuple[str, int]]] = DTYPES

    world_size: int
    pp: int
    end_s: np.ndarray  # [W]
    last_op_s: np.ndarray  # [W]
    slowdown: np.ndarray  # [W]
    ep_coord: np.ndarray  # [W]
    ep_group: np.ndarray  # [W]: row of ep_groups
    ep_groups: np.ndarray  # [G, E] member ranks
    rank: np.ndarray  # [N] span columns from here
    t0_s: np.ndarray
    t1_s: np.ndarray
    category: np.ndarray  # index into strings
    lane: np.ndarray
    pass_kind: np.ndarray  # index into strings (F, B, ...); -1: the span has no "what"
    mb: np.ndarray
    vstage: np.ndarray
    layer: np.ndarray
    phase: np.ndarray  # index into strings
    rel_rank: np.ndarray
    rel_send_s: np.ndarray
    rel_link: np.ndarray
    rel_excess_s: np.ndarray
    rel_what: np.ndarray  # index into strings
    rel_a2a: np.ndarray  # row of a2a_send_s, -1: not an all-to-all
    rel_local: np.ndarray  # the sender's column there
    strings: tuple[str, ...]
    a2a_send_s: np.ndarray  # [A, E]: when each member of an all-to-all sent
    moe_layers: np.ndarray  # [K] layer indices
    rank_load: np.ndarray  # [K, E]
    hot_experts: np.ndarray  # [K, E, 3]
    link_names: tuple[str, ...]
    link_tiers: tuple[str, ...]

    @property
    def n_spans(self) -> int:
        return int(self.rank.size)
