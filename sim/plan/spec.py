"""What a design is asked: model, goal (tokens and days, or a GPU count), GPU kind, fabric."""

from __future__ import annotations

import math
from dataclasses import dataclass

from moesim.errors import ConfigError
from moesim.io import check_limit


@dataclass(frozen=True)
class DesignSpec:
    """The question. ``global_batch`` in sequences of ``seq_len`` tokens.

    ``gpus`` pins the GPU count; ``None`` sizes the cluster for the goal: the fewest GPUs
    that train ``tokens`` in ``days`` (at most ``gpu_budget`` when given, which alone makes
    the budget the count). ``fabric``: ``auto`` builds a rail fat tree for the count
    (:mod:`moesim.plan.cluster`, ``nic_gbit`` and leaf ``oversubscription``), else a preset
    name or a YAML file. ``simulate_min`` candidates (best by estimate), and every other one
    the estimate cannot rule out, run through the whole-step simulator in fast mode, up to
    ``simulate_max``. ``routing_draws`` is fast mode's count of distinct router draws
    (:func:`moesim.step.fast.fast_plan`; ``0`` = every MoE layer drawn, as ``moesim step``).

    Defaults: H200; 15e12 training tokens (Kimi K2 trained on 15.5T tokens, arXiv:2507.20534)
    in 60 days; global batch 16384 x 4096 = 67M tokens (Kimi K2 used a 67M-token batch;
    DeepSeek-V3 ramped to 15360 sequences, arXiv:2412.19437 sec. 4.2).
    """

    model: str = "moe-1t"
    gpus: int | None = None
    gpu: str = "H200"
    fabric: str = "auto"
    nic_gbit: int = 400
    oversubscription: float = 1.0
    tokens: float = 15e12
    days: float = 60.0
    gpu_budget: int | None = None
    seq_len: int = 4096
    global_batch: int = 16384
    micro_batch_size: int = 1
    precision: str = "bf16"
    hbm_reserve: float = 0.1
    simulate_min: int = 16
    simulate_max: int = 48
    routing_draws: int = 1
    extrapolate: bool = True  # steps of many micro-batches from two short runs (plan.extrapolate)
    # Search tp and cp only up to these (a team's own constraint; tp stays inside NVLink).
    max_tp: int = 8
    max_cp: int = 2
    prices: str | None = None  # YAML file over moesim.plan.prices' table
    checkpoint_interval_s: float = 0.0  # 0 = use the Young/Daly optimum
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("seq_len", "global_batch", "micro_batch_size", "simulate_min",
                     "simulate_max", "max_tp", "max_cp"):
            _positive_int(name, getattr(self, name))
        for name in ("gpus", "gpu_budget"):
            if getattr(self, name) is not None:
                _positive_int(name, getattr(self, name))
        if isinstance(self.routing_draws, bool) or not isinstance(self.routing_draws, int) \
                or self.routing_draws < 0:
            raise ConfigError("routing_draws", f"must be an integer >= 0 (0 = every layer), "
                              f"got {self.routing_draws!r}")
        if self.simulate_max < self.simulate_min:
            raise ConfigError("simulate_max", f"must be >= simulate_min ({self.simulate_min})")
        for name in ("gpus", "gpu_budget", "seq_len", "global_batch", "micro_batch_size"):
            if getattr(self, name) is not None:
                check_limit("gpus" if name == "gpu_budget" else name, getattr(self, name), name)
        for name in ("tokens", "days"):
            value = float(getattr(self, name))
            if not (value > 0 and math.isfinite(value)):
                raise ConfigError(name, f"must be a finite positive number, got {value!r}")
        if not 0 <= self.hbm_reserve < 1:
            raise ConfigError("hbm_reserve", f"must be in [0, 1), got {self.hbm_reserve!r}")
        if self.checkpoint_interval_s < 0:
            raise ConfigError("checkpoint_interval_s", "must be >= 0 (0 = Young/Daly)")

    @property
    def tokens_per_step(self) -> int:
        """Tokens of the batch as asked (a layout may adjust it: Candidate.global_batch)."""
        return self.global_batch * self.seq_len


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(name, f"must be a positive integer, got {value!r}")


def nearest_batch(requested: int, unit: int) -> int:
    """The multiple of ``unit`` nearest ``requested`` (ties upward), at least ``unit``:
    Megatron needs the global batch to split into whole micro-batches per DP replica."""
    low = requested - requested % unit
    high = low + unit
    if low < unit:
        return unit
    return low if requested - low < high - requested else high
