"""Activation memory saved for the backward pass, per decoder layer and micro-batch.

Counting follows Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models" (arXiv:2205.05198), sec. 4: 16-bit tensors, 1-byte dropout masks. For a
GPT layer (MHA, 4h GeLU MLP) with sequence s, micro-batch b, hidden h, heads a it gives
``s*b*h*(34 + 5*a*s/h)`` bytes:

* attention 11sbh + 5as^2b: QKV input 2sbh, Q and K 4sbh, V 2sbh, softmax 2as^2b, its dropout
  mask as^2b and output 2as^2b, output-projection input 2sbh, dropout mask sbh;
* MLP 19sbh: input 2sbh, fc1 output 8sbh, GeLU output 8sbh, dropout mask sbh;
* two layer-norm inputs 4sbh.

Generalised here to the actual tensor widths: GQA's narrower K/V, MLA's latents
(q_a and kv_a outputs and their normalised copies) and per-head dims, SwiGLU (fc1 output is
gate+up, 4sbf; activation output 2sbf). An MoE layer stores, per routed token copy (top_k of
them): the permuted expert input 2sbh, the expert internals (as a dense FFN of
moe_intermediate_size) and the expert output 2sbh (needed for the gradient of the combine
weights); shared experts as dense FFNs; router logits in fp32 (4sbE). Tensor parallelism with
sequence parallelism divides everything by tp (sec. 4.2.2: ``34/t``); context parallelism
divides the local sequence by cp (scores: the local queries against all keys).

Recompute modes: ``none`` keeps the 5as^2b score terms (materialised softmax); ``selective``
drops them (Megatron's selective recompute of core attention, and equally what a fused/flash
attention kernel stores); ``full`` keeps only each layer's input (2sbh) — the working set of
the one layer being recomputed is added by the caller.
"""

from __future__ import annotations

from moesim.model.config import ModelConfig

RECOMPUTE_MODES = ("none", "selective", "full")
ACT_BYTES = 2  # 16-bit activations
MASK_BYTES = 1  # dropout mask
FP32_BYTES = 4


def _ffn_bytes(cfg: ModelConfig, tokens: float, intermediate: int) -> float:
    """Saved tensors inside one FFN per its tokens (input excluded)."""
    internal = 3 if cfg.gated_ffn else 2  # gate+up (2) + act (1)  |  fc1 (1) + act (1)
    return internal * ACT_BYTES * tokens * intermediate


def _attention_bytes(cfg: ModelConfig, tokens: float) -> float:
    """Attention tensors per its tokens, score terms excluded (input included)."""
    h, heads = cfg.hidden_size, cfg.num_attention_heads
    if cfg.attention == "mla":
        d_qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        latents = 2 * (cfg.q_lora_rank or 0) + (cfg.kv_lora_rank + cfg.qk_rope_head_dim) \
            + cfg.kv_lora_rank
        q, k, v = heads * d_qk, heads * d_qk, heads * cfg.v_head_dim
        ctx = heads * cfg.v_head_dim
    else:
        latents = 0
        q = heads * cfg.head_dim
        k = v = cfg.num_key_value_heads * cfg.head_dim
        ctx = q
    widths = h + latents + q + k + v + ctx
    return ACT_BYTES * tokens * widths + MASK_BYTES * tokens * h


def attention_score_bytes(cfg: ModelConfig, seq_len: int, micro_batch_size: int,
                          cp: int = 1) -> float:
    """The 5 a s^2 b term: softmax, its mask and dropout output (local queries x all keys)."""
    local = seq_len / cp
    return 5.0 * cfg.num_attention_heads * local * seq_len * micro_batch_size


def layer_activation_bytes(
    cfg: ModelConfig,
    *,
    moe: bool,
    seq_len: int,
    micro_batch_size: int,
    tp: int = 1,
    cp: int = 1,
    recompute: str = "none",
) -> float:
    """Bytes one decoder layer keeps for backward for one micro-batch, on one GPU."""
    tokens = seq_len / cp * micro_batch_size  # local tokens before TP/SP sharding
    h = cfg.hidden_size
    if recompute == "full":
        return ACT_BYTES * tokens * h / tp
    total = 2 * ACT_BYTES * tokens * h  # two norm inputs
    total += _attention_bytes(cfg, tokens)
    if recompute == "none":
        total += attention_score_bytes(cfg, seq_len, micro_batch_size, cp)
    total += ACT_BYTES * tokens * h + MASK_BYTES * tokens * h  # FFN input, output dropout mask
    if moe:
        copies = tokens * cfg.top_k
        total += copies * 2 * ACT_BYTES * h  # permuted expert input + expert output
        total += _ffn_bytes(cfg, copies, cfg.moe_intermediate_size)
        total += cfg.n_shared_experts * _ffn_bytes(cfg, tokens,
                                                   cfg.shared_expert_intermediate_size)
        total += FP32_BYTES * tokens * cfg.n_routed_experts
    else:
        total += _ffn_bytes(cfg, tokens, cfg.intermediate_size)
    return total / tp


def logits_bytes(cfg: ModelConfig, seq_len: int, micro_batch_size: int, tp: int = 1,
                 cp: int = 1) -> float:
    """FP32 logits kept for the cross-entropy backward on the last stage (vocab-parallel)."""
    return FP32_BYTES * seq_len / cp * micro_batch_size * cfg.vocab_size / tp
