"""moesim installs under one import name: the card's folders map to moesim.* and nothing
generic (sim, topologies, scenarios, plots) is importable at the top level."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = {"moesim": "sim", "moesim.topologies": "topologies",
           "moesim.scenarios": "scenarios", "moesim.plots": "plots"}


def _declared() -> tuple[dict[str, str], list[str]]:
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return setup["package-dir"], setup["packages"]


def test_package_dirs_map_the_card_folders() -> None:
    package_dir, _ = _declared()
    assert package_dir == FOLDERS


def _data_folders(root: Path) -> list[Path]:
    """Folders under ``root`` holding data files (YAML) and no Python."""
    return [d for d in root.rglob("*") if d.is_dir() and "__pycache__" not in d.parts
            and any(d.glob("*.yaml")) and not any(d.glob("*.py"))]


def test_every_folder_with_python_or_data_is_a_declared_package() -> None:
    """Python packages and data-only folders (presets, sweeps, configs) are each declared, so
    setuptools ships their files without its "package would be ignored" warnings."""
    _, packages = _declared()
    found = set()
    for name, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
        for py in (ROOT / folder).rglob("*.py"):
            assert (py.parent / "__init__.py").is_file(), f"{py} is outside a package"
        for data in _data_folders(ROOT / folder):
            found.add(".".join((name, *data.relative_to(ROOT / folder).parts)))
    assert sorted(found) == sorted(packages)


def test_a_built_wheel_ships_every_yaml(tmp_path: Path) -> None:
    """A (non-editable) wheel holds each data file (YAML, JSON) of the source tree under moesim/,
    and setuptools builds it without warning of folders it would ignore."""
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                          str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "would be ignored" not in out.stderr, out.stderr[-2000:]
    wheel = next(tmp_path.glob("moesim-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        shipped = {n for n in zf.namelist() if n.endswith((".yaml", ".json"))}
    wanted = set()
    for name, folder in FOLDERS.items():
        prefix = name.replace(".", "/")
        for y in [*(ROOT / folder).rglob("*.yaml"), *(ROOT / folder).rglob("*.json")]:
            wanted.add(f"{prefix}/{y.relative_to(ROOT / folder).as_posix()}")
    assert wanted <= shipped, sorted(wanted - shipped)


@pytest.mark.parametrize("name", ["sim", "topologies", "scenarios", "plots"])
def test_generic_names_are_not_importable(name: str, tmp_path: Path) -> None:
    for cwd in (tmp_path, ROOT):  # not even from the repository root
        out = subprocess.run([sys.executable, "-c", f"import {name}"], cwd=cwd,
                             capture_output=True, text=True)
        assert out.returncode != 0, (name, cwd)


def test_moesim_imports_from_anywhere(tmp_path: Path) -> None:
    code = "import moesim, moesim.topologies, moesim.scenarios; print(moesim.__version__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip()
