"""A scenario: model + GPU + fabric + workload + router, as frozen, validated records."""

from __future__ import annotations

from dataclasses import dataclass, field

from moesim.errors import ConfigError
from moesim.fabric.spec import FabricSpec
from moesim.model import ModelConfig
from moesim.router import RouterConfig
from moesim.workload.costs import WIRE_DTYPES


@dataclass(frozen=True)
class GroupWorkload:
    """One micro-batch through ``layers`` MoE layers of one EP group."""

    layers: int = 4
    tokens_per_rank: int = 4096
    seq_len: int = 4096
    dispatch_dtype: str = "fp8"
    combine_dtype: str = "bf16"
    dedup: bool = True  # DeepEP sends a token once per destination rank
    backward: bool = True

    def __post_init__(self) -> None:
        for name in ("layers", "tokens_per_rank", "seq_len"):
            if getattr(self, name) < 1:
                raise ConfigError(f"workload.{name}", "must be >= 1")
        for name in ("dispatch_dtype", "combine_dtype"):
            if getattr(self, name) not in WIRE_DTYPES:
                raise ConfigError(
                    f"workload.{name}", f"unknown '{getattr(self, name)}'; allowed: fp8, bf16"
                )


@dataclass(frozen=True)
class Placement:
    """Group mode only: EP rank r runs on GPU ``first_gpu + r * gpu_stride`` (full and fast
    modes run rank r on GPU r)."""

    first_gpu: int = 0
    gpu_stride: int = 1

    def __post_init__(self) -> None:
        if self.first_gpu < 0:
            raise ConfigError("placement.first_gpu", "must be >= 0")
        if self.gpu_stride < 1:
            raise ConfigError("placement.gpu_stride", "must be >= 1")

    def gpu_ids(self, ranks: int) -> list[int]:
        """The GPU of each of ``ranks`` EP ranks."""
        return [self.first_gpu + r * self.gpu_stride for r in range(ranks)]


@dataclass(frozen=True)
class Setting:
    """What every scenario names, whatever simulates it: the model on which GPUs, fabric and
    router, the slowed GPUs, the seed of every random draw, and a description."""

    name: str
    model: ModelConfig
    gpu: str = "H100"
    fabric: FabricSpec = field(default_factory=FabricSpec)
    router: RouterConfig = field(default_factory=RouterConfig)
    slow_gpus: tuple[tuple[int, float], ...] = ()  # (GPU, slowdown factor >= 1)
    seed: int = 0
    description: str = ""


@dataclass(frozen=True)
class GroupSpec(Setting):
    """Everything one group-mode run needs: the setting, the EP group's size (the layout's
    ``ep``), its workload and where its ranks run."""

    ep: int = 8
    workload: GroupWorkload = field(default_factory=GroupWorkload)
    placement: Placement = field(default_factory=Placement)

    def __post_init__(self) -> None:
        wl, model = self.workload, self.model
        if self.ep < 1 or model.n_routed_experts % self.ep:
            raise ConfigError(
                "layout.ep",
                f"{model.n_routed_experts} experts do not divide over ep={self.ep}; "
                f"ep must divide {model.n_routed_experts}",
            )
        if wl.layers > model.n_moe_layers:
            raise ConfigError(
                "workload.layers", f"model {model.name} has {model.n_moe_layers} MoE layers"
            )
        for gpu, factor in self.slow_gpus:
            if factor < 1:
                raise ConfigError(f"slow_gpus.{gpu}", f"slowdown must be >= 1, got {factor}")
