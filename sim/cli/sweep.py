"""``moesim sweep SPEC``: run a sweep file, resumably, and print its Monte Carlo summary.

Registered on the CLI group by ``sim/cli.py`` (``main.add_command(sweep)``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from moesim.cli.files import check_flag_count, check_outputs
from moesim.cli.oneline import one_line
from moesim.cli.progress import Bar, quiet_option
from moesim.errors import ConfigError, MoesimError
from moesim.io import short
from moesim.sweep.execute import check_dask_address
from moesim.sweep.montecarlo import summary_path

SWEEP_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "sweeps"
EXIT_BAD_INPUT = 2


def resolve_sweep(name_or_path: str) -> Path:
    """A sweep YAML path, or the name of a shipped sweep in ``scenarios/sweeps/``."""
    path = Path(name_or_path)
    if path.is_file():
        return path
    shipped = SWEEP_DIR / f"{name_or_path}.yaml"
    if shipped.is_file():
        return shipped
    names = sorted(p.stem for p in SWEEP_DIR.glob("*.yaml"))
    raise ConfigError("sweep", f"unknown {name_or_path!r}; give a YAML path or one of: "
                      + ", ".join(names))


def _fmt(value: object, metric: bool) -> str:
    if value is None or value == "":
        return "-"
    if metric and isinstance(value, float):
        return f"{value * 1e3:.3f}"
    return str(value)


def summary_table(summary: list[dict[str, object]], group_columns: tuple[str, ...]) -> str:
    """A fixed-width table: group columns, n, and step time / excesses in ms."""
    metrics = ["step_time_s_p50", "step_time_s_p99", "imbalance_excess_s_p50",
               "congestion_excess_s_p50", "dropped_tokens_mean"]
    heads = [*group_columns, "n", "failed", "step p50 ms", "step p99 ms", "imb.exc p50 ms",
             "cong.exc p50 ms", "dropped"]
    cells = [[_fmt(r.get(c), False) for c in (*group_columns, "n", "failed")]
             + [_fmt(r.get(m), m != "dropped_tokens_mean") for m in metrics] for r in summary]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


@click.command()
@click.argument("spec")
@click.option("-j", "--jobs", type=int, default=1, show_default=True,
              help="Local worker processes (1 runs the points inline).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Results CSV (appended; rerun to resume; locked while the sweep runs). "
                   "Its summary (.summary.csv) and Parquet copy (.parquet) are written "
                   "beside it. Default: results/<sweep>.csv")
@click.option("--dask", "dask_address", default=None, metavar="ADDRESS",
              help="Run on an existing Dask distributed scheduler (needs moesim[dask]).")
@quiet_option
def sweep(spec: str, jobs: int, out: str | None, dask_address: str | None, quiet: bool) -> None:
    """Run sweep SPEC (a YAML path or a shipped sweep name); resumes an existing --out."""
    from moesim.sweep import load_sweep_file, run_sweep
    from moesim.sweep.montecarlo import summarize
    from moesim.sweep.runner import sweep_rows

    try:
        source = resolve_sweep(spec)
        parsed = load_sweep_file(source)
        path = Path(out) if out else Path("results") / f"{parsed.name}.csv"
        check_sweep_outputs(path, [source, parsed.base_path], parsed.group_columns,
                            flag="--out" if out else "sweep.name")
        if dask_address is None:
            check_flag_count(jobs, "jobs", "-j")
        else:
            check_dask_address(dask_address)
        with Bar(f"sweep {parsed.name}", "point", quiet) as bar:
            done = run_sweep(parsed, path, jobs=jobs, dask_address=dask_address,
                             progress=lambda n, total, failed: bar(n, total, failed=failed))
    except MoesimError as exc:
        click.echo(f"moesim: {one_line(exc)}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    rows = sweep_rows(parsed, path)
    all_failed = bool(rows) and all(r.get("error") for r in rows)
    click.echo(f"{done.total} points: {done.skipped} already in {done.results}, "
               f"{done.ran} run now ({done.failed} failed)")
    for label, extra in (("summary", done.summary), ("parquet", done.parquet)):
        if extra is not None:
            click.echo(f"{label}: {extra}")
    click.echo(summary_table(summarize(rows, parsed.group_columns), parsed.group_columns))
    if all_failed:
        first = rows[0]["error"].split(": ", 1)[-1]
        click.echo(f"moesim: {one_line(first)} (all {len(rows)} points of the sweep failed; "
                   f"see {path})", err=True)
        sys.exit(EXIT_BAD_INPUT)


def check_sweep_outputs(results: Path, inputs: list[Path | None],
                        group_columns: tuple[str, ...], flag: str = "--out") -> None:
    """The results CSV and the files derived from it (``.summary.csv``, ``.parquet``):
    writable, none of them an input, and a derived file that exists must look like one
    (a summary CSV of these columns, a Parquet file), so a user's own file is not replaced."""
    if results.suffix.lower() != ".csv":
        raise ConfigError(flag, f"the results file must end in .csv (its summary and Parquet "
                          f"copy are written beside it), got {short(str(results))}")
    summary, parquet = summary_path(results), results.with_suffix(".parquet")
    check_outputs({flag: results, f"{flag} summary": summary, f"{flag} parquet": parquet},
                  [p for p in inputs if p is not None], make_dirs=True)
    header = ",".join([*group_columns, "n", "failed"])
    for derived, looks_right in ((summary, lambda b: not b or b.startswith(header.encode())),
                                 (parquet, lambda b: not b or b.startswith(b"PAR1"))):
        if derived.is_file() and not looks_right(derived.open("rb").read(len(header))):
            raise ConfigError(flag, f"{short(str(derived))} exists and is not this sweep's "
                              "own; move it or give another --out")
