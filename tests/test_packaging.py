"""moesim installs under one import name: the card's folders map to moesim.* and nothing
generic (sim, topologies, scenarios, plots) is importable at the top level."""

from __future__ import annotations

import subprocess
import sys
import tomllib
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


def test_every_folder_with_python_is_a_declared_package() -> None:
    _, packages = _declared()
    found = set()
    for name, folder in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((name, *parts)))
        for py in (ROOT / folder).rglob("*.py"):
            assert (py.parent / "__init__.py").is_file(), f"{py} is outside a package"
    assert sorted(found) == sorted(packages)


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
