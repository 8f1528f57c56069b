"""``moesim validate``: every validation case, predicted against published, with sources."""

from __future__ import annotations

import click

from moesim.cli.progress import Bar, quiet_option
from moesim.validate import CASES, render_table, results_json, run_cases
from moesim.validate.table import FAIL


@click.command("validate")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--detail", is_flag=True, help="Add each case's detail line under it.")
@click.option("--kind", "kinds", multiple=True,
              type=click.Choice(sorted({c.kind for c in CASES})),
              help="Only cases of this kind (repeatable).")
@quiet_option
def validate(as_json: bool, detail: bool, kinds: tuple[str, ...], quiet: bool) -> None:
    """Simulate the published measurements and compare (exit status 1 if any case fails).

    Each row: case, predicted, published, error in percent, tolerance (15% bandwidth and
    throughput, 1% parameter counts), result and source. "consistency" marks a case whose
    published number is itself a calibration input.
    """
    cases = [c for c in CASES if not kinds or c.kind in kinds]
    results = []
    with Bar("validate", "case", quiet) as bar:
        for done, case in enumerate(cases):
            bar(done, len(cases), case=case.name)
            results += run_cases([case])
        bar(len(cases), len(cases))
    click.echo(results_json(results) if as_json else render_table(results, show_detail=detail))
    if any(r.status == FAIL for r in results):
        raise SystemExit(1)
