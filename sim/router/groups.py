"""Group-limited routing (DeepSeek-V3 ``n_group`` / ``topk_group``), vectorised over tokens.

The experts are split into ``n_group`` contiguous groups. Each token first picks ``topk_group``
groups without repeats, proportional to the groups' popularity mass, then its top_k experts
without repeats from p restricted to those groups. (DeepSeek-V3 ranks groups by the sum of their
two best expert scores; here the choice is stochastic in proportion to group mass, which keeps
the same effect: a token's experts span at most topk_group groups, hence few nodes.)

Candidates are drawn directly inside a token's groups - a group by its mass among the token's
groups, then an expert by a per-group alias table (column and threshold from one float32
uniform) - so none are wasted on rejection.
"""

from __future__ import annotations

import numpy as np

from moesim.router.alias import alias_table, draws_needed
from moesim.router.sampling import FirstRound, distinct_columns, topk_columns

SIZING_ROWS = 16
"""Tokens whose restricted popularity sizes the candidate batch (their median need)."""


class _GroupDrawer:
    """i.i.d. draws from p restricted to each token's groups (groups: int [topk_group, n])."""

    def __init__(
        self, p: np.ndarray, groups: np.ndarray, n_group: int, rng: np.random.Generator
    ) -> None:
        self.p, self.groups, self.rng = p, groups, rng
        self.group_size = p.size // n_group
        self.first_expert = groups * np.int32(self.group_size)
        self.per_group = p.reshape(-1, self.group_size)
        mass = self.per_group.sum(axis=1)[groups]
        self.cumulative = (np.cumsum(mass, axis=0)[:-1] / mass.sum(axis=0)).astype(np.float32)
        tables = [alias_table(row) for row in self.per_group]
        self.threshold = np.concatenate([t for t, _ in tables])
        self.alias = np.concatenate([a for _, a in tables])
        self.uniform_inside = bool(np.all(self.threshold >= 1.0))

    def __call__(self, rows: np.ndarray, m: int) -> np.ndarray:
        whole = rows.size == self.groups.shape[1]
        first_expert = self.first_expert if whole else self.first_expert[:, rows]
        cumulative = self.cumulative if whole else self.cumulative[:, rows]
        u = self.rng.random((m, rows.size), dtype=np.float32)
        base = np.broadcast_to(first_expert[-1], u.shape)
        for j in range(cumulative.shape[0] - 1, -1, -1):
            base = np.where(u < cumulative[j], first_expert[j], base)
        # one float32 uniform gives the alias column (integer part) and its coin (fraction);
        # (1 - 2^-24) x size never rounds up to size, so the column stays in range
        x = self.rng.random(u.shape, dtype=np.float32) * np.float32(self.group_size)
        local = x.astype(np.int32)
        index = base + local
        if self.uniform_inside:
            return index
        keep = np.subtract(x, local, dtype=np.float32) < self.threshold[index]
        return np.where(keep, index, base + self.alias[index])

    def allowed(self, rows: np.ndarray) -> np.ndarray:
        """bool [len(rows), n_experts]: experts inside each row's groups."""
        n_group = self.per_group.shape[0]
        ok = np.zeros((rows.size, n_group), dtype=bool)
        ok[np.arange(rows.size)[None, :], self.groups[:, rows]] = True
        return np.repeat(ok, self.group_size, axis=1)

    def draws_needed(self, k: int) -> int:
        """Candidate batch size: the median need of the first SIZING_ROWS tokens."""
        rows = np.arange(min(SIZING_ROWS, self.groups.shape[1]))
        restricted = self.allowed(rows) * self.p
        return int(np.median([draws_needed(r[r > 0] / r.sum(), k) for r in restricted]))


def group_limited_columns(
    p: np.ndarray, n_tokens: int, top_k: int, rng: np.random.Generator, *, n_group: int,
    topk_group: int, first: FirstRound | None = None,
) -> np.ndarray:
    """``sample_group_limited`` in column-major form: [top_k, n_tokens] of sampling.index_type.
    ``first`` (n_group 1 only): the first round, drawn by ``sampling.topk_first``."""
    p = np.asarray(p, dtype=np.float64)
    if n_group == 1:
        return topk_columns(p, n_tokens, top_k, rng, first)
    if first is not None:
        raise ValueError("a first round drawn ahead is for n_group = 1 only")
    group_mass = p.reshape(n_group, -1).sum(axis=1)
    groups = topk_columns(group_mass, n_tokens, topk_group, rng)
    drawer = _GroupDrawer(p, groups, n_group, rng)
    return distinct_columns(p, n_tokens, top_k, rng, m=drawer.draws_needed(top_k), draw=drawer,
                            allowed=drawer.allowed)


def sample_group_limited(
    p: np.ndarray, n_tokens: int, top_k: int, rng: np.random.Generator, *, n_group: int,
    topk_group: int,
) -> np.ndarray:
    """Each token's ``top_k`` distinct experts (int64 [n_tokens, top_k]) within ``topk_group``
    of ``n_group`` contiguous expert groups. Needs n_experts % n_group == 0 and top_k <=
    topk_group x group size."""
    columns = group_limited_columns(p, n_tokens, top_k, rng, n_group=n_group,
                                    topk_group=topk_group)
    return np.ascontiguousarray(columns.T, dtype=np.int64)
