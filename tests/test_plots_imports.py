"""The simulator never depends on matplotlib or plots/ (only the CLI edge imports plots lazily)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("matplotlib", "moesim.plots")


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def _module_level_imports(path: Path) -> list[str]:
    """Modules imported by statements that run at import time (not inside functions)."""
    names: list[str] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                continue
            if isinstance(child, ast.Import):
                names.extend(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                names.append(child.module)
            visit(child)

    visit(ast.parse(path.read_text(), filename=str(path)))
    return names


def test_no_sim_module_imports_matplotlib_or_plots_at_import_time() -> None:
    files = sorted((ROOT / "sim").rglob("*.py"))
    assert len(files) > 20
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in files
        for name in _module_level_imports(path)
        if _forbidden(name)
    ]
    assert offenders == []


def test_no_sim_module_mentions_matplotlib() -> None:
    hits = [p for p in (ROOT / "sim").rglob("*.py") if "matplotlib" in p.read_text()]
    assert hits == []


def test_importing_every_sim_module_loads_neither() -> None:
    code = (
        "import importlib, pkgutil, sys, moesim\n"
        "for m in pkgutil.walk_packages(moesim.__path__, 'moesim.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules\n"
        "             if n.split('.')[0] == 'matplotlib' or n.startswith('moesim.plots'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "[]"
