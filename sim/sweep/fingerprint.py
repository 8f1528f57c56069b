"""What a sweep's rows were computed from: its base scenario and the model code and data.

Resume skips the points already in a results file, and a point's id hashes only its axis
values. Without more, a sweep resumed after its base scenario was edited, or after the model
changed, would mix rows of two models into one table. Each row therefore carries a
fingerprint, and :class:`moesim.sweep.store.ResultStore` refuses a file whose rows carry
another.

What is hashed -- what determines the numbers in a row:

- the resolved base scenario mapping (``set`` applied), so a shipped scenario file enters by
  what it says (a model given as a path to a Hugging Face ``config.json`` enters by its path);
- the code of :data:`MODEL_CODE`: engine, fabric, topologies (with their YAML presets),
  hardware, model, router, parallel layouts, workload, collectives, schedules, step, runner,
  scenario assembly, calibration constants, result records and attribution, and the sweep's
  own point expansion, point runner, rows and Monte Carlo summaries (a new module of these
  packages is in until declared out).

What is not (:data:`NOT_MODEL_CODE`): the command line, plots, text summaries, traces,
exports, timeline files, input reading and its limits, error messages, result files and
resuming, the design planner, the validation harness and its error band (sweeps run none of
them), and this module. Nor how the code is written: a module enters as its syntax tree without
docstrings (comments, docstrings and formatting do not change it), a YAML file as its parsed
data. So a new build that changes no number keeps every fingerprint, and the gallery does not
recompute its sweeps. (``ast.unparse`` may print a tree differently under another Python
minor version: a sweep resumed under another Python recomputes.)
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

FINGERPRINT_COLUMN = "fingerprint"
PACKAGE = "moesim"

MODEL_CODE = (
    "calibration", "collectives", "engine", "fabric", "hardware", "model", "parallel",
    "registry", "results", "router", "runner", "scenario", "schedule", "step", "sweep",
    "topologies", "workload",
)
"""Modules and packages of ``moesim`` whose code and data determine a sweep row's numbers."""

NOT_MODEL_CODE = (
    "api", "cli", "errors", "export", "io", "plan", "plots", "scenarios", "validate",
    "results.band", "results.group_timeline", "results.run_file", "results.step_summary",
    "results.summary", "results.timeline", "results.trace",
    "sweep.fingerprint", "sweep.runner", "sweep.store",
)
"""The rest: presentation, input/output, and tools that sweeps do not run. The most specific
entry decides (``results`` is in, ``results.trace`` out); every module must match one
(tests/test_sweep_fingerprint.py checks it)."""

DATA_SUFFIXES = (".yaml", ".yml")


def is_model_code(module: str) -> bool | None:
    """Whether ``moesim.<module>`` determines results; None when no entry names it."""
    best, inside = -1, None
    for entries, verdict in ((MODEL_CODE, True), (NOT_MODEL_CODE, False)):
        for entry in entries:
            if (module == entry or module.startswith(entry + ".")) and len(entry) > best:
                best, inside = len(entry), verdict
    return inside


def installed(entry: str) -> Path | None:
    """Where ``moesim.<entry>`` lives: a package's folder or a module's file (None: absent)."""
    spec = importlib.util.find_spec(f"{PACKAGE}.{entry}")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent if spec.submodule_search_locations else Path(spec.origin)


def source_files(
    locate: Callable[[str], Path | None] = installed,
) -> Iterator[tuple[str, Path]]:
    """(dotted name under moesim, file) of every Python module and YAML file of the model code,
    in name order; ``locate`` finds each entry of :data:`MODEL_CODE`."""
    found: dict[str, Path] = {}
    for entry in MODEL_CODE:
        where = locate(entry)
        if where is None:
            continue
        if where.is_dir():
            for path in where.rglob("*"):
                if path.suffix in (".py", *DATA_SUFFIXES) and "__pycache__" not in path.parts:
                    rel = ".".join(path.relative_to(where).with_suffix("").parts)
                    found[f"{entry}.{rel}"] = path
        else:
            found[entry] = where
    for name in sorted(found):
        if is_model_code(name.removesuffix(".__init__")):
            yield name, found[name]


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def canonical(path: Path) -> str:
    """What a file says, not how it is written: a module's code without comments, docstrings
    or formatting (``ast.unparse``); a YAML file's data as sorted JSON."""
    text = path.read_text(encoding="utf-8")
    if path.suffix in DATA_SUFFIXES:
        return json.dumps(yaml.safe_load(text), sort_keys=True, default=str)
    return ast.unparse(_strip_docstrings(ast.parse(text, filename=str(path))))


def files_sha(files: Iterable[tuple[str, Path]]) -> str:
    """SHA-256 over (name, canonical form) of ``files``."""
    h = hashlib.sha256()
    for name, path in files:
        h.update(f"{name}\0{canonical(path)}\0".encode())
    return h.hexdigest()


@lru_cache(maxsize=1)
def code_sha() -> str:
    """SHA-256 of the installed model code and data (about 0.8 s; once per process)."""
    return files_sha(source_files())


def sweep_fingerprint(base: Mapping[str, Any]) -> str:
    """12 hex digits naming the base scenario mapping (``set`` applied; keys sorted) and the
    model code. A model given as a path to a Hugging Face ``config.json`` enters by its path,
    not its contents."""
    text = json.dumps(base, sort_keys=True, default=str)
    return hashlib.sha256(f"{code_sha()}\0{text}".encode()).hexdigest()[:12]
