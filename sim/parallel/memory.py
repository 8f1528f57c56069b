"""Per-GPU memory of a training job: model state, activations and buffers, worst stage.

Model state (Megatron-LM ``docs/source/api-guide/dist_optimizer.md``, mixed-precision Adam with
BF16 parameters and FP32 gradients): weights 2 B/param, gradients 4 (``main_grad``), optimizer
12 (FP32 master 4 + Adam m 4 + v 4) = 18 B/param; the distributed optimizer shards the 12 over
the data-parallel group: 6 + 12/d. Dense parameters shard over DP x CP (Megatron reduces dense
gradients over the dp-cp group), routed-expert parameters over EDP (which folds CP in).

``precision="fp8"`` models Transformer Engine FP8 training with ``--fp8-param-gather``: the
model keeps FP8 weights (1 B/param) while the optimizer keeps its FP32 master copy, so
17 B/param (5 + 12/d sharded). Activations are still counted at 16 bits — TE saves FP8 copies of
GEMM inputs only, so this is conservative.

Per-GPU parameter share: a pipeline stage's dense parameters / tp and its expert parameters /
(etp * ep). The first stage holds the input embedding, the last the output head (a copy of the
embedding when tied and pp > 1), the final norm and the MTP modules (Megatron places MTP on the
last stage). The budget reported is the stage with the largest total.

Micro-batches in flight (activations held at once) on stage r of pp:

* ``1f1b``: min(pp - r, m) micro-batches of the stage's layers;
* ``interleaved``: Megatron's warm-up count ``2(pp - r - 1) + (vpp - 1) pp`` + 1 model chunks
  (capped at m * vpp), each 1/vpp of the stage; on stage 0 that is pp (1 + (pp-1)/(pp vpp))
  stage-equivalents (Korthikanti et al. 2022, sec. 4.2.3);
* ``dualpipe``: DeepSeek-V3 technical report Table 2: pp + 1 micro-batches, and two copies of
  the parameters — rank r holds stages r and pp-1-r. Gradients follow the parameters; with the
  distributed optimizer the two copies of a stage shard their optimizer over both DP groups
  (2 dp), so optimizer bytes per GPU stay those of one stage (an assumption: DeepSeek does not
  publish its sharding).

Buffers: the MoE all-to-all staging of one layer (send + receive; dispatch at 2 B/element, or
1 B + an FP32 scale per 128 elements for FP8, combine at 2 B), doubled under DualPipe (two
micro-batches overlap), plus :data:`WORKSPACE_BYTES` for the CUDA context, cuBLAS/TE
workspaces and NCCL communicator buffers — an engineering estimate, not a measurement.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from moesim.calibration import (
    GRAD_BYTES_PER_PARAM,
    HBM_RESERVE_FRACTION,
    OPTIMIZER_STATE_BYTES_PER_PARAM,
    WORKSPACE_BYTES,
)
from moesim.errors import ConfigError
from moesim.model.accounting import embedding_params, layer_params, mtp_module_params
from moesim.model.activations import RECOMPUTE_MODES, layer_activation_bytes, logits_bytes
from moesim.model.config import ModelConfig
from moesim.parallel.layout import ParallelLayout

GIB = 2**30
RECOMPUTE_ORDER = ("selective", "full")
"""Tried in this order until the layout fits (``moesim plan memory``, the design search and
the step's ``recompute: auto``): selective first (Megatron's core-attention recompute; a flash
kernel keeps no score matrix either), then full."""
WEIGHT_BYTES = {"bf16": 2, "fp8": 1}
GRAD_BYTES = GRAD_BYTES_PER_PARAM  # moesim.calibration
OPTIMIZER_BYTES = OPTIMIZER_STATE_BYTES_PER_PARAM  # moesim.calibration
SCHEDULES = ("1f1b", "interleaved", "dualpipe")


class _InGib:
    """A read-only ``*_gib`` attribute: the byte count ``bytes_attr`` in GiB (2**30 bytes)."""

    def __init__(self, bytes_attr: str) -> None:
        self.bytes_attr = bytes_attr

    def __get__(self, obj: object, owner: type | None = None) -> float:
        size_bytes: float = getattr(obj, self.bytes_attr)
        return size_bytes / GIB


@dataclass(frozen=True)
class MemoryBudget:
    """Bytes per GPU on the worst pipeline stage (``stage``)."""

    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    buffers_bytes: float
    params_per_gpu_dense: float
    params_per_gpu_expert: float
    stage: int
    stage_totals_bytes: tuple[float, ...]

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.grads_bytes + self.optimizer_bytes
                + self.activations_bytes + self.buffers_bytes)

    @property
    def params_per_gpu(self) -> float:
        return self.params_per_gpu_dense + self.params_per_gpu_expert

    weights_gib = _InGib("weights_bytes")
    grads_gib = _InGib("grads_bytes")
    optimizer_gib = _InGib("optimizer_bytes")
    activations_gib = _InGib("activations_bytes")
    buffers_gib = _InGib("buffers_bytes")
    total_gib = _InGib("total_bytes")


@dataclass(frozen=True)
class Fit:
    """Whether a budget fits a GPU; ``reason`` says why not (empty when it fits)."""

    ok: bool
    reason: str
    need_bytes: float
    usable_bytes: float

    def __bool__(self) -> bool:
        return self.ok


def stage_params(cfg: ModelConfig, layout: ParallelLayout) -> list[tuple[int, int]]:
    """(dense, routed-expert) parameters of each pipeline stage (whole stage, unsharded)."""
    emb_in, emb_out = embedding_params(cfg)
    if layout.pp > 1 and emb_out == 0:
        emb_out = emb_in  # tied: Megatron keeps a copy of the embedding on the last stage
    mtp_dense, mtp_expert = mtp_module_params(cfg)
    stages, start = [], 0
    for n in layout.stage_layers(cfg.num_layers):
        per_layer = [layer_params(cfg, i) for i in range(start, start + n)]
        stages.append([sum(p[0] for p in per_layer), sum(p[1] for p in per_layer)])
        start += n
    stages[0][0] += emb_in
    stages[-1][0] += emb_out + cfg.hidden_size + cfg.mtp_layers * mtp_dense
    stages[-1][1] += cfg.mtp_layers * mtp_expert
    return [(d, e) for d, e in stages]


def inflight_chunks(layout: ParallelLayout, schedule: str, stage: int,
                    num_microbatches: int) -> float:
    """Activations held at once on ``stage``, in micro-batches of the whole stage."""
    pp, vpp, m = layout.pp, layout.vpp, num_microbatches
    if schedule == "interleaved":
        chunks = 2 * (pp - stage - 1) + (vpp - 1) * pp + 1
        return min(chunks, m * vpp) / vpp
    if schedule == "dualpipe":
        return float(min(pp + 1, m))
    return float(min(pp - stage, m))


def _check_inputs(cfg: ModelConfig, layout: ParallelLayout, seq_len: int, mbs: int, m: int,
                  recompute: str, precision: str, schedule: str) -> None:
    for name, value in (("seq_len", seq_len), ("micro_batch_size", mbs),
                        ("num_microbatches", m)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(name, f"must be a positive integer, got {value!r}")
    choices: tuple[tuple[str, str, tuple[str, ...]], ...] = (
        ("recompute", recompute, RECOMPUTE_MODES),
        ("precision", precision, tuple(WEIGHT_BYTES)),
        ("schedule", schedule, SCHEDULES),
    )
    for name, choice, allowed in choices:
        if choice not in allowed:
            raise ConfigError(name, f"unknown {choice!r}; allowed: " + ", ".join(allowed))
    layout.validate(cfg)
    if (schedule == "interleaved") != (layout.vpp > 1):
        raise ConfigError("schedule", f"'interleaved' goes with layout.vpp > 1 and only "
                          f"with it (vpp={layout.vpp}, schedule={schedule!r})")
    if schedule == "dualpipe" and layout.pp % 2:
        raise ConfigError("layout.pp", f"dualpipe needs an even pp, got {layout.pp}")
    shard = 2 * layout.cp if layout.cp > 1 else 1
    if seq_len % (shard * layout.tp):
        raise ConfigError("seq_len", f"{seq_len} must divide by tp*cp (x2 for causal CP "
                          f"load balancing) = {shard * layout.tp}")


def state_memory(
    cfg: ModelConfig,
    layout: ParallelLayout,
    *,
    seq_len: int,
    micro_batch_size: int,
    num_microbatches: int,
    recompute: str = "none",
    precision: str = "bf16",
    distributed_optimizer: bool = True,
    schedule: str = "1f1b",
) -> MemoryBudget:
    """Per-GPU memory of training ``cfg`` with ``layout``; the worst pipeline stage."""
    _check_inputs(cfg, layout, seq_len, micro_batch_size, num_microbatches, recompute,
                  precision, schedule)
    params = stage_params(cfg, layout)
    acts = [_stage_activations(cfg, layout, r, seq_len, micro_batch_size, num_microbatches,
                               recompute, schedule) for r in range(layout.pp)]
    buffers = _buffer_bytes(cfg, layout, seq_len, micro_batch_size, precision, schedule)
    budgets = []
    for r in range(layout.pp):
        dense, expert = params[r]
        copies = 1
        if schedule == "dualpipe" and layout.pp > 1:
            mirror = params[layout.pp - 1 - r]
            dense, expert, copies = dense + mirror[0], expert + mirror[1], 2
        budgets.append(_budget(layout, r, dense / layout.tp, expert / (layout.etp * layout.ep),
                               acts[r], buffers, precision, distributed_optimizer, copies))
    worst = max(budgets, key=lambda b: b.total_bytes)
    totals = tuple(b.total_bytes for b in budgets)
    return dataclasses.replace(worst, stage_totals_bytes=totals)


def _budget(layout: ParallelLayout, stage: int, dense: float, expert: float, acts: float,
            buffers: float, precision: str, distributed: bool, copies: int) -> MemoryBudget:
    dense_shard = layout.dp * layout.cp * copies if distributed else 1
    expert_shard = layout.edp * copies if distributed else 1
    optimizer = OPTIMIZER_BYTES * (dense / dense_shard + expert / expert_shard)
    return MemoryBudget(
        weights_bytes=WEIGHT_BYTES[precision] * (dense + expert),
        grads_bytes=GRAD_BYTES * (dense + expert),
        optimizer_bytes=optimizer,
        activations_bytes=acts,
        buffers_bytes=buffers,
        params_per_gpu_dense=dense,
        params_per_gpu_expert=expert,
        stage=stage,
        stage_totals_bytes=(),
    )


def _stage_activations(cfg: ModelConfig, layout: ParallelLayout, stage: int, seq_len: int,
                       mbs: int, m: int, recompute: str, schedule: str) -> float:
    def layer(moe: bool, mode: str) -> float:
        return layer_activation_bytes(cfg, moe=moe, seq_len=seq_len, micro_batch_size=mbs,
                                      tp=layout.tp, cp=layout.cp, recompute=mode)

    def stage_bytes(r: int) -> float:
        start = sum(layout.stage_layers(cfg.num_layers)[:r])
        n = layout.stage_layers(cfg.num_layers)[r]
        flags = list(cfg.moe_layers[start:start + n])
        if r == layout.pp - 1:
            flags += [cfg.is_moe] * cfg.mtp_layers
        return sum(layer(f, recompute) for f in flags)

    held = stage_bytes(stage)
    if schedule == "dualpipe" and layout.pp > 1:
        held = (held + stage_bytes(layout.pp - 1 - stage)) / 2
    total = inflight_chunks(layout, schedule, stage, m) * held
    if recompute == "full":  # the one layer being recomputed holds its working set
        total += max(layer(f, "selective") for f in set(cfg.moe_layers))
    holds_head = stage == layout.pp - 1 or (schedule == "dualpipe" and stage == 0)
    if holds_head:
        total += (1 + cfg.mtp_layers) * logits_bytes(cfg, seq_len, mbs, layout.tp, layout.cp)
    return total


def _buffer_bytes(cfg: ModelConfig, layout: ParallelLayout, seq_len: int, mbs: int,
                  precision: str, schedule: str) -> float:
    if not cfg.is_moe:
        return float(WORKSPACE_BYTES)
    tokens = seq_len * mbs / (layout.tp * layout.cp)
    h = cfg.hidden_size
    dispatch = h + 4 * h / 128 if precision == "fp8" else 2 * h
    per_copy = dispatch + 2 * h  # combine in BF16
    a2a = 2 * tokens * cfg.top_k * per_copy  # send + receive
    if schedule == "dualpipe":
        a2a *= 2
    return WORKSPACE_BYTES + a2a


def choose_recompute(
    cfg: ModelConfig, layout: ParallelLayout, *, seq_len: int, micro_batch_size: int,
    num_microbatches: int, hbm_bytes: float, precision: str = "bf16", schedule: str = "1f1b",
    reserve_fraction: float = HBM_RESERVE_FRACTION,
) -> tuple[str, MemoryBudget, Fit]:
    """The first recompute of :data:`RECOMPUTE_ORDER` whose budget fits ``hbm_bytes`` (the
    last one, not fitting, when none does): (recompute, its budget, the verdict)."""
    for recompute in RECOMPUTE_ORDER:
        budget = state_memory(cfg, layout, seq_len=seq_len, micro_batch_size=micro_batch_size,
                              num_microbatches=num_microbatches, recompute=recompute,
                              precision=precision, schedule=schedule)
        verdict = fits(budget, hbm_bytes, reserve_fraction)
        if verdict.ok:
            break
    return recompute, budget, verdict


def fits(budget: MemoryBudget, gpu_hbm_bytes: float, reserve_fraction: float = 0.1) -> Fit:
    """Does ``budget`` fit in ``gpu_hbm_bytes`` less a ``reserve_fraction`` (fragmentation)?"""
    if not 0 <= reserve_fraction < 1:
        raise ConfigError("reserve_fraction", f"must be in [0, 1), got {reserve_fraction!r}")
    if gpu_hbm_bytes <= 0:
        raise ConfigError("gpu_hbm_bytes", f"must be positive, got {gpu_hbm_bytes!r}")
    usable = gpu_hbm_bytes * (1 - reserve_fraction)
    need = budget.total_bytes
    if need <= usable:
        return Fit(True, "", need, usable)
    parts = {"weights": budget.weights_gib, "grads": budget.grads_gib,
             "optimizer": budget.optimizer_gib, "activations": budget.activations_gib,
             "buffers": budget.buffers_gib}
    largest = max(parts, key=lambda k: parts[k])
    detail = ", ".join(f"{k} {v:.1f}" for k, v in parts.items())
    reason = (f"needs {need / GIB:.1f} GiB per GPU on pipeline stage {budget.stage} but only "
              f"{usable / GIB:.1f} GiB is usable ({gpu_hbm_bytes / GIB:.1f} GiB less "
              f"{reserve_fraction:.0%} reserve): {detail} GiB; largest: {largest}")
    return Fit(False, reason, need, usable)
