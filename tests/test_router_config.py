"""RouterConfig validation, registries, placement and shape checks of the router."""

from __future__ import annotations

import math

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.router import (
    BALANCED,
    UNIFORM,
    PopularityModel,
    RouterConfig,
    place_experts,
    placement_names,
    popularity_names,
    register_placement,
    register_popularity,
    route_tokens,
)


def test_defaults_are_uniform_dropless_contiguous() -> None:
    cfg = RouterConfig()
    assert (cfg.kind, cfg.resample, cfg.placement, cfg.capacity_factor) == (
        "uniform", "per_layer", "contiguous", None)
    assert cfg.dropless and cfg == UNIFORM and BALANCED.kind == "exact_balanced"


def test_registry_names() -> None:
    assert popularity_names() == (
        "uniform", "zipf", "hot", "dirichlet", "force_balanced", "exact_balanced",
        "force_biased")
    assert placement_names() == ("contiguous", "round_robin")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"kind": "zip"}, "router.kind"),
        ({"alpha": -0.1}, "router.alpha"),
        ({"alpha": math.inf}, "router.alpha"),
        ({"alpha": "1"}, "router.alpha"),
        ({"hot_experts": 0}, "router.hot_experts"),
        ({"hot_experts": 1.5}, "router.hot_experts"),
        ({"hot_experts": True}, "router.hot_experts"),
        ({"hot_factor": 0.5}, "router.hot_factor"),
        ({"concentration": 0.0}, "router.concentration"),
        ({"bias_std": math.nan}, "router.bias_std"),
        ({"resample": "per_step"}, "router.resample"),
        ({"drift_steps": -1}, "router.drift_steps"),
        ({"drift_steps": 4, "resample": "per_microbatch"}, "router.drift_steps"),
        ({"capacity_factor": 0.0}, "router.capacity_factor"),
        ({"capacity_factor": -1.0}, "router.capacity_factor"),
        ({"placement": "random"}, "router.placement"),
    ],
)
def test_bad_field_names_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        RouterConfig(**kwargs)  # type: ignore[arg-type]
    assert err.value.field == field


def test_unknown_kind_lists_allowed() -> None:
    with pytest.raises(ConfigError, match="allowed: uniform, zipf, hot"):
        RouterConfig(kind="zip")


def test_edge_values_are_accepted() -> None:
    RouterConfig(kind="zipf", alpha=0.0)
    RouterConfig(kind="hot", hot_factor=1.0)
    RouterConfig(kind="force_biased", bias_std=-2.0)
    RouterConfig(capacity_factor=0.01, placement="round_robin", drift_steps=3)


def test_duplicate_registration_is_an_error() -> None:
    with pytest.raises(ConfigError, match="already registered"):
        register_popularity(PopularityModel("zipf", lambda cfg, rng, n: np.ones(n)))
    with pytest.raises(ConfigError, match="already registered"):
        register_placement("contiguous", lambda n_experts, n_ranks: np.zeros(n_experts))


def test_placements_hand_computed() -> None:
    assert place_experts("contiguous", 8, 4).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert place_experts("round_robin", 8, 4).tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_placement_needs_divisible_ep() -> None:
    with pytest.raises(ConfigError) as err:
        place_experts("contiguous", 10, 4)
    assert err.value.field == "ep"


SHAPE = {"tokens_per_rank": 8, "n_ranks": 2, "n_experts": 8, "top_k": 2, "seed": 0, "layer": 0}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"n_ranks": 3}, "ep"),
        ({"n_ranks": 0}, "ep"),
        ({"tokens_per_rank": 0}, "tokens_per_rank"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 9}, "top_k"),
        ({"n_group": 3}, "n_group"),
        ({"n_group": 4, "topk_group": 5}, "topk_group"),
        ({"n_group": 4, "topk_group": 1, "top_k": 3}, "top_k"),
        ({"seed": -1}, "seed"),
        ({"layer": -1}, "layer"),
        ({"microbatch": -2}, "microbatch"),
        ({"step": 1.0}, "step"),
    ],
)
def test_route_shape_errors(change: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        route_tokens(UNIFORM, **{**SHAPE, **change})  # type: ignore[arg-type]
    assert err.value.field == field


def test_more_hot_experts_than_experts() -> None:
    with pytest.raises(ConfigError) as err:
        route_tokens(RouterConfig(kind="hot", hot_experts=9), **SHAPE)
    assert err.value.field == "router.hot_experts"


def test_docstring_examples() -> None:
    import doctest

    import moesim.router
    from moesim.router import alias, placement, route, sampling

    for module in (moesim.router, alias, placement, route, sampling):
        assert doctest.testmod(module).failed == 0, module.__name__
