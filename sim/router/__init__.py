"""MoE token router: per layer and micro-batch, which tokens go to which experts and ranks.

>>> from moesim.router import RouterConfig, route_tokens
>>> r = route_tokens(RouterConfig(kind="exact_balanced"), tokens_per_rank=4, n_ranks=2,
...                  n_experts=4, top_k=2, seed=0, layer=0)
>>> r.tokens.tolist(), r.rank_tokens.tolist()
([[2, 2, 2, 2], [2, 2, 2, 2]], [[4, 4], [4, 4]])
"""

from __future__ import annotations

from moesim.router.config import (
    BALANCED,
    FORCE_BALANCED,
    HOT_1X4,
    UNIFORM,
    ZIPF_1,
    RouterConfig,
)
from moesim.router.groups import sample_group_limited
from moesim.router.metrics import imbalance
from moesim.router.placement import place_experts, placement_names, register_placement
from moesim.router.popularity import (
    PopularityModel,
    layer_popularity,
    popularity_names,
    register_popularity,
)
from moesim.router.result import RoutingResult
from moesim.router.route import (
    Draw,
    assign_experts,
    balanced_assignments,
    capacity_per_expert,
    check_shape,
    count_tokens,
    draw_tokens,
    route_tokens,
)
from moesim.router.sampling import sample_topk

__all__ = [
    "BALANCED",
    "FORCE_BALANCED",
    "HOT_1X4",
    "UNIFORM",
    "ZIPF_1",
    "Draw",
    "PopularityModel",
    "RouterConfig",
    "RoutingResult",
    "assign_experts",
    "balanced_assignments",
    "capacity_per_expert",
    "check_shape",
    "count_tokens",
    "draw_tokens",
    "imbalance",
    "layer_popularity",
    "place_experts",
    "placement_names",
    "popularity_names",
    "register_placement",
    "register_popularity",
    "route_tokens",
    "sample_group_limited",
    "sample_topk",
]
