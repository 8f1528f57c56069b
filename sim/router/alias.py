"""i.i.d. expert draws in O(1) each (Vose's alias method) and how many a token needs.

Used by ``sampling``: a token's top_k distinct experts are the first top_k distinct values of an
i.i.d. sequence drawn from the popularity p, so the sampler needs fast i.i.d. draws and an
estimate of how many draws give top_k distinct values.
"""

from __future__ import annotations

import numpy as np


def alias_table(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vose's alias table for p: (threshold float32 [E], alias int32 [E]); loops over experts.

    A draw picks column c uniformly and keeps it with probability threshold[c], else takes
    alias[c]. float32 thresholds and uniforms bound the error per expert near 2^-24 / E.

    >>> [t.tolist() for t in alias_table(np.array([0.5, 0.25, 0.25]))]
    [[1.0, 0.75, 0.75], [0, 0, 0]]
    """
    n = p.size
    scaled = p * (n / p.sum())
    threshold = np.ones(n, dtype=np.float32)
    alias = np.arange(n, dtype=np.int32)
    small = [i for i in range(n) if scaled[i] < 1.0]
    large = [i for i in range(n) if scaled[i] >= 1.0]
    while small and large:
        s, g = small.pop(), large.pop()
        threshold[s], alias[s] = scaled[s], g
        scaled[g] -= 1.0 - scaled[s]
        (small if scaled[g] < 1.0 else large).append(g)
    return threshold, alias


def draw_alias(
    table: tuple[np.ndarray, np.ndarray], rng: np.random.Generator, shape: tuple[int, ...]
) -> np.ndarray:
    """i.i.d. draws (int32, ``shape``) of column indices of an alias table."""
    threshold, alias = table
    column = rng.integers(0, threshold.size, size=shape, dtype=np.int32)
    if np.all(threshold >= 1.0):
        return column
    keep = rng.random(shape, dtype=np.float32) < threshold[column]
    return np.where(keep, column, alias[column])


def expected_distinct(p: np.ndarray, draws: int) -> float:
    """Expected number of distinct values among ``draws`` i.i.d. draws from p.

    >>> expected_distinct(np.array([0.5, 0.5]), 2)
    1.5
    """
    p = np.asarray(p, dtype=np.float64)
    return float(p.size - np.exp(draws * np.log1p(-np.minimum(p, 1.0 - 1e-16))).sum())


def draws_needed(p: np.ndarray, k: int) -> int:
    """Fewest draws whose expected distinct count reaches about k + sqrt(k) / 2 (capped 64 x E)."""
    target = min(k + 0.5 * np.sqrt(k), p.size - 0.5 * np.sqrt(k))
    lo, hi = k, k
    while expected_distinct(p, hi) < target and hi < 64 * p.size:
        lo, hi = hi, hi * 2
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if expected_distinct(p, mid) < target else (lo, mid)
    return hi
