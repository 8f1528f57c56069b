"""A layer's counts drawn directly when every expert is equally popular (no per-token draws).

Law: with a uniform popularity, :mod:`moesim.router.sampling`'s law (Plackett-Luce top-k)
gives each token a uniformly random k-subset of the experts, in uniformly random order,
independently of the other tokens. Without a capacity cut or replicas, counting needs only
per source rank the tokens per expert and the tokens per destination (EP rank, and node for
DeepEP) with >= 1 expert there: neither which token chose what nor in which order. Method,
exact for that law (the same joint distribution of every count and dedup size as counting
:func:`moesim.router.sampling.sample_topk`'s per-token draws; tests/test_router_exchangeable.py):

1. Walk a source rank's destination blocks (the experts of one node, or of one EP rank) in
   order, with its tokens grouped by how many experts they still need. A token that needs r
   of the M experts not walked yet takes j of the next block's b with the hypergeometric
   probability C(b, j) C(M - b, r - j) / C(M, r), independently of the other tokens, so the
   need-r tokens taking j = 0 .. min(b, r) are Multinomial(g_r, that row). Tokens taking
   j >= 1 count once in that block's dedup; they need r - j after it.
2. Given how many it takes, a token's experts inside a block are a uniformly random j-subset
   of the block, independent of everything else: recurse into the block (node -> EP rank),
   with its tokens grouped by j, vectorised over every block at once.
3. Inside an EP rank: tokens taking one of its b experts take each with probability 1 / b
   (Multinomial(n_1, 1/b)); the few taking j >= 2 draw their j-subset per token
   (:func:`moesim.router.sampling.topk_columns` on a uniform b).

Cost: ~(blocks x distinct needs) small multinomials per source rank instead of
tokens x ~(k + sqrt k) random integers and their dedup passes (1T layer, 64 ranks x 4096
tokens x top-8 of 384: benchmarks/README.md).
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations
from math import comb
from typing import NamedTuple

import numpy as np

from moesim.router.sampling import topk_columns


class Counted(NamedTuple):
    """One layer's counts per source rank (:func:`sample_counts`)."""

    tokens: np.ndarray
    """int64 [n_ranks, n_experts]: tokens per (source rank, expert)."""
    rank_dedup: np.ndarray
    """int64 [n_ranks, n_ranks]: tokens of a source rank with >= 1 expert on an EP rank."""
    node_dedup: np.ndarray
    """int64 [n_ranks, nodes]: the same per node of ``ranks_per_node`` ranks ((0, 0): none)."""
    ranks_per_node: int


def blocks_equal(expert_to_rank: np.ndarray, n_ranks: int) -> bool:
    """True when every EP rank hosts the same number of experts (the walk's blocks)."""
    return bool(np.all(np.bincount(expert_to_rank, minlength=n_ranks)
                       == expert_to_rank.size // n_ranks))


@lru_cache(maxsize=256)
def _split_table(left: int, right: int, top_k: int) -> np.ndarray:
    """float64 [top_k + 1, top_k + 1]: row r = P(a token needing r of ``left`` + ``right``
    exchangeable experts takes a of the first ``left``), hypergeometric
    C(left, a) C(right, r - a) / C(left + right, r); a need past the experts cannot occur
    (all mass on a = 0). Read-only."""
    table = np.zeros((top_k + 1, top_k + 1))
    for need in range(top_k + 1):
        ways = comb(left + right, need)
        if ways == 0:
            table[need, 0] = 1.0
            continue
        for a in range(need + 1):
            table[need, a] = comb(left, a) * comb(right, need - a) / ways
    table.setflags(write=False)
    return table


EXACT_FLOAT32 = 1 << 24
"""Integers below this are exact in float32, and so are sums of them that stay below it."""


def product_dtype(tokens_per_source: int) -> str:
    """The float type of the count products below: float32 (half the bytes, ~10 % of a 1T
    layer's draw) when every count and sum of counts, at most ``tokens_per_source``, is exact
    in it, else float64 (exact below 2^53)."""
    return "float32" if tokens_per_source < EXACT_FLOAT32 else "float64"


@lru_cache(maxsize=16)
def _halves(top_k: int, dtype: str = "float64") -> np.ndarray:
    """[(top_k + 1)^2, 2 (top_k + 1)] of ``dtype``: (need r, left takes a) -> left needs a
    (first top_k + 1 columns), right needs r - a (last top_k + 1); a matmul sums the groups
    (the fastest of the ways measured: gathers and strided diagonals cost 3-6x more; one 2-D
    product instead of the stacked ones spins OpenBLAS's threads: twice the CPU)."""
    width = top_k + 1
    out = np.zeros((width * width, 2 * width), dtype=dtype)
    for need in range(width):
        for a in range(need + 1):
            out[need * width + a, a] = 1.0
            out[need * width + a, width + need - a] = 1.0
    out.setflags(write=False)
    return out


Level = tuple[int, tuple[tuple[int, np.ndarray, np.ndarray], ...]]
"""One halving of :func:`split_blocks`: blocks after it, and per block size (ascending) the
blocks of that size and where their halves (or the block itself, size 1) go."""


@lru_cache(maxsize=64)
def _levels(n_blocks: int) -> tuple[Level, ...]:
    """The halvings of ``n_blocks`` blocks down to single blocks (order kept)."""
    levels: list[Level] = []
    sizes = np.array([n_blocks])
    while sizes.max() > 1:
        nxt = np.concatenate([[s // 2, s - s // 2] if s > 1 else [s] for s in sizes])
        start = np.concatenate([[0], np.cumsum(np.where(sizes > 1, 2, 1))[:-1]])
        steps = tuple((int(size), np.flatnonzero(sizes == size), start[sizes == size])
                      for size in sorted(set(sizes.tolist())))  # np.unique imports numpy.ma
        levels.append((int(nxt.size), steps))
        sizes = nxt
    return tuple(levels)


def split_blocks(rng: np.random.Generator, need: np.ndarray, n_blocks: int,
                 block: int) -> np.ndarray:
    """Tokens grouped by need, ``need`` int64 [..., top_k + 1] ([..., r]: tokens needing r of
    ``n_blocks`` x ``block`` exchangeable experts), split over the blocks: int64
    [..., n_blocks, top_k + 1], [..., d, j] = tokens taking j experts of block d. Halves the
    blocks level by level (each split one multinomial call over every block of a size): the
    need-r tokens of a range take a of its left half's experts, Multinomial(g_r,
    :func:`_split_table`), and need a there and r - a in the right half, independently."""
    width = need.shape[-1]
    dtype = product_dtype(int(need.sum(axis=-1).max(initial=0)))
    halves = _halves(width - 1, dtype)
    groups = need.astype(np.int64)[..., None, :]
    for count, steps in _levels(n_blocks):
        nxt = np.empty((*groups.shape[:-2], count, width), dtype=np.int64)
        for size, at, start in steps:
            whole = at.size == groups.shape[-2]  # every block this size: no gather
            part = groups if whole else groups[..., at, :]
            if size == 1:
                nxt[..., start, :] = part
                continue
            table = _split_table(size // 2 * block, (size - size // 2) * block, width - 1)
            split = rng.multinomial(part, table)  # [..., at, need, left]
            moved = split.reshape(*split.shape[:-2], -1).astype(dtype) @ halves  # exact
            if whole and count == 2 * at.size:
                nxt[..., 0::2, :], nxt[..., 1::2, :] = moved[..., :width], moved[..., width:]
            else:
                nxt[..., start, :] = moved[..., :width]
                nxt[..., start + 1, :] = moved[..., width:]
        groups = nxt
    return groups


SUBSETS_MAX = 4096
"""Most j-subsets of an EP rank's experts enumerated by :func:`within_rank` (more: it draws
each token's subset with :func:`moesim.router.sampling.topk_columns`)."""


@lru_cache(maxsize=64)
def _subsets(block: int, j: int) -> np.ndarray:
    """int64 [C(block, j), j]: the j-subsets of range(block), in :func:`_members`' order."""
    out = np.array(list(combinations(range(block), j)), dtype=np.int64).reshape(-1, j)
    out.setflags(write=False)
    return out


@lru_cache(maxsize=64)
def _members(block: int, j: int, dtype: str = "float64") -> np.ndarray:
    """[C(block, j), block] of ``dtype``: row s = the indicator of the s-th j-subset.
    Read-only."""
    rows = list(combinations(range(block), j))
    out = np.zeros((len(rows), block), dtype=dtype)
    out[np.repeat(np.arange(len(rows)), j), np.array(rows).ravel()] = 1.0
    out.setflags(write=False)
    return out


def within_rank(rng: np.random.Generator, taken: np.ndarray, block: int) -> np.ndarray:
    """Tokens per expert of each EP rank: ``taken`` int64 [..., top_k + 1] (tokens taking j
    of the rank's ``block`` experts) -> int64 [..., block]. One expert: Multinomial(n_1,
    1 / block); j >= 2: each token a uniformly random j-subset."""
    counts = np.zeros((*taken.shape[:-1], block), dtype=np.int64)
    if taken.shape[-1] > 1:
        counts += rng.multinomial(taken[..., 1], np.full(block, 1.0 / block))
    cells = taken[..., 0].size
    flat = counts.reshape(cells, block)
    for j in range(2, min(block, taken.shape[-1] - 1) + 1):
        n = taken[..., j].ravel()
        total = int(n.sum())
        if total == 0:
            continue
        if j == block:
            flat += n[:, None]
        elif comb(block, j) <= SUBSETS_MAX:
            kinds = comb(block, j)
            subset = rng.integers(0, kinds, size=total)
            if total * j < cells:  # few: add each token's experts (same counts)
                at = np.repeat(np.arange(cells) * block, n)[:, None] + _subsets(block, j)[subset]
                np.add.at(flat.reshape(-1), at.ravel(), 1)
                continue
            if cells * kinds > 4 * total * j:  # many kinds: count each token's experts
                at = np.repeat(np.arange(cells) * block, n)[:, None] + _subsets(block, j)[subset]
                flat += np.bincount(at.ravel(), minlength=cells * block).reshape(cells, block)
                continue
            cell = np.repeat(np.arange(cells) * kinds, n)
            per_cell = np.bincount(cell + subset, minlength=cells * kinds)
            # batched by the leading axis: small products, which BLAS runs on one thread (one
            # big product spins up its threads: twice the CPU for the same time)
            lead = taken.shape[0] if taken.ndim > 1 else 1
            dtype = product_dtype(int(n.max()))  # a cell's sums: at most its n tokens
            flat += (per_cell.reshape(lead, cells // lead, kinds).astype(dtype)
                     @ _members(block, j, dtype)).reshape(cells, block).astype(np.int64)
        else:
            cell = np.repeat(np.arange(cells) * block, n)
            for slot in topk_columns(np.full(block, 1.0 / block), total, j, rng):
                flat += np.bincount(cell + slot, minlength=cells * block).reshape(cells, block)
    return counts


def sample_counts(rng: np.random.Generator, *, tokens_per_rank: int, n_ranks: int,
                  expert_to_rank: np.ndarray, top_k: int, ranks_per_node: int = 0) -> Counted:
    """Every source rank's counts for ``tokens_per_rank`` tokens each taking a uniformly
    random ``top_k``-subset of the experts (module docstring). ``expert_to_rank``: every
    rank the same number of experts (:func:`blocks_equal`); ``ranks_per_node`` > 0 (dividing
    ``n_ranks``) also counts per node."""
    n_experts = expert_to_rank.size
    block = n_experts // n_ranks
    need = np.zeros((n_ranks, top_k + 1), dtype=np.int64)
    need[:, top_k] = tokens_per_rank
    nodes = n_ranks // ranks_per_node if ranks_per_node else 0
    if nodes:
        per_node = split_blocks(rng, need, nodes, block * ranks_per_node)  # [src, node, j]
        taken = split_blocks(rng, per_node, ranks_per_node, block).reshape(n_ranks, n_ranks, -1)
        node_dedup = tokens_per_rank - per_node[..., 0]
    else:
        taken = split_blocks(rng, need, n_ranks, block)  # [src, rank, j]
        node_dedup = np.zeros((0, 0), dtype=np.int64)
    rank_dedup = taken[..., 1:].sum(axis=-1)
    by_rank = within_rank(rng, taken, block)  # [src, rank, slot]
    tokens = np.empty((n_ranks, n_experts), dtype=np.int64)
    order = np.argsort(expert_to_rank, kind="stable")  # rank-major: a rank's experts in order
    tokens[:, order] = by_rank.reshape(n_ranks, n_experts)
    return Counted(tokens, rank_dedup, node_dedup, ranks_per_node)
