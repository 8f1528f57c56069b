"""The Chrome-trace writer and the saved run record, on ep8-hot-expert (a fast scenario).

Both are written from the result record (evidence + timeline); the live simulation of the
same scenario (deterministic) is the reference they are checked against."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import click
import numpy as np
import pytest
from click.testing import CliRunner

from moesim.cli.plot import save_run_option, trace_option, write_run_files
from moesim.results.result import Result
from moesim.results.timeline import FORMAT, run_record, save_run
from moesim.results.trace import (
    COMM_TID,
    COMPUTE_TID,
    US_PER_S,
    busiest_links,
    check_sequential,
    write_chrome_trace,
)
from moesim.runner.group import Simulation, simulate
from moesim.runner.run import run_scenario
from moesim.scenario import load_scenario_file
from moesim.scenarios import resolve

PHASES = {"X", "M", "C", "i", "s", "f"}  # the event types this writer may emit


@pytest.fixture(scope="module")
def sim() -> Simulation:
    return simulate(load_scenario_file(resolve("ep8-hot-expert")).group_spec())


@pytest.fixture(scope="module")
def result(sim: Simulation) -> Result:
    return run_scenario(load_scenario_file(resolve("ep8-hot-expert")), timeline=True)


@pytest.fixture(scope="module")
def trace(result: Result, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = write_chrome_trace(result, tmp_path_factory.mktemp("trace") / "t.json", top_links=10)
    return json.loads(path.read_text())  # the file is valid JSON


def check_format(doc: dict[str, Any]) -> None:
    """The Trace Event Format rules this project relies on (JSON object form)."""
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    assert doc["displayTimeUnit"] in ("ms", "ns")
    events = doc["traceEvents"]
    named_pids, named_threads = set(), set()
    for ev in events:
        assert ev["ph"] in PHASES, ev
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int)
        assert isinstance(ev["name"], str) and ev["name"]
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name", "process_sort_index",
                                  "thread_sort_index")
            if ev["name"] == "process_name":
                named_pids.add(ev["pid"])
            if ev["name"] == "thread_name":
                named_threads.add((ev["pid"], ev["tid"]))
            continue
        assert isinstance(ev["ts"], float) and math.isfinite(ev["ts"]) and ev["ts"] >= 0
        if ev["ph"] == "X":
            assert isinstance(ev["dur"], float) and ev["dur"] >= 0
        if ev["ph"] == "C":
            assert ev["args"] and all(
                isinstance(v, int | float) and math.isfinite(v) for v in ev["args"].values()
            )
        if ev["ph"] == "i":
            assert ev["s"] in ("g", "p", "t")
    used = {(ev["pid"], ev["tid"]) for ev in events if ev["ph"] in ("X", "C")}
    assert {pid for pid, _ in used} <= named_pids
    assert {key for key in used if key[0] in {e["pid"] for e in events if e["ph"] == "X"}} \
        <= named_threads
    _check_nesting(events)
    _check_flows(events)


def _check_nesting(events: list[dict[str, Any]]) -> None:
    """X events on one (pid, tid) must nest: each is disjoint from or inside its neighbours."""
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for ev in events:
        if ev["ph"] == "X":
            tracks[(ev["pid"], ev["tid"])].append((ev["ts"], ev["ts"] + ev["dur"]))
    for spans in tracks.values():
        stack: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start + 1e-6:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-6, "spans cross on one track"
            stack.append(end)


def _check_flows(events: list[dict[str, Any]]) -> None:
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert set(starts) == set(ends)
    for key, s in starts.items():
        assert ends[key]["ts"] >= s["ts"] and ends[key]["cat"] == s["cat"]
    spans = [e for e in events if e["ph"] == "X"]
    for flow in [*starts.values(), *ends.values()]:  # each end binds to a slice on its track
        assert any(x["pid"] == flow["pid"] and x["tid"] == flow["tid"]
                   and x["ts"] <= flow["ts"] <= x["ts"] + x["dur"] for x in spans)


def test_trace_follows_the_format(trace: dict[str, Any]) -> None:
    check_format(trace)


def test_spans_are_the_simulated_phases_in_microseconds(
    sim: Simulation, trace: dict[str, Any]
) -> None:
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    n_phases, n_ranks = sim.trace.start_s.shape
    assert (n_phases, n_ranks) == (40, 8)  # 4 layers x (6 fwd + 4 bwd), EP8
    assert len(spans) == n_phases * n_ranks
    for ev in spans:
        ph = sim.trace.phases[[p.label for p in sim.trace.phases].index(ev["name"])]
        rank = ev["pid"]
        assert ev["tid"] == (COMM_TID if ph.is_a2a else COMPUTE_TID)
        assert ev["cat"] == ("a2a" if ph.is_a2a else "compute")
        assert ev["ts"] == pytest.approx(sim.trace.start_s[ph.index, rank] * 1e6)
        assert ev["ts"] + ev["dur"] == pytest.approx(sim.trace.end_s[ph.index, rank] * 1e6)
    assert max(e["ts"] + e["dur"] for e in spans) == pytest.approx(sim.step_time_s * US_PER_S)


def test_processes_and_threads_are_named(trace: dict[str, Any]) -> None:
    meta = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    assert procs[0] == "rank 0 (h0/gpu0)" and procs[7] == "rank 7 (h0/gpu7)"
    assert procs[8] == "links"
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert threads[(3, COMPUTE_TID)] == "compute" and threads[(3, COMM_TID)] == "a2a"


def test_critical_spans_are_the_last_to_finish(sim: Simulation, trace: dict[str, Any]) -> None:
    events = trace["traceEvents"]
    critical = [e for e in events if e["ph"] == "X" and e["args"].get("critical")]
    assert len(critical) == len(sim.trace.phases)  # exactly one per phase
    for ev in critical:
        index = [p.label for p in sim.trace.phases].index(ev["name"])
        assert ev["ts"] + ev["dur"] == pytest.approx(np.max(sim.trace.end_s[index]) * 1e6)
    instants = [e for e in events if e["ph"] == "i"]
    assert len(instants) == len(sim.trace.phases)
    assert len([e for e in events if e["ph"] == "s"]) == len(sim.trace.phases) - 1
    # the hot-expert rank 7 is on the critical path of its experts phases
    assert any(e["pid"] == 7 and e["args"]["phase"] == "experts" for e in critical)


def test_counters_are_the_busiest_links_utilisation(
    sim: Simulation, result: Result, trace: dict[str, Any]
) -> None:
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    links = np.flatnonzero(sim.net.stats.bytes > 0)[busiest_links(result.timeline, 10)]
    assert len(links) == 10
    bytes_moved = sim.net.stats.bytes
    assert np.all(np.diff(bytes_moved[links]) <= 0)  # busiest first
    names = {f"{sim.fabric.link_name(int(i))} [{sim.fabric.tier[i]}]" for i in links}
    assert {e["name"] for e in counters} == names
    assert all(e["pid"] == 8 for e in counters)
    times, util = sim.net.stats.timeline()
    top = int(links[0])
    series = {e["ts"]: e["args"]["util"] for e in counters
              if e["name"].startswith(sim.fabric.link_name(top) + " ")}
    for t_us, value in series.items():
        k = int(np.argmin(np.abs(times * 1e6 - t_us)))
        assert value == pytest.approx(float(util[k, top]), abs=1e-6)
    assert max(series.values()) == pytest.approx(float(np.max(util[:, top])), abs=1e-6)


def test_overlapping_spans_are_refused() -> None:
    ok = [{"ph": "X", "pid": 0, "tid": 0, "ts": 0.0, "dur": 2.0},
          {"ph": "X", "pid": 0, "tid": 0, "ts": 2.0, "dur": 1.0},
          {"ph": "X", "pid": 0, "tid": 1, "ts": 1.0, "dur": 5.0}]
    check_sequential(ok)
    bad = [*ok, {"ph": "X", "pid": 0, "tid": 0, "ts": 2.5, "dur": 1.0}]
    with pytest.raises(ValueError, match="pid=0 tid=0"):
        check_sequential(bad)


def test_run_record_holds_spans_links_and_attribution(
    sim: Simulation, result: Result, tmp_path: Path
) -> None:
    res = result
    assert res.step_time_s == sim.step_time_s  # deterministic: the same actual run
    rec = json.loads(save_run(res, tmp_path / "run.json").read_text())
    assert rec == json.loads(json.dumps(run_record(res)))
    assert rec["format"] == FORMAT and rec["scenario"] == "ep8-hot-expert"
    assert np.array_equal(np.array(rec["start_s"]), sim.trace.start_s)
    assert np.array_equal(np.array(rec["end_s"]), sim.trace.end_s)
    assert [p["label"] for p in rec["phases"]] == [p.label for p in sim.trace.phases]
    assert [p["critical_rank"] for p in rec["phases"]] == list(np.argmax(sim.trace.end_s, 1))
    links = rec["links"]
    used = np.flatnonzero(sim.net.stats.bytes > 0)
    assert len(links["id"]) == len(links["tier"]) == used.size == 16
    assert set(links["tier"]) <= {"nvlink", "pcie"}
    util = np.array(links["util"])
    assert util.shape == (len(links["times_s"]), used.size)
    _, full = sim.net.stats.timeline()
    assert np.allclose(util, full[:, used], atol=1e-4)
    assert sum(rec["breakdown_s"].values()) == pytest.approx(rec["step_time_s"])
    assert rec["stragglers"][0]["cause"] == "expert_imbalance"


def test_run_options_write_the_trace_and_the_run_record(
    sim: Simulation, result: Result, tmp_path: Path
) -> None:
    @click.command()
    @trace_option
    @save_run_option
    def fake_run(trace_path: str | None, run_path: str | None) -> None:
        for path in write_run_files(result, trace_path, run_path):
            click.echo(path.name)

    out = CliRunner().invoke(fake_run, ["--trace", str(tmp_path / "t.json"),
                                        "--save-run", str(tmp_path / "r.json")])
    assert out.exit_code == 0, out.output
    assert out.output.split() == ["t.json", "r.json"]
    check_format(json.loads((tmp_path / "t.json").read_text()))
    assert json.loads((tmp_path / "r.json").read_text())["end_s"] == sim.trace.end_s.tolist()
    assert write_run_files(result) == []
    with pytest.raises(ValueError, match="no group timeline"):  # kept only when asked
        plain = run_scenario(load_scenario_file(resolve("ep8-balanced")))
        write_run_files(plain, run_path=tmp_path / "x.json")
