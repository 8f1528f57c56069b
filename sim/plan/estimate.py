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
  step's de-duplicating dispatcher does, at FP8 (dispatch) or BF16 (the others). A token
  reaches each other EP rank with the probability :func:`rank_hit_probability` gives (the
  step's default router: uniform popularity, contiguous experts, group-limited routing with
  the model's ``n_group`` / ``topk_group``: exact there). The copies to peers in the
  sender's NVLink domain cross NVLink, the others the slowest class the group crosses (the
  NIC side): two legs on different links, and the step's all-to-all
  (:class:`moesim.step.estimate.A2ATimer`, a per-link load bound) ends with the slower one
  (:meth:`FabricView.ep_legs`). Not overlapped with compute (nor is it in the step).
  (It was every off-rank copy over the slowest link, with distinct ranks counted as if any
  ``top_k`` experts could be picked: 2.2x the step's all-to-all for DeepSeek-V3 EP16 over two
  HGX hosts, 1.4x at EP8 and EP32, 1.15x at EP64.)
* TP with sequence parallelism: per layer and direction, an all-gather and a
  reduce-scatter around attention, and around the dense FFN on dense layers (routed
  experts with etp=1 need none), each moving ``(tp-1)/tp`` of the layer's activation.
  CP: ring attention passes K/V ``cp-1`` times forward (twice the bytes backward), each
  send hidden behind ``1/cp`` of the attention core, as the step runs it: what exceeds it is
  exposed. MoE layers with shared experts run them as a TP-sharded block of their own (an
  all-gather and a reduce-scatter more per direction).
* Pipeline (1F1B / interleaved): the slowest stage runs all ``m`` micro-batches; its first
  input passes the forwards of the stages before it (the fill: ``(1 - BWD_SHARE) x t_mb x
  (compute of the stages before the slowest / its compute) / vpp``, with equal stages
  ``(pp-1)/vpp`` micro-batches' forwards, Narayanan et al. 2021, sec. 2.2); its last
  gradient then passes their backwards (the drain), which runs beside its own DP tail: the
  step ends with the latest stage's tail (:mod:`moesim.plan.dp_tail`), and what a stage
  before the slowest adds over the slowest's own tail is booked as bubble. Pipeline sends
  overlap the other stages' compute in the steady state; the fill's and drain's sends
  (``2 (pp vpp - 1)``) are exposed.
* Data parallel, as the whole-step simulator runs it (:mod:`moesim.step.program`):
  distributed-optimizer gradient reduce-scatter in FP32 (Megatron reduces the fp32
  ``main_grad``, :data:`moesim.step.spec.GRAD_REDUCE_BYTES`), then the BF16 parameter
  all-gather; each ring moves ``(n-1)/n * bytes`` per rank once (RS and AG are one ring
  each, not two), dense parameters over the DP x CP group and experts over EDP. A layer's
  reduce-scatter starts after its last backward (``--overlap-grad-reduce``) and a link
  carries its rings' bytes back to back (shared or queued), so what is exposed after the
  last backward is the largest backlog of the buckets still to reduce
  (:func:`moesim.plan.dp_tail.stage_tail_s`; at least the last bucket: the first layer with
  the stage's embedding or LM head). The
  all-gather runs after the optimizer, exposed, as the simulator has it.
* Optimizer step: memory-bound over the GPU's shard (~30 B per sharded parameter).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from itertools import combinations

import numpy as np

from moesim.calibration import (
    CP_EXPOSED_FRACTION,
    HBM_ACHIEVABLE_FRACTION,
    OPTIMIZER_STEP_BYTES_PER_PARAM,
)
from moesim.hardware import GpuSpec
from moesim.model import ModelConfig, flops_per_token
from moesim.parallel.memory import stage_params
from moesim.plan.candidates import Candidate
from moesim.plan.dp_tail import BWD_SHARE, tails_s
from moesim.plan.fabric_view import FabricView
from moesim.plan.spec import DesignSpec
from moesim.plan.stage_cost import head_s, layer_prices, slowest, stage_times
from moesim.step.spec import GRAD_REDUCE_BYTES
from moesim.workload.costs import token_bytes

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
    head = head_s(model, gpu, lay, int(t_r))
    times, parts = stage_times(model, lay, moe_p, dense_p, head, cand.recompute)
    worst = slowest(times)
    stage_s, (experts_s_mb, n_moe, n_dense), before_s = times[worst], parts[worst], sum(
        times[:worst])
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
    fill_s = (1 - BWD_SHARE) * t_mb * (before_s / stage_s) / lay.vpp
    tails = tails_s(model, lay, view, (moe_p, dense_p), cand.recompute, (times, head), worst,
                    t_mb)
    dp_s = tails[worst]
    bubble_s = fill_s + max(tails) - dp_s  # a stage before it ends later: the drain shows
    opt_s = _dp_and_optimizer_s(model, gpu, cand, view)[2]
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
    per_peer = t_r * float(rank_hit_probability(model.n_routed_experts, model.top_k, lay.ep,
                                                model.n_group, model.topk_group).mean())
    wire = token_bytes(model.hidden_size, "fp8") + 3 * token_bytes(model.hidden_size, "bf16")
    return max(peers * per_peer * wire / (bw_GBps * 1e9) for peers, bw_GBps in view.ep_legs(lay))


def rank_hit_probability(experts: int, top_k: int, ep: int, n_group: int = 1,
                         topk_group: int = 1) -> np.ndarray:
    """[ep]: the probability that a token has at least one of its ``top_k`` experts on each EP
    rank (experts placed contiguously, ``experts / ep`` per rank), under the step's uniform
    router: the token picks ``topk_group`` of ``n_group`` contiguous expert groups uniformly
    without repeats (:mod:`moesim.router.groups`), then ``top_k`` distinct experts uniformly
    among theirs. A rank overlapping groups ``R`` by ``o_g`` experts each is missed with
    ``sum_{T <= R} P(chosen & R = T) C(E' - o(T), k) / C(E', k)`` (``E'`` the chosen groups'
    experts; ``P(chosen & R = T) = C(n - |R|, t - |T|) / C(n, t)``); one group: ``1 -
    C(E - E/ep, k) / C(E, k)``."""
    return np.array(_hit_probability(experts, top_k, ep, n_group, topk_group))


@cache
def _hit_probability(experts: int, top_k: int, ep: int, n_group: int, topk_group: int
                     ) -> tuple[float, ...]:
    if experts % n_group or topk_group > n_group or experts % ep:
        raise ValueError(f"{experts} experts, ep {ep}, groups {topk_group}/{n_group}")
    size, reach = experts // n_group, topk_group * (experts // n_group)
    per_rank = experts // ep
    hit = []
    for r in range(ep):
        first, last = r * per_rank, (r + 1) * per_rank
        overlap = {g: min(last, (g + 1) * size) - max(first, g * size)
                   for g in range(first // size, (last - 1) // size + 1)}
        miss = 0.0
        for n_in in range(len(overlap) + 1):
            p_set = math.comb(n_group - len(overlap), topk_group - n_in) / math.comb(
                n_group, topk_group)
            for chosen in combinations(overlap.values(), n_in):
                miss += p_set * math.comb(reach - sum(chosen), top_k) / math.comb(reach, top_k)
        hit.append(1.0 - miss)
    return tuple(hit)


def distinct_ranks(experts: int, top_k: int, ep: int, n_group: int = 1,
                   topk_group: int = 1) -> float:
    """Expected EP ranks a token reaches (its copies after per-rank de-duplication):
    the sum of :func:`rank_hit_probability`; one group: ``ep * (1 - C(E - E/ep, k) / C(E, k))``."""
    if ep <= 1:
        return 1.0
    return float(rank_hit_probability(experts, top_k, ep, n_group, topk_group).sum())


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
