"""The preset models typed by hand from their published Hugging Face ``config.json`` files.

An oracle independent of moesim's Hugging Face reader, which builds the shipped presets from
``sim/model/hf_configs/*.yaml`` (tests/test_model_config.py compares the two). Sources: the
URLs at the top of each of those files.
"""

from __future__ import annotations

import dataclasses

from moesim.model import ModelConfig

DEEPSEEK_V3 = ModelConfig(
    name="deepseek-v3",
    hidden_size=7168,
    num_layers=61,
    vocab_size=129280,
    num_attention_heads=128,
    attention="mla",
    q_lora_rank=1536,
    kv_lora_rank=512,
    qk_nope_head_dim=128,
    qk_rope_head_dim=64,
    v_head_dim=128,
    intermediate_size=18432,
    n_routed_experts=256,
    n_shared_experts=1,
    moe_intermediate_size=2048,
    top_k=8,
    n_group=8,
    topk_group=4,
    router_bias=True,  # topk_method "noaux_tc": e_score_correction_bias per MoE layer
    moe_layers=(False,) * 3 + (True,) * 58,  # first_k_dense_replace 3, moe_layer_freq 1
    mtp_layers=1,  # num_nextn_predict_layers
)

KIMI_K2 = dataclasses.replace(
    DEEPSEEK_V3,
    name="kimi-k2",
    vocab_size=163840,
    num_attention_heads=64,
    num_key_value_heads=64,
    n_routed_experts=384,
    n_group=1,
    topk_group=1,
    moe_layers=(False,) + (True,) * 60,  # first_k_dense_replace 1
    mtp_layers=0,
)

MIXTRAL_8X7B = ModelConfig(
    name="mixtral-8x7b",
    hidden_size=4096,
    num_layers=32,
    vocab_size=32000,
    num_attention_heads=32,
    attention="gqa",
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=14336,  # Mixtral: intermediate_size is the per-expert FFN size
    n_routed_experts=8,  # num_local_experts
    moe_intermediate_size=14336,
    top_k=2,
)

QWEN3_235B_A22B = ModelConfig(
    name="qwen3-235b-a22b",
    hidden_size=4096,
    num_layers=94,
    vocab_size=151936,
    num_attention_heads=64,
    attention="gqa",
    num_key_value_heads=4,
    head_dim=128,
    qk_norm=True,
    intermediate_size=12288,
    n_routed_experts=128,  # num_experts
    moe_intermediate_size=1536,
    top_k=8,
)

HAND_TYPED = {cfg.name: cfg for cfg in (DEEPSEEK_V3, KIMI_K2, MIXTRAL_8X7B, QWEN3_235B_A22B)}
