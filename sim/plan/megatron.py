"""Megatron-LM command-line arguments for a design's chosen layout: model, MoE, parallelism,
precision, recompute and batch, as one list of tokens (the JSON record's ``megatron_args``;
the Markdown report prints the same list).

Flag names follow Megatron-LM's ``megatron/training/arguments.py`` (NVIDIA/Megatron-LM at
commit 000c4ac, Megatron-Core 0.14 era); tests/test_plan_megatron.py holds the names and
checks every flag emitted here against them. What the flags assume, as the memory plan and
the simulated step do:

* the distributed optimizer with gradient reduce-scatter overlapped with the backward
  (``--overlap-grad-reduce``) and gradients reduced in FP32 (Megatron's default with
  ``--bf16``: no ``--grad-reduce-in-bf16``);
* the alltoall token dispatcher with grouped GEMMs;
* recompute: ``selective`` = the attention core (``--recompute-modules core_attn``),
  ``full`` = every layer (``--recompute-method uniform --recompute-num-layers 1``).

Data, tokenizer, learning-rate and checkpoint paths are the user's and are not emitted.
"""

from __future__ import annotations

from moesim.model import ModelConfig
from moesim.plan.candidates import Candidate

MEGATRON_COMMIT = "000c4ac24f61159c138b0975def722c65245983c"


def model_args(m: ModelConfig, seq_len: int) -> list[str]:
    """Architecture flags."""
    args = ["--num-layers", str(m.num_layers), "--hidden-size", str(m.hidden_size),
            "--num-attention-heads", str(m.num_attention_heads),
            "--seq-length", str(seq_len), "--max-position-embeddings", str(seq_len),
            "--vocab-size", str(m.vocab_size), "--position-embedding-type", "rope",
            "--normalization", "RMSNorm", "--disable-bias-linear"]
    if m.intermediate_size:
        args += ["--ffn-hidden-size", str(m.intermediate_size)]
    if m.gated_ffn:
        args.append("--swiglu")
    if not m.tie_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if m.qk_norm:
        args.append("--qk-layernorm")
    if m.attention == "mla":
        args += ["--multi-latent-attention", "--kv-lora-rank", str(m.kv_lora_rank),
                 "--qk-head-dim", str(m.qk_nope_head_dim),
                 "--qk-pos-emb-head-dim", str(m.qk_rope_head_dim),
                 "--v-head-dim", str(m.v_head_dim)]
        if m.q_lora_rank:
            args += ["--q-lora-rank", str(m.q_lora_rank)]
    else:
        if m.head_dim:
            args += ["--kv-channels", str(m.head_dim)]
        kv = m.num_key_value_heads or m.num_attention_heads
        if kv != m.num_attention_heads:
            args += ["--group-query-attention", "--num-query-groups", str(kv)]
    if m.mtp_layers:
        args += ["--mtp-num-layers", str(m.mtp_layers)]
    return args


def layer_freq(moe_layers: tuple[bool, ...]) -> str:
    """``--moe-layer-freq`` as Megatron's list expression, runs compressed:
    ``([0]*3+[1]*58)``."""
    runs: list[tuple[int, int]] = []
    for flag in moe_layers:
        bit = int(flag)
        if runs and runs[-1][0] == bit:
            runs[-1] = (bit, runs[-1][1] + 1)
        else:
            runs.append((bit, 1))
    return "(" + "+".join(f"[{b}]*{n}" for b, n in runs) + ")"


def moe_args(m: ModelConfig) -> list[str]:
    """MoE flags (none for a dense model)."""
    if not m.is_moe:
        return []
    args = ["--num-experts", str(m.n_routed_experts), "--moe-router-topk", str(m.top_k),
            "--moe-ffn-hidden-size", str(m.moe_intermediate_size),
            "--moe-layer-freq", layer_freq(m.moe_layers),
            "--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm"]
    shared = m.n_shared_experts * m.shared_expert_intermediate_size
    if shared:
        args += ["--moe-shared-expert-intermediate-size", str(shared)]
    if m.n_group > 1:
        args += ["--moe-router-num-groups", str(m.n_group),
                 "--moe-router-group-topk", str(m.topk_group)]
    if m.router_bias:
        args += ["--moe-router-score-function", "sigmoid", "--moe-router-enable-expert-bias",
                 "--moe-router-load-balancing-type", "seq_aux_loss"]
    return args


def recompute_args(recompute: str) -> list[str]:
    if recompute == "full":
        return ["--recompute-granularity", "full", "--recompute-method", "uniform",
                "--recompute-num-layers", "1"]
    if recompute in ("none", "auto"):
        return []
    names = ["core_attn"] if recompute == "selective" else recompute.split("+")
    return ["--recompute-granularity", "selective", "--recompute-modules", *names]


def megatron_args(model: ModelConfig, cand: Candidate, seq_len: int, micro_batch_size: int,
                  precision: str) -> list[str]:
    """Every flag the design assumes, in one list (module docstring)."""
    prec = ["--bf16"] + (["--fp8-format", "hybrid"] if precision == "fp8" else [])
    return (model_args(model, seq_len) + moe_args(model)
            + cand.layout.megatron_args(model.num_layers)
            + ["--micro-batch-size", str(micro_batch_size),
               "--global-batch-size", str(cand.global_batch)]
            + prec + recompute_args(cand.recompute)
            + ["--use-distributed-optimizer", "--overlap-grad-reduce"])
