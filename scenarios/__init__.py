"""Shipped scenario files (YAML) and a registry that resolves them by name or path.

Layer-stack scenarios (``moesim run``) live here; whole-step scenarios (``moesim step``) in
``steps/``; sweeps in ``sweeps/``.

>>> "ep8-balanced" in scenario_names()
True
>>> "mixtral-64xh100" in scenario_names("steps")
True
"""

from __future__ import annotations

from pathlib import Path

if __name__ != "moesim.scenarios":  # scenarios/ is not a top-level name
    raise ImportError("import moesim.scenarios: moesim installs scenarios/ under its own name")

SCENARIO_DIR = Path(__file__).resolve().parent
KINDS = ("", "steps")  # subfolder of each kind of scenario


class UnknownScenario(ValueError):
    """Neither a shipped scenario name nor a readable file."""


def scenario_names(kind: str = "") -> list[str]:
    """Names of the shipped scenarios of ``kind`` ("" layer stacks, "steps") as file stems."""
    return sorted(p.stem for p in (SCENARIO_DIR / kind).glob("*.yaml"))


def resolve(name_or_path: str, kind: str = "") -> Path:
    """The YAML file for a shipped scenario name of ``kind``, or the given path if it exists."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    shipped = SCENARIO_DIR / kind / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    raise UnknownScenario(
        f"scenario: unknown '{name_or_path}'; give a YAML path or one of: "
        + ", ".join(scenario_names(kind))
    )
