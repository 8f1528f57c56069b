"""Parameter accounting: total parameters (storage) and active parameters per token (compute).

Counts follow the Hugging Face checkpoints of each family: every linear layer without bias
(unless ``attention_bias``), RMSNorm with a weight only, SwiGLU experts with three matrices.

* MLA (DeepSeek-V2/V3 ``modeling_deepseek.py``): ``q_a_proj`` h x q_lora, ``q_a_layernorm``,
  ``q_b_proj`` q_lora x H(nope+rope) (or ``q_proj`` h x H(nope+rope) without q_lora),
  ``kv_a_proj_with_mqa`` h x (kv_lora+rope), ``kv_a_layernorm``, ``kv_b_proj``
  kv_lora x H(nope+v), ``o_proj`` Hv x h.
* Router: ``gate`` h x E, plus an E-vector ``e_score_correction_bias`` when ``router_bias``.
* MTP (DeepSeek-V3 sec. 2.2): per module ``enorm``, ``hnorm``, ``eh_proj`` 2h x h, one
  transformer block (MLA + MoE) and ``shared_head.norm``; its embedding and output head are
  *shared* with the main model. The checkpoint nevertheless stores copies of both
  (``model.layers.61.embed_tokens``, ``shared_head.head``); :attr:`ParamCounts.mtp_stored`
  includes them. That is how DeepSeek states "685B = 671B main + 14B MTP": the config gives
  671.03B + 13.46B (= 11.61B own + 1.85B embedding/head copies) = 684.5B.

Conventions of the published "active" numbers differ: Mixtral (12.9B) and Qwen3 (22B) count
both embedding matrices; DeepSeek-V3 (37B) and Kimi K2 (32B) match better without the input
embedding (a row lookup, no compute). :attr:`ParamCounts.active` counts every matrix a token
touches (input embedding included); :attr:`ParamCounts.active_compute` drops the input
embedding, and is the N of the classic ``6 N T`` training FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from moesim.model.config import ModelConfig


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameters by part of the model (main model only; MTP is kept apart)."""

    embedding_input: int
    embedding_output: int  # LM head; 0 when tied to the input embedding
    attention: int  # projections (+ MLA latent norms, Qwen3 q/k norms, biases)
    dense_ffn: int
    routed_experts: int
    shared_experts: int
    router: int
    norms: int  # two per layer + the final norm

    @property
    def total(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))


@dataclass(frozen=True)
class ParamCounts:
    """Total and per-token active parameters of a model, with breakdowns."""

    all: ParamBreakdown
    per_token: ParamBreakdown  # what one token touches: top_k of the routed experts
    mtp: int  # MTP modules' own parameters (embedding and head shared with the main model)
    mtp_active: int

    @property
    def total(self) -> int:
        """Main-model parameters, excluding MTP (as DeepSeek states 671B)."""
        return self.all.total

    @property
    def active(self) -> int:
        """Parameters one token touches, embeddings (input and output) included."""
        return self.per_token.total

    @property
    def active_compute(self) -> int:
        """Active parameters that take part in matrix products (no input embedding)."""
        return self.active - self.per_token.embedding_input

    @property
    def expert(self) -> int:
        """Routed-expert parameters: the part sharded by expert parallelism."""
        return self.all.routed_experts

    @property
    def dense(self) -> int:
        """Everything else (replicated across EP; sharded by TP and PP)."""
        return self.total - self.expert

    @property
    def mtp_stored(self) -> int:
        """MTP parameters as the checkpoint stores them: own + embedding and head copies."""
        if self.mtp == 0:
            return 0
        copies = self.all.embedding_input + (self.all.embedding_output
                                             or self.all.embedding_input)
        return self.mtp + copies


def attention_params(cfg: ModelConfig) -> int:
    """Attention parameters of one layer (projections, latent/q-k norms, biases)."""
    return attention_matmul_params(cfg) + _attention_extra_params(cfg)


def attention_matmul_params(cfg: ModelConfig) -> int:
    """Weights of one layer's attention projections (what takes part in GEMMs)."""
    h, heads = cfg.hidden_size, cfg.num_attention_heads
    if cfg.attention == "mla":
        qk_dim = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        if cfg.q_lora_rank is None:
            q = h * heads * qk_dim
        else:
            q = h * cfg.q_lora_rank + cfg.q_lora_rank * heads * qk_dim
        kv = (h * (cfg.kv_lora_rank + cfg.qk_rope_head_dim)
              + cfg.kv_lora_rank * heads * (cfg.qk_nope_head_dim + cfg.v_head_dim))
        return q + kv + heads * cfg.v_head_dim * h
    q_out = heads * cfg.head_dim
    kv_out = cfg.num_key_value_heads * cfg.head_dim
    return h * q_out + 2 * h * kv_out + q_out * h


def _attention_extra_params(cfg: ModelConfig) -> int:
    """Latent norms (MLA), q/k norms (Qwen3) and projection biases of one layer."""
    if cfg.attention == "mla":
        return cfg.kv_lora_rank + (cfg.q_lora_rank or 0)
    extra = 0
    if cfg.attention_bias:
        extra += (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim
    if cfg.qk_norm:
        extra += 2 * cfg.head_dim
    return extra


def ffn_params(cfg: ModelConfig, intermediate: int) -> int:
    """One FFN (dense or one expert) of the given intermediate size."""
    return (3 if cfg.gated_ffn else 2) * cfg.hidden_size * intermediate


def expert_params(cfg: ModelConfig) -> int:
    """One routed expert."""
    return ffn_params(cfg, cfg.moe_intermediate_size)


def shared_expert_params(cfg: ModelConfig) -> int:
    """All shared experts of one MoE layer."""
    return cfg.n_shared_experts * ffn_params(cfg, cfg.shared_expert_intermediate_size)


def router_params(cfg: ModelConfig) -> int:
    """Router of one MoE layer: gate matrix (+ correction bias)."""
    e = cfg.n_routed_experts
    return cfg.hidden_size * e + (e if cfg.router_bias else 0)


def embedding_params(cfg: ModelConfig) -> tuple[int, int]:
    """(input embedding, output head); the head is 0 when tied."""
    emb = cfg.vocab_size * cfg.hidden_size
    return emb, 0 if cfg.tie_embeddings else emb


def layer_params(cfg: ModelConfig, layer: int) -> tuple[int, int]:
    """(dense, routed-expert) parameters of decoder layer ``layer``, its norms included."""
    base = attention_params(cfg) + 2 * cfg.hidden_size
    if cfg.moe_layers[layer]:
        dense = base + shared_expert_params(cfg) + router_params(cfg)
        return dense, cfg.n_routed_experts * expert_params(cfg)
    return base + ffn_params(cfg, cfg.intermediate_size), 0


def mtp_module_params(cfg: ModelConfig) -> tuple[int, int]:
    """(dense, routed-expert) parameters of one MTP module, shared embedding/head excluded.

    enorm + hnorm + eh_proj (2h x h) + one MoE transformer block + shared_head.norm.
    """
    h = cfg.hidden_size
    block_dense = attention_params(cfg) + 2 * h
    if cfg.is_moe:
        block_dense += shared_expert_params(cfg) + router_params(cfg)
        experts = cfg.n_routed_experts * expert_params(cfg)
    else:
        block_dense += ffn_params(cfg, cfg.intermediate_size)
        experts = 0
    return 3 * h + 2 * h * h + block_dense, experts


def param_counts(cfg: ModelConfig) -> ParamCounts:
    """Total and active parameters of ``cfg``, with breakdowns by part."""
    n_moe, n_dense = cfg.n_moe_layers, cfg.n_dense_layers
    emb_in, emb_out = embedding_params(cfg)
    common = dict(
        embedding_input=emb_in,
        embedding_output=emb_out,
        attention=cfg.num_layers * attention_params(cfg),
        dense_ffn=n_dense * ffn_params(cfg, cfg.intermediate_size),
        shared_experts=n_moe * shared_expert_params(cfg),
        router=n_moe * router_params(cfg),
        norms=(2 * cfg.num_layers + 1) * cfg.hidden_size,
    )
    all_parts = ParamBreakdown(routed_experts=n_moe * cfg.n_routed_experts * expert_params(cfg),
                               **common)
    per_token = ParamBreakdown(routed_experts=n_moe * cfg.top_k * expert_params(cfg), **common)
    mtp_dense, mtp_experts = mtp_module_params(cfg)
    mtp_active_experts = mtp_experts // cfg.n_routed_experts * cfg.top_k if cfg.is_moe else 0
    return ParamCounts(
        all=all_parts,
        per_token=per_token,
        mtp=cfg.mtp_layers * (mtp_dense + mtp_experts),
        mtp_active=cfg.mtp_layers * (mtp_dense + mtp_active_experts),
    )
