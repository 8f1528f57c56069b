"""ModelConfig validation, the safe moe_layer_freq parser, HF loading and presets."""

from __future__ import annotations

import dataclasses
import json

import pytest

from moesim.errors import ConfigError
from moesim.model import MODELS, ModelConfig, get_model, model_from_dict, model_from_hf
from moesim.model.layer_pattern import moe_layers_from_freq, moe_layers_qwen, parse_layer_freq
from moesim.model.presets import (
    DEEPSEEK_V3,
    KIMI_K2,
    MIXTRAL_8X7B,
    MOE_1T,
    QWEN3_235B_A22B,
    register_model,
)

# Subsets of the public config.json files (fields moesim does not read are kept on purpose:
# they must be ignored).
DEEPSEEK_V3_HF = {
    "architectures": ["DeepseekV3ForCausalLM"], "attention_bias": False,
    "aux_loss_alpha": 0.001, "ep_size": 1, "first_k_dense_replace": 3, "hidden_act": "silu",
    "hidden_size": 7168, "intermediate_size": 18432, "kv_lora_rank": 512,
    "max_position_embeddings": 163840, "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048, "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256,
    "n_shared_experts": 1, "norm_topk_prob": True, "num_attention_heads": 128,
    "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
    "rope_scaling": {"type": "yarn", "factor": 40}, "routed_scaling_factor": 2.5,
    "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 4,
    "topk_method": "noaux_tc", "torch_dtype": "bfloat16", "v_head_dim": 128,
    "vocab_size": 129280,
}
KIMI_K2_HF = {
    **DEEPSEEK_V3_HF, "model_type": "kimi_k2", "n_routed_experts": 384,
    "num_attention_heads": 64, "num_key_value_heads": 64, "first_k_dense_replace": 1,
    "n_group": 1, "topk_group": 1, "num_nextn_predict_layers": 0, "vocab_size": 163840,
    "routed_scaling_factor": 2.827,
}
MIXTRAL_HF = {
    "architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
    "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05,
    "router_aux_loss_coef": 0.02, "sliding_window": None, "tie_word_embeddings": False,
    "vocab_size": 32000,
}
QWEN3_HF = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "decoder_sparse_step": 1,
    "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 12288,
    "max_window_layers": 94, "mlp_only_layers": [], "model_type": "qwen3_moe",
    "moe_intermediate_size": 1536, "norm_topk_prob": True, "num_attention_heads": 64,
    "num_experts": 128, "num_experts_per_tok": 8, "num_hidden_layers": 94,
    "num_key_value_heads": 4, "rope_scaling": None, "tie_word_embeddings": False,
    "vocab_size": 151936,
}


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
    assert model_from_hf(hf, name=preset.name) == preset


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
