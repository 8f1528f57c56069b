"""Layout rankings: cases that share a ``ranking`` name (several layouts of one workload on one
cluster, :mod:`moesim.validate.zoo`) are ordered by their published and by their simulated
values; the check is that the two orders are the same (fastest first).

>>> from moesim.validate.table import CaseResult
>>> r = [CaseResult(n, p, q, "s", 0.0, 10.0, "pass", "out_of_sample", "", "", ranking="x",
...                 lower_is_faster=True) for n, p, q in (("a", 2.0, 20.0), ("b", 1.0, 25.0))]
>>> v = ranking_verdicts(r)[0]
>>> (v.published_order, v.predicted_order, v.exact)
(('a', 'b'), ('b', 'a'), False)
>>> v.line().split(";")[0]
'  x: RANKED DIFFERENTLY (2 of 2 layouts simulable)'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Ranked(Protocol):
    """What a ranking reads of a case result (:class:`moesim.validate.table.CaseResult`),
    read-only (a frozen dataclass's fields qualify)."""

    @property
    def name(self) -> str: ...
    @property
    def predicted(self) -> float | None: ...
    @property
    def published(self) -> float: ...
    @property
    def lower_is_faster(self) -> bool: ...
    @property
    def ranking(self) -> str: ...


@dataclass(frozen=True)
class RankingVerdict:
    """One comparison: its case names fastest first, as published and as simulated, over the
    ``len(published_order)`` of its ``n_layouts`` layouts that moesim can simulate."""

    name: str
    published_order: tuple[str, ...]
    predicted_order: tuple[str, ...]
    n_layouts: int = 0

    @property
    def exact(self) -> bool:
        return self.published_order == self.predicted_order

    def line(self) -> str:
        verdict = "ranked exactly" if self.exact else "RANKED DIFFERENTLY"
        return (f"  {self.name}: {verdict} ({len(self.published_order)} of {self.n_layouts} "
                f"layouts simulable); published: {' > '.join(self.published_order)}; "
                f"simulated: {' > '.join(self.predicted_order)}")


def _order(results: Sequence[Ranked], value: str) -> tuple[str, ...]:
    def speed(r: Ranked) -> float:
        v = float(getattr(r, value))
        return -v if r.lower_is_faster else v

    return tuple(r.name for r in sorted(results, key=speed, reverse=True))


def ranking_verdicts(results: Sequence[Ranked]) -> list[RankingVerdict]:
    """One verdict per ranking name with at least two simulated layouts (a layout moesim
    cannot express yet is left out of the order and counted in ``n_layouts``)."""
    names = sorted({r.ranking for r in results if r.ranking})
    out = []
    for name in names:
        members = [r for r in results if r.ranking == name]
        simulated = [r for r in members if r.predicted is not None]
        if len(simulated) < 2:
            continue
        out.append(RankingVerdict(name, _order(simulated, "published"),
                                  _order(simulated, "predicted"), len(members)))
    return out
