"""Out-of-sample end-to-end cases: the Megatron-Bridge performance tables (NeMo 25.09-26.08).

Source: NVIDIA-NeMo/Megatron-Bridge ``docs/performance-summary.md`` at commit
df0289c180dd20ff26933455c7a0a11084f6a36f (sections "26.02 NeMo Container", "25.11 NeMo
Container" and "25.09 NeMo Container" / Pre-Training Performance; the 25.11 section there is
the one of commit 00b7660b with the DGX-H100 Qwen3-235B row's missing GBS column restored):
per system (DGX-GB200, DGX-B200, DGX-H100) and model, the GPU count, precision, GBS, MBS,
sequence length, FSDP, TP, PP, CP, VP, EP, GA and the measured tokens / s / GPU. The tables'
notes: "we force-balance the token distribution among experts and all benchmarks are
token-dropless" (Megatron ``--moe-router-force-load-balancing``: router kind
``force_balanced``). No moesim constant was chosen with these numbers in view.

One case per system, model and layout, from the newest table that states it (a row repeated
in a later container with the same layout is taken from the later one: 26.02 over 25.11 for
DeepSeek-V3 and Qwen3-30B on DGX-B200 and Qwen3-235B on DGX-H100; the 26.08 GB200 row over
its 26.02 and 25.11 readings). Every setting the table states is passed to the simulator as
stated; precision names map to moesim's (FP8-MX / MXFP8 -> ``mxfp8``, FP8-CS -> ``fp8-cs``,
BF16 -> ``bf16``). What it leaves open is taken from the row's Megatron-Bridge performance
configs where a stored version states it (each case's assumptions cite file and commit),
else is a listed assumption: the fabric (DGX SuperPOD reference: one 400 Gb/s CX7 NIC per
GPU on a non-blocking rail-optimised fat tree); the token dispatcher (Megatron's NCCL
``alltoall`` on the three Qwen3-235B rows, as their presets / config functions state,
:data:`ALLTOALL_235B`, :data:`ALLTOALL_2511`; HybridEP where the row's preset states
``moe_flex_dispatcher_backend="hybridep"``: the GB200 Qwen3-30B row and the DeepSeek-V3
DGX-B200 row; else DeepEP, as the Megatron-Bridge MoE hardware playbook states for DGX-H100
and DGX-B200, ``skills/perf-techniques/moe-hardware-configs``: the Qwen3-30B rows on
DGX-B200 / DGX-H100, whose own presets are not identified, and the DeepSeek-V3 DGX-H100 row,
whose config enables DeepEP); recompute (none on every Qwen3 row: its config sets
``recompute_granularity = None``, :data:`QWEN3_NO_RECOMPUTE`; the DeepSeek-V3 rows run the
``recompute_modules`` their presets state: :data:`DSV3_B200_2602`,
:data:`DSV3_H100_RECOMPUTE`); the gradient reduce in BF16 on every row
(:data:`GRAD_REDUCE`), not overlapped on the DeepSeek-V3 DGX-H100 row
(:data:`DSV3_H100_DP_OVERLAP`); and the pipeline layout (moesim's even split). The two
DeepSeek-V3 rows run the multi-token-prediction module and the pipeline layout their
Megatron-Bridge sources state (one rule for both: the recipe's ``mtp_num_layers`` and the
preset's ``pp_layout``, else the recipe's layout for the row's PP and VPP;
:data:`DSV3_B200_PIPELINE`, :data:`DSV3_H100_PIPELINE`).

Not cases: DGX-GB200 / GB300 rows on several NVL72 racks (moesim cannot build racks of 64 used
GPUs on a scale-out network yet), DGX-B300 / GB300 rows (no B300 preset), GPT-OSS 120B and the
Llama rows (not moesim models), and the 25.09 "tokendrop" rows (capacity-limited routing with
padding is not modelled).

The published figure is tokens / s / GPU; the prediction is global_batch x seq_len over the
simulated step time (fast mode) and the GPU count.
"""

from __future__ import annotations

import dataclasses

from moesim.model import get_model
from moesim.model.config import ModelConfig
from moesim.validate.case import Case

_DOC = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md @df0289c1"
SOURCE_2602 = f"{_DOC}, 26.02 NeMo container, pre-training table"
SOURCE = f"{_DOC}, 25.11 NeMo container, pre-training table (as @00b7660b)"
SOURCE_2509 = f"{_DOC}, 25.09 NeMo container, pre-training table (dropless row)"
SOURCE_2608 = ("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md, NeMo 26.08 container "
               "(as mirrored at swiss-ai/Megatron-Bridge @1a2ac152); the same row read 23766 "
               "in 25.11 and 26084 in 26.02")
PRECISIONS = {"FP8-MX": "mxfp8", "MXFP8": "mxfp8", "FP8-CS": "fp8-cs", "BF16": "bf16"}
"""The tables' precision names -> moesim's (:mod:`moesim.hardware.precision`)."""
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


DISPATCH_BF16 = ("dispatch in BF16 whatever the precision: Megatron-Core's flex dispatcher hands "
                 "DeepEP the BF16 hidden states (megatron/core/transformer/moe/fused_a2a.py "
                 "@02ad939b, FusedDispatch.forward -> buffer.dispatch(x); HybridEP: 'fp8_dispatch "
                 "= False  # Currently, we do not support fp8 dispatch'); TE quantises inside "
                 "the grouped linear, after the all-to-all")


PERF = "NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs"
B200_NICS = (" (an 8-GPU B200 node has 8 ConnectX-7 NDR 400 Gb/s NICs: mlcommons/"
             "inference_results_v6.0 closed/Nebius/systems/nebius_b200_n1.json, host_networking "
             "'8x ConnectX-7 IB NDR 400Gb/s'; the table's DGX-B200 is the same 8-GPU HGX board)")
"""Where the DGX-B200 rows' one 400G NIC per GPU comes from."""
GRAD_REDUCE = (
    "gradients reduced in BF16: every Megatron-Bridge performance config read sets "
    "ddp.grad_reduce_in_fp32 = False (Qwen3: set_qwen3_common_configs, "
    f"{PERF}/qwen/qwen3_llm_pretrain.py @05c0c90f and qwen3/qwen3_llm_pretrain.py @0fa501ac; "
    "DeepSeek-V3: set_deepseek_v3_common_configs, deepseek/deepseek_llm_pretrain.py @69655bff "
    "and @01328424)")
"""The DP / EDP gradient reduce-scatter's dtype every Bridge row runs (Megatron's default is
FP32: :data:`moesim.step.spec.GRAD_REDUCE_BYTES`)."""

QWEN3_NO_RECOMPUTE = ("none", (
    "recompute: none: the Qwen3 performance config sets recompute_granularity = None "
    f"(set_qwen3_common_configs, {PERF}/qwen/qwen3_llm_pretrain.py @05c0c90f; the 25.11-era "
    "qwen3/qwen3_llm_pretrain.py @0fa501ac says the same) and no Qwen3 preset read sets "
    "recompute_modules or recompute_num_layers",))
"""The recompute every Qwen3 row runs: none, as its performance config states."""

QWEN3_PRESETS = ("NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/qwen/"
                 "qwen3_workload_base_configs.py @01b2977e")
HYBRIDEP_PRESET = (f"dispatcher hybridep: the row's preset states moe_flex_dispatcher_backend "
                   f"'hybridep' (QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1, {QWEN3_PRESETS}: "
                   "EP8, MBS4, as the row); in one NVL72 rack every EP rank is in one NVLink "
                   "domain: each token once per destination rank over NVLink")
"""The dispatcher the DGX-GB200 Qwen3-30B row's own preset states."""

QWEN3_30B_B200_DISPATCHER = (
    "the row's own preset is not identified: the one read (QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_"
    f"FP8_MX_V1, {QWEN3_PRESETS}) states MBS 4, hybridep and TE CUDA graphs of attn / moe_router / "
    "moe_preprocess, against the table's MBS 1 (GA 64), which the 25.11-era preset states "
    f"(QWEN3_30B_A3B_B200_FP8_MX_PARALLEL_CONFIG, {PERF}/qwen3/workload_base_configs.py "
    "@0fa501ac: MBS 1, EP8, CUDA graph 'local' / 'full_iteration', no dispatcher, i.e. the "
    "provider's alltoall); the dispatcher stays the playbook's DeepEP (assumption). The same "
    "8 B200 ran 18066 tokens / s / GPU with token dropping (25.09 table): 1.9x this dropless row")
"""What the sources leave open for the DGX-B200 Qwen3-30B row (26.02, MBS 1)."""

QWEN3_30B_H100_PRESETS = (
    "the row's own preset is not identified: the 25.11-era one (QWEN3_30B_A3B_H100_FP8_CS_"
    f"PARALLEL_CONFIG, {PERF}/qwen3/workload_base_configs.py @0fa501ac) states PP2 VP12 MBS 2 "
    "GBS 512 (the 25.11 table: VP 24) and no dispatcher (the provider's alltoall); the later "
    f"one (QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1, {QWEN3_PRESETS}) EP16, GBS 1024, no PP, "
    "hybridep (the 26.02 table: PP2 VP12 EP8); the dispatcher stays the playbook's DeepEP "
    "(assumption). The 25.11 row's layout ran 10494 tokens / s / GPU with token dropping (25.09)")
"""What the sources leave open for the two DGX-H100 Qwen3-30B rows."""

ALLTOALL_235B = ("alltoall", (
    "as the row's sources state: Megatron's alltoall dispatcher (NCCL all-to-all, one copy per "
    "routed expert) in the presets QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_CS_V1 (= FP8_MX; "
    "PP8 EP8, no VP, moe_a2a_overlap False) and _H100_FP8_CS_V1 (TP2 PP8 VP4 EP32, "
    f"moe_a2a_overlap True), whose V2 (256 GPUs, GBS 8192) are the table's rows ({QWEN3_PRESETS}),"
    " and in the config functions qwen3_235b_a22b_pretrain_config_b200 / _h100 "
    f"(moe_token_dispatcher_type = 'alltoall', {PERF}/qwen/qwen3_llm_pretrain.py @05c0c90f)"))
"""The dispatcher the 26.02 Qwen3-235B rows' sources state."""

ALLTOALL_2511 = ("alltoall", (
    "as the row's sources state: the 25.11-era preset QWEN3_235B_A22B_B200_FP8_MX_PARALLEL_CONFIG "
    "(PP8 VP2 EP8 GBS 1024: the table's row; "
    f"{PERF}/qwen3/workload_base_configs.py @0fa501ac) and its config function "
    "(qwen3/qwen3_llm_pretrain.py @0fa501ac) set no dispatcher, so the model provider's "
    "default runs: Qwen3MoEModelProvider moe_token_dispatcher_type = 'alltoall' "
    "(src/megatron/bridge/models/qwen/qwen_provider.py @07d0d14a; the recipe of that version "
    "is not stored: an assumption that it kept the default)"))
"""The dispatcher the 25.11 DGX-B200 Qwen3-235B row's sources state."""

A2A_OVERLAP_NOT_MODELLED = (
    "the preset sets moe_a2a_overlap True (Megatron's EP all-to-all overlap with the other "
    "micro-batch's compute in interleaved 1F1B): not modelled for this schedule, the "
    "all-to-alls run exposed, so the prediction is pessimistic by what the overlap hides")


def _case(system: str, model: str, gpus: int, precision: str, gbs: int, mbs: int,
          layout: dict[str, int], tokens_per_gpu_s: float, source: str,
          recipe: tuple[str, tuple[str, ...]] = ("auto", ()),
          dispatcher: tuple[str, str] = ("", ""),
          pipeline: tuple[int, str, str] = (0, "", ""), dp_overlap: str = "") -> Case:
    """One table row; ``recipe`` = (the recompute the step runs, what the row's Megatron-Bridge
    sources state beyond the table); ``dispatcher`` = (the one the row's sources state, where
    they say so), else DeepEP (the playbook's); ``pipeline`` = (MTP modules, pipeline layout
    string, where both are stated) when the row's sources state them, else none and moesim's
    even split; ``dp_overlap``: where the row's sources turn the DP gradient reduce's overlap
    off, where they say so (else on, Megatron-Bridge's default). Every row reduces gradients
    in BF16, as every Megatron-Bridge performance config read states (:data:`GRAD_REDUCE`)."""
    lay = " ".join(f"{k.upper()}{v}" for k, v in layout.items())
    gpu = {"DGX-H100": "H100", "DGX-B200": "B200", "DGX-GB200": "GB200"}[system]
    stated = bool(dispatcher[0])
    dispatcher_name = dispatcher[0] or "deepep"
    fabric = ("nvl72-gb200 (one rack; the case's GPUs are its first ones)" if gpu == "GB200"
              else "rail-optimised fat tree, 1 x 400G CX7 per GPU, 1:1" + (
                  B200_NICS if gpu == "B200" else ""))
    args = (("model", model), ("gpu", gpu), ("gpus", gpus), ("precision", precision),
            ("global_batch", gbs), ("micro_batch_size", mbs), ("seq_len", 4096),
            ("layout", tuple(layout.items())), ("dispatcher", dispatcher_name),
            ("recompute", recipe[0]), ("dispatch_dtype", "bf16"), ("grad_reduce_dtype", "bf16"),
            *((("mtp_layers", pipeline[0]), ("pp_layout", pipeline[1])) if pipeline[2] else ()),
            *((("dp_overlap", False),) if dp_overlap else ()))
    why = (dispatcher[1] if stated else
           "DeepEP, as the Megatron-Bridge MoE hardware playbook states for H100 / B200")
    return Case(
        f"{model} {gpus}x {gpu} {precision} GBS{gbs} {lay}", "bridge", args, tokens_per_gpu_s,
        "tokens/s/GPU", TOLERANCE, source, scope="end_to_end", gpu=gpu, path="fast",
        tolerance_why=TOLERANCE_WHY,
        note=f"{system}, GBS {gbs}, MBS {mbs}, seq 4096, force-balanced dropless router",
        assumptions=(f"dispatcher {dispatcher_name}: {why}", DISPATCH_BF16, fabric,
                     *(recipe[1] or ("recompute: the memory plan's choice",)),
                     pipeline[2] or "pipeline: moesim's even stage split (no preset layout read)",
                     GRAD_REDUCE, *((dp_overlap,) if dp_overlap else ()),
                     f"{precision} as moesim's {PRECISIONS[precision]}"),
    )


PRESETS = ("NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/deepseek/"
           "deepseek_workload_base_configs.py @f0e2c37e")
"""The DeepSeek-V3 presets of the 26.02 table's layouts (that version's B200 / B300 PP16 EP8,
GB200 PP4 VP4 EP64 and GB300 PP2 VP8 EP32 MBS2 presets are the table's rows)."""

DSV3_B200_2602 = ("mla_up_proj", (
    f"recompute: the preset (DEEPSEEK_V3_PRETRAIN_CONFIG_B200_V2, {PRESETS}) states "
    "recompute_modules ['mla_up_proj']: the q / kv up-projection GEMMs again before each "
    "backward (0.18 ms per layer and micro-batch here)",
    "the preset sets no CUDA graphs (cuda_graph_impl unset; host-side launch cost is not "
    "modelled here), moe_a2a_overlap False, and the hybridep flex dispatcher, run as moesim's "
    "hybridep (each token sent once per destination node, then forwarded over NVLink)",
    "MTP: the table's Model TFLOP/s per token (699 / 2689 = 260 G) is its 'w/ MTP' count "
    "(25.11: 557 / 2139 = 260 G w/ MTP, 1003 / 4018 = 250 G w/o): the run had the MTP module"))
"""What the DeepSeek-V3 DGX-B200 preset of the 26.02 table states beyond the table."""

RECIPE = "NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/deepseek/deepseek_v3.py"
RECIPE_MTP = (f"the recipe ({RECIPE} @05d003fb and @355cef45, which agree; it is not stored at "
              "the presets' version: an assumption that the run's recipe said the same) sets "
              "mtp_num_layers = 1 and no preset overrides it")
DSV3_B200_PIPELINE = (1, "Et*4|(t*4|)*14tmL", (
    f"MTP and pipeline layout: the preset (DEEPSEEK_V3_PRETRAIN_CONFIG_B200_V2, {PRESETS}) sets "
    "no pp_layout, so the recipe's layout for (PP 16, VPP 1) is run: layout_map[(16, 1)] of "
    "set_deepseek_v3_pipeline_model_parallel_layout = 'Et*4|(t*4|)*14tmL' (embedding + 4 layers "
    "| 14 x 4 layers | 1 layer + MTP + loss); " + RECIPE_MTP))
"""The DeepSeek-V3 DGX-B200 row's MTP module and pipeline layout, as its sources state."""

DSV3_H100_PIPELINE = (1, "Et|(tt|)*30mL", (
    "MTP and pipeline layout: the 25.09 container's preset is not stored at a version dated to "
    "it; every stored version read states pp_layout 'Et|(tt|)*30mL' for H100 TP2 PP8 VP4 EP64 "
    f"GBS8192 (DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1, {PRESETS}; deepseek_llm_pretrain.py "
    "@01328424, deepseek_v3_h100_1024gpus_fp8_config: layout='Et|(tt|)*30mL', with "
    "parallelism_configs.py @01328424 stating the row's TP2 PP8 VP4 EP64 GBS8192 MBS1): embedding "
    "+ 1 layer | 30 x 2 layers | MTP + loss; " + RECIPE_MTP))
"""The DeepSeek-V3 DGX-H100 row's MTP module and pipeline layout, as its sources state."""

DSV3_H100_RECOMPUTE = ("mla_up_proj+mlp", (
    f"recompute: every stored version read of the preset (DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1, "
    f"{PRESETS}, and @04264182) states recompute_modules ['mla_up_proj', 'mlp'] (the 25.09 "
    "container's own is not stored: an assumption that it said the same, as for the pipeline "
    "layout): the q / kv up-projections again before each layer's backward, and the dense "
    "MLP of the 3 dense layers (Megatron's 'mlp' skips MoE layers)",))
"""The recompute the DeepSeek-V3 DGX-H100 row's preset states."""

DSV3_H100_DP_OVERLAP = (
    "DP gradient reduce not overlapped: every DeepSeek-V3 H100 config read sets "
    "comm_overlap.overlap_grad_reduce = False ('Disabling to avoid functional errors', "
    f"{PERF}/deepseek/deepseek_llm_pretrain.py @01328424 and @69655bff, "
    "deepseek_v3_llm_pretrain.py @27dfb3df); the reduce-scatters run after the last backward")
"""Why the DeepSeek-V3 DGX-H100 row runs with ``dp_overlap`` off."""

BRIDGE_CASES: tuple[Case, ...] = (
    _case("DGX-B200", "deepseek-v3", 256, "FP8-MX", 4096, 1, {"pp": 16, "ep": 8}, 2689.0,
          SOURCE_2602, DSV3_B200_2602, dispatcher=("hybridep", "as the row's preset states"),
          pipeline=DSV3_B200_PIPELINE),
    _case("DGX-B200", "qwen3-30b-a3b", 8, "FP8-MX", 512, 1, {"ep": 8}, 9691.0, SOURCE_2602,
          (QWEN3_NO_RECOMPUTE[0], (*QWEN3_NO_RECOMPUTE[1], QWEN3_30B_B200_DISPATCHER))),
    _case("DGX-B200", "qwen3-235b-a22b", 256, "FP8-MX", 8192, 1, {"pp": 8, "ep": 8}, 3805.0,
          SOURCE_2602, QWEN3_NO_RECOMPUTE, dispatcher=ALLTOALL_235B),
    _case("DGX-H100", "qwen3-30b-a3b", 16, "FP8-CS", 1024, 1, {"pp": 2, "vpp": 12, "ep": 8},
          2557.0, SOURCE_2602, (QWEN3_NO_RECOMPUTE[0],
                                (*QWEN3_NO_RECOMPUTE[1], QWEN3_30B_H100_PRESETS))),
    _case("DGX-H100", "qwen3-235b-a22b", 256, "FP8-CS", 8192, 1,
          {"tp": 2, "pp": 8, "vpp": 4, "ep": 32}, 1633.0, SOURCE_2602,
          (QWEN3_NO_RECOMPUTE[0], (*QWEN3_NO_RECOMPUTE[1], A2A_OVERLAP_NOT_MODELLED)),
          dispatcher=ALLTOALL_235B),
    _case("DGX-B200", "qwen3-235b-a22b", 64, "FP8-MX", 1024, 1, {"pp": 8, "vpp": 2, "ep": 8},
          3269.0, SOURCE, QWEN3_NO_RECOMPUTE, dispatcher=ALLTOALL_2511),
    _case("DGX-H100", "qwen3-30b-a3b", 16, "FP8-CS", 512, 2, {"pp": 2, "vpp": 24, "ep": 8},
          5275.0, SOURCE, (QWEN3_NO_RECOMPUTE[0],
                           (*QWEN3_NO_RECOMPUTE[1], QWEN3_30B_H100_PRESETS))),
    _case("DGX-H100", "deepseek-v3", 1024, "FP8-CS", 8192, 1,
          {"tp": 2, "pp": 8, "vpp": 4, "ep": 64}, 1297.0, SOURCE_2509, DSV3_H100_RECOMPUTE,
          pipeline=DSV3_H100_PIPELINE, dp_overlap=DSV3_H100_DP_OVERLAP),
    _case("DGX-GB200", "qwen3-30b-a3b", 8, "MXFP8", 512, 4, {"ep": 8}, 39936.0, SOURCE_2608,
          (QWEN3_NO_RECOMPUTE[0], (HYBRIDEP_PRESET, *QWEN3_NO_RECOMPUTE[1])),
          dispatcher=("hybridep", "as the row's preset states")),
)
"""The DGX-B200 and DGX-H100 MoE rows of the 26.02 table, the 25.11 rows whose layout the
26.02 table does not repeat, the 25.09 DGX-H100 DeepSeek-V3 dropless row (its table has no
precision column; FP8-CS is an assumption: the H100 rows of the later tables are FP8-CS), and
the one DGX-GB200 row that fits in one NVL72 rack (8 GPUs), from the 26.08 table."""
