"""Shipped scenario files (YAML) and a registry that resolves them by name or path.

>>> "ep8-balanced" in scenario_names()
True
"""

from __future__ import annotations

from pathlib import Path

SCENARIO_DIR = Path(__file__).resolve().parent


class UnknownScenario(ValueError):
    """Neither a shipped scenario name nor a readable file."""


def scenario_names() -> list[str]:
    """Names of the shipped scenarios (file stems)."""
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
