"""The sweep fingerprint hashes what determines results: model code and data, not the CLI,
plots, wording or formatting (moesim.sweep.fingerprint)."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest
from test_layers import modules

from moesim.sweep import fingerprint as fp

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A copy of the project's package folders: dotted package name -> folder."""
    base = tmp_path_factory.mktemp("src")
    dirs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    out = {}
    for name, folder in dirs["package-dir"].items():
        out[name] = Path(shutil.copytree(ROOT / folder, base / folder,
                                         ignore=shutil.ignore_patterns("__pycache__")))
    return out


def sha(copy: dict[str, Path]) -> str:
    def locate(entry: str) -> Path | None:
        name = f"moesim.{entry}"
        if name in copy:
            return copy[name]
        package, _, rest = name.rpartition(".")
        parent = locate(package.removeprefix("moesim.")) if package != "moesim" else copy[package]
        if parent is None:
            return None
        for candidate in (parent / rest, parent / f"{rest}.py"):
            if candidate.exists():
                return candidate
        return None

    return fp.files_sha(fp.source_files(locate))


def edited(path: Path, old: str, new: str) -> str:
    """Replace the first ``old`` (a regex) in ``path``; returns the original text."""
    text = path.read_text()
    changed = re.sub(old, new, text, count=1)
    assert changed != text, f"{old!r} not in {path}"
    path.write_text(changed)
    return text


def check(copy: dict[str, Path], rel: str, old: str, new: str) -> tuple[str, str]:
    """(sha before, sha after) editing ``rel`` (under the copy of sim/ or topologies/)."""
    folder, _, inner = rel.partition("/")
    path = copy["moesim" if folder == "sim" else f"moesim.{folder}"] / inner
    before = sha(copy)
    original = edited(path, old, new)
    try:
        return before, sha(copy)
    finally:
        path.write_text(original)


def test_the_copy_hashes_like_the_installed_tree(copy: dict[str, Path]) -> None:
    assert sha(copy) == fp.code_sha()
    names = [name for name, _ in fp.source_files()]
    assert "engine.network" in names and "calibration.kernels" in names
    assert "topologies.presets.hgx-h100" in names  # YAML data
    assert not any(n.startswith(("cli", "plots", "results.trace")) for n in names)


def test_a_cli_only_change_keeps_it(copy: dict[str, Path]) -> None:
    new = "\n\ndef extra() -> int:\n    return 1\n"
    before, after = check(copy, "sim/cli/main.py", r"\n\Z", new)
    assert before == after


def test_wording_and_formatting_keep_it(copy: dict[str, Path]) -> None:
    doc = check(copy, "sim/engine/network.py", r'"""Flows on a fabric', '"""Flows, on a fabric')
    comment = check(copy, "sim/calibration/kernels.py", r"\n", "\n# a new comment\n\n")
    assert doc[0] == doc[1] and comment[0] == comment[1]


def test_a_calibration_constant_changes_it(copy: dict[str, Path]) -> None:
    before, after = check(copy, "sim/calibration/kernels.py", r"KERNEL_LAUNCH_OVERHEAD_S = 3\.0e-6",
                          "KERNEL_LAUNCH_OVERHEAD_S = 4.0e-6")
    assert before != after


def test_a_topology_preset_value_changes_it(copy: dict[str, Path]) -> None:
    preset = "topologies/presets/hgx-h100.yaml"
    before, after = check(copy, preset, r"nic_gbit: 400", "nic_gbit: 200")
    comment = check(copy, preset, r"# One HGX", "# A single HGX")
    assert comment[0] == comment[1]
    assert before != after


def test_every_module_is_declared_in_or_out() -> None:
    undeclared = [m for m in modules() if m != "moesim"
                  and fp.is_model_code(m.removeprefix("moesim.")) is None]
    assert undeclared == []
