"""Out-of-sample end-to-end cases measured on Ampere (A100 / A800): FlagPerf, DeepSpeed-MoE.

FlagPerf (8 A800, Megatron-LM through Pai-Megatron-Patch)
---------------------------------------------------------

Source: FlagOpen/FlagPerf (now flagos-ai/FlagPerf), ``training/nvidia/qwen1.5_MoE-megatron/
README.md`` at commit 32f1a7a7299e8f76190e74fce111d5b0afceb1f9, "性能指标" (performance)
table: one NVIDIA DGX A800 (80G) node, 8 x A800-SXM4-80GB, Megatron-LM-240405 through
Pai-Megatron-Patch, flash attention 2, "A800单机8卡（1x8）, bf16, TP1PP2DP4": 7450.7 tokens / s
/ GPU (MFU 32.95%, 66 of 80 GiB; the fp16 row, 7537.7, is the same layout and is not taken).
MBS 1, sequence 8192, GBS 512 (the README's input-batch section and ``config/config_A800x1x8.py``
at 572fd7d8d2401132019bd1b145df521ab324ef94). 100 training steps (the README).

The model and every other setting: the launch script ``training/benchmarks/qwen1.5_MoE/
megatron/megatron_pai_main.sh`` at 04c97573c9c7034352b1d91fc4bc29b009469317 (the version
that trains 100 iterations, as the README states): "Qwen1.5 14B(8*1.8B)" -- 24 layers, hidden
2048, 16 heads (MHA, QKV bias), SwiGLU FFN of 5504, 8 experts top-2 (no shared expert),
untied embeddings, Qwen2 tokenizer + 293 extra tokens (vocabulary 151936), aux-loss load
balancing (coefficient 1e-2), ``--expert-model-parallel-size 1``, ``--recompute-activations``
(Megatron's selective recompute), ``--use-distributed-optimizer``, ``--sequence-parallel``
(a no-op at TP1). Cross-check of the model: the README's MFU (32.95% of 312 TFLOP/s at
7450.7 tokens/s/GPU = 13.8 GFLOP per token = 6 x 2.3 B) is 6 x the active parameters of this
24-layer model (2.3 B with the LM head); the script's other version (12 layers) would give
1.6 B. No moesim constant was chosen with this number in view.

What it leaves open (listed assumptions): the router (``uniform``: a freshly initialised
router under aux-loss balancing, 100 steps from scratch), the dispatcher (EP1: every expert is
local, no token exchange; ``alltoall`` is named and moves nothing), the node's fabric (one
HGX A800 host: DP4 x PP2 all on NVLink; HDR 200 Gb/s NICs, unused), moesim's even stage split
(12 layers a stage), no MTP.

DeepSpeed-MoE (128 A100, Megatron-DeepSpeed)
--------------------------------------------
Source: microsoft/DeepSpeed ``docs/_posts/2021-12-09-deepspeed-moe-nlg.md`` ("DeepSpeed-MoE for
NLG", 2021-12-09; the same figure is Table 3 of arXiv:2201.05596): "1.3B+MoE-128" trained
with DeepSpeed data + expert parallelism on 128 A100 GPUs: **372 training samples per
second**. The model, as the post states it: the GPT-3 XL base (24 layers, hidden 2048, 16
heads), 128 experts on every other feed-forward layer (12 MoE layers), top-1 gating. From the
release the post points to (microsoft/Megatron-DeepSpeed
``examples_deepspeed/MoE/ds_pretrain_gpt_1.3B_MoE128.sh`` @8d90491e): sequence 2048, global
batch 512 for the 1.3B base, capacity factor 1.0 with token dropping, full activation
checkpointing (``--checkpoint-activations``), ZeRO stage 1, GPT-2 vocabulary; MoE on layers
whose 1-based number is a multiple of the expert interval 2 (Megatron-DeepSpeed
``megatron/model/transformer.py``). The published figure is samples / s; the case compares
tokens / s / GPU = 372 x 2048 / 128 = 5952 (exact).

What it leaves open (listed assumptions): the A100 variant (Azure ND A100 v4 carries the
40 GB part at 1555 GB/s; the 80 GB preset is used: same SMs and clocks), one expert per GPU
(EP128, the paper's recommended layout, section 4.1.3) and DP128, micro-batch 4 (512 / 128:
one micro-batch; the example script's 16 is for its 8-GPU run), capacity factor 1.0 as the
``force_balanced`` router (padding every expert to its capacity moves and computes what a
perfectly balanced routing does; dropped tokens are not simulated), the fabric (16 HGX A100
hosts, 8 HDR 200 Gb/s NICs each, rail-optimised fat tree 1:1, as ND A100 v4), the vocabulary
padded to 50304 (Megatron's multiple of 128), BF16 rates for the fp16 run (same tensor-core
rate on Ampere), the alltoall dispatcher (DeepSpeed's einsum dispatch + NCCL all-to-all).
"""

from __future__ import annotations

from moesim.model.config import ModelConfig
from moesim.validate.case import Case

SOURCE = ("FlagOpen/FlagPerf training/nvidia/qwen1.5_MoE-megatron/README.md @32f1a7a7 "
          "(8x A800, Megatron-LM-240405 / Pai-Megatron-Patch); model and flags "
          "training/benchmarks/qwen1.5_MoE/megatron/megatron_pai_main.sh @04c97573")
TOLERANCE = 0.10
TOLERANCE_WHY = ("one run, no spread published; its own fp16 twin of the same layout measured "
                 "1.2% apart (7537.7 vs 7450.7); benchmark-to-benchmark spread of such tables "
                 "is ~10% (see bridge): 10%")

QWEN15_MOE_8X18B = ModelConfig(
    name="qwen1.5-moe-8x1.8b", hidden_size=2048, num_layers=24, vocab_size=151936,
    num_attention_heads=16, attention="mha", head_dim=128, attention_bias=True,
    intermediate_size=5504, gated_ffn=True, n_routed_experts=8, moe_intermediate_size=5504,
    top_k=2,
)
"""FlagPerf's "Qwen1.5 14B(8*1.8B)" MoE from its launch script's flags (see the module doc)."""

GPT3_XL_MOE128 = ModelConfig(
    name="gpt3-1.3b-moe128", hidden_size=2048, num_layers=24, vocab_size=50304,
    num_attention_heads=16, attention="mha", head_dim=128, attention_bias=True,
    intermediate_size=8192, gated_ffn=False, n_routed_experts=128, moe_intermediate_size=8192,
    top_k=1, moe_layers=(False, True) * 12, tie_embeddings=True,
)
"""DeepSpeed-MoE's "1.3B+MoE-128": GPT-3 XL with 128 top-1 experts on every other FFN."""

MODELS: dict[str, ModelConfig] = {m.name: m for m in (QWEN15_MOE_8X18B, GPT3_XL_MOE128)}

SOURCE_DS = ("microsoft/DeepSpeed docs/_posts/2021-12-09-deepspeed-moe-nlg.md (= arXiv:2201.05596 "
             "Table 3): 372 samples/s on 128 A100; settings from microsoft/Megatron-DeepSpeed "
             "examples_deepspeed/MoE/ds_pretrain_gpt_1.3B_MoE128.sh @8d90491e")
TOLERANCE_DS = 0.10
TOLERANCE_DS_WHY = ("one figure rounded to samples/s, no spread published; the same post's "
                    "dense baseline is given to 2 digits (70): 10%")

def _row(name: str, gpu: str, gpus: int, model: ModelConfig, batch: tuple[int, int, int],
         layout: tuple[tuple[str, int], ...], recompute_router: tuple[str, str],
         published: float, tolerance: tuple[float, str], source: str, note: str,
         assumptions: tuple[str, ...]) -> Case:
    """A whole-step throughput row (tokens/s/GPU, BF16, fast path, alltoall dispatcher);
    ``batch`` = (global batch, micro-batch size, sequence length)."""
    (gbs, mbs, seq), (recompute, router) = batch, recompute_router
    args = (("model", model.name), ("gpu", gpu), ("gpus", gpus), ("precision", "BF16"),
            ("global_batch", gbs), ("micro_batch_size", mbs), ("seq_len", seq),
            ("layout", layout), ("dispatcher", "alltoall"), ("recompute", recompute),
            ("router", router))
    return Case(name, "bridge", args, published, "tokens/s/GPU", tolerance[0], source,
                scope="end_to_end", gpu=gpu, path="fast", tolerance_why=tolerance[1], note=note,
                assumptions=assumptions)


AMPERE_CASES: tuple[Case, ...] = (
    _row("qwen1.5-moe-8x1.8b 8x A800 BF16 GBS512 PP2 (FlagPerf)", "A800", 8, QWEN15_MOE_8X18B,
         (512, 1, 8192), (("pp", 2),), ("selective", "uniform"), 7450.7,
         (TOLERANCE, TOLERANCE_WHY), SOURCE,
         note="DGX A800 x1, TP1 PP2 DP4 EP1, MBS 1, seq 8192, selective recompute, "
              "distributed optimizer",
         assumptions=("router uniform (aux-loss balanced, 100 steps from scratch)",
                      "EP1: no token exchange (dispatcher alltoall moves nothing)",
                      "one HGX A800 host, NVLink 200 GB/s per direction; HDR NICs unused",
                      "even stage split (12 layers a stage), no MTP")),
    _row("gpt3-1.3b-moe128 128x A100 GBS512 EP128 (DeepSpeed-MoE)", "A100", 128, GPT3_XL_MOE128,
         (512, 4, 2048), (("ep", 128),), ("full", "force_balanced"), 372.0 * 2048 / 128,
         (TOLERANCE_DS, TOLERANCE_DS_WHY), SOURCE_DS,
         note="372 samples/s x 2048 / 128 GPUs; EP128 DP128, top-1, capacity factor 1.0, "
              "full activation checkpointing",
         assumptions=("A100 80 GB preset (ND A100 v4 has the 40 GB part)",
                      "EP128 DP128, micro-batch 4 (one per step)",
                      "capacity factor 1.0 as router force_balanced (no dropped tokens)",
                      "16 HGX A100 hosts, 8 x HDR 200 Gb/s, rail fat tree 1:1",
                      "fp16 at the BF16 rate; vocabulary padded to 50304")),
)
"""The A800 row of FlagPerf's Qwen1.5-MoE Megatron benchmark and DeepSpeed-MoE's 1.3B+MoE-128
on 128 A100."""
