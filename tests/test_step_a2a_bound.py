"""A2ATimer._bound (fast mode's all-to-all link bound) equals its defining formula bit for bit:
per link, the largest release offset plus the bytes released at or after it over the
capacity, summed in release order (the in-place row accumulation must keep numpy's cumsum
sums exactly)."""

from __future__ import annotations

import numpy as np
import pytest

from moesim.step.estimate import A2ATimer


def _timer(rng: np.random.Generator, n: int, n_links: int, unit: bool = False) -> A2ATimer:
    """An A2ATimer over a made-up routing: every (src, dst) pair on a few random links, with
    random path weights, or weight 1 on every entry (``unit``: the path it skips x 1.0 on)."""
    timer = object.__new__(A2ATimer)
    src, dst = np.divmod(np.arange(n * n), n)
    off = src != dst
    timer.src, timer.dst = src[off], dst[off]
    hops = rng.integers(1, 5, size=timer.src.size)
    timer.pair = np.repeat(np.arange(timer.src.size), hops)
    timer.link = rng.integers(0, n_links, size=timer.pair.size)
    timer.weight = np.ones(timer.pair.size) if unit else rng.random(timer.pair.size)
    timer.n, timer.n_links = n, n_links
    timer.sender_link = timer.src[timer.pair] * n_links + timer.link
    timer.entry = (timer.src * n + timer.dst)[timer.pair]
    timer.unit = unit
    timer.inv_cap = 1.0 / rng.uniform(1e9, 4e11, size=n_links)
    return timer


def _reference(timer: A2ATimer, size_bytes: np.ndarray, offsets_s: np.ndarray) -> float:
    per_entry = size_bytes[timer.src, timer.dst][timer.pair] * timer.weight
    load = np.bincount(timer.sender_link, weights=per_entry,
                       minlength=timer.n * timer.n_links).reshape(timer.n, timer.n_links)
    order = np.argsort(offsets_s, kind="stable")
    drain = np.cumsum((load * timer.inv_cap)[order][::-1], axis=0)[::-1]
    return float((offsets_s[order][:, None] + drain).max(initial=0.0))


@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("n, n_links", [(2, 3), (8, 40), (64, 512), (65, 7)])
def test_bound_equals_its_formula_bit_for_bit(n: int, n_links: int, unit: bool) -> None:
    rng = np.random.default_rng(n * 1000 + n_links)
    timer = _timer(rng, n, n_links, unit)
    for case in range(6):
        size_bytes = rng.uniform(0, 1e8, size=(n, n))
        if case == 0:
            offsets = np.zeros(n)  # simultaneous sends
        elif case == 1:
            offsets = rng.choice([0.0, 1e-4, 3e-4], size=n)  # ties: stable order matters
        else:
            offsets = rng.uniform(0, 2e-4, size=n)
        assert timer._bound(size_bytes, offsets) == _reference(timer, size_bytes, offsets)
