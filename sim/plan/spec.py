"""What a design is asked: model, GPU count and kind, fabric, token budget, batch."""

from __future__ import annotations

from dataclasses import dataclass

from moesim.errors import ConfigError

RECOMPUTE_ORDER = ("selective", "full")  # tried in this order until the layout fits


@dataclass(frozen=True)
class DesignSpec:
    """The question. ``global_batch`` in sequences of ``seq_len`` tokens.

    Defaults: 4096 H200 on ``rail-h200-4096``; 15e12 training tokens (Kimi K2 trained on
    15.5T tokens, arXiv:2507.20534); global batch 16384 x 4096 = 67M tokens (Kimi K2 used a
    67M-token batch; DeepSeek-V3 ramped to 15360 sequences, arXiv:2412.19437 sec. 4.2).
    """

    model: str = "moe-1t"
    gpus: int = 4096
    gpu: str = "H200"
    fabric: str = "rail-h200-4096"
    tokens: float = 15e12
    days: float = 60.0
    seq_len: int = 4096
    global_batch: int = 16384
    micro_batch_size: int = 1
    precision: str = "bf16"
    hbm_reserve: float = 0.1
    simulate_top: int = 3
    checkpoint_interval_s: float = 0.0  # 0 = use the Young/Daly optimum
    seed: int = 1

    def __post_init__(self) -> None:
        for name in ("gpus", "seq_len", "global_batch", "micro_batch_size", "simulate_top"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(name, f"must be a positive integer, got {value!r}")
        for name in ("tokens", "days"):
            if not float(getattr(self, name)) > 0:
                raise ConfigError(name, f"must be positive, got {getattr(self, name)!r}")
        if not 0 <= self.hbm_reserve < 1:
            raise ConfigError("hbm_reserve", f"must be in [0, 1), got {self.hbm_reserve!r}")
        if self.checkpoint_interval_s < 0:
            raise ConfigError("checkpoint_interval_s", "must be >= 0 (0 = Young/Daly)")

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch * self.seq_len
