"""Corpus tables for Hugging Face ``config.json`` files (``plan accounting``, ``design --model``):
a valid DeepSeek-V3 subset and its malformed mutations (and Qwen3's layer keys)."""

from __future__ import annotations

from typing import Any

from malformed_case import BIG, DROP

HF: dict[str, Any] = {  # a subset of DeepSeek-V3's config.json (huggingface.co/deepseek-ai)
    "first_k_dense_replace": 3,
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "kv_lora_rank": 512,
    "model_type": "deepseek_v3",
    "moe_intermediate_size": 2048,
    "moe_layer_freq": 1,
    "n_group": 8,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_attention_heads": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 61,
    "num_key_value_heads": 128,
    "num_nextn_predict_layers": 1,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "tie_word_embeddings": False,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "v_head_dim": 128,
    "vocab_size": 129280,
}

HF_MUTATIONS: list[tuple[str, object, str]] = [
    *(
        (key, DROP, f"model.{key}")
        for key in (
            "hidden_size",
            "num_hidden_layers",
            "vocab_size",
            "num_attention_heads",
            "moe_intermediate_size",
            "num_experts_per_tok",
        )
    ),
    *(
        (key, bad, f"model.{key}")
        for key in (
            "hidden_size",
            "num_hidden_layers",
            "vocab_size",
            "num_attention_heads",
            "n_routed_experts",
        )
        for bad in ("x", 1.5, True, -1)
    ),
    ("num_hidden_layers", 1_000_000_000, "model.num_hidden_layers"),
    ("num_hidden_layers", 0, "model.num_hidden_layers"),
    ("hidden_size", 10**15, "model.hidden_size"),
    ("n_routed_experts", 10**8, "model.n_routed_experts"),
    ("first_k_dense_replace", -1, "model.first_k_dense_replace"),
    ("first_k_dense_replace", "x", "model.first_k_dense_replace"),
    ("first_k_dense_replace", 1000, "model.first_k_dense_replace"),
    ("moe_layer_freq", "+".join(["1"] * 5000), "model.moe_layer_freq"),
    ("moe_layer_freq", "*".join(["[1]"] + ["2"] * 3000), "model.moe_layer_freq"),
    ("moe_layer_freq", "(" * 3000 + "1" + ")" * 3000, "model.moe_layer_freq"),
    ("moe_layer_freq", "[1]*10**12", "model.moe_layer_freq"),
    ("moe_layer_freq", "__import__('os').system('true')", "model.moe_layer_freq"),
    ("moe_layer_freq", "[[1]]", "model.moe_layer_freq"),
    ("moe_layer_freq", 0, "model.moe_layer_freq"),
    ("moe_layer_freq", -1, "model.moe_layer_freq"),
    ("moe_layer_freq", True, "model.moe_layer_freq"),
    ("moe_layer_freq", {"a": 1}, "model.moe_layer_freq"),
    ("moe_layer_freq", "([0]*3+[1]*50)", "model.moe_layer_freq"),
    ("moe_layer_freq", "[2]*61", "model.moe_layer_freq"),
    ("moe_layer_freq", "1 +", "model.moe_layer_freq"),
    ("n_group", 0, "model.n_group"),
    ("n_group", 3, "model.n_group"),
    ("topk_group", 99, "model.topk_group"),
    ("num_experts_per_tok", 1000, "model.num_experts_per_tok"),
    ("num_experts_per_tok", 0, "model.num_experts_per_tok"),
    ("kv_lora_rank", "x", "model.kv_lora_rank"),
    ("text_config", 5, "model.text_config"),
    ("tie_word_embeddings", "yes", "model.tie_word_embeddings"),
    ("topk_method", 5, "model.topk_method"),
    ("num_nextn_predict_layers", -1, "model.num_nextn_predict_layers"),
    ("num_nextn_predict_layers", BIG, "model.num_nextn_predict_layers"),
    ("q_lora_rank", -5, "model.q_lora_rank"),
    ("qk_rope_head_dim", 0, "model.qk_rope_head_dim"),
]
QWEN_MUTATIONS: list[tuple[str, object, str]] = [
    ("mlp_only_layers", "x", "model.mlp_only_layers"),
    ("mlp_only_layers", [999], "model.mlp_only_layers"),
    ("decoder_sparse_step", 0, "model.decoder_sparse_step"),
    ("decoder_sparse_step", "x", "model.decoder_sparse_step"),
]
