"""End to end: every shipped scenario runs; the attribution names what the scenario plants."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from moesim.runner.group import simulate
from moesim.runner.run import run_scenario
from moesim.scenario import load_scenario_file
from moesim.scenarios import resolve, scenario_names


@pytest.fixture(scope="module")
def results() -> dict:
    return {name: run_scenario(load_scenario_file(resolve(name))) for name in scenario_names()}


def test_every_shipped_scenario_runs(results: dict) -> None:
    for name, res in results.items():
        assert res.step_time_s > 0, name
        assert res.tokens_per_s > 0
        assert {"rank", "compute_s", "comm_s", "idle_s"} <= set(res.to_dict()["ranks"][0])
        assert {"id", "tier", "bytes", "busy_s", "peak_util"} <= set(res.to_dict()["links"][0])


def test_balanced_scenario_has_no_real_straggler(results: dict) -> None:
    res = results["ep8-balanced"]
    assert res.step_time_s == pytest.approx(res.balanced_step_time_s, rel=0.02)
    assert all(s.excess_s < 0.02 * res.step_time_s for s in res.stragglers)


def test_hot_expert_names_the_hot_rank_and_its_experts(results: dict) -> None:
    res = results["ep8-hot-expert"]
    top = res.stragglers[0]
    assert top.cause == "expert_imbalance"
    assert res.step_time_s > 1.5 * res.balanced_step_time_s
    scn = load_scenario_file(resolve("ep8-hot-expert"))
    sim = simulate(scn)
    hot_ranks = {int(np.argmax(r.rank_load())) for r in sim.routings}
    assert top.rank in hot_ranks
    layer = next(i for i, r in enumerate(sim.routings) if int(np.argmax(r.rank_load())) == top.rank)
    assert str(sim.routings[layer].hot_experts(top.rank)[:1])[1:-1] in top.detail
    assert top.excess_s > 0.1 * res.step_time_s


def test_congested_rail_names_a_leaf_uplink(results: dict) -> None:
    res = results["ep32-rail-4to1"]
    top = res.stragglers[0]
    assert top.cause == "link_congestion"
    assert top.link is not None and top.link.startswith("leaf.") and "spine" in top.link
    assert "leaf_spine" in top.detail
    assert res.step_time_s > 1.5 * res.uncongested_step_time_s


def test_slow_gpu_is_named() -> None:
    scn = load_scenario_file(resolve("ep8-balanced"))
    res = run_scenario(replace(scn, slow_gpus=((3, 1.5),)))
    assert res.stragglers[0].cause == "slow_gpu"
    assert res.stragglers[0].rank == 3


def test_same_scenario_and_seed_give_identical_json() -> None:
    scn = load_scenario_file(resolve("ep8-hot-expert"))
    first = run_scenario(scn).to_json()
    assert run_scenario(scn).to_json() == first
    other = json.loads(run_scenario(replace(scn, seed=scn.seed + 1)).to_json())
    assert other["step_time_s"] != json.loads(first)["step_time_s"]
