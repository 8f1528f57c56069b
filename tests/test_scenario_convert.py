"""The old scenario languages convert into the one language: every file shipped before the
move (kept in tests/data/legacy_scenarios/) loads through the converter, with a one-line
notice, into exactly the scenario its shipped version-2 file describes. The scenario fully
determines the simulation (seeded), so the numbers are the same; tests/test_scenarios_run.py
pins the one-EP-group ones to the pre-move code's figures, tests/test_validate.py the Mixtral
and DeepSeek-V3 steps."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from moesim.errors import ConfigError
from moesim.runner.specs import spec_for, step_spec
from moesim.scenario import load_scenario_file, scenario_from_dict
from moesim.scenario.legacy import convert, is_legacy
from moesim.scenarios import resolve, scenario_names
from moesim.sweep.spec import load_sweep_file

LEGACY = Path(__file__).resolve().parent / "data" / "legacy_scenarios"
OLD_FILES = sorted(LEGACY.glob("*.yaml"))


def test_every_old_shipped_file_has_its_one_language_version() -> None:
    assert len(OLD_FILES) == 11
    assert {p.stem for p in OLD_FILES} <= set(scenario_names())


@pytest.mark.parametrize("old", OLD_FILES, ids=lambda p: p.stem)
def test_old_file_converts_to_the_shipped_scenario(old: Path) -> None:
    notice = io.StringIO()
    converted = load_scenario_file(old, notice=notice)
    assert notice.getvalue().count("\n") == 1 and "converted" in notice.getvalue()
    shipped = load_scenario_file(resolve(old.stem), notice=notice)
    assert notice.getvalue().count("\n") == 1  # a version-2 file loads silently
    assert converted == shipped
    assert spec_for(converted) == spec_for(shipped)  # the simulator's input, equal too


def test_shipped_files_are_all_version_2() -> None:
    for name in scenario_names():
        assert not is_legacy(yaml.safe_load(resolve(name).read_text())), name


def test_group_scenario_runs_as_a_whole_step_too() -> None:
    """The one-EP-group study is a step with pp = 1, dp = ep and a few layers: the same
    scenario gives the whole-step simulator's input, its model cut to those layers."""
    scn = load_scenario_file(resolve("ep8-hot-expert"))
    step = step_spec(scn)
    assert (step.layout.pp, step.layout.dp, step.layout.ep, step.model.num_layers) == (1, 8, 8, 4)
    assert step.tokens_per_microbatch == scn.group_spec().workload.tokens_per_rank


def test_converter_keeps_differing_defaults() -> None:
    group = scenario_from_dict({"model": "mixtral-8x7b"})  # old layer stack: all defaults
    assert (group.mode, group.fabric.multipath, group.fabric.batch_window_rel) == (
        "group", "ecmp", 0.0)
    assert (group.layout.ep, group.workload.layers) == (8, 4)
    step = scenario_from_dict({"layout": {"ep": 8, "dp": 8}})  # old step file: no fabric
    assert (step.mode, step.fabric.multipath, step.fabric.batch_window_rel) == (
        "full", "dmodk", 0.02)
    assert convert({"workload": {"tokens_per_rank": 8192, "seq_len": 4096}})["workload"][
        "micro_batch_size"] == 2
    part = scenario_from_dict({"workload": {"tokens_per_rank": 1000, "seq_len": 4096}})
    assert part.group_spec().workload.tokens_per_rank == 1000  # group mode keeps the count
    with pytest.raises(ConfigError, match=r"workload\.tokens_per_rank"):
        step_spec(part)


def test_sweep_on_an_old_base_converts_it(tmp_path: Path) -> None:
    (tmp_path / "old.yaml").write_text((LEGACY / "ep8-balanced.yaml").read_text())
    (tmp_path / "s.yaml").write_text("base: old.yaml\ngrid: {router.alpha: [0, 1]}\n")
    spec = load_sweep_file(tmp_path / "s.yaml")
    assert spec.scenario["version"] == 2 and spec.scenario["layout"] == {"ep": 8, "dp": 8}
