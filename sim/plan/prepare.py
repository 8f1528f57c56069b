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
from moesim.hardware import GpuSpec
from moesim.model import ModelConfig, get_model, model_from_hf
from moesim.plan.candidates import Candidate, enumerate_candidates
from moesim.plan.cluster import fabric_spec
from moesim.plan.estimate import Estimate, estimate
from moesim.plan.fabric_view import FabricView
from moesim.plan.spec import DesignSpec
from moesim.scenario.schema import FabricSpec


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

    gpus: int
    fabric: FabricSpec
    view: FabricView
    candidates: list[Candidate]
    ranked: list[Ranked]


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
    fitting = [c for c in cands if c.fits]
    ranked = [Ranked(c, estimate(spec, model, gpu, c, view)) for c in fitting]
    ranked.sort(key=lambda r: r.est_per_token_s(spec.seq_len))
    return Prepared(gpus, fs, view, cands, ranked)


def no_fit(model: ModelConfig, gpu: GpuSpec, prep: Prepared) -> ConfigError:
    closest = min((c for c in prep.candidates if c.memory),
                  key=lambda c: c.memory.total_bytes)  # type: ignore[union-attr]
    return ConfigError("gpus", f"no layout of {model.name} fits {prep.gpus} x {gpu.name}; "
                               f"closest: {closest.name}: {closest.reason}")
