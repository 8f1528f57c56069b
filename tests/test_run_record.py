"""The run record (issue 17): attribution, the critical path, the group trace and the saved
timeline are functions of the record.

The simulators fill the record's evidence (group: :class:`GroupEvidence`; full mode:
:class:`WalkRecord`); attribution and the walk read only it. Checked three ways: the readers'
imports reach no simulator module (statically, lazy imports included, and in a fresh
interpreter); a record saved by ``moesim run --save-run`` and loaded from disk gives the very
stragglers, collectives and critical path of the live run.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from dataclasses import replace

import networkx as nx
import pytest
from click.testing import CliRunner
from test_layers import import_edges, package
from test_step import _model, _spec  # the small Mixtral-shaped steps

from moesim.cli import main
from moesim.parallel.layout import ParallelLayout
from moesim.results.critical_path import walk
from moesim.results.group_record import GroupEvidence
from moesim.results.run_file import load_evidence, reread
from moesim.results.walk_record import WalkRecord
from moesim.runner.run import run_scenario
from moesim.scenario import load_scenario_file
from moesim.scenarios import resolve
from moesim.step import simulate_step
from moesim.step.critical_record import walk_record

READERS = ("moesim.results.attribution", "moesim.results.critical_path",
           "moesim.results.run_file", "moesim.results.trace", "moesim.results.timeline")
ALLOWED = {"results", "calibration", "errors", "io"}
"""What the readers may reach: records, constants, errors and file reading."""


def test_readers_reach_no_simulator_module() -> None:
    graph = nx.DiGraph(list(import_edges()))
    reached = set(READERS).union(*(nx.descendants(graph, r) for r in READERS))
    assert {package(m) for m in reached} <= ALLOWED, sorted(
        m for m in reached if package(m) not in ALLOWED)
    assert "moesim.results.walk_record" in reached  # the check sees the readers' imports
    assert "moesim.step.state" not in reached and "moesim.runner.group" not in reached


def test_a_fresh_interpreter_rereads_a_record_without_the_simulator(tmp_path) -> None:
    path = tmp_path / "run.json"
    res = CliRunner().invoke(main, ["run", "ep8-balanced", "--mode", "full", "--quiet",
                                    "--save-run", str(path)])
    assert res.exit_code == 0, res.output
    code = (
        "import sys\n"
        "from moesim.results.run_file import load_evidence, reread\n"
        f"cp = reread(load_evidence({str(path)!r}))\n"
        "print(cp.step_time_s)\n"
        "print(sorted(m for m in sys.modules if m.startswith('moesim.')"
        " and m.split('.')[1] in ('step', 'engine', 'runner', 'workload', 'collectives',"
        " 'fabric', 'router', 'scenario')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert float(out[0]) == json.loads(path.read_text())["step_time_s"]
    assert out[1] == "[]"


@pytest.fixture(scope="module")
def group_saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, object]:
    path = tmp_path_factory.mktemp("run") / "group.json"
    res = CliRunner().invoke(main, ["run", "ep8-hot-expert", "--quiet", "--json",
                                    "--save-run", str(path)])
    assert res.exit_code == 0, res.output
    return json.loads(res.output), path


def test_a_saved_group_record_attributes_as_the_live_run(group_saved) -> None:
    printed, path = group_saved
    live = run_scenario(load_scenario_file(resolve("ep8-hot-expert")))
    ev = load_evidence(path)
    assert isinstance(ev, GroupEvidence) and ev.equal(live.evidence)
    stragglers, collectives = reread(ev)
    assert stragglers == live.stragglers and collectives == live.collectives
    assert stragglers[0].cause == "expert_imbalance"  # what the scenario plants
    assert printed["stragglers"] == json.loads(live.to_json())["stragglers"]
    saved = json.loads(path.read_text())
    assert saved["format"] == "moesim-run/1" and saved["stragglers"] == printed["stragglers"]


def test_a_saved_full_record_walks_the_live_critical_path(tmp_path) -> None:
    scn = load_scenario_file(resolve("ep8-hot-expert"))
    path = tmp_path / "full.json"
    res = CliRunner().invoke(main, ["run", "ep8-hot-expert", "--mode", "full", "--quiet",
                                    "--json", "--save-run", str(path)])
    assert res.exit_code == 0, res.output
    live = run_scenario(scn, "full")
    ev = load_evidence(path)
    assert isinstance(ev, WalkRecord) and ev.equal(live.evidence)
    again, live_path = walk(ev), walk(live.evidence)
    assert again.segments == live_path.segments
    assert again.to_dict() == live.critical_path
    assert json.loads(json.dumps(again.to_dict())) == json.loads(res.output)["critical_path"]
    assert json.loads(path.read_text())["format"] == "moesim-step-run/1"


def test_a_fast_record_keeps_no_evidence(tmp_path) -> None:
    scn = load_scenario_file(resolve("ep8-hot-expert"))
    live = run_scenario(replace(scn, mode="fast"))
    assert live.evidence is None and live.critical_path is None
    path = tmp_path / "fast.json"
    res = CliRunner().invoke(main, ["run", "ep8-hot-expert", "--mode", "fast", "--quiet",
                                    "--save-run", str(path)])
    assert res.exit_code == 0, res.output
    assert load_evidence(path) is None


def test_a_changed_record_changes_the_reading() -> None:
    """The readers really read the record: a slowed rank written into it is named."""
    live = run_scenario(load_scenario_file(resolve("ep8-balanced")))
    ev = live.evidence
    slowdown = ev.slowdown.copy()
    slowdown[3] = 1.5
    end_s = ev.end_s.copy()
    end_s[:, 3] += 0.05  # rank 3 finishes every phase late
    stragglers, _ = reread(replace(ev, slowdown=slowdown, end_s=end_s))
    assert stragglers[0].cause == "slow_gpu" and stragglers[0].rank == 3
    assert all(s.cause != "slow_gpu" for s in reread(ev)[0])


def test_a_dense_step_record_round_trips() -> None:
    """No MoE layer: the record's per-layer and all-to-all tables are empty, and still come
    back from JSON equal, walking to the same path."""
    model = dataclasses.replace(_model(), num_layers=2, moe_layers=(False, False),
                                intermediate_size=14336)
    rec = walk_record(simulate_step(_spec(ParallelLayout(dp=4, pp=2), model=model,
                                          microbatches=2)))
    assert rec.a2a_send_s.size == rec.moe_layers.size == 0
    back = WalkRecord.from_dict(json.loads(json.dumps(rec.to_dict(), allow_nan=False)))
    assert back.equal(rec)
    assert walk(back).to_dict() == walk(rec).to_dict()
