"""Published MoE model configurations, as module-level presets and a registry by name.

Every number below is copied from the model's public Hugging Face ``config.json``:

* DeepSeek-V3 — huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json and the
  DeepSeek-V3 Technical Report (arXiv:2412.19437, sec. 4.2): 671B total + 14B MTP, 37B active.
* Kimi K2 — huggingface.co/moonshotai/Kimi-K2-Instruct/blob/main/config.json (DeepSeek-V3
  architecture: 384 experts, 64 heads, one dense layer, no MTP); 1.04T total / 32B active
  (Kimi K2 tech report, arXiv:2507.20534).
* Mixtral 8x7B — huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json
  (no ``head_dim`` field: 4096 / 32 heads = 128); 46.7B total / 12.9B active (mistral.ai).
* Qwen3-235B-A22B — huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json
  (``head_dim`` 128, ``intermediate_size`` 12288 unused as ``mlp_only_layers`` is empty and
  ``decoder_sparse_step`` 1); 235B total / 22B active.

``moe-1t`` is moesim's default one-trillion-parameter design model. It *is* Kimi K2's
configuration under another name, so that "a 1T MoE" in a plan names one definite model
(DESIGN.md: "A '1T MoE' must first say which one it is").
"""

from __future__ import annotations

import dataclasses

from moesim.model.config import ModelConfig
from moesim.registry import Registry

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

MOE_1T = dataclasses.replace(KIMI_K2, name="moe-1t")

MODELS = Registry[ModelConfig]("model", "model", sorted_names=True)
"""Model presets by name (a read-only mapping)."""


def register_model(cfg: ModelConfig) -> ModelConfig:
    """Add a model to :data:`MODELS`; a duplicate name is an error."""
    return MODELS.add(cfg.name, cfg)


def get_model(name: str) -> ModelConfig:
    """The registered model called ``name``."""
    return MODELS.lookup(name)


for _cfg in (DEEPSEEK_V3, KIMI_K2, MIXTRAL_8X7B, QWEN3_235B_A22B, MOE_1T):
    register_model(_cfg)
