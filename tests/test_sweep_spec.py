"""Sweep files: axes expand to the right points, paths are checked, ids are stable."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from moesim.errors import ConfigError
from moesim.sweep import load_sweep_file, point_scenario, summarize, sweep_from_dict
from moesim.sweep.paths import check_path, set_path
from moesim.sweep.row import format_value

TINY = {"workload.layers": 1, "workload.backward": False, "workload.tokens_per_rank": 512}
SWEEP_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "sweeps"


def test_grid_zip_seeds_expand_in_order() -> None:
    spec = sweep_from_dict({
        "base": "ep8-hot-expert",
        "set": TINY,
        "grid": {"router.hot_factor": [1.0, 2.0], "workload.ep": [4, 8]},
        "zip": {"fabric.multipath": ["ecmp", "spray"], "fabric.pxn": [False, True]},
        "seeds": {"count": 2, "start": 5},
    })
    assert spec.columns == ("router.hot_factor", "workload.ep", "fabric.multipath",
                            "fabric.pxn", "seed")
    assert spec.group_columns == spec.columns[:-1]
    points = spec.points()
    assert len(points) == 2 * 2 * 2 * 2
    assert points[0].values == (("router.hot_factor", 1.0), ("workload.ep", 4),
                                ("fabric.multipath", "ecmp"), ("fabric.pxn", False), ("seed", 5))
    assert points[1].values[-1] == ("seed", 6)
    assert points[2].values[2:4] == (("fabric.multipath", "spray"), ("fabric.pxn", True))
    assert len({p.id for p in points}) == len(points)
    scn = point_scenario(spec, points[-1])
    assert (scn.router.hot_factor, scn.layout.ep, scn.fabric.multipath, scn.fabric.pxn,
            scn.seed) == (2.0, 8, "spray", True, 6)
    assert (scn.workload.layers, scn.workload.backward) == (1, False)


def test_ids_are_stable_and_depend_only_on_values() -> None:
    a = sweep_from_dict({"base": "ep8-balanced", "grid": {"router.alpha": [0.5]}, "seeds": [3]})
    b = sweep_from_dict({"base": "ep8-hot-expert", "seeds": [3], "grid": {"router.alpha": [0.5]}})
    assert a.points()[0].id == b.points()[0].id
    # sha1('{"router.alpha": 0.5, "seed": 3}')[:12], computed by hand with hashlib
    import hashlib
    assert a.points()[0].id == hashlib.sha1(b'{"router.alpha": 0.5, "seed": 3}').hexdigest()[:12]


def test_model_path_expands_a_preset() -> None:
    spec = sweep_from_dict({"base": "ep8-hot-expert", "set": {"model": "deepseek-v3", **TINY},
                            "grid": {"model.topk_group": [2, 8]}})
    scns = [point_scenario(spec, p) for p in spec.points()]
    assert [s.model.topk_group for s in scns] == [2, 8]
    assert {s.model.n_group for s in scns} == {8}


@pytest.mark.parametrize("path", ["router.alfa", "rooter.alpha", "fabric.params.foo",
                                  "model.hidden", "seed.x", "workload.ep.x"])
def test_unknown_path_is_a_config_error_naming_it(path: str) -> None:
    with pytest.raises(ConfigError) as err:
        sweep_from_dict({"base": "ep8-balanced", "grid": {path: [1, 2]}})
    assert err.value.field == path


def test_known_paths_pass() -> None:
    for path in ("seed", "router.kind", "fabric.params.oversubscription", "fabric.pxn",
                 "placement.gpu_stride", "model.n_group", "hardware.slow_gpus.3",
                 "fabric.faults", "layout.ep", "mode"):
        assert check_path(path) == path
    data: dict[str, object] = {}
    set_path(data, "hardware.slow_gpus.3", 1.5)
    assert data == {"hardware": {"slow_gpus": {3: 1.5}}}


def test_old_language_paths_set_their_new_fields() -> None:
    """Sweep files written for the old layer-stack language keep their columns."""
    for path in ("workload.ep", "workload.gpu_stride", "slow_gpus.3", "gpu"):
        assert check_path(path) == path
    data: dict[str, object] = {}
    set_path(data, "slow_gpus.3", 1.5)
    set_path(data, "workload.ep", 4)
    set_path(data, "workload.gpu_stride", 2)
    assert data == {"hardware": {"slow_gpus": {3: 1.5}}, "layout": {"ep": 4, "dp": 4},
                    "placement": {"gpu_stride": 2}}


@pytest.mark.parametrize("bad, field", [
    ({"zip": {"router.alpha": [0, 1], "seed": [1]}}, "sweep.zip"),
    ({"seeds": {"count": 0}}, "sweep.seeds"),
    ({"seeds": [1.5]}, "sweep.seeds"),
    ({"grid": {"router.alpha": []}}, "sweep.grid.router.alpha"),
    ({"grid": {"seed": [1]}, "seeds": [1, 2]}, "seed"),
    ({"grid": {"router.alpha": [1, 1]}}, "sweep"),
    ({"gird": {}}, "sweep.gird"),
    ({"set": {"router.kind": "zip"}}, "router.kind"),
    ({"base": "no-such-scenario"}, "sweep.base"),
])
def test_bad_sweep_files_name_the_field(bad: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        sweep_from_dict({"base": "ep8-balanced", **bad})
    assert err.value.field == field


def test_relative_base_resolves_next_to_the_sweep_file(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump({"model": "mixtral-8x7b", "seed": 9}))
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"base": "mine.yaml", "seeds": [1]}))
    spec = load_sweep_file(tmp_path / "s.yaml")
    assert spec.name == "s" and spec.scenario["seed"] == 9


def test_shipped_sweeps_parse() -> None:
    files = sorted(SWEEP_DIR.glob("*.yaml"))
    assert {f.stem for f in files} >= {"imbalance-zipf", "imbalance-hot", "imbalance-mitigations",
                                       "congestion-oversub"}
    for f in files:
        spec = load_sweep_file(f)
        for p in spec.points():
            point_scenario(spec, p)


def test_format_value() -> None:
    assert [format_value(v) for v in (None, True, 0.1, 3, "ecmp", [1, 2])] == [
        "", "true", "0.1", "3", "ecmp", "[1, 2]"]


def test_summary_groups_seeds_and_skips_failures() -> None:
    rows = [{"a": "x", "seed": str(s), "step_time_s": str(float(s)), "error": ""}
            for s in range(1, 101)]
    rows.append({"a": "x", "seed": "0", "step_time_s": "", "error": "ConfigError: boom"})
    rows.append({"a": "y", "seed": "1", "step_time_s": "7.0", "error": ""})
    out = summarize(rows, ("a",), metrics=("step_time_s",))
    assert [o["a"] for o in out] == ["x", "y"]
    assert (out[0]["n"], out[0]["failed"]) == (100, 1)
    assert out[0]["step_time_s_mean"] == pytest.approx(50.5)
    assert out[0]["step_time_s_p50"] == pytest.approx(50.5)
    assert out[0]["step_time_s_p99"] == pytest.approx(1 + 0.99 * 99)  # linear interpolation
    assert out[1]["step_time_s_p99"] == 7.0
