"""The Python API: ``import moesim`` stays cheap, the README's example and the docstrings' run."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
DOCTESTED = ("moesim", "moesim.api", "moesim.scenario.spec", "moesim.scenario.legacy",
             "moesim.runner.run", "moesim.scenarios", "moesim.hardware")


def test_import_moesim_loads_no_simulator() -> None:
    code = ("import sys, moesim; print(sorted(m for m in sys.modules if m.startswith('moesim')),"
            " 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['moesim'] False"


def test_unknown_attribute_is_an_attribute_error() -> None:
    import moesim

    with pytest.raises(AttributeError, match="no attribute 'simulatee'"):
        moesim.simulatee  # noqa: B018


@pytest.mark.parametrize("module", DOCTESTED)
def test_docstrings(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module))
    assert result.attempted > 0 and result.failed == 0


def test_readme_example() -> None:
    result = doctest.testfile(str(README), module_relative=False)
    assert result.attempted >= 4 and result.failed == 0
