"""A GPU count's fabric, its layouts' memory verdicts and estimates, ordered (no simulation).

:func:`prepare` is what both the layout search (:mod:`moesim.plan.design`) and the cluster
sizing (:mod:`moesim.plan.sizing`) ask of one GPU count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from moesim.errors import ConfigError
from moesim.fabric.build import build_graph
from moesim.fabric.spec import FabricSpec
from moesim.hardware import GpuSpec
from moesim.model import ModelConfig, get_model, model_from_hf
from moesim.plan.candidates import Candidate, enumerate_candidates
from moesim.plan.cluster import fabric_spec
from moesim.plan.estimate import Estimate, estimate
from moesim.plan.fabric_view import FabricView
from moesim.plan.spec import DesignSpec


@dataclass(frozen=True)
class Ranked:
    """A fitting candidate with its estimate and, once simulated, its fast-mode step record."""

    cand: Candidate
    est: Estimate
    sim: dict[str, Any] | None = None  # StepResult.to_dict() of the simulated step
    sim_error: str = ""
    sim_wall_s: float = 0.0

    @property
    def simulated_step_s(self) -> float | None:
        return float(self.sim["step_time_s"]) if self.sim else None

    @property
    def step_time_s(self) -> float:
        """The simulated step when there is one, else the estimate."""
        s = self.simulated_step_s
        return s if s is not None else self.est.step_time_s

    def per_token_s(self, seq_len: int) -> float:
        return self.step_time_s / self.cand.tokens_per_step(seq_len)

    def est_per_token_s(self, seq_len: int) -> float:
        return self.est.step_time_s / self.cand.tokens_per_step(seq_len)


@dataclass
class Prepared:
    """A GPU count's fabric and fitting candidates, ordered by estimate (no simulation)."""

    gpus: int  # GPUs the layouts use
    fabric: FabricSpec
    view: FabricView
    candidates: list[Candidate]
    ranked: list[Ranked]
    asked_gpus: int = 0  # GPUs of the fabric, when no layout fits all of them (else gpus)
    why_fewer: str = ""


def load_model(name_or_path: str) -> ModelConfig:
    """A preset name, or a path to a Hugging Face ``config.json`` (file or directory)."""
    if Path(name_or_path).exists():
        return model_from_hf(name_or_path)
    return get_model(name_or_path)


def prepare(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec, gpus: int) -> Prepared:
    """Fabric for ``gpus``, every layout's memory verdict, estimates of those that fit."""
    fs = fabric_spec(spec.fabric, gpus, spec.gpu, spec.nic_gbit, spec.oversubscription)
    graph = build_graph(fs)
    view = FabricView(graph, gpu.name)
    if gpus > view.n_gpus:
        raise ConfigError("gpus", f"{gpus} GPUs do not fit fabric {fs.preset!r}, which holds "
                                  f"{view.n_gpus}; use --fabric auto or a larger fabric")
    cands = enumerate_candidates(spec, model, gpu, view.domain_size, gpus)
    used, why = gpus, ""
    if not any(c.fits for c in cands):
        used, fewer = _fewer_gpus(spec, model, gpu, view.domain_size, gpus, view.gpus_per_host)
        if fewer:
            why = (f"no layout of {model.name} fits all {gpus} ({_closest(cands)}); the largest "
                   f"whole-host count below that has one is {used}, the other {gpus - used} "
                   "GPUs stay idle (spares)")
            cands = fewer
    fitting = [c for c in cands if c.fits]
    ranked = [Ranked(c, estimate(spec, model, gpu, c, view)) for c in fitting]
    ranked.sort(key=lambda r: r.est_per_token_s(spec.seq_len))
    return Prepared(used, fs, view, cands, ranked, gpus, why)


def _fewer_gpus(spec: DesignSpec, model: ModelConfig, gpu: GpuSpec, domain: int, gpus: int,
                per_host: int) -> tuple[int, list[Candidate]]:
    """The largest whole-host count below ``gpus`` (down to half) with a fitting layout.

    A count whose data-parallel size has few factors of two (1000 = 8 x 125) leaves no
    expert-parallel degree that divides both the experts and the replicas, so a large MoE
    may fit no layout of all of them while one of a slightly smaller count fits."""
    n = gpus - per_host
    while n >= max(per_host, gpus // 2):
        try:
            cands = enumerate_candidates(spec, model, gpu, domain, n)
        except ConfigError:
            cands = []
        if any(c.fits for c in cands):
            return n, cands
        n -= per_host
    return gpus, []


def _closest(cands: list[Candidate]) -> str:
    with_mem = [c for c in cands if c.memory]
    if not with_mem:
        return cands[0].reason if cands else "no layout divides it"
    c = min(with_mem, key=lambda c: c.memory.total_bytes)  # type: ignore[union-attr]
    need = c.memory.total_gib if c.memory else 0.0
    return f"the closest, {c.name}, needs {need:.0f} GiB per GPU"


def no_fit(model: ModelConfig, gpu: GpuSpec, prep: Prepared) -> ConfigError:
    return ConfigError("gpus", f"no layout of {model.name} fits {prep.gpus} x {gpu.name} nor "
                               f"down to half as many; {_closest(prep.candidates)}")
