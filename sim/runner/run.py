"""The one runner: scenario -> simulation (full, fast or group mode) -> result record.

>>> from moesim.scenario import load_scenario_file
>>> from moesim.scenarios import resolve
>>> rec = run_scenario(load_scenario_file(resolve("ep8-balanced")))
>>> rec.mode, round(rec.step_time_s * 1e3, 3)
('group', 71.155)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from moesim.results.result import Result
from moesim.runner.specs import spec_for
from moesim.scenario.schema import GroupSpec
from moesim.scenario.spec import Scenario
from moesim.step.run import StepResult, run_step


def run_scenario(scn: Scenario, mode: str | None = None, seed: int | None = None,
                 timeline: bool = False) -> Result:
    """Simulate ``scn`` in ``mode`` (default: the scenario's) into the result record; in group
    mode ``timeline`` keeps what the Chrome trace and the saved run's timeline read."""
    if seed is not None:
        scn = replace(scn, seed=seed)
    mode = mode or scn.mode
    spec = spec_for(scn, mode)
    setting = scenario_setting(scn, mode)
    if isinstance(spec, GroupSpec):
        from moesim.runner.group_run import run_group  # group mode's machinery: only then

        return run_group(spec, setting, timeline)
    return step_result(scn, mode, run_step(spec, mode=mode))


def step_result(scn: Scenario, mode: str, result: StepResult) -> Result:
    """The record of ``scn``'s whole step simulated in ``mode`` (full or fast)."""
    step = result.to_dict()
    return Result(
        scenario=scn.name, seed=scn.seed, mode=mode, step_time_s=step["step_time_s"],
        tokens_per_s=step["tokens_per_s"], breakdown_s=step["breakdown_s"], mfu=step["mfu"],
        tflops_per_gpu=step["tflops_per_gpu"], last_rank=step["last_rank"],
        stage_makespan_s=step["stage_makespan_s"], critical_path=step["critical_path"],
        engine=step["engine"], setting=scenario_setting(scn, mode),
        evidence=result.critical.record if result.critical else None,
    )


def scenario_setting(scn: Scenario, mode: str) -> dict[str, Any]:
    """What ran, in plain types, for the record's ``setting`` (and the text report's header)."""
    lay, wl = scn.layout, scn.workload
    return {
        "description": scn.description,
        "model": scn.model.name,
        "layers": scn.cut_model().num_layers,
        "gpu": scn.gpu,
        "fabric": scn.fabric.preset,
        "world_size": lay.world_size,
        "layout": lay.degrees(),
        "edp": lay.edp,
        "schedule": scn.schedule if mode != "group" else None,
        "microbatches": wl.microbatches(lay.dp),
        "micro_batch_size": wl.micro_batch_size,
        "seq_len": wl.seq_len,
    }
