"""moesim.io: limits, safe readers and atomic outputs refuse hostile input with one ConfigError."""

from __future__ import annotations

import doctest
import importlib
import os
import stat
from pathlib import Path

import pytest

from moesim.errors import ConfigError
from moesim.io import (
    LIMITS,
    check_limit,
    check_outputs,
    load_json_text,
    load_yaml_text,
    read_json,
    read_text,
    read_yaml,
    short,
    write_atomic,
)


def _bomb(levels: int, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("module", ["limits", "quote"])
def test_doctests(module: str) -> None:
    assert doctest.testmod(importlib.import_module(f"moesim.io.{module}")).failed == 0


def test_alias_bomb_is_refused_before_it_expands() -> None:
    with pytest.raises(ConfigError, match=r"expands to more than"):
        load_yaml_text(_bomb(9), "scenario")


def test_alias_budget_counts_aliases() -> None:
    text = "a: &a 1\nb: [" + ", ".join(["*a"] * (LIMITS["yaml_aliases"].value + 1)) + "]\n"
    with pytest.raises(ConfigError, match=r"more than 64 YAML aliases"):
        load_yaml_text(text, "scenario")


def test_few_aliases_load_as_usual() -> None:
    assert load_yaml_text("x: &k {a: 1}\ny: *k\n", "s") == {"x": {"a": 1}, "y": {"a": 1}}


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"recursive"):
        load_yaml_text("a: &a [1, *a]\n", "scenario")


@pytest.mark.parametrize("text", ["[" * 40 + "]" * 40, "a:\n" + "".join(
    "  " * i + "b:\n" for i in range(1, 40)) + "  " * 40 + "c: 1\n", "[" * 100_000])
def test_deep_yaml_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match=r"scenario: .*(nested|not valid)"):
        load_yaml_text(text, "scenario")


def test_deep_json_is_refused_without_recursing() -> None:
    with pytest.raises(ConfigError, match=r"nested deeper than 32"):
        load_json_text("[" * 200_000 + "]" * 200_000, "model.path")
    assert load_json_text('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', "m") == {
        "a": "[" * 38}


def test_json_nan_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"model.path: NaN is not a JSON number"):
        load_json_text('{"hidden_size": NaN}', "model.path")


@pytest.mark.parametrize("data, problem", [
    ("name: x\n".encode("utf-16"), "UTF-16"),
    ("name: café\n".encode("latin-1"), "not UTF-8"),
    (bytes(range(256)), "NUL|not UTF-8"),
])
def test_text_that_is_not_utf8_is_refused(tmp_path: Path, data: bytes, problem: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError, match=problem):
        read_yaml(path, "scenario")


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes("\ufeffname: café\n".encode())
    assert read_yaml(path, "scenario") == {"name": "café"}


def test_devices_fifos_and_folders_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", fifo, tmp_path):
        with pytest.raises(ConfigError, match=r"not a regular file|a directory"):
            read_text(path, "model.path")


def test_oversized_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (LIMITS["file_bytes"].value + 1))
    with pytest.raises(ConfigError, match=r"over the limit"):
        read_json(path, "model.path")


def test_limits_refuse_big_and_non_finite_numbers() -> None:
    assert check_limit("gpus", 4096, "gpus") == 4096
    for value in (10**9, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match=r"^gpus: "):
            check_limit("gpus", value, "gpus")


def test_short_quotes_a_prefix() -> None:
    assert len(short("x" * 10**6)) < 80
    assert len(short(list(range(10**6)))) <= 60


def test_output_that_is_an_input_is_refused_even_through_a_symlink(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("name: s\n")
    link = tmp_path / "link.json"
    link.symlink_to(scenario)
    with pytest.raises(ConfigError, match=r"--out: .* is an input"):
        check_outputs({"--out": link}, [scenario])
    with pytest.raises(ConfigError, match=r"--trace: .* is also the --out output"):
        check_outputs({"--out": tmp_path / "a.json", "--trace": tmp_path / "a.json"})
    assert scenario.read_text() == "name: s\n"


def test_unwritable_outputs_are_refused(tmp_path: Path) -> None:
    locked = tmp_path / "ro.json"
    locked.write_text("{}")
    locked.chmod(stat.S_IRUSR)
    cases = {"/nonexistent-dir/x.json": "does not exist", str(tmp_path): "is a folder",
             "/dev/null": "not a regular file"}
    if os.geteuid() != 0:
        cases[str(locked)] = "read-only"
    for path, problem in cases.items():
        with pytest.raises(ConfigError, match=problem):
            check_outputs({"--out": path})


def test_atomic_write_keeps_symlinks_and_modes(tmp_path: Path) -> None:
    target = tmp_path / "t.json"
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "l.json"
    link.symlink_to(target)
    write_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_readme_limits_table_is_the_code_s() -> None:
    from moesim.io import limits_table

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert limits_table() in readme
