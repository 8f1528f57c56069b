"""Top-k sampling without repeats: exact small cases and the Plackett-Luce law."""

from __future__ import annotations

from collections.abc import Callable
from itertools import permutations

import numpy as np
import pytest

from moesim.router.alias import alias_table, draw_alias, draws_needed, expected_distinct
from moesim.router.groups import sample_group_limited
from moesim.router.sampling import distinct_columns, first_distinct, race, sample_topk

P4 = np.array([0.4, 0.3, 0.2, 0.1])
SAMPLES = 200_000
TOLERANCE = 0.006  # about 5 standard deviations of a frequency over SAMPLES draws


def plackett_luce(p: np.ndarray, order: tuple[int, ...]) -> float:
    """Probability of drawing ``order`` first, sequentially without replacement."""
    prob, left = 1.0, 1.0
    for e in order:
        prob *= p[e] / left
        left -= p[e]
    return prob


def assert_law(chosen: np.ndarray, p: np.ndarray, k: int) -> None:
    codes = chosen[:, 0].copy()
    for slot in range(1, k):
        codes = codes * p.size + chosen[:, slot]
    freq = np.bincount(codes, minlength=p.size**k) / chosen.shape[0]
    for order in permutations(range(p.size), k):
        code = 0
        for e in order:
            code = code * p.size + e
        assert abs(freq[code] - plackett_luce(p, order)) < TOLERANCE, order


def test_first_distinct_hand_computed() -> None:
    cand = np.array([[3, 3, 1, 3, 2], [0, 1, 2, 3, 4], [5, 5, 5, 5, 5]])
    chosen, found = first_distinct(cand, 3)
    assert chosen.tolist() == [[3, 1, 2], [0, 1, 2], [5, -1, -1]]
    assert found.tolist() == [3, 3, 1]


def test_alias_table_hand_computed() -> None:
    threshold, alias = alias_table(np.array([0.5, 0.25, 0.25]))
    assert threshold.tolist() == [1.0, 0.75, 0.75]
    assert alias.tolist() == [0, 0, 0]


def test_alias_draws_follow_p() -> None:
    p = np.array([0.5, 0.3, 0.15, 0.05])
    draws = draw_alias(alias_table(p), np.random.default_rng(0), (SAMPLES,))
    assert np.abs(np.bincount(draws, minlength=4) / SAMPLES - p).max() < TOLERANCE


def test_expected_distinct_and_draws_needed() -> None:
    assert expected_distinct(np.array([0.5, 0.5]), 2) == pytest.approx(1.5)
    uniform = np.full(256, 1 / 256)
    m = draws_needed(uniform, 8)
    assert expected_distinct(uniform, m) >= 8 + 0.5 * np.sqrt(8) > expected_distinct(uniform, m - 1)


def test_topk_equal_to_experts_gives_permutations() -> None:
    chosen = sample_topk(P4, 1000, 4, np.random.default_rng(1))
    assert (np.sort(chosen, axis=1) == np.arange(4)).all()


def test_sample_topk_follows_plackett_luce() -> None:
    assert_law(sample_topk(P4, SAMPLES, 2, np.random.default_rng(2)), P4, 2)


def test_skewed_p_takes_the_race_and_follows_the_law() -> None:
    p = np.array([0.94, 0.03, 0.02, 0.01])
    assert_law(sample_topk(p, SAMPLES, 2, np.random.default_rng(3)), p, 2)


def test_race_from_empty_prefix_follows_the_law() -> None:
    rng = np.random.default_rng(4)
    prefix = np.full((2, SAMPLES), -1, dtype=np.int32)
    out = race(P4, prefix, np.zeros(SAMPLES, dtype=np.int32), rng)
    assert_law(out.T.astype(np.int64), P4, 2)


def test_rounds_then_race_continuation_follows_the_law() -> None:
    # one candidate per round: most rows need several rounds and many finish with the race
    rng = np.random.default_rng(5)
    table = alias_table(P4)

    def draw(rows: np.ndarray, m: int) -> np.ndarray:
        return draw_alias(table, rng, (m, rows.size))

    out = distinct_columns(P4, SAMPLES, 3, rng, m=1, draw=draw)
    assert_law(out.T.astype(np.int64), P4, 3)


def test_group_limited_law_hand_computed() -> None:
    # groups {0,1} (mass .5) and {2,3} (mass .5); one group per token, two experts in it
    p = np.array([0.4, 0.1, 0.3, 0.2])
    chosen = sample_group_limited(p, SAMPLES, 2, np.random.default_rng(6), n_group=2,
                                  topk_group=1)
    pairs = {(0, 1): 0.5 * 0.8, (1, 0): 0.5 * 0.2, (2, 3): 0.5 * 0.6, (3, 2): 0.5 * 0.4}
    codes = chosen[:, 0] * 4 + chosen[:, 1]
    freq = np.bincount(codes, minlength=16) / SAMPLES
    for (a, b), prob in pairs.items():
        assert abs(freq[a * 4 + b] - prob) < TOLERANCE
    assert freq.sum() == pytest.approx(sum(freq[a * 4 + b] for a, b in pairs))


def group_limited_law(p: np.ndarray, n_group: int, topk_group: int, k: int) -> dict:
    """Exact law of group-limited top-k by enumeration: groups by Plackett-Luce on group mass,
    then experts by Plackett-Luce on p restricted to the chosen groups."""
    size = p.size // n_group
    mass = p.reshape(n_group, size).sum(axis=1)
    law: dict[tuple[int, ...], float] = {}
    for groups in permutations(range(n_group), topk_group):
        allowed = np.zeros(p.size)
        for g in groups:
            allowed[g * size:(g + 1) * size] = 1.0
        restricted = p * allowed / (p * allowed).sum()
        for order in permutations(np.flatnonzero(allowed).tolist(), k):
            prob = plackett_luce(mass, groups) * plackett_luce(restricted, order)
            law[order] = law.get(order, 0.0) + prob
    return law


def test_group_limited_law_by_enumeration() -> None:
    p = np.array([0.25, 0.05, 0.3, 0.1, 0.2, 0.1])  # groups {0,1} .3, {2,3} .4, {4,5} .3
    chosen = sample_group_limited(p, SAMPLES, 2, np.random.default_rng(10), n_group=3,
                                  topk_group=2)
    freq = np.bincount(chosen[:, 0] * 6 + chosen[:, 1], minlength=36) / SAMPLES
    law = group_limited_law(p, 3, 2, 2)
    assert sum(law.values()) == pytest.approx(1.0)
    for a in range(6):
        for b in range(6):
            assert abs(freq[a * 6 + b] - law.get((a, b), 0.0)) < TOLERANCE, (a, b)


def test_group_limited_stays_inside_groups() -> None:
    p = np.random.default_rng(7).dirichlet(np.ones(64))
    chosen = sample_group_limited(p, 5000, 6, np.random.default_rng(8), n_group=8, topk_group=2)
    groups = np.sort(chosen // 8, axis=1)
    n_groups = 1 + (groups[:, 1:] != groups[:, :-1]).sum(axis=1)
    assert n_groups.max() <= 2
    assert (np.sort(chosen, axis=1)[:, 1:] != np.sort(chosen, axis=1)[:, :-1]).all()


@pytest.mark.parametrize(
    "make_p",
    [lambda: np.full(256, 1 / 256), lambda: 1 / np.arange(1, 257) ** 3.0],
)
def test_many_tokens_distinct(make_p: Callable[[], np.ndarray]) -> None:
    p = make_p()
    p = p / p.sum()
    chosen = sample_topk(p, 20_000, 8, np.random.default_rng(9))
    ordered = np.sort(chosen, axis=1)
    assert (ordered[:, 1:] != ordered[:, :-1]).all() and chosen.min() >= 0 and chosen.max() < 256
