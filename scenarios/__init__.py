"""Shipped scenario files (YAML, the one language: ``version: 2``) and a registry that
resolves them by name or path. Every scenario lives in this folder (``moesim run NAME``);
sweeps in ``sweeps/``.

>>> {"ep8-balanced", "mixtral-64xh100"} <= set(scenario_names())
True
"""

from __future__ import annotations

from pathlib import Path

if __name__ != "moesim.scenarios":  # scenarios/ is not a top-level name
    raise ImportError("import moesim.scenarios: moesim installs scenarios/ under its own name")

SCENARIO_DIR = Path(__file__).resolve().parent


class UnknownScenario(ValueError):
    """Neither a shipped scenario name nor a readable file."""


def scenario_names() -> list[str]:
    """Names of the shipped scenarios, as file stems."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.yaml"))


def resolve(name_or_path: str) -> Path:
    """The YAML file for a shipped scenario name, or the given path if it exists."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    shipped = SCENARIO_DIR / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    raise UnknownScenario(
        f"scenario: unknown '{name_or_path}'; give a YAML path or one of: "
        + ", ".join(scenario_names())
    )
