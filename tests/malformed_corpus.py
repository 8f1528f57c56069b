"""The malformed-input corpus: a generator of inputs moesim must refuse, with expected answers.

Each :class:`Case` is a command line (``{d}`` stands for the case's own folder), the files it
reads, and the **field** its one-line error must name: for moesim's own errors the line must
start ``moesim: <field>`` (``ConfigError`` puts the field first), for click's flag errors it
must quote the flag (``'--tp'``). The corpus mutates valid inputs of every entry point:
layer-stack scenarios (``run``), step scenarios (``step``), sweep specs (``sweep``), Hugging
Face ``config.json`` files (``plan accounting`` / ``design --model``), fabric settings, and
flags of every command; plus hostile files for every reader (binary, UTF-16, Latin-1, alias
bombs, deep nesting, oversized, ``/dev/zero``, a FIFO, a folder).

The tables live by entry point: ``malformed_run`` (layer-stack scenarios), ``malformed_step``,
``malformed_sweep``, ``malformed_hf`` (``config.json``), ``malformed_files`` (hostile files),
``malformed_flags`` (command lines); ``malformed_case`` holds :class:`Case` and the helpers.
This module assembles them (:func:`build_corpus`).

``python tests/malformed_corpus.py`` prints the count per entry point.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from malformed_case import Case, set_path, yaml_bytes
from malformed_files import HOSTILE_FILES, JSON_FILES, YAML_FILES
from malformed_flags import FLAG_CASES, OK_HF, OK_S, OK_STEP, OK_SW
from malformed_hf import HF, HF_MUTATIONS, QWEN_MUTATIONS
from malformed_run import INLINE_MODEL, MODEL_MUTATIONS, SCENARIO, SCENARIO_MUTATIONS
from malformed_step import STEP, STEP_MUTATIONS
from malformed_sweep import SWEEP, SWEEP_MUTATIONS

_SWEEP_CSV = (
    b"point_id,router.alpha,seed,step_time_s,imbalance_excess_s,congestion_excess_s,"
    b"dropped_tokens,error\nabc,1,1,0.5,0.1,0.1,0,\n"
)


def _valid_files() -> dict[str, bytes]:
    """The valid inputs every case may refer to (a case's own files replace them)."""
    return {
        "s.yaml": yaml_bytes(SCENARIO),
        "step.yaml": yaml_bytes(STEP),
        "sw.yaml": yaml_bytes(SWEEP),
        "config.json": json.dumps(HF).encode(),
        "base.yaml": yaml_bytes(SCENARIO),
        "swf.yaml": yaml_bytes({**SWEEP, "base": "base.yaml"}),
        "other.csv": b"a,b\n1,2\n",
        "run.json": b"{}",
        "sweep.csv": _SWEEP_CSV,
        "list.json": b"[1, 2]",
        "keys.json": b'{"a": 1}',
        "empty.json": b"",
        "text.json": b"not json at all",
    }


def _mutated(
    prefix: str,
    argv: tuple[str, ...],
    name: str,
    base: dict[str, Any],
    table: list[tuple[str, object, str]],
    dump: Any = yaml_bytes,
) -> list[Case]:
    cases = []
    for i, (path, value, fld) in enumerate(table):
        data = dump(set_path(base, path, value))
        cases.append(Case(f"{prefix}-{i:03d}-{path}", argv, fld, {name: data}))
    return cases


SHAPE_FIELDS = {
    "topo": "preset",
    "run": "scenario",
    "step": "step",
    "sweep": "sweep",
    "sweep-base": "sweep.base",
    "hf": "model.path",
    "design-hf": "model.path",
}
"""A file of the wrong shape (a list, a scalar, nothing) is reported as the top-level field."""
SPECIAL_FIELDS = {"step": "scenario"}
"""Where a path that is no file at all is reported by the command's argument instead."""


def _file_cases(
    prefix: str, argv: tuple[str, ...], name: str, files: dict[str, bytes], fld: str
) -> list[Case]:
    cases = [
        Case(
            f"{prefix}-file-{kind}",
            argv,
            SHAPE_FIELDS[prefix] if kind in ("list", "scalar", "empty") else fld,
            {name: data},
            hostile=kind in HOSTILE_FILES,
        )
        for kind, data in files.items()
    ]
    path = "{d}/" + name
    for special, target in (
        ("devzero", "/dev/zero"),
        ("fifo", "{d}/fifo"),
        ("dir", "{d}/emptydir"),
    ):
        if prefix == "sweep-base":  # the base is named inside the sweep file
            files_ = {"swf.yaml": yaml_bytes({**SWEEP, "base": target.replace("{d}/", "")})}
            cases.append(Case(f"{prefix}-file-{special}", argv, fld, files_, hostile=True))
            continue
        swapped = tuple(target if a == path else a for a in argv)
        cases.append(
            Case(f"{prefix}-file-{special}", swapped, SPECIAL_FIELDS.get(prefix, fld), hostile=True)
        )
    return cases


def build_corpus() -> list[Case]:
    """Every malformed input, with the field its answer must name."""
    run, step = ("run", OK_S), ("step", OK_STEP)
    sweep = ("sweep", OK_SW, "--out", "{d}/r.csv")
    acct = ("plan", "accounting", "--model", OK_HF)
    inline = {**SCENARIO, "model": INLINE_MODEL}
    cases = [
        *_mutated("run", run, "s.yaml", SCENARIO, SCENARIO_MUTATIONS),
        *_mutated(
            "run-model",
            run,
            "s.yaml",
            inline,
            [(f"model.{p}", v, f) for p, v, f in MODEL_MUTATIONS],
        ),
        *_mutated("step", step, "step.yaml", STEP, STEP_MUTATIONS),
        *_mutated("sweep", sweep, "sw.yaml", SWEEP, SWEEP_MUTATIONS),
        *_mutated("hf", acct, "config.json", HF, HF_MUTATIONS, lambda d: json.dumps(d).encode()),
        *_mutated(
            "qwen",
            acct,
            "config.json",
            {**HF, "decoder_sparse_step": 1},
            QWEN_MUTATIONS,
            lambda d: json.dumps(d).encode(),
        ),
        *_file_cases("run", run, "s.yaml", YAML_FILES, "scenario"),
        *_file_cases("step", step, "step.yaml", YAML_FILES, "step scenario"),
        *_file_cases("sweep", sweep, "sw.yaml", YAML_FILES, "sweep"),
        *_file_cases(
            "sweep-base",
            ("sweep", "{d}/swf.yaml", "--out", "{d}/r.csv"),
            "base.yaml",
            YAML_FILES,
            "sweep.base",
        ),
        *_file_cases("hf", acct, "config.json", JSON_FILES, "model.path"),
        *_file_cases("topo", ("topo", "{d}/f.yaml"), "f.yaml", YAML_FILES, "preset"),
        *_file_cases(
            "design-hf",
            ("design", "--model", OK_HF),
            "config.json",
            {k: v for k, v in JSON_FILES.items() if k in ("binary", "utf16", "deep")},
            "model.path",
        ),
    ]
    for name, argv, fld in FLAG_CASES:
        special = {"sweep-locked": "lock:r.csv"}.get(name, "")
        files = {"r.summary.csv": yaml_bytes({**SWEEP, "name": "r"})} if "summary" in name else {}
        cases.append(Case(f"flag-{name}", argv, fld, files, special=special))
    ids = [c.id for c in cases]
    assert len(set(ids)) == len(ids), "case ids must be unique"
    return [replace(c, field=one_language(c)) for c in cases]


ONE_LANGUAGE = {
    "scenario.gpu": "hardware.gpu",
    "workload.ep": "layout.ep",
    "workload.first_gpu": "placement.first_gpu",
    "workload.gpu_stride": "placement.gpu_stride",
    "step scenario": "scenario",
    "step": "scenario",
}
STEP_WORKLOAD = ("global_batch", "micro_batch_size", "seq_len", "dispatch_dtype", "combine_dtype",
                 "grad_reduce_dtype", "compute_dtype", "dispatcher", "dedup", "lm_head",
                 "dp_overlap", "fb_overlap", "recompute")


def one_language(case: Case) -> str:
    """The field an answer names once an old-language scenario (the corpus writes the old
    layer-stack and step shapes) is converted to the one language (moesim.scenario.legacy)."""
    fld = case.field
    if not case.id.startswith(("run", "step", "sweep")):
        return fld
    if case.id == "step-006-layout.pp":  # pp=3 under interleaved: the schedule names it
        return "~microbatches"
    if fld.startswith("step."):
        name = fld.removeprefix("step.")
        return f"workload.{name}" if name in STEP_WORKLOAD else f"scenario.{name}"
    return ONE_LANGUAGE.get(fld, fld)


def entry_point(case: Case) -> str:
    """The entry point a case exercises (for the per-entry counts)."""
    return case.id.split("-")[0]


if __name__ == "__main__":
    from collections import Counter

    corpus = build_corpus()
    print(len(corpus), dict(Counter(entry_point(c) for c in corpus)))
