"""Top-k experts per token without repeats, vectorised over tokens.

Law: sequential sampling without replacement proportional to p (Plackett-Luce; the same law as
Gumbel-top-k on log p, or the k smallest of Exp(1)/p_e). Method, exact for that law:

1. draw m candidates per token i.i.d. from p (``alias``: O(1) per draw), m chosen so the
   expected number of distinct experts in m draws is about k + sqrt(k) / 2;
2. walk the candidate columns in draw order, taking a candidate when its row has a free slot and
   has not chosen it yet - exactly the first k distinct of the sequential draw (loops over columns
   and slots, vectorised over rows);
3. rows that came short get m more candidates (loop over rounds, not tokens);
4. rows still short after a few rounds finish with an exponential race (Exp(1)/p_e, smallest
   first) over the experts they have not chosen - exact by Plackett-Luce's memorylessness.
When p is so skewed that m candidates would cost more than a race over all experts (measured
costs, see ``_race_is_cheaper``), every row uses the race directly.

Results are column-major, [top_k, n_tokens] of ``index_type`` (int16 below 2^15 experts; row s =
every token's (s+1)-th choice): the layout the router counts from; ``sample_topk`` gives the
row-major view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from moesim.router.alias import alias_table, draw_alias, draws_needed

EXTRA_ROUNDS = 3
"""Rounds of further candidates before the exponential race finishes the remaining rows."""
RACE_CHUNK_CELLS = 2**21
"""Cells (rows x experts) per chunk of the exponential race: bounds its scratch memory."""

Drawer = Callable[[np.ndarray, int], np.ndarray]
"""(rows, m) -> int32 [m, len(rows)]: m i.i.d. candidates for each of ``rows``, in draw order."""
Allowed = Callable[[np.ndarray], np.ndarray]
"""rows -> bool [len(rows), n_experts]: the experts each of ``rows`` may pick."""


class _Chosen:
    """Per-row distinct choices so far, column-major: chosen [k, rows] (-1 = free), found [rows]."""

    def __init__(self, rows: int, k: int, chosen: np.ndarray | None = None,
                 found: np.ndarray | None = None, kind: type[np.integer] = np.int32) -> None:
        self.chosen = np.full((k, rows), -1, dtype=kind) if chosen is None else chosen
        self.found = np.zeros(rows, dtype=np.int32) if found is None else found

    def absorb(self, rows: np.ndarray, cand_t: np.ndarray) -> None:
        """Feed candidate columns ``cand_t`` [m, len(rows)] (in draw order) to ``rows``: a
        candidate is taken when its row has a free slot and has not chosen it yet."""
        k = self.chosen.shape[0]
        whole = rows.size == self.found.size
        chosen = self.chosen if whole else self.chosen[:, rows]
        found = self.found if whole else self.found[rows]
        filled = int(found.max(initial=0))
        fresh = np.empty(rows.size, dtype=bool)
        differs = np.empty(rows.size, dtype=bool)
        for column, cand in enumerate(cand_t):
            np.less(found, k, out=fresh)
            fresh &= cand >= 0
            for slot in range(min(k, filled + column)):
                fresh &= np.not_equal(chosen[slot], cand, out=differs)
            take = np.flatnonzero(fresh)
            chosen[found[take], take] = cand[take]
            found[take] += 1
        if not whole:
            self.chosen[:, rows], self.found[rows] = chosen, found


def _clean_head(cand_t: np.ndarray, k: int) -> np.ndarray:
    """bool [rows]: rows whose first k candidates are valid (>= 0) and distinct - a fresh row
    takes exactly those, in order. Loops over candidate pairs; no copy of the candidates."""
    clean = cand_t[0] >= 0
    scratch = np.empty(clean.shape, dtype=bool)
    for j in range(1, k):
        clean &= np.greater_equal(cand_t[j], 0, out=scratch)
        for earlier in range(j):
            clean &= np.not_equal(cand_t[j], cand_t[earlier], out=scratch)
    return clean


def fresh_absorb(cand_t: np.ndarray, k: int, clean: np.ndarray | None = None) -> _Chosen:
    """A new :class:`_Chosen` of ``cand_t.shape[1]`` rows fed ``cand_t`` [m, rows]: the same
    state as ``_Chosen(rows, k).absorb(all rows, cand_t)``, faster when most rows draw k
    distinct experts first (they take their first k candidates as they are; the others go
    through ``absorb``). The state's ``chosen`` is ``cand_t[:k]``, overwritten in place (of
    ``cand_t``'s type). ``clean``: :func:`_clean_head` of ``cand_t``, if known."""
    m, rows = cand_t.shape
    if m < k:
        state = _Chosen(rows, k, kind=cand_t.dtype.type)
        state.absorb(np.arange(rows), cand_t)
        return state
    clean = _clean_head(cand_t, k) if clean is None else clean
    state = _Chosen(rows, k, cand_t[:k], np.full(rows, k, dtype=np.int32))
    rest = np.flatnonzero(~clean)
    if rest.size:
        others = _Chosen(rest.size, k, kind=cand_t.dtype.type)
        others.absorb(np.arange(rest.size), cand_t[:, rest])
        state.chosen[:, rest], state.found[rest] = others.chosen, others.found
    return state


def first_distinct(cand: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """First k distinct non-negative entries of each row of ``cand`` [rows, m], in column order.

    Returns (chosen int64 [rows, k], n_found int64 [rows]); slots past n_found hold -1.

    >>> first_distinct(np.array([[3, 3, -1, 1, 3, 2]]), 2)[0].tolist()
    [[3, 1]]
    """
    state = _Chosen(cand.shape[0], k)
    state.absorb(np.arange(cand.shape[0]), np.asarray(cand, dtype=np.int32).T)
    return state.chosen.T.astype(np.int64), state.found.astype(np.int64)


def race(
    p: np.ndarray, prefix: np.ndarray, found: np.ndarray, rng: np.random.Generator,
    allowed: Allowed | None = None, rows: np.ndarray | None = None,
) -> np.ndarray:
    """Complete each column of ``prefix`` [k, r] (first ``found`` slots set) with the
    winners of an exponential race - smallest Exp(1)/p_e first - over the experts it may pick
    (``allowed(rows)``) and has not chosen. Returns the completed [k, r], prefix's type."""
    out = prefix.copy()
    (k, n_rows), n = prefix.shape, p.size
    ids = np.arange(n_rows) if rows is None else rows
    chunk = max(1, RACE_CHUNK_CELLS // n)
    for start in range(0, n_rows, chunk):
        sl = slice(start, min(start + chunk, n_rows))
        keys = rng.standard_exponential((sl.stop - sl.start, n), dtype=np.float32) / p
        if allowed is not None:
            keys[~allowed(ids[sl])] = np.inf
        taken = np.arange(k)[:, None] < found[None, sl]
        row_ids = np.broadcast_to(np.arange(keys.shape[0])[None, :], taken.shape)
        keys[row_ids[taken], prefix[:, sl][taken]] = np.inf
        best = np.argpartition(keys, k - 1, axis=1)[:, :k]
        best = np.take_along_axis(best, np.argsort(np.take_along_axis(keys, best, 1), 1), 1)
        slot = np.maximum(np.arange(k)[:, None] - found[None, sl], 0)
        out[:, sl] = np.where(taken, prefix[:, sl], np.take_along_axis(best.T, slot, axis=0))
    return out


def _race_is_cheaper(m: int, k: int, n_experts: int) -> bool:
    """Cost model measured on numpy 2.4 (2-core VM): a candidate column costs ~10 + 2.5 k ns per
    row, a race ~400 + 22 x n_experts ns per row."""
    return m * (10 + 2.5 * k) > 400 + 22 * n_experts


def index_type(n_values: int) -> type[np.signedinteger]:
    """The narrowest signed type that holds -1 .. n_values - 1 (int16 or int32): candidates and
    choices in it, every pass over them reads half the bytes of int32."""
    return np.int16 if n_values <= np.iinfo(np.int16).max else np.int32


def distinct_columns(
    p: np.ndarray, n_tokens: int, top_k: int, rng: np.random.Generator, *, m: int,
    draw: Drawer, allowed: Allowed | None = None, first: FirstRound | None = None,
) -> np.ndarray:
    """Core sampler: [top_k, n_tokens] of :func:`index_type` (p.size), each column the first
    top_k distinct candidates of ``draw`` (m per round, then the race). ``draw`` and
    ``allowed`` describe the same law; ``first``: the first round, drawn already."""
    rows = np.arange(n_tokens)
    kind = index_type(p.size)
    if _race_is_cheaper(m, top_k, p.size):
        state = _Chosen(n_tokens, top_k, kind=kind)
    else:
        if first is None:
            state = fresh_absorb(draw(rows, m).astype(kind, copy=False), top_k)
        else:
            state = fresh_absorb(first.candidates.astype(kind, copy=False), top_k, first.clean)
        rows = rows[state.found < top_k]
        for _round in range(EXTRA_ROUNDS):
            if rows.size == 0:
                return state.chosen
            state.absorb(rows, draw(rows, m))
            rows = rows[state.found[rows] < top_k]
        if rows.size == 0:
            return state.chosen
    state.chosen[:, rows] = race(p, state.chosen[:, rows], state.found[rows], rng, allowed, rows)
    return state.chosen


class FirstRound(NamedTuple):
    """The first round of :func:`topk_columns`' candidates, drawn ahead (:func:`topk_first`)."""

    candidates: np.ndarray
    """[m, n_tokens] of :func:`index_type`: m candidates per token, in draw order."""
    clean: np.ndarray | None
    """bool [n_tokens]: :func:`_clean_head` of the candidates (None when m < top_k)."""


def topk_first(p: np.ndarray, n_tokens: int, top_k: int,
               rng: np.random.Generator) -> FirstRound | None:
    """The first round of :func:`topk_columns`' candidates, drawn from ``rng`` as it would
    draw them, and which tokens take their first top_k as they are; None when it races every
    row instead. Mostly one numpy call that runs without the GIL (then element-wise passes
    that release it): a worker thread can draw it ahead."""
    p = np.asarray(p, dtype=np.float64)
    m = draws_needed(p, top_k)
    if _race_is_cheaper(m, top_k, p.size):
        return None
    cand = draw_alias(alias_table(p), rng, (m, n_tokens)).astype(index_type(p.size), copy=False)
    return FirstRound(cand, _clean_head(cand, top_k) if m >= top_k else None)


def topk_columns(p: np.ndarray, n_tokens: int, top_k: int, rng: np.random.Generator,
                 first: FirstRound | None = None) -> np.ndarray:
    """``sample_topk`` in column-major form: [top_k, n_tokens] of :func:`index_type`.
    ``first``: the first round as :func:`topk_first` drew it from ``rng`` (``rng`` past it)."""
    p = np.asarray(p, dtype=np.float64)
    table = alias_table(p)

    def draw(rows: np.ndarray, m: int) -> np.ndarray:
        return draw_alias(table, rng, (m, rows.size))

    m = draws_needed(p, top_k) if first is None else first.candidates.shape[0]
    return distinct_columns(p, n_tokens, top_k, rng, m=m, draw=draw, first=first)


def sample_topk(p: np.ndarray, n_tokens: int, top_k: int, rng: np.random.Generator) -> np.ndarray:
    """Each token's ``top_k`` distinct experts (int64 [n_tokens, top_k]), in choice order, by
    sequential sampling without replacement proportional to p (all p > 0, top_k <= E)."""
    return np.ascontiguousarray(topk_columns(p, n_tokens, top_k, rng).T, dtype=np.int64)
