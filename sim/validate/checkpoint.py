"""Tensor elements of a released block-FP8 checkpoint (DeepSeek-V3 format), from the config.

The Hugging Face hub's parameter count of a safetensors checkpoint is the sum of the element
counts of every stored tensor. The DeepSeek-V3-format releases (DeepSeek-V3, Kimi K2:
``quantization_config`` ``fmt: e4m3``, ``weight_block_size: [128, 128]``) store every Linear
weight of attention, dense MLP, routed and shared experts in FP8 with one fp32
``weight_scale_inv`` per 128 x 128 block beside it: ``ceil(out/128) x ceil(in/128)`` extra
elements per weight. Embedding, LM head, norms, the router gate and its correction bias stay in
BF16/fp32 without scales (DeepSeek-V3 report sec. 3.3.2 keeps embedding, output head, MoE
gating and normalisation in higher precision). The MTP module's ``eh_proj`` is taken as
unquantised (6272 scale elements either way: far below any rounding of the published totals).

So: checkpoint elements = main-model parameters + MTP as stored (own + its embedding and head
copies, :attr:`moesim.model.accounting.ParamCounts.mtp_stored`) + the FP8 block scales.
"""

from __future__ import annotations

from math import ceil

from moesim.model.accounting import param_counts
from moesim.model.config import ModelConfig

FP8_BLOCK = 128  # quantization_config.weight_block_size of the DeepSeek-V3 / Kimi K2 releases


def block_scales(out_features: int, in_features: int, block: int = FP8_BLOCK) -> int:
    """fp32 scale elements of one block-quantised ``[out, in]`` weight.

    >>> block_scales(576, 7168)  # kv_a_proj_with_mqa of DeepSeek-V3: 5 x 56
    280
    """
    return ceil(out_features / block) * ceil(in_features / block)


def _attention_weights(cfg: ModelConfig) -> list[tuple[int, int]]:
    """(out, in) of each attention projection of one layer (HF module shapes)."""
    h, heads = cfg.hidden_size, cfg.num_attention_heads
    if cfg.attention == "mla":
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        q = ([(cfg.q_lora_rank, h), (heads * qk, cfg.q_lora_rank)] if cfg.q_lora_rank
             else [(heads * qk, h)])
        kv_a = (cfg.kv_lora_rank + cfg.qk_rope_head_dim, h)
        kv_b = (heads * (cfg.qk_nope_head_dim + cfg.v_head_dim), cfg.kv_lora_rank)
        return [*q, kv_a, kv_b, (h, heads * cfg.v_head_dim)]
    q_out, kv_out = heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    return [(q_out, h), (kv_out, h), (kv_out, h), (h, q_out)]


def _ffn_scales(cfg: ModelConfig, intermediate: int) -> int:
    """Scales of one FFN (gate and up: [ffn, h]; down: [h, ffn])."""
    h = cfg.hidden_size
    ups = 2 if cfg.gated_ffn else 1
    return ups * block_scales(intermediate, h) + block_scales(h, intermediate)


def fp8_scale_elements(cfg: ModelConfig, *, include_mtp: bool = True) -> int:
    """fp32 block-scale elements of the whole checkpoint (main model + MTP modules)."""
    attn = sum(block_scales(o, i) for o, i in _attention_weights(cfg))
    moe = (cfg.n_routed_experts * _ffn_scales(cfg, cfg.moe_intermediate_size)
           + cfg.n_shared_experts * _ffn_scales(cfg, cfg.shared_expert_intermediate_size))
    dense = _ffn_scales(cfg, cfg.intermediate_size) if cfg.n_dense_layers else 0
    total = cfg.num_layers * attn + cfg.n_moe_layers * moe + cfg.n_dense_layers * dense
    if include_mtp and cfg.mtp_layers:
        block_ffn = moe if cfg.is_moe else _ffn_scales(cfg, cfg.intermediate_size)
        total += cfg.mtp_layers * (attn + block_ffn)
    return total


def checkpoint_elements(cfg: ModelConfig) -> int:
    """Every stored tensor element of the block-FP8 release: params + MTP copies + scales."""
    counts = param_counts(cfg)
    return counts.total + counts.mtp_stored + fp8_scale_elements(cfg)
