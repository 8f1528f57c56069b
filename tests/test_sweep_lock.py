"""One sweep per results file; rows of another base never join; outputs never replace inputs."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from malformed_run import SCENARIO

import moesim.io.outputs as outputs
from moesim.cli import main
from moesim.errors import ConfigError
from moesim.sweep import read_rows, run_sweep, sweep_from_dict
from moesim.sweep.lock import lock_path, results_lock
from moesim.sweep.row import ID_COLUMN, row_columns
from moesim.sweep.store import ResultStore

TINY = {"workload.layers": 1, "workload.backward": False, "workload.tokens_per_rank": 512}
SPEC = {"base": "ep8-hot-expert", "set": TINY, "grid": {"router.hot_factor": [1.0, 4.0]}}


def _spec_file(tmp_path: Path, spec: dict[str, object], name: str = "sw.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return path


def test_second_sweep_on_a_locked_results_file_exits_2_naming_the_owner(tmp_path: Path) -> None:
    spec, out = _spec_file(tmp_path, SPEC), tmp_path / "r.csv"
    with results_lock(out):
        res = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out)])
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1
    assert f"pid {os.getpid()} on host '{socket.gethostname()}'" in res.stderr
    assert not out.exists()
    assert not lock_path(out).exists()  # released by its owner


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    dead_pid = 2**22 + 12345  # above Linux's default pid_max: no such process
    lock_path(out).write_text(json.dumps({"pid": dead_pid, "host": socket.gethostname(),
                                          "started": "earlier"}))
    done = run_sweep(sweep_from_dict(SPEC), out)
    assert done.complete and done.ran == 2
    assert not lock_path(out).exists()


def test_lock_of_another_host_is_not_guessed_at(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    lock_path(out).write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": "x"}))
    with pytest.raises(ConfigError, match="locked by pid 1 on host 'elsewhere'"):
        run_sweep(sweep_from_dict(SPEC), out)


def test_rows_are_checked_as_they_are_appended(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    columns = row_columns(("router.hot_factor",))
    row = {ID_COLUMN: "p1", "router.hot_factor": "1.0", "error": ""}
    with ResultStore(out, columns, "aaaaaaaaaaaa") as store:
        assert store.append(row)
        assert not store.append(row)  # the same point is never written twice
        with pytest.raises(ConfigError, match="fingerprint 'bbbbbbbbbbbb'"):
            store.append({**row, ID_COLUMN: "p2", "fingerprint": "bbbbbbbbbbbb"})
        with out.open("a") as other:  # another writer, past the lock (e.g. another host)
            other.write(",".join(["p3", "2.0", *[""] * (len(columns) - 3), "cccccccccccc"]) + "\n")
        with pytest.raises(ConfigError, match="another writer added rows of fingerprint cccc"):
            store.append({**row, ID_COLUMN: "p4"})
    assert [r[ID_COLUMN] for r in read_rows(out)] == ["p1", "p3"]


def test_same_spec_twice_does_not_duplicate_points(tmp_path: Path) -> None:
    spec, out = sweep_from_dict(SPEC), tmp_path / "r.csv"
    run_sweep(spec, out)
    again = run_sweep(spec, out)
    assert again.ran == 0 and len(read_rows(out)) == 2


def test_sweep_whose_points_all_fail_exits_2(tmp_path: Path) -> None:
    spec = _spec_file(tmp_path, {**SPEC, "grid": {"router.hot_factor": [-1.0, -2.0]}})
    res = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(tmp_path / "r.csv")])
    assert res.exit_code == 2
    assert res.stderr.rstrip().rsplit("\r", 1)[-1].replace("\x1b[2K", "").startswith(
        "moesim: router.hot_factor: ")


@pytest.mark.parametrize(("seeds", "problem"), [([-1, 2], "seeds must be >= 0"),
                                                ({"count": 10**9}, "over the limit")])
def test_bad_seeds_are_refused_before_any_point_runs(seeds: object, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        sweep_from_dict({**SPEC, "seeds": seeds})


def test_sweep_outputs_never_replace_its_inputs(tmp_path: Path) -> None:
    spec = _spec_file(tmp_path, SPEC)
    before = spec.read_bytes()
    runner = CliRunner()
    for out, problem in ((spec, "must end in .csv"), (tmp_path / "r.parquet", "must end in .csv")):
        res = runner.invoke(main, ["sweep", str(spec), "--out", str(out)])
        assert res.exit_code == 2 and problem in res.stderr, res.stderr
    summary_spec = _spec_file(tmp_path, SPEC, "r.summary.csv")
    res = runner.invoke(main, ["sweep", str(summary_spec), "--out", str(tmp_path / "r.csv")])
    assert res.exit_code == 2 and "is an input" in res.stderr
    assert spec.read_bytes() == before and summary_spec.read_bytes() == yaml.safe_dump(
        SPEC).encode()
    assert not (tmp_path / "r.csv").exists()


@contextlib.contextmanager
def _disk_full(path: object) -> Iterator[Path]:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    yield Path()  # pragma: no cover


def test_a_result_that_cannot_be_written_is_still_printed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    monkeypatch.setattr(outputs, "atomic_target", _disk_full)
    res = CliRunner().invoke(main, ["run", str(scenario), "--json", "--out",
                                    str(tmp_path / "r.json")])
    assert res.exit_code == 2
    assert json.loads(res.stdout)["step_time_s"] > 0
    last = res.stderr.splitlines()[-1]  # after the old-format notice of a run that answered
    assert last.startswith("moesim: --out: cannot write") and "No space" in last
    assert not (tmp_path / "r.json").exists()


def test_an_old_format_file_with_a_bad_value_still_gets_one_line(tmp_path: Path) -> None:
    """The old-format notice is shown once the run answers; an error stays the only line."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({**SCENARIO, "fabric": {"preset": "hgx-h100", "faults": [
        {"link": ["gpu0", "nowhere"], "kind": "down"}]}}))
    res = subprocess.run([sys.executable, "-m", "moesim.cli", "run", str(scenario)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [res.stderr.strip()], res.stderr
    assert res.stderr.startswith("moesim: fabric.faults[0].link: ")
