"""Route one MoE layer's tokens for one micro-batch: who sends how many tokens to which expert.

``assign_experts`` draws each token's top_k experts (the per-token view, for tests and traces);
``route_tokens`` turns them into counts per (source rank, expert), applies capacity, and derives
the all-to-all sizes per (source rank, destination rank), with and without the per-rank dedup
that DeepEP does (a token goes to a destination rank once, however many of its experts live there).
When every expert is equally popular and nothing needs the tokens' choice order (no capacity,
no replicas, no expert groups: :func:`exchangeable`), ``route_tokens`` draws those counts
directly from their joint law (:mod:`moesim.router.exchangeable`): the same law as counting
``assign_experts``' tokens, not the same draw.

Capacity follows Megatron (``--moe-expert-capacity-factor``, applied at the source rank before
dispatch): capacity per expert per source rank = ceil(factor x tokens_per_rank x top_k / experts);
assignments beyond it are dropped. Which ones is a modelling choice (counts are what matter):
here a rank keeps every token's first choice before any token's second, and earlier tokens
first within a choice - close to Megatron's "probs" policy, since earlier choices carry higher
router probabilities.

``RouterConfig.redundant_experts`` > 0 then copies the hottest experts
(``moesim.router.redundant``):
the replicas are extra expert columns of the result, so the per-rank sizes and loads include them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from moesim.errors import ConfigError
from moesim.router.config import RouterConfig
from moesim.router.counts import (
    dedup_rank_tokens,
    destinations,
    keep_mask,
    node_dedup,
    pair_counts,
    rank_totals,
)
from moesim.router.exchangeable import Counted, blocks_equal, sample_counts
from moesim.router.groups import group_limited_columns
from moesim.router.placement import place_experts
from moesim.router.popularity import layer_popularity, popularity_model
from moesim.router.redundant import check_redundant, replicate_hot_experts
from moesim.router.result import RoutingResult
from moesim.router.sampling import FirstRound, topk_first
from moesim.router.streams import TAG_TOKENS, check_index, stream


def check_shape(
    *, tokens_per_rank: int, n_ranks: int, n_experts: int, top_k: int, n_group: int = 1,
    topk_group: int = 1,
) -> None:
    """Validate the layer shape; ConfigError naming the offending field."""
    check_index("tokens_per_rank", tokens_per_rank, minimum=1)
    check_index("ep", n_ranks, minimum=1)
    check_index("n_experts", n_experts, minimum=1)
    check_index("top_k", top_k, minimum=1)
    check_index("n_group", n_group, minimum=1)
    check_index("topk_group", topk_group, minimum=1)
    if n_experts % n_group != 0:
        raise ConfigError("n_group", f"{n_group} groups must divide the {n_experts} experts")
    if topk_group > n_group:
        raise ConfigError("topk_group", f"{topk_group} must be <= n_group {n_group}")
    reachable = topk_group * (n_experts // n_group)
    if top_k > reachable:
        raise ConfigError(
            "top_k", f"{top_k} > {reachable} experts reachable in topk_group={topk_group} groups"
        )


def balanced_assignments(
    n_ranks: int, tokens_per_rank: int, top_k: int, n_experts: int
) -> np.ndarray:
    """Exactly balanced, deterministic assignments (int64 [n_ranks, tokens, top_k]).

    All assignments, in (rank, token, slot) order, walk the experts cyclically, so each source
    rank sends floor or ceil(tokens x top_k / E) to every expert, the remainders rotate over the
    experts rank after rank, and each token's top_k experts are consecutive, hence distinct.
    Group limits are not applied (exact_balanced replaces the router).

    >>> balanced_assignments(2, 3, 2, 4).tolist()
    [[[0, 1], [2, 3], [0, 1]], [[2, 3], [0, 1], [2, 3]]]
    """
    columns = _balanced_columns(n_ranks * tokens_per_rank, top_k, n_experts)
    return np.ascontiguousarray(columns.T, dtype=np.int64).reshape(n_ranks, tokens_per_rank, top_k)


def _balanced_columns(n_tokens: int, top_k: int, n_experts: int) -> np.ndarray:
    """``balanced_assignments`` column-major: int32 [top_k, n_tokens]."""
    position = np.arange(n_tokens, dtype=np.int64)[None, :] * top_k + np.arange(top_k)[:, None]
    return (position % n_experts).astype(np.int32)


def _assign_columns(
    cfg: RouterConfig, p: np.ndarray, *, tokens_per_rank: int, n_ranks: int, top_k: int,
    rng: np.random.Generator | None, n_group: int, topk_group: int,
    first: FirstRound | None = None,
) -> np.ndarray:
    """Assignments column-major: [top_k, n_ranks * tokens_per_rank] (rank-major tokens),
    int32 or (sampled) :func:`moesim.router.sampling.index_type`; ``rng``: the layer's token
    stream (None: not sampled), past ``first`` (the first round drawn ahead) if given."""
    n_tokens = n_ranks * tokens_per_rank
    if rng is None or not popularity_model(cfg.kind).sampled:
        return _balanced_columns(n_tokens, top_k, p.size)
    return group_limited_columns(p, n_tokens, top_k, rng, n_group=n_group, topk_group=topk_group,
                                 first=first)


def _token_stream(cfg: RouterConfig, seed: int, layer: int, microbatch: int,
                  step: int) -> np.random.Generator | None:
    """The layer's token-sampling stream; None for a popularity that is not sampled."""
    if not popularity_model(cfg.kind).sampled:
        return None
    return stream(seed, TAG_TOKENS, layer, microbatch, step)


def assign_experts(
    cfg: RouterConfig, *, tokens_per_rank: int, n_ranks: int, n_experts: int, top_k: int,
    seed: int, layer: int, microbatch: int = 0, step: int = 0, n_group: int = 1,
    topk_group: int = 1,
) -> np.ndarray:
    """Each token's experts: int64 [n_ranks, tokens_per_rank, top_k], distinct per token, in
    choice order. The same draw ``route_tokens`` counts, for the same arguments, unless it
    counts directly (:func:`exchangeable`: then the same law, another draw)."""
    p = _popularity(cfg, n_experts=n_experts, seed=seed, layer=layer, microbatch=microbatch,
                    step=step, shape=(tokens_per_rank, n_ranks, top_k, n_group, topk_group))
    columns = _assign_columns(cfg, p, tokens_per_rank=tokens_per_rank, n_ranks=n_ranks,
                              top_k=top_k, rng=_token_stream(cfg, seed, layer, microbatch, step),
                              n_group=n_group, topk_group=topk_group)
    return np.ascontiguousarray(columns.T, dtype=np.int64).reshape(n_ranks, tokens_per_rank, top_k)


def _popularity(
    cfg: RouterConfig, *, n_experts: int, seed: int, layer: int, microbatch: int, step: int,
    shape: tuple[int, int, int, int, int],
) -> np.ndarray:
    tokens_per_rank, n_ranks, top_k, n_group, topk_group = shape
    check_shape(tokens_per_rank=tokens_per_rank, n_ranks=n_ranks, n_experts=n_experts,
                top_k=top_k, n_group=n_group, topk_group=topk_group)
    for field, value in (("seed", seed), ("layer", layer), ("microbatch", microbatch),
                         ("step", step)):
        check_index(field, value, minimum=0)
    return layer_popularity(cfg, n_experts=n_experts, seed=seed, layer=layer,
                            microbatch=microbatch, step=step)


def capacity_per_expert(capacity_factor: float, tokens_per_rank: int, top_k: int,
                        n_experts: int) -> int:
    """Megatron's per-expert capacity at one source rank: ceil(cf x tokens x top_k / E)."""
    return math.ceil(capacity_factor * tokens_per_rank * top_k / n_experts)


@dataclass(frozen=True, eq=False)
class Draw:
    """One layer's random draws ahead of counting (:func:`draw_tokens`): its popularity and
    the first round of token candidates, most of a layer's random numbers, drawn in one numpy
    call that runs without the GIL, so a worker thread can draw the next layers while
    :func:`count_tokens` finishes and counts this one. Immutable: counting starts from a copy
    of the stream's state."""

    cfg: RouterConfig
    shape: tuple[int, int, int, int, int, int]
    """(tokens_per_rank, n_ranks, n_experts, top_k, n_group, topk_group)."""
    popularity: np.ndarray
    """float64 [n_experts]: the layer's expert popularity."""
    stream_state: Mapping[str, Any] | None
    """The token stream's bit-generator state past ``first`` (None: not sampled)."""
    first: FirstRound | None
    """The first round of candidates (:func:`moesim.router.sampling.topk_first`), or None
    (group-limited routing, a raced layer, counted directly, or not sampled)."""
    counted: Counted | None = None
    """The layer's counts drawn directly (:func:`exchangeable`: from ``stream_state``), or
    None (counted from per-token draws, or not yet)."""

    def stream(self) -> np.random.Generator | None:
        """A generator at ``stream_state`` (a new one on every call)."""
        if self.stream_state is None:
            return None
        bits = np.random.PCG64(0)  # seeded: its state is replaced (no OS entropy read)
        bits.state = dict(self.stream_state)  # type: ignore[assignment]  # numpy's TypedDict
        return np.random.Generator(bits)


def exchangeable(cfg: RouterConfig, p: np.ndarray, expert_to_rank: np.ndarray,
                 n_group: int) -> bool:
    """True when a layer's counts are drawn directly (:mod:`moesim.router.exchangeable`):
    sampled, every expert equally popular, no expert groups, no capacity cut, no replicas,
    every EP rank the same number of experts. Same law as counting per-token draws."""
    return (popularity_model(cfg.kind).sampled and n_group == 1 and bool(np.all(p == p[0]))
            and cfg.capacity_factor is None and not cfg.redundant_experts
            and blocks_equal(expert_to_rank, int(expert_to_rank.max()) + 1))


def draw_tokens(
    cfg: RouterConfig, *, tokens_per_rank: int, n_ranks: int, n_experts: int, top_k: int,
    seed: int, layer: int, microbatch: int = 0, step: int = 0, n_group: int = 1,
    topk_group: int = 1, ranks_per_node: int = 0,
) -> Draw:
    """The drawing half of :func:`route_tokens` (same arguments): validates them, draws the
    popularity and the first round of candidates, or (:func:`exchangeable`) the counts."""
    p = _popularity(cfg, n_experts=n_experts, seed=seed, layer=layer, microbatch=microbatch,
                    step=step, shape=(tokens_per_rank, n_ranks, top_k, n_group, topk_group))
    expert_to_rank = place_experts(cfg.placement, n_experts, n_ranks)
    check_redundant(cfg.redundant_experts, n_experts=n_experts, n_ranks=n_ranks)
    rng = _token_stream(cfg, seed, layer, microbatch, step)
    shape = (tokens_per_rank, n_ranks, n_experts, top_k, n_group, topk_group)
    if rng is None:
        return Draw(cfg, shape, p, None, None)
    state = rng.bit_generator.state
    if exchangeable(cfg, p, expert_to_rank, n_group):
        _check_node(n_ranks, ranks_per_node)
        return Draw(cfg, shape, p, state, None, sample_counts(
            rng, tokens_per_rank=tokens_per_rank, n_ranks=n_ranks,
            expert_to_rank=expert_to_rank, top_k=top_k, ranks_per_node=ranks_per_node))
    first = topk_first(p, n_ranks * tokens_per_rank, top_k, rng) if n_group == 1 else None
    return Draw(cfg, shape, p, rng.bit_generator.state, first)


def _check_node(n_ranks: int, ranks_per_node: int) -> None:
    if ranks_per_node and n_ranks % ranks_per_node:
        raise ConfigError("router.ranks_per_node", f"{ranks_per_node} must divide the "
                          f"{n_ranks} EP ranks")


def route_tokens(
    cfg: RouterConfig, *, tokens_per_rank: int, n_ranks: int, n_experts: int, top_k: int,
    seed: int, layer: int, microbatch: int = 0, step: int = 0, n_group: int = 1,
    topk_group: int = 1, ranks_per_node: int = 0,
) -> RoutingResult:
    """Route ``tokens_per_rank`` tokens on each of ``n_ranks`` EP ranks to ``top_k`` of
    ``n_experts`` experts, for one (layer, micro-batch, step). Same arguments -> same arrays.
    ``ranks_per_node`` > 0 also counts the distinct tokens per (rank, node of that many
    consecutive ranks): ``RoutingResult.node_tokens_dedup``. :func:`count_tokens` of
    :func:`draw_tokens`."""
    drawn = draw_tokens(cfg, tokens_per_rank=tokens_per_rank, n_ranks=n_ranks,
                        n_experts=n_experts, top_k=top_k, seed=seed, layer=layer,
                        microbatch=microbatch, step=step, n_group=n_group,
                        topk_group=topk_group, ranks_per_node=ranks_per_node)
    return count_tokens(drawn, ranks_per_node=ranks_per_node)


def count_tokens(drawn: Draw, *, ranks_per_node: int = 0) -> RoutingResult:
    """The counting half of :func:`route_tokens`: every token's experts (from ``drawn``'s
    first round on), the capacity cut, per-rank sizes and dedup."""
    cfg, p = drawn.cfg, drawn.popularity
    tokens_per_rank, n_ranks, n_experts, top_k, n_group, topk_group = drawn.shape
    expert_to_rank = place_experts(cfg.placement, n_experts, n_ranks)
    if drawn.stream_state is not None and exchangeable(cfg, p, expert_to_rank, n_group):
        counted = drawn.counted
        if counted is None or counted.ranks_per_node != ranks_per_node:
            _check_node(n_ranks, ranks_per_node)
            counted = sample_counts(drawn.stream(), tokens_per_rank=tokens_per_rank,  # type: ignore[arg-type]
                                    n_ranks=n_ranks, expert_to_rank=expert_to_rank,
                                    top_k=top_k, ranks_per_node=ranks_per_node)
        return _from_counts(counted, p, expert_to_rank)
    columns = _assign_columns(cfg, p, tokens_per_rank=tokens_per_rank, n_ranks=n_ranks,
                              top_k=top_k, rng=drawn.stream(), n_group=n_group,
                              topk_group=topk_group, first=drawn.first)
    wanted = pair_counts(columns, tokens_per_rank, n_ranks, n_experts)
    keep = None
    tokens = wanted
    if cfg.capacity_factor is not None:
        capacity = capacity_per_expert(cfg.capacity_factor, tokens_per_rank, top_k, n_experts)
        tokens = np.minimum(wanted, capacity)
        if np.any(wanted > capacity):
            keep = keep_mask(columns, n_ranks, n_experts, capacity)
    if cfg.redundant_experts:
        return _route_with_replicas(cfg, p, columns, keep, tokens, wanted, expert_to_rank,
                                    n_ranks=n_ranks, ranks_per_node=ranks_per_node)
    dst = destinations(columns, expert_to_rank, n_ranks)
    rank_tokens = rank_totals(tokens, expert_to_rank, n_ranks)
    return RoutingResult(
        tokens=tokens,
        dropped=wanted - tokens,
        expert_to_rank=expert_to_rank,
        rank_tokens=rank_tokens,
        rank_tokens_dedup=dedup_rank_tokens(dst, keep, rank_tokens),
        popularity=p,
        node_tokens_dedup=node_dedup(dst, keep, rank_tokens, ranks_per_node),
    )


def _from_counts(counted: Counted, p: np.ndarray, expert_to_rank: np.ndarray) -> RoutingResult:
    """``count_tokens``' result from counts drawn directly (nothing dropped)."""
    n_ranks = counted.rank_dedup.shape[0]
    return RoutingResult(
        tokens=counted.tokens,
        dropped=np.zeros_like(counted.tokens),
        expert_to_rank=expert_to_rank,
        rank_tokens=rank_totals(counted.tokens, expert_to_rank, n_ranks),
        rank_tokens_dedup=counted.rank_dedup,
        popularity=p,
        node_tokens_dedup=counted.node_dedup,
    )


def _route_with_replicas(
    cfg: RouterConfig, p: np.ndarray, columns: np.ndarray, keep: np.ndarray | None,
    tokens: np.ndarray, wanted: np.ndarray, expert_to_rank: np.ndarray,
    *, n_ranks: int, ranks_per_node: int = 0,
) -> RoutingResult:
    """``route_tokens`` tail with ``cfg.redundant_experts`` replicas as extra expert columns."""
    n_experts = expert_to_rank.size
    kept = np.ones(columns.shape, dtype=bool) if keep is None else keep
    remapped, placement, replica_of = replicate_hot_experts(
        columns, kept, expert_to_rank, n_ranks=n_ranks, count=cfg.redundant_experts)
    n_columns = placement.size
    extended = pair_counts(remapped, columns.shape[1] // n_ranks, n_ranks, n_columns, keep)
    dropped = np.zeros_like(extended)
    dropped[:, :n_experts] = wanted - tokens
    dst = destinations(remapped, placement, n_ranks)
    rank_tokens = rank_totals(extended, placement, n_ranks)
    return RoutingResult(
        tokens=extended,
        dropped=dropped,
        expert_to_rank=placement,
        rank_tokens=rank_tokens,
        rank_tokens_dedup=dedup_rank_tokens(dst, keep, rank_tokens),
        popularity=p,
        replica_of=replica_of,
        node_tokens_dedup=node_dedup(dst, keep, rank_tokens, ranks_per_node),
    )
