"""Router configuration: which popularity model, how it is resampled, capacity and placement.

Megatron-LM knobs modelled here (Megatron-LM arguments, ``megatron/training/arguments.py``):
``--moe-router-force-load-balancing`` (kind ``force_balanced``: random logits, so a uniformly
random top_k per token; ``exact_balanced`` is the deterministic exactly-balanced variant for
hand-worked tests), ``--moe-router-force-biased <std>``
(kind ``force_biased``: normal random bias on the router logits; a positive std draws a new bias
every forward, a negative std one bias per layer, reused), ``--moe-expert-capacity-factor``
(unset = dropless; else capacity per expert = ceil(factor x tokens x top_k / experts)).
``redundant_experts`` models DeepSeek-V3's redundant experts (arXiv 2412.19437 section 3.4; EPLB).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from moesim.errors import ConfigError
from moesim.router.placement import placement_names
from moesim.router.popularity import PopularityKnobs, popularity_names
from moesim.router.streams import check_index

RESAMPLE_MODES = ("per_layer", "per_microbatch")


def _check_real(field: str, value: object, *, minimum: float, strict: bool = False) -> float:
    """Return ``value`` as float if it is a finite real >= (or > when strict) ``minimum``."""
    bound = f"> {minimum}" if strict else f">= {minimum}"
    if minimum == -math.inf:
        bound = "(any sign)"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(field, f"must be a number {bound}, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < minimum or (strict and number == minimum):
        raise ConfigError(field, f"must be a finite number {bound}, got {value!r}")
    return number


def _check_choice(field: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(field, f"unknown {value!r}; allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class RouterConfig(PopularityKnobs):
    """How tokens pick experts. Validated when built; see the module docstring for sources.

    Its first fields are the popularity knobs (:class:`moesim.router.popularity.PopularityKnobs`:
    kind, alpha, hot_experts, hot_factor, concentration, bias_std, resample, drift_steps).
    """

    capacity_factor: float | None = None
    """None = dropless; else drop assignments over ceil(cf x tokens x top_k / experts) per rank."""
    placement: str = "contiguous"
    """Expert -> EP rank map by registry name: contiguous | round_robin."""
    redundant_experts: int = 0
    """EPLB-style: the N most loaded experts of each layer get one replica on the least loaded
    other rank, and take half of each source's tokens (0 = off; < n_experts, checked at route)."""

    def __post_init__(self) -> None:
        _check_choice("router.kind", self.kind, popularity_names())
        _check_real("router.alpha", self.alpha, minimum=0.0)
        check_index("router.hot_experts", self.hot_experts, minimum=1)
        _check_real("router.hot_factor", self.hot_factor, minimum=1.0)
        _check_real("router.concentration", self.concentration, minimum=0.0, strict=True)
        _check_real("router.bias_std", self.bias_std, minimum=-math.inf)
        _check_choice("router.resample", self.resample, RESAMPLE_MODES)
        check_index("router.drift_steps", self.drift_steps, minimum=0)
        if self.drift_steps > 0 and self.resample != "per_layer":
            raise ConfigError(
                "router.drift_steps", "drift applies only to resample='per_layer'; set it to 0"
            )
        if self.capacity_factor is not None:
            _check_real("router.capacity_factor", self.capacity_factor, minimum=0.0, strict=True)
        _check_choice("router.placement", self.placement, placement_names())
        check_index("router.redundant_experts", self.redundant_experts, minimum=0)

    @property
    def dropless(self) -> bool:
        """True when no capacity factor is set (Megatron's default)."""
        return self.capacity_factor is None


UNIFORM = RouterConfig()
"""Every expert equally popular; imbalance only from token sampling."""
BALANCED = RouterConfig(kind="exact_balanced")
"""Exactly balanced counts (consecutive experts per token): for hand-worked cases."""
FORCE_BALANCED = RouterConfig(kind="force_balanced")
"""Megatron's --moe-router-force-load-balancing: random logits, uniform top_k per token."""
ZIPF_1 = RouterConfig(kind="zipf", alpha=1.0)
"""Zipf(1) popularity, fixed per layer."""
HOT_1X4 = RouterConfig(kind="hot", hot_experts=1, hot_factor=4.0)
"""One hot expert per layer, 4x as popular as the others."""
