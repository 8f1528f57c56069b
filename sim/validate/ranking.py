"""Layout rankings: cases that share a ``ranking`` name (several layouts of one workload on one
cluster, :mod:`moesim.validate.zoo`) are ordered by their published and by their simulated
values; the check is that the two orders are the same (fastest first).

>>> from moesim.validate.case import Case
>>> r = [(Case(n, "bridge", (), q, "s", 0.1, "", ranking="x", lower_is_faster=True), p)
...      for n, p, q in (("a", 2.0, 20.0), ("b", 1.0, 25.0))]
>>> v = ranking_verdicts(r)[0]
>>> (v.published_order, v.predicted_order, v.exact)
(('a', 'b'), ('b', 'a'), False)
>>> v.line().split(";")[0]
'  x: RANKED DIFFERENTLY (2 of 2 layouts simulable)'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from moesim.validate.case import Case

Predicted = tuple[Case, float | None]
"""A case and what moesim predicts for it (None: not simulable)."""


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


def _order(simulated: Sequence[tuple[Case, float]], published: bool) -> tuple[str, ...]:
    """Case names fastest first, by the published or by the predicted values."""
    def speed(r: tuple[Case, float]) -> float:
        v = float(r[0].published if published else r[1])
        return -v if r[0].lower_is_faster else v

    return tuple(case.name for case, _ in sorted(simulated, key=speed, reverse=True))


def ranking_verdicts(results: Sequence[Predicted]) -> list[RankingVerdict]:
    """One verdict per ranking name with at least two simulated layouts (a layout moesim
    cannot express yet is left out of the order and counted in ``n_layouts``)."""
    names = sorted({case.ranking for case, _ in results if case.ranking})
    out = []
    for name in names:
        members = [(case, p) for case, p in results if case.ranking == name]
        simulated = [(case, p) for case, p in members if p is not None]
        if len(simulated) < 2:
            continue
        out.append(RankingVerdict(name, _order(simulated, published=True),
                                  _order(simulated, published=False), len(members)))
    return out
