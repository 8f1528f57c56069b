"""The house's shape, checked from the source with ``ast`` (issue 17): no import circles, every
import pointing down the floors below, plots reached only lazily from the CLI, no module over
350 lines.

The floors (DESIGN.md's layering, as the code has it): a package may import packages on its
own floor or below, never above; and no two modules, nor two packages, import each other
(directly or round a longer circle). Imports inside functions and ``if TYPE_CHECKING:`` blocks
count too: a lazy import still points somewhere; so does a ``"moesim.pkg.module:name"`` string
(what ``importlib`` loads when the name is asked for: the CLI's lazy command table).
"""

from __future__ import annotations

import ast
import re
import tomllib
from functools import cache
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 350
SIZE_CHECKED = ("sim", "topologies", "scenarios", "plots", "benchmarks")

FLOORS: dict[int, tuple[str, ...]] = {
    # data, records and the engine: import nothing of the project above this floor
    0: ("errors", "io", "registry", "calibration", "engine", "hardware", "model", "router",
        "schedule", "topologies", "scenarios", "results", "plots"),
    1: ("collectives", "fabric", "parallel"),  # flows on the engine; fabrics; layouts
    2: ("workload",),  # MoE layer ops and their costs
    3: ("scenario",),  # model + hardware + fabric + layout + router + schedule
    4: ("step", "runner"),  # scenario -> simulation -> result
    5: ("plan", "sweep", "export"),  # design search; batch runs; step traces for other tools
    6: ("validate",),  # checks the model against published runs: above what it checks
    7: ("cli", "api", "moesim"),  # the command line and the Python API (moesim/__init__, api)
}
"""Packages of ``moesim`` by floor (``moesim.plots`` reads result files: floor 0)."""

PLOTS_IMPORTERS = ("cli",)
"""The only packages that may import ``moesim.plots``, and only inside functions."""

LOADER = re.compile(r"moesim(?:\.\w+)+:\w+")
"""A string naming what a module loads by ``importlib`` when asked: ``"module:name"``."""


def _folders() -> dict[str, Path]:
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {name: ROOT / folder for name, folder in setup["package-dir"].items()}


@cache
def modules() -> dict[str, Path]:
    """Every module of the installed ``moesim`` namespace -> its source file."""
    found: dict[str, Path] = {}
    for name, folder in _folders().items():
        for path in folder.rglob("*.py"):
            parts = (*name.split("."), *path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _known(name: str) -> str | None:
    """``name`` or the nearest enclosing module of the project; None outside it."""
    while name and name not in modules():
        name = name.rpartition(".")[0]
    return name or None


def _targets(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        parts = module.split(".")
        base = parts[: len(parts) - (not is_package) - max(node.level - 1, 0)]
        prefix = ".".join([*base, node.module or ""]).strip(".") if node.level else node.module
        names = [f"{prefix}.{alias.name}" for alias in node.names]
    return [t for t in map(_known, names) if t is not None and t != module]


@cache
def import_edges() -> dict[tuple[str, str], bool]:
    """(importer, imported) -> True when some import of it runs at import time (module level),
    False when all are inside functions (or in a loader string: :func:`loader_strings`)."""
    edges: dict[tuple[str, str], bool] = {}
    for module, path in modules().items():
        is_package = path.name == "__init__.py"

        def visit(node: ast.AST, in_function: bool, module: str = module,
                  is_package: bool = is_package) -> None:
            for child in ast.iter_child_nodes(node):
                lazy = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                if isinstance(child, ast.Import | ast.ImportFrom):
                    for target in _targets(module, child, is_package):
                        edges[module, target] = edges.get((module, target), False) or not lazy
                visit(child, lazy)

        visit(ast.parse(path.read_text(), filename=str(path)), False)
    for module, target in loader_strings():
        loaded = target.partition(":")[0]
        if loaded in modules():  # else test_every_loader_string_names_what_it_loads fails
            edges[module, loaded] = edges.get((module, loaded), False)
    return edges


@cache
def loader_strings() -> dict[tuple[str, str], bool]:
    """(module, ``"moesim.pkg.module:name"`` string in it) -> whether ``name`` is defined at the
    top of that module: each is a lazy import (``importlib.import_module`` when asked for)."""
    return {(module, target): defines(target) for module, path in modules().items()
            for target in strings_in(ast.parse(path.read_text(), filename=str(path)))}


def strings_in(tree: ast.AST) -> list[str]:
    """The ``"moesim.pkg.module:name"`` strings of a parsed module."""
    return [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and LOADER.fullmatch(node.value)]


def defines(target: str) -> bool:
    """Whether ``"moesim.pkg.module:name"`` names a module of the project that defines
    ``name`` at its top level (a function, class or assignment)."""
    module, _, name = target.partition(":")
    if module not in modules():
        return False
    tree = ast.parse(modules()[module].read_text())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def package(module: str) -> str:
    """``moesim.step.run`` -> ``step``; ``moesim.errors`` -> ``errors``; ``moesim`` -> itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def floor_of(pkg: str) -> int:
    floors = [f for f, names in FLOORS.items() if pkg in names]
    assert len(floors) == 1, f"package {pkg!r} needs exactly one floor in FLOORS"
    return floors[0]


def upward_imports(edges: dict[tuple[str, str], bool]) -> list[tuple[str, str]]:
    return sorted((a, b) for a, b in edges if floor_of(package(b)) > floor_of(package(a)))


def circles(pairs: object) -> list[list[str]]:
    graph = nx.DiGraph(list(pairs))  # type: ignore[call-overload]
    return [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]


def test_the_graph_sees_the_whole_project() -> None:
    mods, edges = modules(), import_edges()
    assert len(mods) > 150 and "moesim.engine.network" in mods and "moesim.topologies" in mods
    assert ("moesim.step.simulate", "moesim.engine.network") in edges  # absolute import
    assert ("moesim.cli.plot", "moesim.plots.sweep") in edges  # lazy, inside a function
    assert edges["moesim.cli.plot", "moesim.plots.sweep"] is False
    assert edges["moesim.cli.main", "moesim.cli.plot"] is False  # LAZY_COMMANDS' "module:name"


def test_every_loader_string_names_what_it_loads() -> None:
    """Each ``"module:name"`` string (the CLI's lazy commands) names a module of the project
    that defines ``name``: a typo there would only fail when a user types the command."""
    strings = loader_strings()
    assert ("moesim.cli.main", "moesim.cli.run:run") in strings
    assert [s for s, ok in strings.items() if not ok] == []


@pytest.mark.parametrize("target", ["moesim.cli.plto:plot", "moesim.cli.plot:plto",
                                    "moesim.cli.plot:click"])
def test_a_bad_loader_string_is_caught(target: str) -> None:
    """A table entry with a misspelt module, a misspelt name, or an imported (not defined)
    name is read and found wanting."""
    table = ast.parse(f'T = {{"plot": ("{target}", False), "run": ("moesim.cli.run:run", True)}}')
    assert strings_in(table) == [target, "moesim.cli.run:run"]
    assert [defines(t) for t in strings_in(table)] == [False, True]


def test_the_loader_strings_are_what_reaches_the_commands() -> None:
    """Without the loader strings' edges the command modules would look unused (so the
    reachability test below depends on reading them)."""
    loaded = {(m, t.partition(":")[0]) for m, t in loader_strings()}
    without = {e: v for e, v in import_edges().items() if e not in loaded}
    missing = set(modules()) - reached(entry_points(), without)
    assert {"moesim.cli.run", "moesim.cli.design", "moesim.cli.sweep"} <= missing


def test_every_package_has_one_floor() -> None:
    for pkg in {package(m) for m in modules()}:
        floor_of(pkg)
    named = [p for names in FLOORS.values() for p in names]
    assert len(named) == len(set(named))
    assert set(named) == {package(m) for m in modules()}


def test_no_module_imports_itself_round_a_circle() -> None:
    assert circles(import_edges()) == []


def test_no_package_imports_itself_round_a_circle() -> None:
    pairs = {(package(a), package(b)) for a, b in import_edges() if package(a) != package(b)}
    assert circles(pairs) == []


def test_every_import_points_down() -> None:
    assert upward_imports(import_edges()) == []


def test_plots_only_from_the_cli_and_lazily() -> None:
    bad = [
        (a, b, "at import time" if top else "lazily")
        for (a, b), top in import_edges().items()
        if package(b) == "plots" and package(a) != "plots"
        and (top or package(a) not in PLOTS_IMPORTERS)
    ]
    assert bad == []


@pytest.mark.parametrize(
    ("edge", "rule"),
    [
        (("moesim.engine.network", "moesim.step.run"), "upward"),
        (("moesim.step.run", "moesim.plan.design"), "upward"),
        (("moesim.plan.report", "moesim.validate.step"), "upward"),
        (("moesim.errors", "moesim.calibration.kernels"), "circle"),
    ],
)
def test_the_checks_catch_a_bad_import(edge: tuple[str, str], rule: str) -> None:
    """One deliberately added bad import is caught (so the checks above can fail)."""
    edges = {**import_edges(), edge: True}
    if rule == "upward":
        assert edge in upward_imports(edges)
    else:
        assert sorted(edge) in circles(edges)


def entry_points() -> list[str]:
    """What a user starts: the console script's module, the Python API (``moesim``) and every
    module run as ``python -m``."""
    script = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["moesim"]
    mains = [m for m, path in modules().items() if '__name__ == "__main__"' in path.read_text()]
    return [script.partition(":")[0], "moesim", *mains]


def reached(roots: list[str], edges: dict[tuple[str, str], bool]) -> set[str]:
    """Modules that importing ``roots`` can load (lazy imports included): importing ``a.b.c``
    runs ``a`` and ``a.b`` first."""
    graph = nx.DiGraph(list(edges))
    for module in modules():
        if "." in module:
            graph.add_edge(module, module.rpartition(".")[0])
    return set(roots).union(*(nx.descendants(graph, r) for r in roots if r in graph))


def test_every_module_is_reached_from_an_entry_point() -> None:
    """No production code that only tests use: tests-only helpers live in tests/."""
    roots = entry_points()
    assert "moesim.cli" in roots and "moesim.plots.gallery" in roots
    assert sorted(set(modules()) - reached(roots, import_edges())) == []
    eager = {edge: True for edge, at_import in import_edges().items() if at_import}
    assert "moesim.engine.late" not in reached(["moesim.errors"], eager)


def test_no_module_over_350_lines() -> None:
    files = [p for folder in SIZE_CHECKED for p in (ROOT / folder).rglob("*.py")]
    assert len(files) > 150
    long = {str(p.relative_to(ROOT)): n for p in files
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}
