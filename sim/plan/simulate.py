"""Run a design's candidates through the whole-step simulator (fast mode), in parallel.

Each candidate becomes the :class:`moesim.step.spec.StepSpec` that ``moesim step`` would run
for it (:func:`step_spec`; :func:`step_scenario` writes it as a step scenario file), and
:func:`moesim.step.run.run_step` simulates it in fast mode
(:class:`moesim.step.mode.Fast`). The workers are the sweeps' executors
(:func:`moesim.sweep.execute.open_executor`: inline for ``-j 1``, a local process pool, or a
Dask cluster with ``--dask ADDRESS``).

A candidate of many micro-batches runs twice with few and its step is extended to its count
(:mod:`moesim.plan.extrapolate`: affine in the count, 0.5 % bound; ``DesignSpec.extrapolate``).
The step runs the recompute the memory plan chose for the candidate (``StepSpec.recompute``:
``selective`` re-runs the attention core forward, ``full`` each layer's forward).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from moesim.fabric.spec import FabricSpec
from moesim.model import MODELS, ModelConfig
from moesim.plan.candidates import Candidate
from moesim.plan.spec import DesignSpec
from moesim.step.spec import StepSpec
from moesim.sweep.execute import open_executor, run_unordered


def step_spec(spec: DesignSpec, model: ModelConfig, cand: Candidate,
              fabric: FabricSpec) -> StepSpec:
    """The step ``moesim step`` runs for ``cand`` (its layout, schedule, micro-batches)."""
    return StepSpec(model=model, layout=cand.layout, gpu=spec.gpu, fabric=fabric,
                    schedule=cand.schedule, microbatches=cand.num_microbatches,
                    micro_batch_size=spec.micro_batch_size, seq_len=spec.seq_len,
                    compute_dtype="fp8" if spec.precision == "fp8" else "bf16",
                    recompute=cand.recompute, seed=spec.seed)


def _model_value(spec: DesignSpec, model: ModelConfig) -> str | dict[str, Any]:
    """The preset name, or (a config.json model) its fields as a step scenario writes them."""
    if spec.model in MODELS:
        return spec.model
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(model).items()}


def step_scenario(spec: DesignSpec, model: ModelConfig, cand: Candidate, fabric: FabricSpec,
                  name: str = "design") -> dict[str, Any]:
    """``cand`` as a scenario mapping of the one language (``moesim run FILE`` reads it)."""
    lay = cand.layout
    return {
        "version": 2, "name": name, "seed": spec.seed, "mode": "fast",
        "model": _model_value(spec, model), "hardware": {"gpu": spec.gpu},
        "fabric": {"preset": fabric.preset, "params": dict(fabric.params),
                   "multipath": fabric.multipath, "batch_window_rel": fabric.batch_window_rel},
        "layout": lay.degrees(),
        "schedule": cand.schedule,
        "workload": {"global_batch": cand.global_batch, "micro_batch_size": spec.micro_batch_size,
                     "seq_len": spec.seq_len,
                     "compute_dtype": "fp8" if spec.precision == "fp8" else "bf16",
                     "recompute": cand.recompute},
    }


@dataclass(frozen=True)
class SimTask:
    """One candidate for a worker: its index in the design's list and its step."""

    index: int
    step: StepSpec
    routing_draws: int  # 0: every MoE layer drawn (as ``moesim step``)
    extrapolate: bool = True  # many micro-batches: two short runs (moesim.plan.extrapolate)


def simulate_task(task: SimTask) -> dict[str, Any]:
    """Worker: the fast-mode step record of ``task`` (an error becomes the record)."""
    from moesim.plan.extrapolate import at_microbatches, extend, probe_counts
    from moesim.step.mode import Fast
    from moesim.step.run import run_step

    start = time.perf_counter()
    mode = Fast(routing_draws=task.routing_draws or None)
    probes = probe_counts(task.step) if task.extrapolate and task.routing_draws else None
    try:
        if probes is None:
            rec = run_step(task.step, mode).to_dict()
        else:
            lo, hi = (run_step(at_microbatches(task.step, m), mode).to_dict() for m in probes)
            rec = extend(lo, hi, *probes, task.step.microbatches)
    except Exception as exc:  # a candidate the simulator refuses is reported, not fatal
        return {"index": task.index, "error": f"{type(exc).__name__}: {exc}",
                "wall_s": time.perf_counter() - start}
    return {"index": task.index, "result": rec, "wall_s": time.perf_counter() - start}


Progress = Callable[[int, int], None]


Pool = tuple[Any, int]
"""An open executor and how many tasks to keep in flight (:func:`open_executor`)."""


def simulate_all(tasks: Iterable[SimTask], jobs: int = 1, dask_address: str | None = None,
                 progress: Progress | None = None, pool: Pool | None = None
                 ) -> dict[int, dict[str, Any]]:
    """Every task's record by index, run on ``pool`` (kept open by the caller across rounds:
    its workers start once), else on ``-j jobs`` / ``--dask ADDRESS`` opened here."""
    if pool is None:
        with open_executor(jobs, dask_address) as opened:
            return simulate_all(tasks, jobs, dask_address, progress, opened)
    tasks = list(tasks)
    out: dict[int, dict[str, Any]] = {}
    executor, window = pool
    for rec in run_unordered(executor, simulate_task, tasks, window):
        out[int(rec["index"])] = rec
        if progress is not None:
            progress(len(out), len(tasks))
    return out
