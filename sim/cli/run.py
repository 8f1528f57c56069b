"""``moesim run`` (alias ``moesim step``): simulate any scenario and report its record."""

from __future__ import annotations

import io
from dataclasses import replace

import click

from moesim.cli.files import check_flag_count, check_outputs, emit
from moesim.cli.plot import save_run_option, trace_option
from moesim.cli.progress import Bar, Ticker, quiet_option


@click.command("run")
@click.argument("scenario")
@click.option("--mode", type=click.Choice(["full", "fast", "group"]), default=None,
              help="full: every rank; fast: one representative pipeline; group: one EP "
                   "group's layers with counterfactual attribution. Default: the scenario's.")
@click.option("--microbatches", type=int, default=None,
              help="Override the micro-batches per pipeline.")
@click.option("--seed", type=int, default=None, help="Override the scenario's seed.")
@click.option("--json", "as_json", is_flag=True, help="Print the result record as JSON.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Also write the JSON record here.")
@trace_option
@click.option("--chakra", "chakra_dir", type=click.Path(file_okay=False), default=None,
              help="Full/fast mode: also write Chakra execution traces, one "
                   "<scenario>.<rank>.et per simulated rank, into this directory "
                   "(needs moesim[chakra]).")
@save_run_option
@quiet_option
def run(scenario: str, mode: str | None, microbatches: int | None, seed: int | None,
        as_json: bool, out: str | None, trace_path: str | None, chakra_dir: str | None,
        run_path: str | None, quiet: bool) -> None:
    """Simulate SCENARIO (a shipped name or a YAML path) and report it: step time, breakdown,
    and the critical path (full mode) or straggler attribution (group mode). --trace writes
    a Chrome/Perfetto trace in every mode (group: per EP rank and link; full/fast: the whole
    step), --save-run the run record: the result with the evidence its attribution (group) or
    critical path (full) was read from, and in group mode the timeline `moesim plot` draws."""
    from moesim.cli.plot import write_run_files, write_step_run
    from moesim.errors import ConfigError
    from moesim.io import write_atomic
    from moesim.results.summary import record_text
    from moesim.runner.run import run_scenario, step_result
    from moesim.runner.specs import spec_for
    from moesim.scenario import load_scenario_file
    from moesim.scenario.checks import check_seed
    from moesim.scenario.schema import GroupSpec
    from moesim.scenarios import resolve
    from moesim.step.loop import watching

    path = resolve(scenario)
    check_outputs({"--out": out, "--trace": trace_path, "--save-run": run_path}, [path])
    check_flag_count(microbatches, "microbatches", "--microbatches")
    notice = io.StringIO()  # an old-format notice: shown once the run answers, so that an
    scn = load_scenario_file(path, notice=notice)  # error stays the one line on stderr
    if seed is not None:
        scn = replace(scn, seed=check_seed(seed, "--seed"))
    if microbatches is not None:
        per = scn.layout.dp * scn.workload.micro_batch_size
        scn = replace(scn, workload=replace(scn.workload, global_batch=microbatches * per))
    mode = mode or scn.mode
    try:
        spec = spec_for(scn, mode)
    except ConfigError as exc:  # a schedule that cannot take --microbatches names the flag
        if microbatches is not None and exc.field.endswith("microbatches"):
            raise ConfigError("--microbatches", exc.problem) from None
        raise
    if chakra_dir and isinstance(spec, GroupSpec):
        raise ConfigError("--chakra", "written in full and fast mode only")
    label = f"{click.get_current_context().info_name} {scn.name}"  # run, or its alias step
    if isinstance(spec, GroupSpec):
        with Ticker(label, quiet=quiet):
            res = run_scenario(scn, mode, timeline=bool(trace_path or run_path))
    else:
        bar = Bar(f"{label} ({mode})", "backward pass", quiet)
        with bar, watching(bar if bar.enabled else None, bin_links=bool(trace_path)):
            if trace_path or chakra_dir:
                from moesim.export.record import run_recorded  # only with --trace / --chakra

                step, spans = run_recorded(spec, mode, scn.name)
                res = step_result(scn, mode, step)
            else:
                res = run_scenario(scn, mode)
    if not isinstance(spec, GroupSpec) and (trace_path or chakra_dir):
        from moesim.export.cli import write_exports  # Chrome / Chakra writers: only then

        write_exports(spans, res.to_dict(), trace_path, chakra_dir)
    if notice.getvalue():
        click.echo(notice.getvalue().rstrip("\n"), err=True)
    emit(res.to_json() if as_json else record_text(res), [
        lambda: isinstance(spec, GroupSpec) and write_run_files(res, trace_path, run_path),
        lambda: run_path and not isinstance(spec, GroupSpec) and write_step_run(res, run_path),
        lambda: out and write_atomic(out, res.to_json(), "--out"),
    ])
