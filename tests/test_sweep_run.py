"""Running sweeps: resume after a kill, failures recorded, same rows on every executor."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from moesim.cli.sweep import sweep
from moesim.sweep import load_sweep_file, read_rows, run_sweep, summary_path, sweep_from_dict
from moesim.sweep.row import ID_COLUMN, row_columns

ROOT = Path(__file__).resolve().parent.parent
TINY = {"workload.layers": 1, "workload.backward": False, "workload.tokens_per_rank": 512}
SPEC = {"base": "ep8-hot-expert", "set": TINY, "grid": {"router.hot_factor": [1.0, 4.0]},
        "seeds": {"count": 3, "start": 1}}


def _ids(path: Path) -> list[str]:
    return [r[ID_COLUMN] for r in read_rows(path)]


def _by_id(path: Path) -> dict[str, dict[str, str]]:
    return {r[ID_COLUMN]: r for r in read_rows(path)}


def test_stop_and_resume_runs_every_point_once(tmp_path: Path) -> None:
    spec = sweep_from_dict(SPEC)
    out = tmp_path / "r.csv"
    first = run_sweep(spec, out, max_points=2)
    assert (first.ran, first.complete, first.summary) == (2, False, None)
    assert len(_ids(out)) == 2
    second = run_sweep(spec, out)
    assert (second.skipped, second.ran, second.complete) == (2, 4, True)
    assert sorted(_ids(out)) == sorted(p.id for p in spec.points())
    third = run_sweep(spec, out)  # nothing left: runs nothing, appends nothing
    assert (third.ran, len(_ids(out))) == (0, 6)
    summary = list(csv.DictReader(summary_path(out).open()))
    assert [(s["router.hot_factor"], s["n"]) for s in summary] == [("1.0", "3"), ("4.0", "3")]
    assert float(summary[1]["step_time_s_p50"]) > float(summary[0]["step_time_s_p99"])


def test_killed_process_resumes_without_loss_or_repeat(tmp_path: Path) -> None:
    spec_file = tmp_path / "kill.yaml"
    many = {**SPEC, "seeds": {"count": 6, "start": 1}}
    spec_file.write_text(yaml.safe_dump(many))
    out = tmp_path / "kill.csv"
    code = "import sys; from moesim.cli.sweep import sweep; sweep.main(sys.argv[1:])"
    proc = subprocess.Popen([sys.executable, "-c", code, str(spec_file), "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while len(_ids(out)) < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    killed_at = len(_ids(out))
    assert 3 <= killed_at < 12, "the kill should land mid-sweep"
    with out.open("a") as f:  # as if the kill had cut a row in half
        f.write("deadbeef0000,1.0,7,0.001")
    done = run_sweep(load_sweep_file(spec_file), out, jobs=2)
    ids = _ids(out)
    assert done.complete and done.ran == 12 - killed_at
    assert len(ids) == len(set(ids)) == 12
    assert set(ids) == {p.id for p in load_sweep_file(spec_file).points()}


def test_failing_point_is_recorded_and_the_rest_complete(tmp_path: Path) -> None:
    spec = sweep_from_dict({**SPEC, "grid": {"workload.ep": [8, 3, 4]}, "seeds": [1]})
    out = tmp_path / "f.csv"
    done = run_sweep(spec, out, jobs=2)
    assert (done.ran, done.failed, done.complete) == (3, 1, True)
    rows = _by_id(out)
    bad = [r for r in rows.values() if r["error"]]
    assert [r["workload.ep"] for r in bad] == ["3"]
    # the old path's column stays; the error names where the one language keeps the field
    assert "layout.ep" in bad[0]["error"] and bad[0]["step_time_s"] == ""
    assert all(float(r["step_time_s"]) > 0 for r in rows.values() if not r["error"])
    assert run_sweep(spec, out).ran == 0  # a recorded failure counts as done


def test_pool_inline_and_dask_give_the_same_rows(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    spec = sweep_from_dict({**SPEC, "seeds": [1, 2]})
    run_sweep(spec, tmp_path / "inline.csv", jobs=1)
    run_sweep(spec, tmp_path / "pool.csv", jobs=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        done = run_sweep(spec, tmp_path / "dask.csv", dask_address=cluster.scheduler_address)
    assert done.complete and done.ran == 4
    inline, pool, dask = (_by_id(tmp_path / f"{n}.csv") for n in ("inline", "pool", "dask"))
    assert len(inline) == 4
    assert inline == pool == dask


def test_other_sweeps_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    out.write_text(",".join(row_columns(("router.alpha",))) + "\n")
    from moesim.errors import ConfigError
    with pytest.raises(ConfigError, match="different sweep"):
        run_sweep(sweep_from_dict(SPEC), out)


def test_rows_from_another_base_or_build_are_not_resumed(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Point ids hash the axis values only: a file computed from another base scenario, or by
    another moesim build, is refused instead of being resumed into a mixed table."""
    import moesim.sweep.fingerprint as fp
    from moesim.errors import ConfigError

    out = tmp_path / "r.csv"
    run_sweep(sweep_from_dict(SPEC), out, max_points=2)
    stamped = {r["fingerprint"] for r in read_rows(out)}
    assert stamped == {fp.sweep_fingerprint(sweep_from_dict(SPEC).scenario)}
    edited = {**SPEC, "set": {**TINY, "workload.tokens_per_rank": 256}}
    with pytest.raises(ConfigError, match="another base scenario or moesim build"):
        run_sweep(sweep_from_dict(edited), out)
    monkeypatch.setattr(fp, "code_sha", lambda: "a different build")
    with pytest.raises(ConfigError, match=r"fingerprint [0-9a-f]{12}, now [0-9a-f]{12}"):
        run_sweep(sweep_from_dict(SPEC), out)
    monkeypatch.undo()
    assert run_sweep(sweep_from_dict(SPEC), out).skipped == 2  # same base, same build
    spec_file = tmp_path / "e.yaml"
    spec_file.write_text(yaml.safe_dump(edited))
    cli = CliRunner().invoke(sweep, [str(spec_file), "--out", str(out)])
    assert cli.exit_code == 2 and "another base scenario" in cli.output
    assert "Traceback" not in cli.output


def test_cli_runs_resumes_and_reports(tmp_path: Path) -> None:
    spec_file = tmp_path / "c.yaml"
    spec_file.write_text(yaml.safe_dump({**SPEC, "seeds": [1]}))
    out = tmp_path / "c.csv"
    runner = CliRunner()
    first = runner.invoke(sweep, [str(spec_file), "--out", str(out), "-j", "2"])
    assert first.exit_code == 0, first.output
    assert "2 run now" in first.output and "c.summary.csv" in first.output
    assert "step p50 ms" in first.output
    again = runner.invoke(sweep, [str(spec_file), "--out", str(out)])
    assert "2 already in" in again.output and "0 run now" in again.output
    bad = runner.invoke(sweep, ["no-such-sweep"])
    assert bad.exit_code == 2 and "unknown 'no-such-sweep'" in bad.output
    spec_file.write_text(yaml.safe_dump({**SPEC, "grid": {"router.alfa": [1]}}))
    typo = runner.invoke(sweep, [str(spec_file), "--out", str(tmp_path / "t.csv")])
    assert typo.exit_code == 2 and "router.alfa" in typo.output


def test_parquet_written_when_pyarrow_is_installed(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    done = run_sweep(sweep_from_dict({**SPEC, "seeds": [1]}), tmp_path / "p.csv")
    assert done.parquet == tmp_path / "p.parquet"
    assert pq.read_table(done.parquet).num_rows == 2
