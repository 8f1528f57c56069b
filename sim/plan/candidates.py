"""Enumerate Megatron parallel layouts for a GPU count; keep what fits, say why the rest fail.

Search space (kept small so it runs in well under a second):

* ``tp`` in {1, 2, 4, 8} up to the fabric's NVLink domain (TP all-gathers and
  reduce-scatters every layer: it stays inside NVLink, as every Megatron recipe keeps it)
  and ``DesignSpec.max_tp``;
* ``cp`` in {1, 2} up to ``DesignSpec.max_cp``; ``pp`` in powers of two up to 32 (and <= layers);
* ``vpp`` in {1, 2, 4}, only where pp*vpp divides the layer count (Megatron's
  ``--num-layers-per-virtual-pipeline-stage``);
* ``ep`` in the divisors of the routed-expert count up to 128; ``etp`` = 1 (Megatron's MoE
  recipes for DeepSeek-V3/Kimi-class models run experts without tensor parallelism);
* ``dp`` = gpus / (tp * cp * pp); the global batch must split into whole micro-batches per
  DP replica, so each layout takes the multiple of ``dp x micro_batch_size`` (x ``pp``
  with ``vpp`` > 1: Megatron's interleaved schedule runs whole rounds) nearest the batch
  asked (:func:`moesim.plan.spec.nearest_batch`; ``Candidate.global_batch``).

Each layout is tried with selective recompute (flash attention keeps no score matrix), then
full recompute; the first that fits in HBM (``moesim.model.fits``) is kept. A layout that does
not divide or does not fit is kept as rejected with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.errors import ConfigError
from moesim.hardware import GpuSpec
from moesim.model import ModelConfig
from moesim.parallel.layout import ParallelLayout
from moesim.parallel.memory import RECOMPUTE_ORDER, MemoryBudget, fits, state_memory
from moesim.plan.spec import DesignSpec, nearest_batch

TP_CHOICES = (1, 2, 4, 8)
CP_CHOICES = (1, 2)
PP_CHOICES = (1, 2, 4, 8, 16, 32)
VPP_CHOICES = (1, 2, 4)
EP_MAX = 128


@dataclass(frozen=True)
class Candidate:
    """One layout with its memory verdict."""

    layout: ParallelLayout
    fits: bool
    reason: str
    num_microbatches: int = 0
    recompute: str = ""
    schedule: str = ""
    memory: MemoryBudget | None = None
    label: str = ""  # the degrees as asked, when they could not even form a layout
    global_batch: int = 0  # sequences per step: the batch asked, adjusted to divide

    def tokens_per_step(self, seq_len: int) -> int:
        return self.global_batch * seq_len

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        lay = self.layout
        return (f"tp{lay.tp} pp{lay.pp} vpp{lay.vpp} ep{lay.ep} etp{lay.etp} cp{lay.cp} "
                f"dp{lay.dp}")


def ep_choices(model: ModelConfig) -> list[int]:
    """Divisors of the routed-expert count up to :data:`EP_MAX` (1 for a dense model)."""
    experts = model.n_routed_experts if model.is_moe else 1
    return [d for d in range(1, min(experts, EP_MAX) + 1) if experts % d == 0]


def _degrees(spec: DesignSpec, gpus: int, model: ModelConfig, domain: int
             ) -> list[dict[str, int]]:
    out = []
    for tp in (t for t in TP_CHOICES if t <= min(domain, spec.max_tp)):
        for cp in (c for c in CP_CHOICES if c <= spec.max_cp):
            for pp in (p for p in PP_CHOICES if p <= model.num_layers):
                if gpus % (tp * cp * pp):
                    continue
                dp = gpus // (tp * cp * pp)
                for vpp in (v for v in VPP_CHOICES if v == 1 or pp > 1):
                    for ep in ep_choices(model):
                        out.append(dict(tp=tp, cp=cp, pp=pp, vpp=vpp, ep=ep, etp=1, dp=dp))
    return out


def _reject(layout: ParallelLayout, reason: str) -> Candidate:
    return Candidate(layout, False, reason)


def check_layout(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec,
                 layout: ParallelLayout) -> Candidate:
    """Divisibility and HBM checks of one layout; the verdict with its reason."""
    if layout.ep > layout.world_size // (layout.pp * layout.etp):
        return _reject(layout, f"ep={layout.ep} exceeds the {layout.world_size // layout.pp} "
                               "ranks of a pipeline stage")
    try:
        layout.validate(model)
    except ConfigError as exc:
        return _reject(layout, exc.problem)
    if layout.vpp > 1 and model.num_layers % (layout.pp * layout.vpp):
        return _reject(layout, f"pp*vpp={layout.pp * layout.vpp} does not divide "
                               f"{model.num_layers} layers")
    per_step = layout.dp * spec.micro_batch_size
    # Megatron's interleaved schedule needs a multiple of pp micro-batches
    gbs = nearest_batch(spec.global_batch, per_step * (layout.pp if layout.vpp > 1 else 1))
    m = gbs // per_step
    schedule = "interleaved" if layout.vpp > 1 else "1f1b"
    reason = ""
    for recompute in RECOMPUTE_ORDER:
        try:
            budget = state_memory(model, layout, seq_len=spec.seq_len,
                                  micro_batch_size=spec.micro_batch_size, num_microbatches=m,
                                  recompute=recompute, precision=spec.precision,
                                  schedule=schedule)
        except ConfigError as exc:
            return _reject(layout, exc.problem)
        verdict = fits(budget, gpu.hbm_bytes, spec.hbm_reserve)
        if verdict.ok:
            return Candidate(layout, True, "", m, recompute, schedule, budget,
                             global_batch=gbs)
        reason = verdict.reason + f" (even with {recompute} recompute)"
    return Candidate(layout, False, reason, m, RECOMPUTE_ORDER[-1], schedule, budget,
                     global_batch=gbs)


def enumerate_candidates(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec,
                         domain: int, gpus: int) -> list[Candidate]:
    """Every layout of the search space for ``gpus`` GPUs, fitting or rejected."""
    out = []
    for degrees in _degrees(spec, gpus, model, domain):
        try:
            layout = ParallelLayout.of(degrees)
        except ConfigError as exc:
            out.append(Candidate(ParallelLayout(), False, exc.problem, label=_spell(degrees)))
            continue
        out.append(check_layout(spec, model, gpu, layout))
    if not out:
        raise ConfigError("gpus", f"{gpus} GPUs admit no layout with tp in {TP_CHOICES}, "
                          f"cp in {CP_CHOICES}, pp in {PP_CHOICES}; use a multiple of 8")
    return out


def _spell(degrees: dict[str, int]) -> str:
    order = ("tp", "pp", "vpp", "ep", "etp", "cp", "dp")
    return " ".join(f"{k}{degrees[k]}" for k in order)
