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
measurements span 10x, so the band is reported at both ends (:data:`HOST_LAUNCH_S`, from
:mod:`moesim.calibration`), never a value inside it chosen to fit.

Why a band and not a model. The mechanism is known: per MoE layer, after the dropless sync the
host launches the layer's remaining kernels one by one into an empty queue, so that segment
lasts ``max(GPU time, host time of its launches)``. Building it needs the host seconds per
launch (or per module call) of Megatron-Core's TEGroupedMLP / TE GroupedLinear at the version
the cases ran; searched on 2026-12-03 (TE, Megatron-LM, Megatron-Bridge issues and PRs, their
docs and benchmarks, the Megatron-Core MoE report arXiv:2603.07685), none gives it:

- TE issue #2053: CPU time per ``te.Linear`` forward (H100 DGX, GH200, GB200): one GEMM;
- TE issue #2897: fused ``te.ops`` grouped MLP, 64 experts on GB200, ~1.2 ms forward and
  ~2.1 ms backward of CPU: one expert count (no per-expert slope), an op path TEGroupedMLP did
  not run at NeMo 25.11 / 26.02, a Grace host;
- TE PR #3134: ``benchmark_grouped_linear.py`` wall time per grouped GEMM, NVFP4 on SM100,
  one stored row (8 experts); TE issue #1499: a TEGroupedLinear forward ~1 ms in an H800 nsys
  (TE 1.13, local expert count not stated; CPU ranges stretch when the GPU queue is full);
- Megatron-Bridge PR #3868: Qwen3-30B-A3B on 16 H100 BF16 EP16, step 41.36 s eager, 42.00 s
  with TE graphs of attention, router and preprocess: a step pair, no host time.

Nor does one constant fit the rows: measured minus simulated per expert GEMM launch
(:func:`expert_gemm_launches`) is 49 us on PR #3868's BF16 EP16 run (moesim +30.0 % there,
196,608 launches) and 153 / 291 us on the FP8-CS PP2 EP8 table rows on the same 16 H100
(MBS 2 / MBS 1), so a value fitted to one row misses the others 2-6x.

What would unblock it: an Nsight Systems trace of one Megatron-Bridge MoE row at its
container (e.g. Qwen3-30B-A3B 16 H100 FP8-CS PP2 VPP12 EP8 MBS 1, 26.02) giving, per MoE layer
and micro-batch, the host time from the token-count sync to the layer's last launch (forward,
backward), the launch count inside and the GPU-busy time; or that TE's
``benchmarks/linear/benchmark_grouped_linear.py`` at host-bound token counts for 4 to 32
GEMMs, BF16 and FP8 current scaling, on an x86 H100 host (host seconds per call as
``a + b x GEMMs``).
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.calibration import HOST_LAUNCH_HIGH_S, HOST_LAUNCH_LOW_S
from moesim.step.plan import chunk_layers
from moesim.step.spec import StepSpec

HOST_LAUNCH_S: dict[str, float] = {"low": HOST_LAUNCH_LOW_S, "high": HOST_LAUNCH_HIGH_S}
"""Host seconds per kernel launch, both ends of the published range (kind: measured, each;
values and sources in :mod:`moesim.calibration`). ``low``: the CUDA driver call alone
(4.58 us). ``high``: a whole eager PyTorch model per launch (45.3 us). Megatron-Core with
Transformer Engine sits somewhere between: Python modules and the allocator per expert on top
of the driver call."""
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
