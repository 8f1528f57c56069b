"""Fast analytical step time of one layout: compute, pipeline bubble, communication.

Assumptions (each a deliberate simplification; the engine replaces the MoE part for the
best candidates, see :mod:`moesim.plan.evaluate`):

* Compute: model FLOPs (:func:`moesim.model.flops_per_token`) x 3 for forward + backward, plus
  recompute (selective: the attention core forward again; full: the whole forward again),
  at the GPU's BF16 peak times the GEMM efficiency of the roofline model
  (:func:`moesim.hardware.gemm_efficiency`) with ``tokens/(tp*cp)`` rows for the dense parts
  (attention core at the same efficiency: an approximation of flash attention). Routed and
  shared experts use the engine's own roofline cost (:func:`moesim.workload.costs.experts_s`,
  grouped GEMMs including their weight reads) under a balanced router: each local expert
  receives ``tokens/(tp*cp) * top_k * ep / experts`` rows.
* MoE all-to-all per layer and micro-batch: four of them (dispatch and combine, forward
  and backward), each rank sending a token once per distinct destination rank, as the
  step's de-duplicating dispatcher does (:func:`distinct_ranks`, uniform router), off-rank
  share ``(1 - 1/ep)`` at FP8 (dispatch) or BF16 (the others), over the
  achievable bandwidth of the slowest link class the EP group crosses
  (:meth:`FabricView.effective_bw_GBps`). Not overlapped with compute.
* TP with sequence parallelism: per layer and direction, an all-gather and a
  reduce-scatter around attention, and around the dense FFN on dense layers (routed
  experts with etp=1 need none), each moving ``(tp-1)/tp`` of the layer's activation.
  CP: ring attention passes K/V ``cp-1`` times forward and twice that backward, half of it
  exposed (:data:`CP_EXPOSED`). PP: one activation send forward and one gradient back per
  micro-batch and virtual chunk, exposed.
* Pipeline (1F1B / interleaved): ``step = t_mb * (m + (pp - 1) / vpp)`` on the slowest
  stage: bubble fraction ``(pp-1)/(vpp*m)`` (Narayanan et al. 2021, sec. 2.2).
* Data parallel, as the whole-step simulator runs it (:mod:`moesim.step.program`):
  distributed-optimizer gradient reduce-scatter in FP32 (Megatron reduces the fp32
  ``main_grad``, :data:`moesim.step.spec.GRAD_REDUCE_BYTES`), then the BF16 parameter
  all-gather; each ring moves ``(n-1)/n * bytes`` per rank once (RS and AG are one ring
  each, not two), dense parameters over the DP x CP group and experts over EDP. A layer's
  reduce-scatter starts after its last backward (``--overlap-grad-reduce``), so the rings
  overlap the rest of the last micro-batch's backward on the stage (:data:`BWD_SHARE` of a
  micro-batch's time): what exceeds that window is exposed, and at least the last layer's
  share always is. The all-gather runs after the optimizer, exposed, as the simulator has
  it.
* Optimizer step: memory-bound over the GPU's shard (~30 B per sharded parameter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from moesim.calibration import (
    CP_EXPOSED_FRACTION,
    HBM_ACHIEVABLE_FRACTION,
    OPTIMIZER_STEP_BYTES_PER_PARAM,
)
from moesim.hardware import GpuSpec, gemm_efficiency
from moesim.model import ModelConfig, flops_per_token
from moesim.parallel.memory import stage_params
from moesim.plan.candidates import Candidate
from moesim.plan.fabric_view import FabricView
from moesim.plan.spec import DesignSpec
from moesim.step.spec import GRAD_REDUCE_BYTES
from moesim.workload.costs import LayerShape, experts_s, token_bytes

BWD_SHARE = 2.0 / 3.0  # backward = 2 of the 3 forward-equivalents of a micro-batch's GEMMs
CP_EXPOSED = CP_EXPOSED_FRACTION  # moesim.calibration (assumption)
OPTIMIZER_BYTES_PER_PARAM = OPTIMIZER_STEP_BYTES_PER_PARAM  # moesim.calibration
BF16 = 2


@dataclass(frozen=True)
class Estimate:
    """Seconds per step of one layout, by part (per-micro-batch parts summed over m)."""

    dense_compute_s: float
    moe_s: float            # routed + shared expert compute and all-to-all (MoE part)
    a2a_s: float            # the all-to-all inside moe_s
    tp_s: float
    cp_s: float
    pp_s: float
    bubble_s: float
    dp_s: float
    optimizer_s: float
    moe_layers: int          # MoE layers on the slowest stage
    microbatches: int
    tokens_per_rank: int     # tokens per GPU per micro-batch (what the EP group sees)

    @property
    def step_time_s(self) -> float:
        return (self.dense_compute_s + self.moe_s + self.tp_s + self.cp_s + self.pp_s
                + self.bubble_s + self.dp_s + self.optimizer_s)

    @property
    def moe_layer_s(self) -> float:
        """One MoE layer, one micro-batch, forward + backward (what the engine replaces)."""
        return self.moe_s / max(1, self.moe_layers * self.microbatches)


def _rate(gpu: GpuSpec, rows: float, n: int, k: int) -> float:
    eff = float(gemm_efficiency(gpu, max(1.0, rows), n, k))
    return gpu.peak_tflops("bf16") * 1e12 * max(eff, 1e-3)


def _stage_layers(model: ModelConfig, cand: Candidate) -> tuple[int, int, bool]:
    """(MoE layers, dense layers, holds the LM head) of the stage with the most layers."""
    bounds, start = [], 0
    for n in cand.layout.stage_layers(model.num_layers):
        bounds.append((start, n))
        start += n
    worst = max(range(len(bounds)), key=lambda r: (bounds[r][1], r))
    s, n = bounds[worst]
    moe = sum(model.moe_layers[s:s + n])
    return moe, n - moe, worst == len(bounds) - 1


def estimate(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec, cand: Candidate,
             view: FabricView) -> Estimate:
    """Analytical step time of a fitting candidate (see the module docstring)."""
    lay, m, h = cand.layout, cand.num_microbatches, model.hidden_size
    t_r = spec.micro_batch_size * spec.seq_len / (lay.tp * lay.cp)
    f = flops_per_token(model, spec.seq_len)
    n_moe, n_dense, head = _stage_layers(model, cand)
    per_attn = (f.attention_proj + f.attention_core) / model.num_layers
    per_dense_ffn = f.dense_ffn / max(1, model.n_dense_layers)
    per_router = f.router / max(1, model.n_moe_layers)
    dense_fwd = (n_moe + n_dense) * per_attn + n_dense * per_dense_ffn + n_moe * per_router
    dense_fwd += (f.lm_head + f.mtp) if head else 0.0
    recompute = {"selective": f.attention_core / model.num_layers * (n_moe + n_dense),
                 "full": dense_fwd}.get(cand.recompute, 0.0)
    dense_rate = _rate(gpu, t_r, h, h)
    dense_s = (3 * dense_fwd + recompute) * t_r / dense_rate
    moe_layer = _moe_layer(spec, model, gpu, cand, view, t_r)
    tp_s = _tp_layer_s(lay.tp, t_r * lay.tp * h * BF16, view.effective_bw_GBps(lay, "tp"))
    tp_s *= n_moe * 4 + n_dense * 8
    cp_s = 0.0
    if lay.cp > 1:
        kv_bytes = t_r * _kv_width(model) * BF16  # this rank's K/V block (heads / tp)
        cp_s = 3 * (lay.cp - 1) * kv_bytes / (view.effective_bw_GBps(lay, "cp") * 1e9)
        cp_s *= CP_EXPOSED * (n_moe + n_dense)
    pp_s = 0.0
    if lay.pp > 1:
        pp_s = 2 * lay.vpp * t_r * h * BF16 / (view.effective_bw_GBps(lay, "pp") * 1e9)
    t_mb = dense_s + moe_layer[0] * n_moe + tp_s + cp_s + pp_s
    bubble_s = t_mb * (lay.pp - 1) / lay.vpp
    rs_s, ag_s, opt_s = _dp_and_optimizer_s(model, gpu, cand, view)
    window_s = BWD_SHARE * t_mb
    dp_s = max(rs_s - window_s, rs_s / max(1, n_moe + n_dense)) + ag_s
    return Estimate(
        dense_compute_s=dense_s * m, moe_s=moe_layer[0] * n_moe * m,
        a2a_s=moe_layer[1] * n_moe * m, tp_s=tp_s * m, cp_s=cp_s * m, pp_s=pp_s * m,
        bubble_s=bubble_s, dp_s=dp_s, optimizer_s=opt_s, moe_layers=n_moe, microbatches=m,
        tokens_per_rank=int(t_r),
    )


def _kv_width(model: ModelConfig) -> int:
    if model.attention == "mla":
        d = model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim
        return model.num_attention_heads * d
    return 2 * model.num_key_value_heads * model.head_dim


def _tp_layer_s(tp: int, full_bytes: float, bw_GBps: float) -> float:
    """One all-gather or reduce-scatter of a layer activation over the TP group."""
    return 0.0 if tp == 1 else (tp - 1) / tp * full_bytes / (bw_GBps * 1e9)


def _moe_layer(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec, cand: Candidate,
               view: FabricView, t_r: float) -> tuple[float, float]:
    """(MoE part, its all-to-all) of one MoE layer and micro-batch, forward + backward."""
    if not model.is_moe:
        return 0.0, 0.0
    lay, h = cand.layout, model.hidden_size
    local = model.n_routed_experts // lay.ep
    load = np.full(local, t_r * model.top_k / local)  # balanced router: copies per expert
    shape = LayerShape(model, max(1, round(t_r)), spec.seq_len)
    fwd = experts_s(shape, gpu, load, 1.0, False)
    compute = fwd + experts_s(shape, gpu, load, 1.0, True)
    if cand.recompute == "full":
        compute += fwd
    copies = t_r * distinct_ranks(model.n_routed_experts, model.top_k, lay.ep) * (
        1 - 1 / lay.ep)
    wire = token_bytes(h, "fp8") + 3 * token_bytes(h, "bf16")
    a2a = copies * wire / (view.effective_bw_GBps(lay, "ep") * 1e9) if lay.ep > 1 else 0.0
    return compute + a2a, a2a


def distinct_ranks(experts: int, top_k: int, ep: int) -> float:
    """Expected EP ranks a token reaches (its copies after per-rank de-duplication) when its
    ``top_k`` experts are ``top_k`` distinct ones drawn uniformly from ``experts`` spread
    evenly over ``ep`` ranks: ``ep * (1 - C(E - E/ep, k) / C(E, k))``."""
    if ep <= 1:
        return 1.0
    miss = math.comb(experts - experts // ep, top_k) / math.comb(experts, top_k)
    return ep * (1.0 - miss)


def _dp_and_optimizer_s(model: ModelConfig, gpu: GpuSpec, cand: Candidate,
                        view: FabricView) -> tuple[float, float, float]:
    """(gradient reduce-scatters, parameter all-gathers, optimizer) of the worst stage."""
    lay = cand.layout
    stages = stage_params(model, lay)
    dense = max(d for d, _ in stages) / lay.tp
    expert = max(e for _, e in stages) / (lay.ep * lay.etp)
    rs_s = ag_s = 0.0
    for kind, n, params in (("dp", lay.dp * lay.cp, dense), ("edp", lay.edp, expert)):
        if n > 1 and params:
            bw = view.effective_bw_GBps(lay, kind if getattr(lay, kind) > 1 else "cp")
            ring_s = (n - 1) / n * params / (bw * 1e9)
            rs_s += ring_s * GRAD_REDUCE_BYTES["fp32"]
            ag_s += ring_s * BF16
    shard = dense / (lay.dp * lay.cp) + expert / lay.edp
    opt_s = shard * OPTIMIZER_BYTES_PER_PARAM / (gpu.hbm_bw_GBps * 1e9 * HBM_ACHIEVABLE_FRACTION)
    return rs_s, ag_s, opt_s


def mfu(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec, cand: Candidate,
        step_time_s: float) -> float:
    """Model FLOPs utilisation: 3 x forward FLOPs of the step's tokens / (time x peak)."""
    flops = 3 * flops_per_token(model, spec.seq_len).total * cand.tokens_per_step(spec.seq_len)
    gpus = cand.layout.world_size
    return flops / (step_time_s * gpus * gpu.peak_tflops("bf16") * 1e12)
