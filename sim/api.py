"""moesim's Python API: load a scenario, simulate it, design a cluster, run a sweep.

>>> import moesim
>>> scn = moesim.load_scenario("ep8-hot-expert")
>>> scn.mode, scn.layout.ep, scn.workload.layers
('group', 8, 4)
>>> r = moesim.simulate(scn)
>>> round(r.step_time_s * 1e3, 1), r.stragglers[0].cause
(179.7, 'expert_imbalance')
>>> round(r.balanced_step_time_s * 1e3, 1)   # the same layers under a balanced router
71.2

``simulate`` returns the one result record (:class:`moesim.results.result.Result`) in every
mode; ``r.to_json()`` is what ``moesim run --json`` prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moesim.plan.design import DesignResult
    from moesim.results.result import Result
    from moesim.scenario.spec import Scenario
    from moesim.sweep.runner import SweepOutcome


def load_scenario(name_or_path: str | Path) -> Scenario:
    """A shipped scenario by name (``moesim scenarios`` lists them) or a YAML file by path;
    a file of the old languages is converted (one notice on stderr)."""
    from moesim.runner.specs import spec_for
    from moesim.scenario import load_scenario_file
    from moesim.scenarios import resolve

    scn = load_scenario_file(resolve(str(name_or_path)))
    spec_for(scn)  # every field checked now by the simulator of its mode
    return scn


def simulate(scenario: Scenario | str | Path, mode: str | None = None,
             seed: int | None = None) -> Result:
    """Simulate ``scenario`` (a Scenario, or a name or path for :func:`load_scenario`) in
    ``mode`` (full | fast | group; default: the scenario's) into the result record."""
    from moesim.runner.run import run_scenario

    scn = scenario if not isinstance(scenario, str | Path) else load_scenario(scenario)
    return run_scenario(scn, mode=mode, seed=seed)


def design(**fields: Any) -> DesignResult:
    """Design a training cluster (what ``moesim design`` prints): keyword fields of
    :class:`moesim.plan.spec.DesignSpec` (model, gpus, gpu, fabric, tokens, days, ...)."""
    from moesim.plan.design import design as run_design
    from moesim.plan.spec import DesignSpec

    return run_design(DesignSpec(**fields))


def sweep(spec: str | Path, out: str | Path, jobs: int = 1,
          **overrides: Any) -> SweepOutcome:
    """Run the sweep file ``spec`` (a path, or a name in ``scenarios/sweeps``) into the CSV
    ``out``, resuming the points already there; ``overrides`` go to the sweep runner."""
    from moesim.sweep.runner import run_sweep
    from moesim.sweep.spec import load_sweep_file

    path = Path(spec)
    if not path.is_file():
        from moesim.scenarios import SCENARIO_DIR

        path = SCENARIO_DIR / "sweeps" / f"{spec}.yaml"
    return run_sweep(load_sweep_file(path), out, jobs=jobs, **overrides)


__all__ = ["design", "load_scenario", "simulate", "sweep"]
