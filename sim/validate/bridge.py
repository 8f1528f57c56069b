"""Out-of-sample end-to-end cases: the Megatron-Bridge performance table (NeMo 25.11).

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary.md`` at commit
00b7660be0254ac6f95f44164ddd0c3e9cc798ed, section "25.11 NeMo Container / Pre-Training
Performance": per system (DGX-GB200, DGX-B200, DGX-H100) and model, the GPU count, precision,
GBS, MBS, sequence length, FSDP, TP, PP, CP, VP, EP, GA and the measured tokens / s / GPU.
The table's notes: "we force-balance the token distribution among experts and all
benchmarks are token-dropless" (Megatron ``--moe-router-force-load-balancing``: router kind
``force_balanced``), and FP8 on H100 is DeepSeek-style blockwise (128x128 weights, 1x128
activations), MXFP8 on Blackwell. No moesim constant was chosen with these numbers in view.

Every setting the table states is passed to the simulator as stated. What it leaves open is
a listed assumption of each case: the fabric (DGX SuperPOD reference: one 400 Gb/s CX7 NIC
per GPU on a non-blocking rail-optimised fat tree), the token dispatcher (the Megatron-Bridge
perf recipes use DeepEP / "flex" for DeepSeek-V3 and the alltoall dispatcher for Qwen3:
assumption), recompute (the memory plan's choice, ``recompute: auto``), and that FP8 GEMMs
run at the FP8 matmul rate. A DGX-GB200 / GB300 row needs several NVL72 racks on a
scale-out network, which moesim cannot express yet: those rows are not cases.

The published figure is tokens / s / GPU; the prediction is global_batch x seq_len over the
simulated step time (fast mode) and the GPU count.
"""

from __future__ import annotations

import dataclasses

from moesim.model import get_model
from moesim.model.config import ModelConfig
from moesim.validate.case import Case

SOURCE = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md @00b7660b, NeMo 25.11 "
          "container, pre-training table")
SOURCE_2608 = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md, NeMo 26.08 container "
               "(as mirrored at swiss-ai/Megatron-Bridge @1a2ac152); the same row read 23766 "
               "in 25.11")
TOLERANCE = 0.10
TOLERANCE_WHY = ("one benchmark run per row, no spread published; the same rows moved by up "
                 "to ~10% between the 25.09 and 25.11 containers: 10%")

QWEN3_30B_A3B = dataclasses.replace(
    get_model("qwen3-235b-a22b"), name="qwen3-30b-a3b", hidden_size=2048, num_layers=48,
    num_attention_heads=32, num_key_value_heads=4, head_dim=128, intermediate_size=6144,
    moe_intermediate_size=768, moe_layers=(True,) * 48,
)
"""Qwen3-30B-A3B from its Hugging Face config.json (Qwen/Qwen3-30B-A3B): hidden 2048, 48
layers, 32 query / 4 KV heads of 128, 128 experts of 768, top-8, vocabulary 151936."""

MODELS: dict[str, ModelConfig] = {"qwen3-30b-a3b": QWEN3_30B_A3B}


def bridge_model(name: str) -> ModelConfig:
    """A case's model: a moesim preset, or one of :data:`MODELS`."""
    return MODELS[name] if name in MODELS else get_model(name)


def _case(system: str, model: str, gpus: int, precision: str, gbs: int, mbs: int,
          layout: dict[str, int], tokens_per_gpu_s: float, dispatcher: str,
          source: str = SOURCE) -> Case:
    lay = " ".join(f"{k.upper()}{v}" for k, v in layout.items())
    gpu = {"DGX-H100": "H100", "DGX-B200": "B200", "DGX-GB200": "GB200"}[system]
    fabric = ("nvl72-gb200 (one rack; the case's GPUs are its first ones)" if gpu == "GB200"
              else "rail-optimised fat tree, 1 x 400G CX7 per GPU, 1:1")
    args = (("model", model), ("gpu", gpu), ("gpus", gpus), ("precision", precision),
            ("global_batch", gbs), ("micro_batch_size", mbs), ("seq_len", 4096),
            ("layout", tuple(layout.items())), ("dispatcher", dispatcher))
    return Case(
        f"{model} {gpus}x {gpu} {precision} {lay}", "bridge", args, tokens_per_gpu_s,
        "tokens/s/GPU", TOLERANCE, source, scope="end_to_end", gpu=gpu, path="fast",
        tolerance_why=TOLERANCE_WHY,
        note=f"{system}, GBS {gbs}, MBS {mbs}, seq 4096, force-balanced dropless router",
        assumptions=(f"dispatcher {dispatcher}", fabric, "recompute: the memory plan's choice",
                     f"{precision} GEMMs at the {'FP8' if precision != 'BF16' else 'BF16'} "
                     "matmul rate; quantisation kernels not modelled"),
    )


BRIDGE_CASES: tuple[Case, ...] = (
    _case("DGX-B200", "deepseek-v3", 256, "FP8-MX", 2048, 1, {"pp": 16, "ep": 8}, 2139.0,
          "deepep"),
    _case("DGX-B200", "qwen3-30b-a3b", 8, "FP8-MX", 512, 1, {"ep": 8}, 9299.0, "alltoall"),
    _case("DGX-B200", "qwen3-235b-a22b", 64, "FP8-MX", 1024, 1, {"pp": 8, "vpp": 2, "ep": 8},
          3269.0, "alltoall"),
    _case("DGX-H100", "qwen3-30b-a3b", 16, "FP8-CS", 512, 2, {"pp": 2, "vpp": 24, "ep": 8},
          5275.0, "alltoall"),
    _case("DGX-GB200", "qwen3-30b-a3b", 8, "MXFP8", 512, 4, {"ep": 8}, 39936.0, "alltoall",
          source=SOURCE_2608),
)
"""The DGX-B200 and DGX-H100 MoE rows of the 25.11 table (GPT-OSS 120B is not a moesim model;
the H100 Qwen3-235B row has a column missing in the source, so its batch is unknown), and the
one DGX-GB200 row that fits in one NVL72 rack (8 GPUs), from the 26.08 table. The other
GB200/GB300 rows use 64 GPUs of each 72-GPU rack, which moesim's rank map cannot express."""
