"""ModelConfig validation, the safe moe_layer_freq parser, HF loading and presets."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml
from published_models import DEEPSEEK_V3, HAND_TYPED, KIMI_K2, MIXTRAL_8X7B, QWEN3_235B_A22B

from moesim.errors import ConfigError
from moesim.model import MODELS, ModelConfig, get_model, model_from_dict, model_from_hf
from moesim.model.layer_pattern import moe_layers_from_freq, moe_layers_qwen, parse_layer_freq
from moesim.model.presets import HF_CONFIGS, MOE_1T, register_model


# The shipped presets' Hugging Face configs (subsets of the public config.json files; fields
# moesim does not read are kept on purpose: they must be ignored).
def _shipped(name: str) -> dict[str, object]:
    data = yaml.safe_load((HF_CONFIGS / f"{name}.yaml").read_text())
    assert isinstance(data, dict)
    return data


DEEPSEEK_V3_HF = _shipped("deepseek-v3")
KIMI_K2_HF = _shipped("kimi-k2")
MIXTRAL_HF = _shipped("mixtral-8x7b")
QWEN3_HF = _shipped("qwen3-235b-a22b")


def toy(**overrides: object) -> ModelConfig:
    base: dict[str, object] = dict(
        name="toy", hidden_size=8, num_layers=2, vocab_size=16, num_attention_heads=2,
        intermediate_size=16, n_routed_experts=4, moe_intermediate_size=4, top_k=2,
        moe_layers=(False, True),
    )
    base.update(overrides)
    return ModelConfig(**base)  # type: ignore[arg-type]


# --- the safe parser ---------------------------------------------------------------------

def test_parse_layer_freq_megatron_examples() -> None:
    assert parse_layer_freq("([0]*3+[1]*58)") == [0] * 3 + [1] * 58
    assert parse_layer_freq("[1,0]*4") == [1, 0, 1, 0, 1, 0, 1, 0]
    assert parse_layer_freq("2*[0, 1]") == [0, 1, 0, 1]
    assert parse_layer_freq("[0]*(2+1)") == [0, 0, 0]
    assert parse_layer_freq(" 3 ") == 3


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "open('x')", "x", "[1]*n", "lambda: 1",
    "[1]*10**3", "[1]-[0]", "[True]", "[1.0]", "-1", "[1]*1000000000", "[[1]]", "[2]",
    "[1]+1", "[1]*[2]", "[1, 0", "{1}", "'abc'",
])
def test_parse_layer_freq_rejects(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_layer_freq(text)
    assert info.value.field == "moe_layer_freq"


def test_moe_layers_from_freq_forms() -> None:
    assert moe_layers_from_freq(2, 5) == (True, False, True, False, True)
    assert moe_layers_from_freq(1, 4, first_k_dense=1) == (False, True, True, True)
    assert moe_layers_from_freq("[0]*1+[1]*3", 4) == (False, True, True, True)
    assert moe_layers_from_freq([1, 0, 1], 3) == (True, False, True)
    with pytest.raises(ConfigError, match="one per layer"):
        moe_layers_from_freq("[1]*3", 4)
    with pytest.raises(ConfigError, match=">= 1"):
        moe_layers_from_freq(0, 4)


def test_moe_layers_qwen_rule() -> None:
    # Qwen: MoE when (i + 1) % step == 0 and i not in mlp_only_layers
    assert moe_layers_qwen(4, decoder_sparse_step=2) == (False, True, False, True)
    assert moe_layers_qwen(3, mlp_only_layers=[0]) == (False, True, True)
    with pytest.raises(ConfigError) as info:
        moe_layers_qwen(3, mlp_only_layers=[5])
    assert info.value.field == "model.mlp_only_layers"


# --- ModelConfig ---------------------------------------------------------------------------

def test_defaults_resolve_and_layer_counts() -> None:
    cfg = toy()
    assert cfg.num_key_value_heads == 2 and cfg.head_dim == 4
    assert cfg.shared_expert_intermediate_size == 4
    assert (cfg.n_moe_layers, cfg.n_dense_layers) == (1, 1)
    assert toy(moe_layers=()).moe_layers == (True, True)
    assert DEEPSEEK_V3.n_dense_layers == 3 and DEEPSEEK_V3.n_moe_layers == 58


@pytest.mark.parametrize(("overrides", "field"), [
    ({"attention": "linear"}, "model.attention"),
    ({"hidden_size": 0}, "model.hidden_size"),
    ({"hidden_size": True}, "model.hidden_size"),
    ({"num_layers": 2.0}, "model.num_layers"),
    ({"top_k": 5}, "model.top_k"),
    ({"top_k": 0}, "model.top_k"),
    ({"moe_layers": (True,)}, "model.moe_layers"),
    ({"attention": "gqa", "num_key_value_heads": 3, "num_attention_heads": 4},
     "model.num_key_value_heads"),
    ({"attention": "mha", "num_key_value_heads": 1}, "model.num_key_value_heads"),
    ({"attention": "mla"}, "model.kv_lora_rank"),
    ({"n_group": 3}, "model.n_group"),
    ({"n_group": 2, "topk_group": 3}, "model.topk_group"),
    ({"n_group": 4, "topk_group": 1}, "model.topk_group"),  # 2 experts from 1 group of 1
    ({"intermediate_size": 0}, "model.intermediate_size"),
    ({"tie_embeddings": 1}, "model.tie_embeddings"),
    ({"n_routed_experts": 0}, "model.n_routed_experts"),
])
def test_model_config_rejects(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        toy(**overrides)
    assert info.value.field == field


def test_model_from_dict_schema() -> None:
    cfg = model_from_dict({"name": "toy", "hidden_size": 8, "num_layers": 4, "vocab_size": 16,
                           "num_attention_heads": 2, "intermediate_size": 16,
                           "n_routed_experts": 4, "moe_intermediate_size": 4, "top_k": 2,
                           "moe_layers": "[0]*1+[1]*3"})
    assert cfg.moe_layers == (False, True, True, True)
    cfg = model_from_dict({"name": "toy", "hidden_size": 8, "num_layers": 4, "vocab_size": 16,
                           "num_attention_heads": 2, "intermediate_size": 16,
                           "n_routed_experts": 4, "moe_intermediate_size": 4, "top_k": 2,
                           "first_k_dense": 2})
    assert cfg.moe_layers == (False, False, True, True)
    with pytest.raises(ConfigError) as info:
        model_from_dict({"name": "x", "hidden_sise": 8})
    assert info.value.field == "model.hidden_sise"
    assert "allowed: name, hidden_size" in info.value.problem
    with pytest.raises(ConfigError) as info:
        model_from_dict({"name": "x"})
    assert info.value.field == "model.hidden_size"


# --- Hugging Face loading -------------------------------------------------------------------

@pytest.mark.parametrize(("hf", "preset"), [
    (DEEPSEEK_V3_HF, DEEPSEEK_V3), (KIMI_K2_HF, KIMI_K2), (MIXTRAL_HF, MIXTRAL_8X7B),
    (QWEN3_HF, QWEN3_235B_A22B),
])
def test_hf_configs_match_presets(hf: dict[str, object], preset: ModelConfig) -> None:
    """The reader on each shipped config gives the hand-typed model, and so does the registry."""
    assert model_from_hf(hf, name=preset.name) == preset
    assert get_model(preset.name) == preset == HAND_TYPED[preset.name]


def test_hf_text_config_nesting_and_file(tmp_path: object) -> None:
    nested = {"model_type": "kimi_k25", "architectures": ["X"], "text_config": KIMI_K2_HF,
              "vision_config": {"hidden_size": 1152}}
    assert model_from_hf(nested, name="kimi-k2") == KIMI_K2
    path = tmp_path / "config.json"  # type: ignore[operator]
    path.write_text(json.dumps(MIXTRAL_HF))
    assert model_from_hf(path, name="mixtral-8x7b") == MIXTRAL_8X7B
    assert model_from_hf(str(tmp_path), name="mixtral-8x7b") == MIXTRAL_8X7B
    assert model_from_hf(MIXTRAL_HF).name == "mixtral"


def test_hf_megatron_style_moe_layer_freq() -> None:
    cfg = model_from_hf({**DEEPSEEK_V3_HF, "first_k_dense_replace": 0,
                         "moe_layer_freq": "([0]*3+[1]*58)"})
    assert cfg.moe_layers == DEEPSEEK_V3.moe_layers
    cfg = model_from_hf({**QWEN3_HF, "mlp_only_layers": [0, 93], "decoder_sparse_step": 1})
    assert cfg.n_dense_layers == 2 and not cfg.moe_layers[93]


@pytest.mark.parametrize(("patch", "field"), [
    ({"hidden_size": "7168"}, "model.hidden_size"),
    ({"num_hidden_layers": None}, "model.num_hidden_layers"),
    ({"tie_word_embeddings": "no"}, "model.tie_word_embeddings"),
    ({"moe_layer_freq": "eval('1')"}, "model.moe_layer_freq"),
    ({"moe_layer_freq": 1.5}, "model.moe_layer_freq"),
    ({"n_group": 2.0}, "model.n_group"),
    ({"topk_method": 3}, "model.topk_method"),
    ({"text_config": [1]}, "model.text_config"),
])
def test_hf_ill_typed_fields(patch: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        model_from_hf({**DEEPSEEK_V3_HF, **patch})
    assert info.value.field == field


def test_hf_missing_file(tmp_path: object) -> None:
    with pytest.raises(ConfigError) as info:
        model_from_hf(tmp_path / "nope.json")  # type: ignore[operator]
    assert info.value.field == "model.path"


# --- presets and registry ------------------------------------------------------------------

def test_presets_registry() -> None:
    assert set(MODELS) >= {"deepseek-v3", "kimi-k2", "mixtral-8x7b", "qwen3-235b-a22b",
                           "moe-1t"}
    assert get_model("moe-1t") is MOE_1T
    assert dataclasses.replace(MOE_1T, name="kimi-k2") == KIMI_K2
    with pytest.raises(ConfigError, match="allowed: deepseek-v3"):
        get_model("gpt-5")
    with pytest.raises(ConfigError, match="already registered"):
        register_model(DEEPSEEK_V3)
