"""``moesim validate``: every validation case, predicted against published, with sources."""

from __future__ import annotations

import click

from moesim.cli.progress import Bar, quiet_option
from moesim.errors import ConfigError
from moesim.validate import CASES, render_table, results_json, run_cases
from moesim.validate.bandfile import write_band
from moesim.validate.table import FAIL


@click.command("validate")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--detail", is_flag=True, help="Add each case's detail line under it.")
@click.option("--kind", "kinds", multiple=True,
              type=click.Choice(sorted({c.kind for c in CASES})),
              help="Only cases of this kind (repeatable).")
@click.option("-j", "--jobs", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Run the cases on this many worker processes.")
@click.option("--write-band", "write_band_file", is_flag=True,
              help="Rewrite the out-of-sample error band file (moesim.results.band) from this "
                   "run; needs every end-to-end case (no --kind).")
@quiet_option
def validate(as_json: bool, detail: bool, kinds: tuple[str, ...], jobs: int,
             write_band_file: bool, quiet: bool) -> None:
    """Simulate the published measurements and compare (exit status 1 if any case fails).

    Two groups are printed apart: CONSISTENCY cases (the number is a calibration input, or a
    constant was chosen with it in view) and OUT-OF-SAMPLE cases (measurements that chose no
    constant), each with count, bias (mean signed error), median and max |error| per scope and
    per GPU generation. Each case's tolerance is its measurement's own uncertainty.
    """
    cases = [c for c in CASES if not kinds or c.kind in kinds]
    results = []
    with Bar("validate", "case", quiet) as bar:
        if jobs > 1:  # the pool returns all at once
            bar(0, len(cases), case=f"{len(cases)} cases on {jobs} processes")
            results = run_cases(cases, jobs=jobs)
        else:
            for done, case in enumerate(cases):
                bar(done, len(cases), case=case.name)
                results += run_cases([case])
        bar(len(cases), len(cases))
    click.echo(results_json(results) if as_json else render_table(results, show_detail=detail))
    if write_band_file:
        try:
            click.echo(f"wrote {write_band(results)}", err=True)
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from None
    if any(r.status == FAIL for r in results):
        raise SystemExit(1)
