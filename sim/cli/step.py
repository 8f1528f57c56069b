"""``moesim step``: simulate one whole training step of a step scenario and report it."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from moesim.cli.files import check_flag_count, check_outputs, emit
from moesim.cli.progress import Bar, quiet_option
from moesim.errors import ConfigError

if TYPE_CHECKING:
    from moesim.step.spec import StepSpec


@click.command("step")
@click.argument("scenario")
@click.option("--mode", type=click.Choice(["full", "fast"]), default=None,
              help="full: every rank on one fabric; fast: one representative pipeline. "
                   "Default: the scenario's.")
@click.option("--microbatches", type=int, default=None,
              help="Override the micro-batches per pipeline.")
@click.option("--seed", type=int, default=None, help="Override the scenario's seed.")
@click.option("--json", "as_json", is_flag=True, help="Print the step record as JSON.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON record here.")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
              help="Also write a Chrome/Perfetto trace of the whole step (JSON) here.")
@click.option("--chakra", "chakra_dir", type=click.Path(file_okay=False), default=None,
              help="Also write Chakra execution traces, one <scenario>.<rank>.et per simulated "
                   "rank, into this directory (needs moesim[chakra]).")
@quiet_option
def step(scenario: str, mode: str | None, microbatches: int | None, seed: int | None,
         as_json: bool, out: str | None, quiet: bool, trace_path: str | None,
         chakra_dir: str | None) -> None:
    """Simulate SCENARIO (a name from scenarios/steps or a YAML path): step time, MFU,
    breakdown (compute, exposed all-to-all / TP / DP, bubble, optimizer) and critical path."""
    from moesim.export.cli import write_exports
    from moesim.export.record import run_recorded
    from moesim.io import write_atomic
    from moesim.results.step_summary import step_text
    from moesim.scenario.checks import check_seed
    from moesim.scenarios import resolve
    from moesim.step.loop import watching
    from moesim.step.run import run_step
    from moesim.step.scenario import load_step_file

    path = resolve(scenario, "steps")
    check_outputs({"--out": out, "--trace": trace_path}, [path])
    check_flag_count(microbatches, "microbatches", "--microbatches")
    scn = load_step_file(path)
    spec = scn.spec
    if microbatches is not None:
        spec = _with_microbatches(spec, microbatches)
    if seed is not None:
        spec = replace(spec, seed=check_seed(seed, "--seed"))
    scn = replace(scn, spec=spec, mode=mode or scn.mode)
    bar = Bar(f"step {scn.name} ({scn.mode})", "backward pass", quiet)
    with bar, watching(bar if bar.enabled else None, bin_links=bool(trace_path)):
        if trace_path or chakra_dir:
            res, spans = run_recorded(spec, scn.mode, scn.name)
        else:
            res = run_step(spec, mode=scn.mode)
    record = {"scenario": scn.name, "mode": scn.mode, "seed": spec.seed, **res.to_dict()}
    if trace_path or chakra_dir:
        write_exports(spans, record, trace_path, chakra_dir)
    text = json.dumps(record, indent=2)
    emit(text if as_json else step_text(scn, record),
         [lambda: out and write_atomic(out, text, "--out")])


def _with_microbatches(spec: StepSpec, microbatches: int) -> StepSpec:
    """``spec`` with ``--microbatches``; a schedule that cannot take them names the flag."""
    try:
        return replace(spec, microbatches=microbatches)
    except ConfigError as exc:
        if exc.field in ("schedule.microbatches", "step.microbatches"):
            raise ConfigError("--microbatches", exc.problem) from None
        raise
