"""The model description: a frozen, validated transformer/MoE configuration.

Field names follow Hugging Face ``config.json`` where one exists (``hidden_size``,
``n_routed_experts``, ``q_lora_rank`` ...); ``num_layers`` is HF's ``num_hidden_layers``,
``top_k`` is ``num_experts_per_tok`` and ``mtp_layers`` is ``num_nextn_predict_layers``.
Loading HF files lives in :mod:`moesim.model.hf`; this module does no file I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from moesim.errors import ConfigError
from moesim.io import check_limit, short
from moesim.model.layer_pattern import moe_layers_from_freq

ATTENTION_KINDS = ("mha", "gqa", "mla")


@dataclass(frozen=True)
class ModelConfig:
    """One decoder-only transformer, dense or mixture-of-experts.

    Attention ``kind``: ``mha`` (kv heads = heads), ``gqa`` (fewer kv heads), or ``mla``
    (DeepSeek multi-head latent attention, using the ``*_lora_rank`` and ``*_head_dim`` fields).
    ``moe_layers[i]`` says whether layer ``i`` has a routed-expert FFN (else the dense FFN of
    ``intermediate_size``); empty means "all layers MoE" when ``n_routed_experts > 0``, else none.
    Shared experts each have ``shared_expert_intermediate_size`` (0 = ``moe_intermediate_size``).
    """

    name: str
    hidden_size: int
    num_layers: int
    vocab_size: int
    num_attention_heads: int
    attention: str = "mha"
    num_key_value_heads: int = 0  # 0 = num_attention_heads
    head_dim: int = 0  # 0 = hidden_size // num_attention_heads (mha/gqa)
    q_lora_rank: int | None = None  # MLA: None = no query compression
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    attention_bias: bool = False
    intermediate_size: int = 0  # dense FFN
    gated_ffn: bool = True  # SwiGLU: gate, up, down (3 matrices); False: up, down
    n_routed_experts: int = 0
    n_shared_experts: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    top_k: int = 0
    n_group: int = 1
    topk_group: int = 1
    router_bias: bool = False  # DeepSeek-V3 "noaux_tc" e_score_correction_bias
    moe_layers: tuple[bool, ...] = field(default=())
    mtp_layers: int = 0
    tie_embeddings: bool = False

    def __post_init__(self) -> None:
        _check_types(self)
        if self.attention not in ATTENTION_KINDS:
            raise ConfigError("model.attention", f"unknown {short(self.attention)}; allowed: "
                              + ", ".join(ATTENTION_KINDS))
        self._fill_defaults()
        self._check_attention()
        self._check_moe()

    def _fill_defaults(self) -> None:
        if self.num_key_value_heads == 0:
            object.__setattr__(self, "num_key_value_heads", self.num_attention_heads)
        if self.head_dim == 0 and self.attention != "mla":
            object.__setattr__(self, "head_dim", self.hidden_size // self.num_attention_heads)
        if self.shared_expert_intermediate_size == 0:
            object.__setattr__(self, "shared_expert_intermediate_size",
                               self.moe_intermediate_size)
        flags = tuple(bool(f) for f in self.moe_layers)
        if not flags:
            flags = (self.n_routed_experts > 0,) * self.num_layers
        object.__setattr__(self, "moe_layers", flags)

    def _check_attention(self) -> None:
        heads, kv = self.num_attention_heads, self.num_key_value_heads
        if self.attention == "mha" and kv != heads:
            raise ConfigError("model.num_key_value_heads", f"mha needs kv heads = heads "
                              f"({heads}), got {kv}; use attention 'gqa'")
        if self.attention == "gqa" and (kv > heads or heads % kv):
            raise ConfigError("model.num_key_value_heads", f"{kv} must divide "
                              f"num_attention_heads={heads}")
        if self.attention == "mla":
            for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
                if getattr(self, name) <= 0:
                    raise ConfigError(f"model.{name}", "mla needs a positive value")
            if self.q_lora_rank is not None and self.q_lora_rank <= 0:
                raise ConfigError("model.q_lora_rank", "must be positive or None (no q "
                                  "compression)")
        elif self.head_dim <= 0:
            raise ConfigError("model.head_dim", "must be positive")

    def _check_moe(self) -> None:
        if len(self.moe_layers) != self.num_layers:
            raise ConfigError("model.moe_layers", f"has {len(self.moe_layers)} entries; need "
                              f"one per layer ({self.num_layers})")
        if self.n_moe_layers:
            for name in ("n_routed_experts", "moe_intermediate_size", "top_k"):
                if getattr(self, name) <= 0:
                    raise ConfigError(f"model.{name}", "must be positive when any layer is MoE")
            if self.top_k > self.n_routed_experts:
                raise ConfigError("model.top_k", f"{self.top_k} exceeds n_routed_experts="
                                  f"{self.n_routed_experts}")
            self._check_groups()
        if self.n_dense_layers and self.intermediate_size <= 0:
            raise ConfigError("model.intermediate_size", "dense FFN layers need a positive "
                              "intermediate_size")

    def _check_groups(self) -> None:
        if self.n_routed_experts % self.n_group:
            raise ConfigError("model.n_group", f"{self.n_group} groups must divide "
                              f"n_routed_experts={self.n_routed_experts}")
        if not 1 <= self.topk_group <= self.n_group:
            raise ConfigError("model.topk_group", f"must be in [1, n_group={self.n_group}], "
                              f"got {self.topk_group}")
        per_group = self.n_routed_experts // self.n_group
        if self.top_k > self.topk_group * per_group:
            raise ConfigError("model.topk_group", f"top_k={self.top_k} experts cannot come "
                              f"from {self.topk_group} groups of {per_group}")

    @property
    def n_moe_layers(self) -> int:
        return sum(self.moe_layers)

    @property
    def n_dense_layers(self) -> int:
        return self.num_layers - self.n_moe_layers

    @property
    def is_moe(self) -> bool:
        return self.n_moe_layers > 0


_INT_FIELDS = (
    "hidden_size", "num_layers", "vocab_size", "num_attention_heads",
)
_NONNEG_INT_FIELDS = (
    "num_key_value_heads", "head_dim", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
    "v_head_dim", "intermediate_size", "n_routed_experts", "n_shared_experts",
    "moe_intermediate_size", "shared_expert_intermediate_size", "top_k", "mtp_layers",
)
_LIMIT_KIND = {"num_layers": "layers", "mtp_layers": "layers", "n_routed_experts": "experts",
               "n_shared_experts": "experts", "top_k": "experts", "n_group": "experts"}
"""Which input limit (:data:`moesim.io.LIMITS`) bounds each count; the rest are "width"."""
_BOOL_FIELDS = ("qk_norm", "attention_bias", "gated_ffn", "router_bias", "tie_embeddings")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_types(cfg: ModelConfig) -> None:
    if not isinstance(cfg.name, str) or not cfg.name:
        raise ConfigError("model.name", "must be a non-empty string")
    for name in (*_INT_FIELDS, "n_group", "topk_group"):
        value = getattr(cfg, name)
        if not _is_int(value) or value < 1:
            raise ConfigError(f"model.{name}", f"must be a positive integer, got {short(value)}")
    for name in _NONNEG_INT_FIELDS:
        value = getattr(cfg, name)
        if not _is_int(value) or value < 0:
            raise ConfigError(f"model.{name}", f"must be an integer >= 0, got {short(value)}")
    for name in (*_INT_FIELDS, *_NONNEG_INT_FIELDS, "n_group"):
        check_limit(_LIMIT_KIND.get(name, "width"), getattr(cfg, name), f"model.{name}")
    if cfg.q_lora_rank is not None and not _is_int(cfg.q_lora_rank):
        raise ConfigError("model.q_lora_rank", f"must be an integer or None, got "
                          f"{short(cfg.q_lora_rank)}")
    for name in _BOOL_FIELDS:
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(f"model.{name}", f"must be true or false, got "
                              f"{getattr(cfg, name)!r}")
    if not isinstance(cfg.moe_layers, tuple | list) or not all(
        isinstance(f, bool) or f in (0, 1) for f in cfg.moe_layers
    ):
        raise ConfigError("model.moe_layers", "must be a list of booleans (true = MoE layer)")


MODEL_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ModelConfig))


def model_from_dict(data: Mapping[str, Any]) -> ModelConfig:
    """Build a :class:`ModelConfig` from moesim's own schema (e.g. a scenario's YAML).

    Keys are the field names of :class:`ModelConfig`; unknown keys are an error. ``moe_layers``
    may also be given as a Megatron ``moe_layer_freq`` (int or list expression string), and
    ``first_k_dense`` (int) marks the first layers dense.
    """
    if not isinstance(data, Mapping):
        raise ConfigError("model", f"expected a mapping, got {type(data).__name__}")
    allowed = (*MODEL_FIELDS, "first_k_dense")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"model.{unknown[0]}", "unknown field; allowed: " + ", ".join(allowed))
    kwargs = {k: v for k, v in data.items() if k != "first_k_dense"}
    for required in ("name", "hidden_size", "num_layers", "vocab_size", "num_attention_heads"):
        if required not in kwargs:
            raise ConfigError(f"model.{required}", "required field is missing")
    first_k = data.get("first_k_dense", 0)
    if not _is_int(first_k) or first_k < 0:
        raise ConfigError("model.first_k_dense", f"must be an integer >= 0, got {short(first_k)}")
    pattern = kwargs.get("moe_layers")
    num_layers = kwargs["num_layers"]
    check_limit("layers", num_layers, "model.num_layers")
    if _is_int(num_layers) and num_layers > 0 and (pattern is not None or first_k):
        kwargs["moe_layers"] = _pattern(pattern, num_layers, first_k, kwargs)
    return ModelConfig(**kwargs)


def _pattern(pattern: object, num_layers: int, first_k: int,
             kwargs: Mapping[str, Any]) -> tuple[bool, ...]:
    if pattern is None:
        pattern = 1 if kwargs.get("n_routed_experts", 0) else [0] * num_layers
    if isinstance(pattern, Sequence) and not isinstance(pattern, str):
        pattern = list(pattern)
    return moe_layers_from_freq(pattern, num_layers, first_k_dense=first_k,  # type: ignore[arg-type]
                                field="model.moe_layers")
