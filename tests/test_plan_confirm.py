"""The sized count confirmed in simulated days (moesim.plan.confirm), stated in the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from moesim.hardware import get_gpu
from moesim.plan.confirm import simulated_days
from moesim.plan.design import design
from moesim.plan.prepare import load_model
from moesim.plan.record import to_record
from moesim.plan.report import to_markdown
from moesim.plan.sizing import SU_GPUS, size_cluster
from moesim.plan.spec import DesignSpec

MODEL = str(Path(__file__).parent / "data" / "design" / "mixtral-4l.json")


@pytest.fixture(scope="module")
def sized() -> tuple[DesignSpec, dict[str, object], str]:
    # 4-layer Mixtral (real layer shapes), 20T tokens in 10 days: a few scalable units
    spec = DesignSpec(model=MODEL, gpu="H100", tokens=20e12, days=10, global_batch=1024,
                      simulate_min=4, simulate_max=4)
    res = design(spec, jobs=1)
    rec = to_record(res)
    return spec, rec, to_markdown(rec)


def test_count_meets_the_goal_in_simulated_days(sized: tuple) -> None:
    """The chosen count's best simulated layout meets the days (goodput charged, as the
    report's days), one unit fewer misses them (simulated, or by estimate where the
    estimate scaled by the simulated ratio already missed), and the report says so."""
    spec, rec, md = sized
    sz = rec["sizing"]
    n = rec["chosen_gpus"]
    tried = {t["gpus"]: t for t in sz["tried"]}
    assert tried[n]["simulated_days"] is not None and tried[n]["simulated_days"] <= spec.days
    assert rec["days_to_train"] <= spec.days
    lower = tried.get(n - SU_GPUS)
    if lower is not None and lower["simulated_days"] is not None:
        assert lower["simulated_days"] > spec.days
    assert "days simulated" in sz["reason"] and f"**{n} GPUs**" in md
    assert "run without --gpus" not in md


def test_confirmed_count_is_not_below_the_estimate_when_the_estimate_is_optimistic(
        sized: tuple) -> None:
    """The estimate's proposal is where confirmation starts: the design never takes a count
    the simulator did not check."""
    spec, rec, _ = sized
    est = size_cluster(spec, load_model(MODEL), get_gpu("H100"), lambda _: None)
    simulated = {t["gpus"] for t in rec["sizing"]["tried"] if t["simulated_days"] is not None}
    assert est.gpus in simulated and rec["chosen_gpus"] in simulated


def test_report_says_how_many_within_the_band_were_not_simulated(sized: tuple) -> None:
    """The validation band is wide: layouts the cap left out although the band cannot rule
    them out are counted in the record and the report, with the cap."""
    _, rec, md = sized
    n = rec["unsimulated_within_band"]
    assert rec["simulate_limits"] == [4, 4] and rec["simulated_count"] == 4
    assert n is None or 0 <= n <= rec["fitting_count"] - 4
    if n:
        assert f"{n} more are within the validation error band" in md and "at most 4" in md


def test_simulated_days_charge_goodput() -> None:
    class R:  # a ranked candidate at 1 s per 1M tokens
        def per_token_s(self, seq_len: int) -> float:
            return 1e-6

    days = simulated_days(DesignSpec(tokens=86400e6), 256, R())  # type: ignore[arg-type]
    assert 1.0 < days < 1.1  # 1 day of steps over a goodput a little below 1


def test_extended_tp_cp_step_is_moesim_step(tmp_path: Path) -> None:
    """A pinned design whose candidates run many micro-batches (extended from two short runs)
    in the default TP/CP space: the record's step is `moesim step --mode fast` on the chosen
    layout's step scenario (every micro-batch, every layer drawn) within 1 %."""
    import json

    import yaml
    from click.testing import CliRunner

    from moesim.cli.main import main

    spec = DesignSpec(model=MODEL, gpus=64, gpu="H100", global_batch=2048, simulate_min=4,
                      simulate_max=4)
    rec = to_record(design(spec, jobs=1))
    chosen = next(c for c in rec["candidates"] if c["simulated_step_s"] is not None)
    assert rec["num_microbatches"] > 12  # past both probes: extended
    assert any(c["layout"]["tp"] * c["layout"]["cp"] > 1 for c in rec["candidates"]
               if c["simulated_step_s"] is not None)
    path = tmp_path / "chosen.yaml"
    path.write_text(yaml.safe_dump(rec["step_scenario"]))
    out = CliRunner().invoke(main, ["step", str(path), "--mode", "fast", "--json"])
    assert out.exit_code == 0, out.output
    assert chosen["simulated_step_s"] == pytest.approx(json.loads(out.output)["step_time_s"],
                                                       rel=0.01)
