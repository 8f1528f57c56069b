"""Expert popularity models (a registry by name) and which random stream each draw comes from.

A popularity is a probability vector p over the experts of one layer; tokens then pick their
top_k experts without repeats proportional to p (see ``sampling``). Models:

- ``uniform``: every expert equal; imbalance comes only from token sampling.
- ``zipf``: p_e ~ 1 / r_e^alpha, r = a random per-draw ranking of the experts (alpha 0 = uniform).
- ``hot``: ``hot_experts`` experts, chosen at random, are ``hot_factor`` x as popular as the rest.
- ``dirichlet``: p ~ Dirichlet(concentration, ..., concentration).
- ``force_balanced``: Megatron ``--moe-router-force-load-balancing``: the router's logits are
  replaced by i.i.d. standard normals (``RandomSTE.forward``: ``logits.clone().normal_()``,
  megatron/core/transformer/moe/moe_utils.py, Megatron-LM core_r0.12 onward), then routed as
  usual: top_k of them, so each token takes a uniformly random k-subset of the experts, balanced
  in expectation, with sampling noise. That is the uniform sampler (group limits apply, as in
  Megatron where the random logits then go through group-limited top-k; here groups are
  picked in proportion to their mass, which for equal experts is uniform over groups). For
  top-8 of 256 over EP64 a token reaches 7.68 EP ranks and, over 8 nodes, 5.29 nodes
  (expected values; tests/test_router_spread.py).
- ``exact_balanced``: exact balanced counts, no sampling: every source rank sends floor or
  ceil(tokens x top_k / E) to every expert, the assignments walking the experts cyclically, so
  each token's experts are *consecutive* (it reaches 1-2 EP ranks, not the ~7.5 of a real or
  force-balanced router): for hand-worked tests and counts, never for the bytes of a
  deduplicating dispatcher.
- ``force_biased``: p ~ exp(b), b_e ~ Normal(0, |bias_std|) (Megatron ``--moe-router-force-biased``:
  bias_std > 0 draws a new bias every forward, < 0 one bias per layer, reused).

Every p is floored at ``P_FLOOR_REL`` / n_experts and renormalised, so every expert stays reachable
and a token can always find top_k distinct experts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from moesim.errors import ConfigError
from moesim.router.streams import TAG_POPULARITY_LAYER, TAG_POPULARITY_MICROBATCH, stream


@dataclass(frozen=True)
class PopularityKnobs:
    """The router settings a popularity model reads, declared once here:
    :class:`moesim.router.RouterConfig` extends (and validates) them, so this module sits below
    the config."""

    kind: str = "uniform"
    """Popularity model by registry name: uniform, zipf, hot, dirichlet, force_balanced, ..."""
    alpha: float = 1.0
    """zipf: p_e ~ 1 / r_e^alpha over a random per-layer ranking r (>= 0; 0 == uniform)."""
    hot_experts: int = 1
    """hot: how many hot experts (>= 1, <= n_experts)."""
    hot_factor: float = 4.0
    """hot: popularity multiplier of each hot expert (>= 1)."""
    concentration: float = 1.0
    """dirichlet: p ~ Dirichlet(concentration) (> 0; small = skewed)."""
    bias_std: float = 0.0
    """force_biased: Megatron --moe-router-force-biased; > 0 new bias per forward, < 0 per layer."""
    resample: str = "per_layer"
    """per_layer: popularity fixed per layer; per_microbatch: redrawn per (layer, mb, step)."""
    drift_steps: int = 0
    """per_layer only: 0 = fixed; N > 0 = popularity glides to a fresh draw every N steps."""


P_FLOOR_REL = 1e-12
"""Smallest popularity relative to uniform (1/n_experts); keeps Dirichlet underflow reachable."""

DrawFn = Callable[[PopularityKnobs, np.random.Generator, int], np.ndarray]
"""(config, generator, n_experts) -> non-negative weights [n_experts] (normalised afterwards)."""


@dataclass(frozen=True)
class PopularityModel:
    """A named popularity model."""

    name: str
    draw: DrawFn
    sampled: bool = True
    """False: token counts are set exactly (exact_balanced), not sampled from p."""


_MODELS: dict[str, PopularityModel] = {}


def register_popularity(model: PopularityModel) -> PopularityModel:
    """Add ``model`` to the registry; a duplicate name is an error."""
    if model.name in _MODELS:
        raise ConfigError("router.kind", f"popularity model {model.name!r} is already registered")
    _MODELS[model.name] = model
    return model


def popularity_names() -> tuple[str, ...]:
    """Registered popularity model names, in registration order."""
    return tuple(_MODELS)


def popularity_model(name: str) -> PopularityModel:
    """The model registered as ``name`` (ConfigError listing the names otherwise)."""
    if name not in _MODELS:
        raise ConfigError("router.kind", f"unknown {name!r}; allowed: {', '.join(_MODELS)}")
    return _MODELS[name]


def _uniform(cfg: PopularityKnobs, rng: np.random.Generator, n_experts: int) -> np.ndarray:
    return np.ones(n_experts)


def _zipf(cfg: PopularityKnobs, rng: np.random.Generator, n_experts: int) -> np.ndarray:
    ranking = rng.permutation(n_experts) + 1
    return 1.0 / ranking.astype(np.float64) ** cfg.alpha


def _hot(cfg: PopularityKnobs, rng: np.random.Generator, n_experts: int) -> np.ndarray:
    if cfg.hot_experts > n_experts:
        raise ConfigError(
            "router.hot_experts", f"{cfg.hot_experts} hot experts, but only {n_experts} experts"
        )
    weights = np.ones(n_experts)
    weights[rng.choice(n_experts, size=cfg.hot_experts, replace=False)] = cfg.hot_factor
    return weights


def _dirichlet(cfg: PopularityKnobs, rng: np.random.Generator, n_experts: int) -> np.ndarray:
    return rng.dirichlet(np.full(n_experts, cfg.concentration))


def _force_biased(cfg: PopularityKnobs, rng: np.random.Generator, n_experts: int) -> np.ndarray:
    bias = rng.normal(0.0, abs(cfg.bias_std), size=n_experts)
    return np.exp(bias - bias.max())


register_popularity(PopularityModel("uniform", _uniform))
register_popularity(PopularityModel("zipf", _zipf))
register_popularity(PopularityModel("hot", _hot))
register_popularity(PopularityModel("dirichlet", _dirichlet))
register_popularity(PopularityModel("force_balanced", _uniform))
register_popularity(PopularityModel("exact_balanced", _uniform, sampled=False))
register_popularity(PopularityModel("force_biased", _force_biased))


def normalise(weights: np.ndarray) -> np.ndarray:
    """Weights -> probabilities floored at P_FLOOR_REL / n (so all > 0), summing to 1."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ConfigError("router.kind", "popularity weights must be finite, >= 0, not all zero")
    p = np.maximum(w / w.sum(), P_FLOOR_REL / w.size)
    return p / p.sum()


def redrawn_per_forward(cfg: PopularityKnobs) -> bool:
    """True when popularity is redrawn for every (layer, micro-batch, step).

    force_biased follows Megatron's sign rule (bias_std > 0: new bias every forward; otherwise
    one bias per layer); every other model follows ``cfg.resample``.
    """
    if cfg.kind == "force_biased":
        return cfg.bias_std > 0
    return cfg.resample == "per_microbatch"


def layer_popularity(
    cfg: PopularityKnobs, *, n_experts: int, seed: int, layer: int, microbatch: int = 0,
    step: int = 0,
) -> np.ndarray:
    """The popularity p [n_experts] used for one (layer, micro-batch, step); sums to 1.

    Per-layer popularity is keyed by (seed, layer) only - or by (seed, layer, drift epoch) with
    ``drift_steps`` N > 0, where step s blends the draws of epochs s // N and s // N + 1 with
    weight (s % N) / N, so popularity glides from one draw to the next. Per-forward popularity is
    keyed by (seed, layer, micro-batch, step).
    """
    model = popularity_model(cfg.kind)

    def draw(tag: int, *keys: int) -> np.ndarray:
        return normalise(model.draw(cfg, stream(seed, tag, layer, *keys), n_experts))

    if redrawn_per_forward(cfg):
        return draw(TAG_POPULARITY_MICROBATCH, microbatch, step)
    if cfg.drift_steps == 0:
        return draw(TAG_POPULARITY_LAYER, 0)
    epoch, into = divmod(step, cfg.drift_steps)
    blend = into / cfg.drift_steps
    if blend == 0.0:
        return draw(TAG_POPULARITY_LAYER, epoch)
    p = (1.0 - blend) * draw(TAG_POPULARITY_LAYER, epoch) + blend * draw(
        TAG_POPULARITY_LAYER, epoch + 1
    )
    return p / p.sum()
