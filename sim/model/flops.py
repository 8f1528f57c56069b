"""Floating-point operations per token: forward pass by part, and a training step.

A GEMM with a weight of P parameters costs 2 P FLOPs per token (multiply + add). Attention's
score (Q K^T) and context (softmax V) products cost ``2 * ctx * heads * (d_qk + d_v)`` per
token per layer, with ``ctx`` the keys a query sees: ``seq_len`` without masking, ``seq_len/2``
on average under a causal mask (the convention of Megatron-LM's ``num_floating_point_operations``
and of the MFU definition of Chowdhery et al. 2022, PaLM, appendix B). MLA is counted in its
training (non-absorbed) form: d_qk = qk_nope + qk_rope, d_v = v_head_dim.

Training = forward + backward, backward = 2 x forward (gradients with respect to inputs and to
weights): 3 x forward, the "model FLOPs" of MFU. Recomputation is not counted here.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from moesim.errors import ConfigError
from moesim.model.accounting import (
    attention_matmul_params,
    expert_params,
    ffn_params,
    shared_expert_params,
)
from moesim.model.config import ModelConfig


@dataclass(frozen=True)
class FlopCounts:
    """Forward FLOPs for one token, by part."""

    attention_proj: float  # Q/K/V/O (and MLA down/up) projections
    attention_core: float  # Q K^T and softmax V
    dense_ffn: float
    routed_experts: float  # top_k experts
    shared_experts: float
    router: float
    lm_head: float
    mtp: float  # all MTP modules: eh_proj, block, their LM-head pass

    @property
    def total(self) -> float:
        return float(sum(getattr(self, f.name) for f in fields(self)))

    @property
    def main(self) -> float:
        """Total without the MTP modules."""
        return self.total - self.mtp


def attention_core_flops(cfg: ModelConfig, seq_len: int, *, causal: bool = True) -> float:
    """Score + context FLOPs of one layer for one token."""
    if cfg.attention == "mla":
        d_qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        d_v = cfg.v_head_dim
    else:
        d_qk = d_v = cfg.head_dim
    ctx = seq_len / 2 if causal else float(seq_len)
    return 2.0 * ctx * cfg.num_attention_heads * (d_qk + d_v)


def _moe_block_flops(cfg: ModelConfig) -> tuple[float, float, float]:
    """(routed, shared, router) FLOPs of one MoE layer for one token."""
    routed = 2.0 * cfg.top_k * expert_params(cfg)
    shared = 2.0 * shared_expert_params(cfg)
    router = 2.0 * cfg.hidden_size * cfg.n_routed_experts
    return routed, shared, router


def flops_per_token(
    cfg: ModelConfig, seq_len: int, *, causal: bool = True, include_mtp: bool = True
) -> FlopCounts:
    """Forward FLOPs per token of ``cfg`` at sequence length ``seq_len``."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ConfigError("seq_len", f"must be a positive integer, got {seq_len!r}")
    h = cfg.hidden_size
    proj = 2.0 * attention_matmul_params(cfg)
    core = attention_core_flops(cfg, seq_len, causal=causal)
    routed, shared, router = _moe_block_flops(cfg) if cfg.is_moe else (0.0, 0.0, 0.0)
    dense_ffn = 2.0 * ffn_params(cfg, cfg.intermediate_size)
    lm_head = 2.0 * cfg.vocab_size * h
    mtp = 0.0
    if include_mtp and cfg.mtp_layers:
        ffn = routed + shared + router if cfg.is_moe else dense_ffn
        mtp = cfg.mtp_layers * (2.0 * 2 * h * h + proj + core + ffn + lm_head)
    return FlopCounts(
        attention_proj=cfg.num_layers * proj,
        attention_core=cfg.num_layers * core,
        dense_ffn=cfg.n_dense_layers * dense_ffn,
        routed_experts=cfg.n_moe_layers * routed,
        shared_experts=cfg.n_moe_layers * shared,
        router=cfg.n_moe_layers * router,
        lm_head=lm_head,
        mtp=mtp,
    )


def training_flops(
    cfg: ModelConfig, tokens: int, seq_len: int, *, causal: bool = True,
    include_mtp: bool = True,
) -> float:
    """Model FLOPs of training on ``tokens`` tokens: 3 x forward (no recompute)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ConfigError("tokens", f"must be an integer >= 0, got {tokens!r}")
    fwd = flops_per_token(cfg, seq_len, causal=causal, include_mtp=include_mtp)
    return 3.0 * fwd.total * tokens
