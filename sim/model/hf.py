"""Read a Hugging Face ``config.json`` (DeepSeek-V3 / Kimi K2, Mixtral, Qwen3-MoE families).

Field names (conventions.md):

* experts: ``n_routed_experts`` (DeepSeek/Kimi) | ``num_local_experts`` (Mixtral) |
  ``num_experts`` (Qwen-MoE); Mixtral has no ``moe_intermediate_size``: its
  ``intermediate_size`` *is* the per-expert FFN size.
* dense layers: ``first_k_dense_replace`` + ``moe_layer_freq`` (DeepSeek) or
  ``mlp_only_layers`` + ``decoder_sparse_step`` (Qwen) — see :mod:`moesim.model.layer_pattern`.
* MLA when ``kv_lora_rank`` is set; otherwise GQA when ``num_key_value_heads`` < heads.
* Newer multimodal releases nest the language model under ``text_config``; its fields win.

Fields not read here are ignored (HF configs carry many); a field that *is* read but has the
wrong type raises :class:`ConfigError` naming it. Defaults where a field is absent follow the
Transformers config classes of these families: ``tie_word_embeddings`` False (DeepseekV3Config,
MixtralConfig, Qwen3MoeConfig), ``head_dim`` = hidden / heads, ``n_group`` = ``topk_group`` = 1.
Qwen3 has per-head q/k RMSNorm that no field announces: it is switched on by ``model_type``
starting with ``qwen3``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from moesim.errors import ConfigError
from moesim.io import check_limit, read_json, short
from moesim.model.config import ModelConfig
from moesim.model.layer_pattern import moe_layers_from_freq, moe_layers_qwen

_EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")
_MISSING = object()
_HF_NAMES = {"num_layers": "num_hidden_layers", "top_k": "num_experts_per_tok",
             "mtp_layers": "num_nextn_predict_layers", "tie_embeddings": "tie_word_embeddings",
             "moe_layers": "moe_layer_freq"}
"""ModelConfig's field -> the config.json field it is read from (where the names differ)."""
_INT_RULES = {  # HF field -> (input limit that bounds it, smallest allowed value); else width, 0
    "num_hidden_layers": ("layers", 1), "num_nextn_predict_layers": ("layers", 0),
    "first_k_dense_replace": ("layers", 0), "hidden_size": ("width", 1),
    "vocab_size": ("width", 1), "num_attention_heads": ("width", 1),
    "num_key_value_heads": ("width", 1), "q_lora_rank": ("width", 1),
    "n_routed_experts": ("experts", 0), "num_local_experts": ("experts", 0),
    "num_experts": ("experts", 0), "n_shared_experts": ("experts", 0),
    "num_experts_per_tok": ("experts", 1), "n_group": ("experts", 1),
    "topk_group": ("experts", 1),
}


def load_hf_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a ``config.json`` file (or a directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    data = read_json(p, "model.path")
    if not isinstance(data, dict):
        raise ConfigError("model.path", f"{short(str(p))} does not hold a JSON object")
    return data


def model_from_hf(
    source: Mapping[str, Any] | str | os.PathLike[str], *, name: str | None = None
) -> ModelConfig:
    """Build a :class:`ModelConfig` from a HF ``config.json`` dict, file or directory."""
    data = load_hf_json(source) if isinstance(source, str | os.PathLike) else dict(source)
    text = data.get("text_config")
    if text is not None:
        if not isinstance(text, Mapping):
            raise ConfigError("model.text_config", "must be a JSON object")
        data = {**data, **text}
    r = _Reader(data)
    heads = r.get_int("num_attention_heads")
    try:
        return _build(r, data, heads, name)
    except ConfigError as exc:  # name the field as config.json spells it
        field = exc.field.removeprefix("model.")
        hf_field = _HF_NAMES.get(field, field)
        if hf_field == field:
            raise
        raise ConfigError(f"model.{hf_field}", exc.problem) from None


def _build(r: _Reader, data: Mapping[str, Any], heads: int, name: str | None) -> ModelConfig:
    return ModelConfig(
        name=name or _default_name(data),
        hidden_size=r.get_int("hidden_size"),
        num_layers=r.get_int("num_hidden_layers"),
        vocab_size=r.get_int("vocab_size"),
        num_attention_heads=heads,
        tie_embeddings=r.get_bool("tie_word_embeddings", False),
        attention_bias=r.get_bool("attention_bias", False),
        qk_norm=str(data.get("model_type", "")).startswith("qwen3"),
        mtp_layers=r.get_int("num_nextn_predict_layers", 0),
        **_attention_fields(r, heads),
        **_ffn_fields(r),
    )


def _default_name(data: Mapping[str, Any]) -> str:
    for key in ("_name_or_path", "model_type"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return "hf-model"


def _attention_fields(r: _Reader, heads: int) -> dict[str, Any]:
    if r.get("kv_lora_rank") is not None:
        return {
            "attention": "mla",
            "num_key_value_heads": heads,
            "q_lora_rank": r.get_int("q_lora_rank", None),
            "kv_lora_rank": r.get_int("kv_lora_rank"),
            "qk_nope_head_dim": r.get_int("qk_nope_head_dim"),
            "qk_rope_head_dim": r.get_int("qk_rope_head_dim"),
            "v_head_dim": r.get_int("v_head_dim"),
        }
    kv = r.get_int("num_key_value_heads", heads)
    return {
        "attention": "gqa" if kv < heads else "mha",
        "num_key_value_heads": kv,
        "head_dim": r.get_int("head_dim", 0),
    }


def _ffn_fields(r: _Reader) -> dict[str, Any]:
    num_layers = r.get_int("num_hidden_layers")
    key = next((k for k in _EXPERT_KEYS if r.get(k) is not None), None)
    experts = r.get_int(key, 0) if key else 0
    dense_ffn = r.get_int("intermediate_size", 0)
    if experts == 0:
        return {"intermediate_size": dense_ffn, "moe_layers": (False,) * num_layers}
    moe_ffn = dense_ffn if key == "num_local_experts" else r.get_int("moe_intermediate_size")
    shared = r.get_int("n_shared_experts", 0)
    shared_ffn = r.get_int("shared_expert_intermediate_size", 0)
    if shared_ffn and not shared:
        shared = 1  # Qwen2-MoE: one shared expert of shared_expert_intermediate_size
    return {
        "intermediate_size": dense_ffn,
        "n_routed_experts": experts,
        "moe_intermediate_size": moe_ffn,
        "n_shared_experts": shared,
        "shared_expert_intermediate_size": shared_ffn,
        "top_k": r.get_int("num_experts_per_tok"),
        "n_group": r.get_int("n_group", 1),
        "topk_group": r.get_int("topk_group", 1),
        "router_bias": r.get_str("topk_method", "") == "noaux_tc",
        "moe_layers": _moe_layers(r, num_layers),
    }


def _moe_layers(r: _Reader, num_layers: int) -> tuple[bool, ...]:
    if r.get("mlp_only_layers") is not None or r.get("decoder_sparse_step") is not None:
        only = r.get("mlp_only_layers") or []
        if not isinstance(only, list):
            raise ConfigError("model.mlp_only_layers", "must be a list of layer indices")
        return moe_layers_qwen(num_layers, decoder_sparse_step=r.get_int("decoder_sparse_step", 1),
                               mlp_only_layers=only)
    freq = r.get("moe_layer_freq")
    if freq is None:
        freq = 1
    if isinstance(freq, bool) or not isinstance(freq, int | str | list):
        raise ConfigError("model.moe_layer_freq", "must be an int, a list of 0/1 or a list "
                          f"expression string, got {type(freq).__name__}")
    first_k = r.get_int("first_k_dense_replace", 0)
    if first_k > num_layers:
        raise ConfigError("model.first_k_dense_replace", f"{first_k} dense layers exceed "
                          f"num_hidden_layers = {num_layers}")
    return moe_layers_from_freq(freq, num_layers, field="model.moe_layer_freq",
                                first_k_dense=first_k)


class _Reader:
    """Typed access to a config dict; errors name the HF field."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data

    def get(self, key: str) -> Any:
        return self._data.get(key)

    def get_int(self, key: str, default: Any = _MISSING) -> Any:
        value = self._data.get(key)
        if value is None:
            if default is _MISSING:
                raise ConfigError(f"model.{key}", "required field is missing from config.json")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"model.{key}", f"must be an integer, got {short(value)}")
        kind, minimum = _INT_RULES.get(key, ("width", 0))
        if value < minimum:
            raise ConfigError(f"model.{key}", f"must be an integer >= {minimum}, got {value}")
        check_limit(kind, value, f"model.{key}")
        return value

    def get_bool(self, key: str, default: bool) -> bool:
        value = self._data.get(key, default)
        if not isinstance(value, bool):
            raise ConfigError(f"model.{key}", f"must be true or false, got {short(value)}")
        return value

    def get_str(self, key: str, default: str) -> str:
        value = self._data.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise ConfigError(f"model.{key}", f"must be a string, got {short(value)}")
        return value
