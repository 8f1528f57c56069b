"""A pipeline stage's compute per micro-batch, priced with the step's own kernel costs.

The estimate used to price compute from model FLOPs at the roofline's GEMM efficiency; the
whole-step simulator prices every op with :mod:`moesim.workload.costs` (the attention block
with its norms and elementwise kernels, the router's gate and permute, grouped expert
GEMMs, the unpermute, TP-sharded shared experts, the vocabulary-parallel head), so the two
disagreed by 5-7 % in opposite directions for stages with and without the head (Mixtral
layers, 64 H100: pp1 550 vs 589 ms of compute, pp2 589 vs 553), and the estimate misranked
layouts that differ by a few percent. Here each stage is priced with those same functions
under a balanced router (each local expert gets ``tokens x top_k / local experts`` rows),
per micro-batch, forward + backward + the recompute the candidate runs
(:func:`moesim.step.recompute.recompute_s`'s rule): what the step books as ``compute`` on
that stage, up to routing imbalance.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from moesim.hardware import GemmShape, GpuSpec, gemm_backward_time_s, gemm_time_s
from moesim.model import ModelConfig
from moesim.parallel.layout import ParallelLayout
from moesim.workload.costs import (
    attention_block_s,
    attention_core_s,
    experts_s,
    ffn_s,
    router_s,
    unpermute_s,
)
from moesim.workload.elementwise import with_elementwise
from moesim.workload.shape import MAIN_GRAD_BYTES, LayerCosts, LayerShape


@dataclass(frozen=True)
class LayerPrices:
    """Seconds of one layer on one rank for one micro-batch (the step's ops)."""

    fwd_s: float
    bwd_s: float
    core_fwd_s: float  # the attention core forward (selective recompute runs it again)
    experts_s: float  # the routed experts' part of fwd + bwd (the estimate's MoE part)
    core_bwd_s: float = 0.0  # the attention core backward (ring attention hides K/V behind)

    def total_s(self, recompute: str) -> float:
        again = {"selective": self.core_fwd_s, "full": self.fwd_s}.get(recompute, 0.0)
        return self.fwd_s + self.bwd_s + again


def layer_prices(model: ModelConfig, gpu: GpuSpec, lay: ParallelLayout, tokens: int,
                 seq_len: int, dtype: str) -> tuple[LayerPrices, LayerPrices]:
    """(MoE layer, dense layer) on a rank holding ``tokens`` tokens per micro-batch (they
    depend on tp, cp, etp and ep only: priced once per design for each)."""
    return _prices(model, gpu, (lay.tp, lay.cp, lay.etp, lay.ep), tokens, seq_len, dtype)


@lru_cache(maxsize=1024)
def _prices(model: ModelConfig, gpu: GpuSpec, degrees: tuple[int, int, int, int], tokens: int,
            seq_len: int, dtype: str) -> tuple[LayerPrices, LayerPrices]:
    tp, cp, etp, ep = degrees
    shape = LayerShape(model, max(1, tokens), seq_len, dtype, tp=tp, cp=cp, etp=etp)
    one = np.ones(1)
    core, core_b = (attention_core_s(shape, gpu, 1.0, b) for b in (False, True))
    attn_f, attn_b = (attention_block_s(shape, gpu, 1.0, b) for b in (False, True))
    dense_f = attn_f + ffn_s(shape, gpu, model.intermediate_size, 1.0, False)
    dense_b = attn_b + ffn_s(shape, gpu, model.intermediate_size, 1.0, True)
    dense = LayerPrices(dense_f, dense_b, core, 0.0, core_b)
    if not model.is_moe:
        return dense, dense
    local = max(1, model.n_routed_experts // ep)
    load = np.full(local, shape.tokens_per_rank * model.top_k / local)
    exp_f, exp_b = (experts_s(shape, gpu, load, 1.0, b) for b in (False, True))
    costs = with_elementwise(LayerCosts(
        attn_fwd=np.array([attn_f]), router=np.array([router_s(shape, gpu, 1.0)]),
        experts_fwd=np.array([exp_f]), unpermute=np.array([unpermute_s(shape, gpu, 1.0)]),
        attn_bwd=np.array([attn_b]), experts_bwd=np.array([exp_b])), shape, gpu, one)
    shared = model.shared_expert_intermediate_size * model.n_shared_experts
    sh_f = sh_b = 0.0
    if tp > 1 and shared > 0:  # TP-sharded shared experts (outside experts_s)
        sh_f, sh_b = (ffn_s(shape, gpu, shared, 1.0, b) for b in (False, True))
    fwd = float(costs.attn_fwd[0] + costs.router[0] + exp_f + costs.unpermute[0]) + sh_f
    bwd = float(costs.attn_bwd[0]) + exp_b + sh_b
    return LayerPrices(fwd, bwd, core, exp_f + exp_b, core_b), dense


def head_s(model: ModelConfig, gpu: GpuSpec, lay: ParallelLayout, tokens: int) -> float:
    """The vocabulary-parallel LM head forward + backward on the gathered tokens (BF16)."""
    m, vocab = max(1, tokens) * lay.tp, -(-model.vocab_size // lay.tp)
    head = GemmShape(m, vocab, model.hidden_size, wgrad_out_bytes=2.0 * MAIN_GRAD_BYTES)
    return float(gemm_time_s(gpu, head) + gemm_backward_time_s(gpu, head))


def stage_times(model: ModelConfig, lay: ParallelLayout, moe: LayerPrices, dense: LayerPrices,
                head: float, recompute: str) -> tuple[list[float], list[tuple[float, int, int]]]:
    """Each pipeline stage's compute per micro-batch (the last with the head) and its
    (routed-expert part, MoE layers, dense layers)."""
    times, parts = [], []
    start = 0
    counts = lay.stage_layers(model.num_layers)
    for s, n in enumerate(counts):
        n_moe = sum(model.moe_layers[start:start + n])
        start += n
        t = n_moe * moe.total_s(recompute) + (n - n_moe) * dense.total_s(recompute)
        times.append(t + (head if s == len(counts) - 1 else 0.0))
        parts.append((n_moe * moe.experts_s, n_moe, n - n_moe))
    return times, parts


def worst_stage(model: ModelConfig, lay: ParallelLayout, moe: LayerPrices, dense: LayerPrices,
                head: float, recompute: str) -> tuple[float, float, int, int, float]:
    """(compute per micro-batch, its routed-expert part, MoE layers, dense layers) of the
    slowest pipeline stage (the last holds the head; of equal ones the last), and the
    compute of the stages before it (what fills and drains a 1F1B pipeline around it: its
    first input passes their forwards, its last gradient their backwards; stages after it
    are faster and wait on it)."""
    times, parts = stage_times(model, lay, moe, dense, head, recompute)
    w = slowest(times)
    return (times[w], *parts[w], sum(times[:w]))


def slowest(times: list[float]) -> int:
    """The slowest stage (of equal ones the last)."""
    return max(range(len(times)), key=lambda s: (times[s], s))
