"""Design tool: candidates with reasons, any GPU count, the JSON record, simulated ranking,
the design's step against `moesim step`, bad input."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from moesim.cli.design import design as design_cmd
from moesim.cli.design import plan
from moesim.cli.main import main
from moesim.errors import ConfigError
from moesim.fabric.build import build_graph
from moesim.hardware import get_gpu
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.plan.bom import FAILURES_PER_GPU_DAY, bill_of_materials
from moesim.plan.candidates import check_layout, enumerate_candidates
from moesim.plan.cluster import fabric_spec, max_rail_gpus, rail_fabric, tiers_for
from moesim.plan.design import DesignResult, design
from moesim.plan.prepare import load_model, prepare
from moesim.plan.prices import Prices
from moesim.plan.record import band_width, to_record, within
from moesim.plan.report import to_markdown
from moesim.plan.sizing import SU_GPUS, size_cluster
from moesim.plan.spec import DesignSpec, nearest_batch

DATA = Path(__file__).parent / "data" / "design"
# Mixtral 8x7B's layer shapes, 4 layers (tests/data/design): real GEMMs, quick to simulate
SMALL = DesignSpec(model=str(DATA / "mixtral-4l.json"), gpus=64, gpu="H100", global_batch=256,
                   simulate_min=4, simulate_max=6, max_tp=1, max_cp=1)


def test_rejections_say_why() -> None:
    spec = DesignSpec(gpus=4096)
    model, gpu = get_model("moe-1t"), get_gpu("H200")
    no_fit = check_layout(spec, model, gpu, ParallelLayout(dp=4096))
    assert not no_fit.fits and "GiB per GPU" in no_fit.reason
    vpp = check_layout(spec, model, gpu, ParallelLayout(pp=2, vpp=2, dp=2048))
    assert not vpp.fits and "does not divide 61 layers" in vpp.reason
    ep = check_layout(DesignSpec(model="mixtral-8x7b", gpus=64), get_model("mixtral-8x7b"),
                      gpu, ParallelLayout(ep=16, dp=64))
    assert not ep.fits and "8 experts do not divide over ep=16" in ep.reason


def test_nearest_batch() -> None:
    assert nearest_batch(16384, 128) == 16384
    assert nearest_batch(16384, 125) == 16375  # 131 x 125; 132 x 125 = 16500 is farther
    assert nearest_batch(16384, 250) == 16500  # 16250 is 134 away, 16500 is 116
    assert nearest_batch(100, 3000) == 3000  # at least one micro-batch per replica


def test_any_count_gets_a_divisible_batch() -> None:
    """1000 GPUs: each layout takes the multiple of dp nearest 16384 sequences; moe-1t fits
    no layout of all 1000 (dp has the odd factor 125, so no EP degree divides it), and the
    design uses the largest whole-host count below that has one."""
    spec = DesignSpec(gpus=1000)
    model, gpu = get_model("moe-1t"), get_gpu("H200")
    assert not any(c.fits for c in enumerate_candidates(spec, model, gpu, 8, 1000))
    prep = prepare(spec, model, gpu, 1000)
    assert prep.asked_gpus == 1000 and 500 <= prep.gpus < 1000 and prep.gpus % 8 == 0
    assert "idle" in prep.why_fewer and prep.ranked
    for r in prep.ranked:
        c = r.cand
        assert c.layout.world_size == prep.gpus
        assert c.global_batch % c.layout.dp == 0
        assert abs(c.global_batch - 16384) <= c.layout.dp / 2
        assert c.num_microbatches == c.global_batch // c.layout.dp


@pytest.mark.parametrize("gpus, tiers", [(512, 2), (1000, 2), (2048, 2), (3072, 3),
                                         (16384, 3)])
def test_rail_fabric_for_any_count(gpus: int, tiers: int) -> None:
    fs = rail_fabric(gpus, "H200", nic_gbit=800, oversubscription=2.0)
    params = dict(fs.params)
    assert params["hosts"] == gpus // 8 and params["tiers"] == tiers == tiers_for(gpus // 8)
    if gpus <= 3072:  # building 16,384 GPUs takes a second or two: the sizes suffice
        g = build_graph(fs)
        assert sum(1 for _, k in g.nodes(data="kind") if k == "gpu") == gpus
        leaf_up = sum(d["bw_GBps"] for _, _, d in g.out_edges("leaf.r0.su0", data=True)
                      if d["tier"] == "leaf_spine")
        assert leaf_up == pytest.approx(32 * 100.0 / 2.0)  # 32 NICs x 800 Gb/s / 2:1


def test_gb200_builds_nvl72_racks() -> None:
    fs = fabric_spec("auto", 1152 + 72, "GB200")
    assert dict(fs.params)["racks"] == 17 and dict(fs.params)["tiers"] == 3
    g = build_graph(fabric_spec("auto", 144, "GB200"))
    assert g.graph["nvlink_domain_size"] == 72
    assert sum(1 for _, k in g.nodes(data="kind") if k == "gpu") == 144
    with pytest.raises(ConfigError, match="NVL72 racks"):
        fabric_spec("auto", 100, "GB200")


def test_b200_what_if_brings_its_nvlink_and_price() -> None:
    g = build_graph(rail_fabric(64, "B200"))
    assert g.edges["h0/gpu0", "h0/nvsw"]["bw_GBps"] == 900.0
    h200 = build_graph(rail_fabric(64, "H200"))
    assert h200.edges["h0/gpu0", "h0/nvsw"]["bw_GBps"] == 450.0
    model = get_model("mixtral-8x7b")
    b200 = bill_of_materials(g, 64, get_gpu("B200"), model)
    assert b200.cost_usd["hosts"] == 8 * Prices().host("B200")
    assert b200.power_mw > bill_of_materials(h200, 64, get_gpu("H200"), model).power_mw


@pytest.mark.parametrize("gpus", [7, 12, 0, max_rail_gpus() + 8])
def test_impossible_counts_one_line_exit_2(gpus: int) -> None:
    out = CliRunner().invoke(main, ["design", "--gpus", str(gpus)])
    assert out.exit_code == 2, out.output
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and "gpus" in lines[0] and "Traceback" not in out.output


@pytest.fixture(scope="module")
def small_result() -> DesignResult:
    return design(SMALL, jobs=1)


def test_small_design_record(small_result: DesignResult) -> None:
    rec = to_record(small_result)
    for key in ("chosen_gpus", "goodput", "days_to_train", "error_band", "megatron_args",
                "candidates", "bill_of_materials", "layout", "memory_gib_per_gpu"):
        assert key in rec
    assert rec["chosen_gpus"] == 64
    assert isinstance(rec["megatron_args"], list)
    assert rec["bill_of_materials"]["cost_usd"]["total"] > 0
    sims = [c for c in rec["candidates"] if c["simulated_step_s"] is not None]
    assert 4 <= len(sims) <= 6 and rec["simulated_count"] == len(sims)
    assert all(c["estimate_step_s"] > 0 for c in rec["candidates"])
    assert rec["step_time_s"] == sims[0]["simulated_step_s"] == rec["simulated_step_s"]
    per_token = [c["simulated_step_s"] / c["global_batch"] for c in sims]
    assert per_token == sorted(per_token)  # the chosen one is the fastest per token
    assert 0 < rec["goodput"] < 1
    assert rec["days_to_train"] == pytest.approx(rec["ideal_days"] / rec["goodput"])
    json.dumps(rec)


def test_small_design_report(small_result: DesignResult) -> None:
    rec = to_record(small_result)
    text = to_markdown(rec)
    assert "**64 GPUs**: pinned by --gpus" in text
    assert "## Why this layout" in text and "runner-up" in text
    assert "## Bill of materials" in text and "$" in text
    assert "same models ran" not in text  # the old validation sentence is gone
    assert " ".join(rec["megatron_args"][:4]) in text


def test_design_step_is_moesim_step(small_result: DesignResult, tmp_path: Path) -> None:
    """The chosen layout's step scenario through `moesim step --mode fast`: within 1 %."""
    rec = to_record(small_result)
    path = tmp_path / "chosen.yaml"
    path.write_text(yaml.safe_dump(rec["step_scenario"]))
    out = CliRunner().invoke(main, ["step", str(path), "--mode", "fast", "--json"])
    assert out.exit_code == 0, out.output
    step = json.loads(out.output)["step_time_s"]
    assert rec["simulated_step_s"] == pytest.approx(step, rel=0.01)


def test_sizing_takes_the_fewest_units_that_meet_the_goal() -> None:
    """20T tokens in 10 days of the 4-layer Mixtral: 768 GPUs meet it by estimate, 512 not."""
    spec = DesignSpec(model=SMALL.model, gpu="H100", tokens=20e12, days=10, global_batch=1024,
                      max_tp=1, max_cp=1)
    model, gpu = load_model(spec.model), get_gpu("H100")
    sz = size_cluster(spec, model, gpu, lambda _: None)
    assert sz.gpus % SU_GPUS == 0 and sz.prepared.gpus == sz.gpus
    assert sz.tried[sz.gpus] is not None and sz.tried[sz.gpus] <= 10
    below = sz.tried.get(sz.gpus - SU_GPUS)
    assert below is None or below > 10
    assert sz.gpus - SU_GPUS in sz.tried  # the unit below was tried and missed
    budget = size_cluster(DesignSpec(model=SMALL.model, gpu="H100", gpu_budget=300,
                                     max_tp=1, max_cp=1), model, gpu, lambda _: None)
    assert budget.gpus == 296 and "budget" in budget.reason


def test_tied_within_the_band() -> None:
    assert within(10.0, 10.05, 0.01) is True
    assert within(10.0, 10.2, 0.01) is False
    assert within(10.0, 10.0, None) is None and within(10.0, 10.0, float("nan")) is None
    assert band_width({"low_rel": -0.02, "high_rel": 0.05}) == pytest.approx(0.07)
    assert band_width(None) is None and band_width({"low_rel": None, "high_rel": None}) is None


def test_out_writes_report_record_and_figure(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["design", "--model", SMALL.model, "--gpus", "64",
                                    "--gpu", "H100", "--global-batch", "256",
                                    "--simulate-min", "2", "--simulate-max", "2",
                                    "--max-tp", "1", "--max-cp", "1", "-j", "1",
                                    "--out", str(tmp_path / "d.md")])
    assert out.exit_code == 0, out.output
    rec = json.loads((tmp_path / "d.json").read_text())
    assert (tmp_path / "d.png").stat().st_size > 10_000
    assert (tmp_path / "d.md").read_text() == to_markdown(rec)


def test_bad_input_raises_config_error() -> None:
    with pytest.raises(ConfigError):
        DesignSpec(gpus=0)
    with pytest.raises(ConfigError):
        design(DesignSpec(model="mixtral-8x7b", gpus=64, gpu="H800", fabric="hgx-h800"))


@pytest.mark.parametrize("args, field", [
    (["--model", "no-such-model", "--gpus", "64"], "model"),
    (["--fabric", "nope", "--gpus", "64"], "fabric"),
    (["--gpus", "64", "--nic-gbit", "300"], "nic_gbit"),
    (["--gpus", "64", "--gpu", "GB200"], "gpu"),
])
def test_bad_input_exit_2(args: list[str], field: str) -> None:
    out = CliRunner().invoke(design_cmd, args)
    assert out.exit_code == 2
    assert field in out.output


def test_bad_model_file_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 1024}))
    out = CliRunner().invoke(design_cmd, ["--model", str(cfg), "--gpus", "64"])
    assert out.exit_code == 2 and "model." in out.output


def test_plan_commands() -> None:
    r = CliRunner()
    out = r.invoke(plan, ["accounting", "--model", "deepseek-v3"])
    assert out.exit_code == 0 and "total 671" in out.output
    out = r.invoke(plan, ["memory", "--model", "mixtral-8x7b", "--gpu", "H800", "--ep", "8",
                          "--dp", "8", "--pp", "4", "--global-batch", "64"])
    assert out.exit_code == 0 and "total" in out.output
    out = r.invoke(plan, ["memory", "--model", "mixtral-8x7b", "--ep", "3", "--dp", "3"])
    assert out.exit_code == 2


def test_failure_rate_from_llama3() -> None:
    assert pytest.approx(419 / (54 * 16384)) == FAILURES_PER_GPU_DAY


def test_inline_pool_and_dask_simulate_the_same_steps() -> None:
    """-j 1, -j 2 and --dask ADDRESS run the same candidates to the same simulated steps."""
    distributed = pytest.importorskip("distributed")
    spec = dataclasses.replace(SMALL, simulate_min=2, simulate_max=2)

    def steps(**kw: object) -> list[tuple[str, float]]:
        res = design(spec, **kw)  # type: ignore[arg-type]
        return [(r.cand.name, r.step_time_s) for r in res.simulated]

    inline = steps(jobs=1)
    assert len(inline) == 2 and steps(jobs=2) == inline
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        assert steps(dask=cluster.scheduler_address) == inline
