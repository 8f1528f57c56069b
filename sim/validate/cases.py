"""The validation cases: what is simulated, the published number and where it comes from.

Each :class:`Case` names a runner ``kind`` (see :mod:`moesim.validate.runners`), its
arguments, the published value with its unit and source, and a relative tolerance (15%
for bandwidths and throughput, 1% for parameter counts). ``check`` says what a pass
means: ``validation`` (the published number is not an input of the model) or
``consistency`` (the number is itself a calibration input; the case checks the machinery
between the constant and the printed figure, not the constant). A case whose runner
returns no prediction is listed as not yet simulable.

Parameter counts come two ways: ``params`` (the model's own parameters against the figure its
authors state) and ``checkpoint`` (every tensor element of the released weights, as the
Hugging Face hub counts them: for the block-FP8 releases that includes the fp32 block scales
and the MTP module as stored, :mod:`moesim.validate.checkpoint`). Kimi K2 is only checked the
second way: its tech report's "1.04T" is 1.3% above what the released config and weights
hold (1026.4B parameters; 1026.5B tensor elements), and no counting convention found
reproduces it. The ``step`` case simulates a whole training step (~1 min for 64 GPUs); the
``training_cost`` case a whole pre-training step in fast mode (~20 s for 2048 GPUs), turned
into GPU-hours per trillion tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.errors import ConfigError

BANDWIDTH_TOLERANCE = 0.15
PARAMS_TOLERANCE = 0.01
CHECKS = ("validation", "consistency")

DEEPEP_SOURCE = "deepseek-ai/DeepEP docs/legacy.md, V1 normal kernels on H800 + CX7"


@dataclass(frozen=True)
class Case:
    """One published measurement the simulator is compared against."""

    name: str
    kind: str
    args: tuple[tuple[str, object], ...]
    published: float
    unit: str
    tolerance_rel: float
    source: str
    check: str = "validation"
    note: str = ""

    def __post_init__(self) -> None:
        if self.check not in CHECKS:
            raise ConfigError("case.check", f"unknown {self.check!r}; allowed: {', '.join(CHECKS)}")
        if self.tolerance_rel <= 0:
            raise ConfigError("case.tolerance_rel", f"must be > 0, got {self.tolerance_rel}")
        if self.published <= 0:
            raise ConfigError("case.published", f"must be > 0, got {self.published}")

    def arg(self, key: str) -> object:
        return dict(self.args)[key]


def _deepep(ep: int, kernel: str, published: float, medium: str) -> Case:
    where = "intranode" if ep == 8 else "internode"
    return Case(f"DeepEP {where} EP{ep} {kernel}", "deepep", (("ep", ep), ("kernel", kernel)),
                published, f"GB/s ({medium})", BANDWIDTH_TOLERANCE, DEEPEP_SOURCE)


_DEEPEP_TABLE = ((8, 153.0, 158.0, "NVLink"), (16, 43.0, 43.0, "RDMA"),
                 (32, 58.0, 57.0, "RDMA"), (64, 51.0, 50.0, "RDMA"))

DEEPEP_CASES: tuple[Case, ...] = tuple(
    case
    for ep, disp, comb, medium in _DEEPEP_TABLE
    for case in (_deepep(ep, "dispatch", disp, medium), _deepep(ep, "combine", comb, medium))
)

NCCL_CASES: tuple[Case, ...] = (
    Case("NCCL all-to-all busBw, 8x H100 NVLink (1 GiB)", "nccl_alltoall", (("hosts", 1),),
         370.0, "GB/s (busBw)", BANDWIDTH_TOLERANCE,
         "NVIDIA/nccl-tests #212 (~370 GB/s busbw, non-all-reduce collectives, H100 8-GPU)",
         check="consistency"),
    Case("NCCL all-to-all per-NIC rate, 6x8 H100 CX7 (1 GiB)", "nccl_alltoall",
         (("hosts", 6),), 48.5, "GB/s per NIC", BANDWIDTH_TOLERANCE,
         "NVIDIA/nccl-tests #267 (6 H100 nodes, 8x CX7 400G: a2a runs at one NIC's rate, "
         "48-49 GB/s)", check="consistency"),
)

_PARAM_SOURCES = {
    "deepseek-v3": (671e9, "DeepSeek-V3 technical report (arXiv:2412.19437): 671B total, "
                           "excl. the 14B MTP module"),
    "mixtral-8x7b": (46.7e9, "Mistral AI, 'Mixtral of experts' (2023): 46.7B total"),
    "qwen3-235b-a22b": (235e9, "Qwen3 technical report / model card: 235B total"),
}

PARAM_CASES: tuple[Case, ...] = tuple(
    Case(f"{model} total parameters", "params", (("model", model),), value, "params",
         PARAMS_TOLERANCE, source)
    for model, (value, source) in _PARAM_SOURCES.items()
)

CHECKPOINT_CASES: tuple[Case, ...] = (
    Case("kimi-k2 checkpoint parameters", "checkpoint", (("model", "kimi-k2"),), 1026.5e9,
         "params", PARAMS_TOLERANCE,
         "Hugging Face hub, moonshotai/Kimi-K2-Instruct: 1026.5B params (safetensors metadata)",
         note="block-FP8 release: parameters + fp32 128x128 block scales; tech report: 1.04T, "
              "not reproducible from the released config/weights: -1.3%"),
    Case("deepseek-v3 checkpoint parameters", "checkpoint", (("model", "deepseek-v3"),), 685e9,
         "params", PARAMS_TOLERANCE,
         "deepseek-ai/DeepSeek-V3 README: 685B on Hugging Face = 671B main + 14B MTP",
         note="block-FP8 release: parameters + MTP as stored + fp32 128x128 block scales"),
)

GEMM_CASES: tuple[Case, ...] = (
    Case("H200 BF16 GEMM 8192^3, sustained (MSMF)", "gemm",
         (("gpu", "H200"), ("size", 8192), ("dtype", "bf16")), 698.6, "TFLOP/s",
         BANDWIDTH_TOLERANCE,
         "stas00/ml-engineering compute/accelerator/benchmarks README (MSMF, all 8 GPUs busy)",
         check="consistency",
         note="the sustained fraction is this run's MSMF / MAMF (698.6 / 823.9); the model "
              "applies it to the H100 MAMF 794.5 (H200 BF16 MAMF taken as H100's)"),
)

STEP_CASES: tuple[Case, ...] = (
    Case("Mixtral 8x7B, 64x H100, TP1 EP8 PP4 VPP8", "step",
         (("model", "mixtral-8x7b"), ("microbatches", 16)),
         468.0, "TFLOP/s per GPU", BANDWIDTH_TOLERANCE,
         "NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md (MCore v0.9; v0.8: 438)",
         note="seq 4096, GBS 256, BF16 a2a, interleaved 1F1B, Megatron 2024 FLOP count "
              "(non-causal attention); moesim.validate.step"),
    Case("DeepSeek-V3 pre-training, 2048 H800, PP16 EP64 DP128", "training_cost",
         (("scenario", "deepseek-v3-2048xh800"),), 180e3, "H800 GPU-hours per 1T tokens",
         BANDWIDTH_TOLERANCE,
         "DeepSeek-V3 technical report (arXiv:2412.19437): 180K H800 GPU hours per trillion "
         "tokens (2664K for 14.8T)",
         note="fast mode; DualPipe-style, FP8 GEMMs, DeepEP dispatch, GBS 15360; not modelled: "
              "the MTP module, FP8 quantisation kernels, the batch ramp over the first 469B "
              "tokens, DualPipe's bidirectional feeding, the multi-plane fabric"),
)

CASES: tuple[Case, ...] = (DEEPEP_CASES + NCCL_CASES + PARAM_CASES + CHECKPOINT_CASES
                           + GEMM_CASES + STEP_CASES)
