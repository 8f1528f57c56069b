"""The host's launch floor on a step: a reported band, not part of the simulated step.

A rank's host (Python, PyTorch, Transformer Engine, the CUDA driver) launches every kernel of
its step one after another, so the step lasts at least as long as those launches take, however
fast the GPU runs them. With ``n`` launches at ``c`` seconds of host time each::

    step >= max(simulated step, n x c)          (the host and the GPU overlap perfectly)

The dropless sync of each MoE layer (the host waits for the token counts, then starts an empty
queue) only makes it worse, so this is a floor, and ``n`` here is itself a lower bound: only
the routed-expert GEMM launches are counted, from Transformer Engine's ``GroupedLinear``
(``transformer_engine/pytorch/module/grouped_linear.py`` at NVIDIA/TransformerEngine
3ea1356190e88a50d8c2cae17e80c4e6ae96d442, the expert MLP of Megatron-Core's TEGroupedMLP):
``general_grouped_gemm`` issues one cuBLAS GEMM per local expert (multi-stream), once in the
forward and twice in the backward (dgrad, wgrad); an expert MLP has two GroupedLinear (fc1,
fc2). Per MoE layer and micro-batch: ``2 E`` launches forward, ``4 E`` backward, ``2 E`` more
when full recompute runs the forward again (``E`` = local experts = routed experts / EP).
Attention, router, permutation, quantisation, norms and the host-side ``torch.split`` /
``torch.empty`` per expert (TE issue #1499) are left out. The count is stack-version
dependent: later Transformer Engine releases add one-launch grouped GEMMs (cuBLAS grouped GEMM,
NVIDIA/TransformerEngine PR #2669, merged 2026-03; a CUTLASS grouped kernel for NVFP4, PR
#3134), with which a GroupedLinear is one launch whatever the expert count; which path each
benchmark row's container ran is not stated in its table.

The per-launch host cost ``c`` has no single published value for this stack; the published
measurements span 10x, so the band is reported at both ends (:data:`HOST_LAUNCH_S`), never a
value inside it chosen to fit.
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.step.plan import chunk_layers
from moesim.step.spec import StepSpec

HOST_LAUNCH_S: dict[str, float] = {"low": 4.58e-6, "high": 53.7e-3 / 1185}
"""Host seconds per kernel launch, both ends of the published range (kind: measured, each).
``low``: the CUDA driver call alone, ``cudaLaunchKernel`` median 4.58 us CPU over 197,809
calls (kekzl/imp PR #1367, Nsight Systems, a C++ inference engine). ``high``: a whole eager
PyTorch model per launch, 53.7 ms for 1185 launches with the GPU busy 7.27 ms of it (45.3 us;
facebookresearch/sam2 issue #768, A6000, PyTorch 2.6, eager, Python modules and 1407 allocator
calls included). Megatron-Core with Transformer Engine sits somewhere between: Python modules
and the allocator per expert on top of the driver call."""
EXPERT_GEMM_LAUNCHES = {"forward": 2, "backward": 4}
"""cuBLAS GEMM launches per local expert per MoE layer and micro-batch (TE GroupedLinear, see
the module docstring): fc1 + fc2 forward; their dgrad + wgrad backward."""


def expert_gemm_launches(spec: StepSpec) -> int:
    """Expert GEMM launches of the busiest pipeline stage's rank in one step (a lower bound
    on its kernel launches; see the module docstring)."""
    m, lay = spec.model, spec.layout
    if not m.n_routed_experts:
        return 0
    local = m.n_routed_experts // lay.ep
    per_layer = EXPERT_GEMM_LAUNCHES["forward"] + EXPERT_GEMM_LAUNCHES["backward"]
    if spec.resolved_recompute() == "full":
        per_layer += EXPERT_GEMM_LAUNCHES["forward"]
    moe = m.moe_layers or (True,) * m.num_layers
    chunks = chunk_layers(lay, m.num_layers)
    per_stage = [sum(moe[i] for c in chunks[s::lay.pp] for i in c) for s in range(lay.pp)]
    return max(per_stage) * spec.microbatches * local * per_layer


@dataclass(frozen=True)
class HostBand:
    """The step at both ends of :data:`HOST_LAUNCH_S`: ``max(simulated, launches x c)``."""

    launches: int
    step_s: dict[str, float]


def host_band(spec: StepSpec, step_time_s: float) -> HostBand:
    """The host floor on ``step_time_s`` at both ends of the per-launch range.

    >>> from moesim.model import get_model
    >>> from moesim.parallel.layout import ParallelLayout
    >>> spec = StepSpec(model=get_model("mixtral-8x7b"), layout=ParallelLayout(ep=8, dp=8),
    ...                 gpu="H100", microbatches=4, recompute="none")
    >>> band = host_band(spec, 0.01)  # 32 MoE layers x 4 micro-batches x 1 local expert x 6
    >>> band.launches, band.step_s["low"], round(band.step_s["high"] * 1e3, 2)
    (768, 0.01, 34.8)
    """
    n = expert_gemm_launches(spec)
    return HostBand(n, {end: max(step_time_s, n * c) for end, c in HOST_LAUNCH_S.items()})
