"""Fast analytical step time of one layout: compute, pipeline bubble, communication.

Assumptions (each a deliberate simplification; the engine replaces the MoE part for the
best candidates, see :mod:`moesim.plan.evaluate`):

* Compute: every op of a stage priced with the step's own kernel costs
  (:mod:`moesim.plan.stage_cost`: attention block, router, grouped expert GEMMs under a
  balanced router, unpermute, TP-sharded shared experts, dense FFN, LM head), forward +
  backward + the recompute the candidate runs. (It was model FLOPs at the roofline's GEMM
  efficiency: 5-7 % off in opposite directions for stages with and without the head.)
* MoE all-to-all per layer and micro-batch: four of them (dispatch and combine, forward
  and backward), each rank sending a token once per distinct destination rank, as the
  step's de-duplicating dispatcher does (:func:`distinct_ranks`, uniform router), off-rank
  share ``(1 - 1/ep)`` at FP8 (dispatch) or BF16 (the others), over the
  achievable bandwidth of the slowest link class the EP group crosses
  (:meth:`FabricView.effective_bw_GBps`). Not overlapped with compute.
* TP with sequence parallelism: per layer and direction, an all-gather and a
  reduce-scatter around attention, and around the dense FFN on dense layers (routed
  experts with etp=1 need none), each moving ``(tp-1)/tp`` of the layer's activation.
  CP: ring attention passes K/V ``cp-1`` times forward (twice the bytes backward), each
  send hidden behind ``1/cp`` of the attention core, as the step runs it: what exceeds it is
  exposed. MoE layers with shared experts run them as a TP-sharded block of their own (an
  all-gather and a reduce-scatter more per direction).
* Pipeline (1F1B / interleaved): the slowest stage runs all ``m`` micro-batches; the stages
  before it fill and drain the pipeline around it once (its first input passes their
  forwards, its last gradient their backwards; stages after it are faster and wait on it):
  ``bubble = t_mb x (compute of the stages before the slowest / its compute) / vpp``, which is
  ``(pp-1)/vpp`` micro-batches with equal stages (Narayanan et al. 2021, sec. 2.2) and near 0
  when the first stage is the slowest. Pipeline sends overlap the other stages' compute in
  the steady state; the fill's and drain's sends (``2 (pp vpp - 1)``) are exposed.
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

from moesim.calibration import (
    CP_EXPOSED_FRACTION,
    HBM_ACHIEVABLE_FRACTION,
    OPTIMIZER_STEP_BYTES_PER_PARAM,
)
from moesim.hardware import GpuSpec
from moesim.model import ModelConfig, flops_per_token
from moesim.parallel.memory import stage_params
from moesim.plan.candidates import Candidate
from moesim.plan.fabric_view import FabricView
from moesim.plan.spec import DesignSpec
from moesim.plan.stage_cost import head_s, layer_prices, worst_stage
from moesim.step.spec import GRAD_REDUCE_BYTES
from moesim.workload.costs import token_bytes

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


def estimate(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec, cand: Candidate,
             view: FabricView) -> Estimate:
    """Analytical step time of a fitting candidate (see the module docstring)."""
    lay, m, h = cand.layout, cand.num_microbatches, model.hidden_size
    t_r = spec.micro_batch_size * spec.seq_len / (lay.tp * lay.cp)
    dtype = "fp8" if spec.precision == "fp8" else "bf16"
    moe_p, dense_p = layer_prices(model, gpu, lay, int(t_r), spec.seq_len, dtype)
    stage_s, experts_s_mb, n_moe, n_dense, before_s = worst_stage(
        model, lay, moe_p, dense_p, head_s(model, gpu, lay, int(t_r)), cand.recompute)
    a2a_layer = _a2a_layer_s(model, cand, view, t_r)
    dense_s = stage_s - experts_s_mb
    moe_layer = ((experts_s_mb / n_moe if n_moe else 0.0) + a2a_layer, a2a_layer)
    tp_s = _tp_layer_s(lay.tp, t_r * lay.tp * h * BF16, view.effective_bw_GBps(lay, "tp"))
    shared = model.is_moe and model.n_shared_experts > 0  # TP-sharded block of its own
    tp_s *= n_moe * (8 if shared else 4) + n_dense * 8
    cp_s = 0.0
    if lay.cp > 1:  # each ring-attention step sends K/V while computing 1/cp of the core
        kv_s = t_r * _kv_width(model) * BF16 / (view.effective_bw_GBps(lay, "cp") * 1e9)
        cp_s = (lay.cp - 1) * (max(0.0, kv_s - moe_p.core_fwd_s / lay.cp)
                               + max(0.0, 2 * kv_s - moe_p.core_bwd_s / lay.cp))
        cp_s *= n_moe + n_dense
    pp_s = 0.0  # the fill's and the drain's sends, on the critical path once per step
    if lay.pp > 1:
        send_s = t_r * h * BF16 / (view.effective_bw_GBps(lay, "pp") * 1e9)
        pp_s = 2 * (lay.pp * lay.vpp - 1) * send_s
    t_mb = dense_s + moe_layer[0] * n_moe + tp_s + cp_s
    bubble_s = t_mb * (before_s / stage_s) / lay.vpp
    rs_s, ag_s, opt_s = _dp_and_optimizer_s(model, gpu, cand, view)
    window_s = BWD_SHARE * t_mb
    dp_s = max(rs_s - window_s, rs_s / max(1, n_moe + n_dense)) + ag_s
    return Estimate(
        dense_compute_s=dense_s * m, moe_s=moe_layer[0] * n_moe * m,
        a2a_s=moe_layer[1] * n_moe * m, tp_s=tp_s * m, cp_s=cp_s * m, pp_s=pp_s,
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


def _a2a_layer_s(model: ModelConfig, cand: Candidate, view: FabricView, t_r: float) -> float:
    """The four all-to-alls of one MoE layer and micro-batch (module docstring)."""
    lay = cand.layout
    if not model.is_moe or lay.ep == 1:
        return 0.0
    copies = t_r * distinct_ranks(model.n_routed_experts, model.top_k, lay.ep) * (
        1 - 1 / lay.ep)
    wire = token_bytes(model.hidden_size, "fp8") + 3 * token_bytes(model.hidden_size, "bf16")
    return copies * wire / (view.effective_bw_GBps(lay, "ep") * 1e9)


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
