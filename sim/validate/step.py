"""The end-to-end case: Mixtral 8x7B on 64 H100 with Megatron-Core, one simulated step.

Setting (NVIDIA/Megatron-LM ``megatron/core/transformer/moe/README.md``, MCore v0.9, 468
TFLOP/s per GPU; v0.8: 438): seq 4096, TP1 EP8 PP4 VPP8, global batch 256, BF16, dropless.
Here: dp = 64 / (tp x pp) = 16, so 256 / 16 = 16 micro-batches of one sequence per pipeline;
interleaved 1F1B with 8 virtual stages; the alltoall token dispatcher sends BF16 both ways
(no deduplication of a token's two experts on the same rank: one copy per routed expert);
uniform dropless routing (aux-loss balanced); 8 HGX H100 nodes on a rail-optimised fat tree
(``rail-h100-64``). The setting is the shipped step scenario
``scenarios/mixtral-64xh100.yaml``: what ``moesim run mixtral-64xh100`` runs.

The published TFLOP/s is Megatron's own count divided by the measured step time. Its
``num_floating_point_operations`` of that era counted the attention core *without* the causal
halving (``... + seq_length / hidden_size``: NVIDIA/Megatron-LM issue #831, 2024-05; MaxText
PR #537 "Megatron is counting attention flops non-causally"; the causal ``/ 2`` came in 2025).
So the prediction is that same count over the simulated step time:
:func:`megatron_v09_flops`. For Mixtral at seq 4096 it is 4% above the causal model FLOPs
that :func:`moesim.step.run_step` reports.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from moesim.fabric.spec import FabricSpec
from moesim.model import ModelConfig
from moesim.parallel.layout import ParallelLayout
from moesim.router import RouterConfig
from moesim.runner.specs import step_spec
from moesim.scenario import load_scenario_file
from moesim.scenarios import resolve
from moesim.step import StepResult, StepSpec, run_step
from moesim.step.host import host_band
from moesim.step.mode import step_mode
from moesim.step.result import summarise
from moesim.validate.ampere import MODELS as AMPERE_MODELS
from moesim.validate.bridge import PRECISIONS, bridge_model
from moesim.validate.case import Case
from moesim.validate.phases import OP_KINDS, StagePhases


def megatron_v09_flops(model: ModelConfig, sequences: int, seq_len: int,
                       causal: bool = False) -> float:
    """Megatron-LM ``num_floating_point_operations`` (2024, MCore v0.8/v0.9) of one step.

    12 B s L h^2 [ (1 + g/a + s/h) (a d / h) + (ffn/h) top_k (3/2 if SwiGLU)
    + shared/h (3/2) + V / (2 L h) ]: GEMMs x 3 (fwd, dgrad, wgrad), full (non-causal)
    attention core, no router, LM head once. ``causal``: the 2025 versions' count, which takes
    half the attention matrix (``seq_length / hidden_size / 2``, "Only half of the attention
    matrix is non-zero"), the TFLOP/s Megatron-Core logs and the ModelZoo tables report.
    """
    h, layers = model.hidden_size, model.num_layers
    heads, groups = model.num_attention_heads, model.num_key_value_heads
    q_ratio = model.head_dim * heads / h
    glu = 1.5 if model.gated_ffn else 1.0
    attention = (1 + groups / heads + seq_len / h / (2 if causal else 1)) * q_ratio
    mlp = model.moe_intermediate_size / h * model.top_k * glu
    shared = model.shared_expert_intermediate_size * model.n_shared_experts / h * glu
    logit = model.vocab_size / (2 * layers * h)
    return 12.0 * sequences * seq_len * layers * h * h * (attention + mlp + shared + logit)


def mixtral_spec(microbatches: int = 16) -> StepSpec:
    """The Megatron-Core Mixtral 8x7B benchmark: the shipped step scenario ``mixtral-64xh100``
    (``moesim step mixtral-64xh100`` runs the same step) with ``microbatches`` per pipeline."""
    spec = step_spec(load_scenario_file(resolve("mixtral-64xh100")))
    return replace(spec, microbatches=microbatches)


@lru_cache(maxsize=2)
def simulate_mixtral(microbatches: int = 16) -> tuple[float, StepResult]:
    """(Megatron-convention TFLOP/s per GPU, the step result); cached: one run per process."""
    spec = mixtral_spec(microbatches)
    result = run_step(spec)
    sequences = spec.layout.dp * spec.microbatches * spec.micro_batch_size
    flops = megatron_v09_flops(spec.model, sequences, spec.seq_len)
    return flops / result.step_time_s / spec.layout.world_size / 1e12, result


@lru_cache(maxsize=2)
def _run_scenario(scenario: str) -> tuple[StepSpec, StepResult, np.ndarray, np.ndarray]:
    """(spec, result, [stage, category] seconds of one simulated rank per stage, [stage, op
    kind F B W FB] seconds in its ops less pipeline waits) of the shipped step scenario
    ``scenario`` in its own mode (what :func:`moesim.step.run_step` runs)."""
    scn = load_scenario_file(resolve(scenario))
    spec = step_spec(scn)
    strategy = step_mode(scn.mode)
    st, ranks = strategy.simulate(spec)
    result = summarise(spec, st, ranks, strategy.name, strategy.critical(st))
    sim = np.asarray(sorted(ranks), dtype=np.int64)
    stage = sim // (spec.layout.world_size // spec.layout.pp)
    first = np.unique(stage, return_index=True)[1]  # one rank per stage (fast mode: the one)
    reps = sim[first].tolist()
    kinds = np.array([[st.op_kind_s[r][k] for k in OP_KINDS] for r in reps], dtype=float)
    return spec, result, st.time_s[reps].copy(), kinds


def simulate_gpu_hours(scenario: str) -> tuple[float, StepResult]:
    """(GPU-hours per trillion tokens, the step result) of the shipped step scenario
    ``scenario`` in its own mode: step time x GPUs / tokens per step, scaled to 1e12 tokens."""
    spec, result, _, _ = _run_scenario(scenario)
    gpus = spec.layout.world_size
    return result.step_time_s * gpus / 3600 * 1e12 / spec.global_tokens, result


def stage_phases(scenario: str) -> StagePhases:
    """Each pipeline stage's time in passes, bubble and optimizer (:mod:`.phases`; bubble
    includes the rank's idle after its own end until the step's), from the same (cached) run
    as :func:`simulate_gpu_hours`."""
    _, result, times, kinds = _run_scenario(scenario)
    return StagePhases.from_times(times, kinds, result.step_time_s)


def step_detail(result: StepResult) -> str:
    """One line: step time, causal-convention TFLOP/s, the last rank's breakdown."""
    parts = ", ".join(f"{k} {v:.3f}" for k, v in result.breakdown_s.items() if v > 0)
    return (f"step {result.step_time_s:.3f} s; {result.tflops_per_gpu:.1f} TFLOP/s causal "
            f"count (MFU {result.mfu:.1%}); last rank [s]: {parts}")


AMPERE_GPUS = ("A100", "A800")


PER_EXPERT_ALLTOALL = (
    "the alltoall dispatcher sends one copy per routed expert (no per-rank deduplication): "
    "Megatron-Core's MoEAlltoAllTokenDispatcher permutes each token once per routed expert and "
    "sizes each EP rank's all-to-all split as the tokens of its local experts "
    "(megatron/core/transformer/moe/token_dispatcher.py, preprocess: input_splits = "
    "num_local_tokens_per_expert summed per EP rank); DeepSpeed-MoE's einsum dispatch fills "
    "one [expert, capacity] slot per routed expert")
"""Why a Megatron-Bridge / ModelZoo / Ampere row with ``alltoall`` runs with ``dedup`` off (as
the Mixtral case's scenario does)."""


def bridge_spec(case: Case) -> StepSpec:
    """The step of a Megatron-Bridge table row (:mod:`moesim.validate.bridge`) as stated
    (optional args: ``grad_reduce_dtype``, default fp32; ``dp_overlap``, default on)."""
    a: dict[str, Any] = dict(case.args)
    degrees: dict[str, int] = dict(a["layout"])
    gpus, mbs, gbs = int(a["gpus"]), int(a["micro_batch_size"]), int(a["global_batch"])
    gpu = str(a["gpu"])
    tp, pp, cp = (degrees.get(k, 1) for k in ("tp", "pp", "cp"))
    layout = replace(
        ParallelLayout.of({**degrees, "dp": gpus // (tp * pp * cp)}),
        pipeline_model_parallel_layout=str(a.get("pp_layout", "")))
    if gpu == "GB200":  # one NVL72 rack; ranks on its first GPUs
        fabric = FabricSpec(preset="nvl72-gb200", multipath="dmodk", batch_window_rel=0.02)
    else:
        params: tuple[tuple[str, object], ...] = (("hosts", max(1, gpus // 8)), ("gpu", gpu))
        if gpu in AMPERE_GPUS:  # HGX A100 / A800: HDR 200 Gb/s NICs
            params += (("nic_gbit", 200),)
        fabric = FabricSpec(preset="rail-h100-64", params=params,
                            multipath="dmodk", batch_window_rel=0.02)
    name = str(a["model"])
    return StepSpec(
        model=AMPERE_MODELS[name] if name in AMPERE_MODELS else bridge_model(name),
        layout=layout, gpu=gpu, fabric=fabric,
        schedule="interleaved" if layout.vpp > 1 else "1f1b",
        microbatches=gbs // (layout.dp * mbs), micro_batch_size=mbs,
        seq_len=int(a["seq_len"]),
        router=RouterConfig(kind=str(a.get("router", "force_balanced"))),
        compute_dtype=PRECISIONS[str(a["precision"])],
        dispatcher=str(a["dispatcher"]),
        dedup=str(a["dispatcher"]) != "alltoall",  # see PER_EXPERT_ALLTOALL
        recompute=str(a.get("recompute", "auto")),
        dispatch_dtype=str(a.get("dispatch_dtype", "fp8")),
        mtp_layers=int(a.get("mtp_layers", 0)),
        grad_reduce_dtype=str(a.get("grad_reduce_dtype", "fp32")),
        dp_overlap=bool(a.get("dp_overlap", True)),
    )


def host_detail(case: Case, value: float, result: StepResult) -> str:
    """The case's prediction at both ends of the host-launch band (:mod:`moesim.step.host`):
    the simulated step floored by its expert GEMM launches x 4.58 us .. 45.3 us."""
    band = host_band(bridge_spec(case), result.step_time_s)
    per = {end: (value * result.step_time_s / s if dict(case.args).get("metric") != "step_s"
                 else s) for end, s in band.step_s.items()}  # rates scale as 1 / step
    errs = {end: (v / case.published - 1) * 100 for end, v in per.items()}
    lo, hi = (f"{v:.0f}" if v >= 100 else f"{v:.3g}" for v in (per["low"], per["high"]))
    return (f"host band ({band.launches} expert GEMM launches): {lo} .. {hi} "
            f"({errs['low']:+.1f}% .. {errs['high']:+.1f}%)")


def simulate_bridge(case: Case) -> tuple[float, StepResult]:
    """(tokens / s / GPU, the step time in seconds with ``metric: step_s``, or TFLOP/s per GPU
    by Megatron-Core's causal count with ``metric: megatron_tflops``; the fast-mode step
    result) of a Megatron-Bridge table row or a ModelZoo layout."""
    spec = bridge_spec(case)
    result = run_step(spec, mode="fast")
    metric = dict(case.args).get("metric")
    if metric == "step_s":
        return result.step_time_s, result
    if metric == "megatron_tflops":  # per GPU, Megatron-Core's causal count
        flops = megatron_v09_flops(spec.model, spec.global_tokens // spec.seq_len, spec.seq_len,
                                   causal=True)
        return flops / result.step_time_s / spec.layout.world_size / 1e12, result
    return spec.global_tokens / result.step_time_s / spec.layout.world_size, result
