"""The end of a step in the design's estimate: gradient buckets drained after the last backward.

The whole-step simulator (:mod:`moesim.step.program`, ``--overlap-grad-reduce``) starts a
layer's gradient reduce-scatter when the stage has run that layer's last backward (the
stage's embedding / LM-head gradients with the layer run last in its chunk), and the rings
on one link share it (:class:`moesim.step.estimate.RingTimer`; work-conserving, so a link
drains the same bytes by the same time whether it shares or queues). So after the last
backward of a stage, what is still to reduce is the largest backlog: over the
buckets ``j`` in the order the last backward frees them,
``max_j (sum of the ring times of buckets j.. - time from bucket j's release to the end)``:
at least the last bucket, which for a stage holding the embedding or the LM head is most of
it. Then the optimizer and the parameter all-gather (exposed, as the simulator has it).

Pipeline: each stage reaches its last backward at its own time. The stages before the
slowest run theirs after it (the drain: their backward of the last micro-batch, ``1/vpp``
of it per chunk), the stages after it before it; the step ends with the latest tail
(:func:`tails_s`). (It was the whole reduce-scatter less the last micro-batch's backward,
at least ``1/layers`` of it, on the slowest stage, plus the whole drain as bubble: on
DeepSeek-V3 cut to 4 layers, whose embedding and head are 2/3 of the dense parameters,
the exposed reduce-scatter was 10-35 % short of the simulator's, and pp2 layouts, whose
drain runs beside the last stage's reduce-scatter, 2-3 % long.)

Each layer's backward takes ``BWD_SHARE`` of its share of the stage's compute (its layers'
forward + backward + recompute prices); a stage's virtual chunks are taken together, in
model order.
"""

from __future__ import annotations

from moesim.model import ModelConfig
from moesim.model.accounting import embedding_params, layer_params
from moesim.parallel.layout import ParallelLayout
from moesim.plan.fabric_view import FabricView
from moesim.plan.stage_cost import LayerPrices
from moesim.step.spec import GRAD_REDUCE_BYTES

BWD_SHARE = 2.0 / 3.0  # backward = 2 of the 3 forward-equivalents of a micro-batch's GEMMs
BF16 = 2


def ring_s_per_param(lay: ParallelLayout, view: FabricView) -> tuple[float, float]:
    """Seconds per parameter per byte of one ring pass ((n-1)/n of it per rank) over the
    dense group (DP x CP) and the expert group (EDP); 0 where the group is one rank."""
    out = []
    for kind, n in (("dp", lay.dp * lay.cp), ("edp", lay.edp)):
        if n <= 1:
            out.append(0.0)
            continue
        bw = view.effective_bw_GBps(lay, kind if getattr(lay, kind) > 1 else "cp")
        out.append((n - 1) / n / (bw * 1e9))
    return out[0], out[1]


def stage_buckets(model: ModelConfig, lay: ParallelLayout, stage: int
                  ) -> tuple[list[int], list[tuple[float, float]]]:
    """(layers, their (dense, expert) parameters per GPU) of ``stage``, in the order its last
    backward frees them: last layer first; the embedding (first stage) and the LM head +
    final norm (last stage) with the stage's first layer (alone when it holds none)."""
    counts = lay.stage_layers(model.num_layers)
    first = sum(counts[:stage])
    layers = list(range(first + counts[stage] - 1, first - 1, -1))
    emb_in, emb_out = embedding_params(model)
    if lay.pp > 1 and emb_out == 0:
        emb_out = emb_in  # tied: the last stage holds a copy (moesim.parallel.memory)
    extra = (emb_in if stage == 0 else 0) + (
        emb_out + model.hidden_size if stage == lay.pp - 1 else 0)
    sizes = [(layer_params(model, i)[0] / lay.tp, layer_params(model, i)[1] / (lay.ep * lay.etp))
             for i in layers] or [(0.0, 0.0)]
    sizes[-1] = (sizes[-1][0] + extra / lay.tp, sizes[-1][1])
    return layers, sizes


def stage_tail_s(model: ModelConfig, lay: ParallelLayout, view: FabricView, stage: int,
                 prices: tuple[LayerPrices, LayerPrices], recompute: str, bwd_s: float,
                 ) -> float:
    """Exposed reduce-scatter + parameter all-gather of ``stage`` after its last backward,
    which takes ``bwd_s`` (module docstring)."""
    layers, sizes = stage_buckets(model, lay, stage)
    dense_s, expert_s = ring_s_per_param(lay, view)
    rs = [d * dense_s * GRAD_REDUCE_BYTES["fp32"] + e * expert_s * GRAD_REDUCE_BYTES["fp32"]
          for d, e in sizes]
    ag = sum(d * dense_s + e * expert_s for d, e in sizes) * BF16
    cost = [prices[0 if model.moe_layers[i] else 1].total_s(recompute) for i in layers]
    scale = bwd_s / sum(cost) if cost and sum(cost) > 0 else 0.0
    left, exposed = 0.0, 0.0  # from the last bucket back: time after its release, backlog
    backlog = 0.0
    for j in range(len(rs) - 1, -1, -1):
        backlog += rs[j]
        exposed = max(exposed, backlog - left)
        left += cost[j] * scale if j < len(cost) else 0.0
    return exposed + ag


def tails_s(model: ModelConfig, lay: ParallelLayout, view: FabricView,
            prices: tuple[LayerPrices, LayerPrices], recompute: str,
            times: tuple[list[float], float], worst: int, t_mb: float) -> list[float]:
    """Per stage: when its DP tail ends, from the slowest stage's (``worst``) last backward.
    ``times``: each stage's compute per micro-batch (the last stage's with the LM head) and
    the head's; ``t_mb``: the slowest stage's micro-batch with its communication (each
    stage's scaled by its compute)."""
    stages, head_s = times
    per_s = t_mb / stages[worst] if stages[worst] > 0 else 0.0
    out = []
    for s in range(lay.pp):
        lo, hi = sorted((s, worst))
        shift = BWD_SHARE * per_s * sum(stages[lo:hi]) / lay.vpp  # the drain (or lead)
        layers_s = stages[s] - (head_s if s == lay.pp - 1 else 0.0)
        bwd_s = BWD_SHARE * per_s * layers_s
        tail = stage_tail_s(model, lay, view, s, prices, recompute, bwd_s)
        out.append(tail + (shift if s < worst else -shift))
    return out
