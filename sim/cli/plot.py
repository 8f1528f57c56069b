"""CLI pieces for figures and timelines: the ``plot`` command and ``run``'s file options.

``plot`` draws from saved files only (run records, result records, sweep CSVs); the
drawing code lives in ``plots/`` and is imported inside the command, so importing
``sim`` never pulls in the plotting library. For ``moesim run``: :func:`trace_option` and
:func:`save_run_option` add ``--trace FILE`` / ``--save-run FILE``, and
:func:`write_run_files` writes them from the result record (its evidence and timeline).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from moesim.cli.files import check_outputs, output_file
from moesim.cli.progress import Ticker, quiet_option
from moesim.errors import ConfigError, MoesimError
from moesim.results.result import Result

F = TypeVar("F", bound=Callable[..., Any])
KINDS = ("congestion", "timeline", "breakdown", "stragglers", "sweep")
SINGLE_INPUT = ("congestion", "timeline", "sweep")


def trace_option(fn: F) -> F:
    """``--trace FILE``: write the Chrome-trace JSON of the run (open it in ui.perfetto.dev)."""
    return click.option(
        "--trace", "trace_path", type=click.Path(dir_okay=False), default=None,
        help="Write a Chrome-trace JSON timeline of the run (opens in ui.perfetto.dev).",
    )(fn)


def save_run_option(fn: F) -> F:
    """``--save-run FILE``: write the run record (result + evidence; group: + timeline)."""
    return click.option(
        "--save-run", "run_path", type=click.Path(dir_okay=False), default=None,
        help="Write the run record: the result and the evidence its attribution / critical "
             "path was read from (group mode: also per-rank spans and link utilisation for "
             "`moesim plot`).",
    )(fn)


def write_step_run(result: Result, path: str | Path) -> Path:
    """Write the saved record of a full- or fast-mode ``result`` (``--save-run``)."""
    from moesim.results.run_file import save_step_run

    with output_file("--save-run", path) as tmp:
        save_step_run(result, tmp)
    return Path(path)


def write_run_files(
    result: Result,
    trace_path: str | Path | None = None,
    run_path: str | Path | None = None,
) -> list[Path]:
    """Write the trace and/or run record of the group run recorded in ``result`` (run with
    ``timeline=True``)."""
    if trace_path is None and run_path is None:
        return []
    from moesim.results.timeline import save_run
    from moesim.results.trace import write_chrome_trace

    written = []
    if trace_path is not None:
        with output_file("--trace", trace_path) as tmp:
            write_chrome_trace(result, tmp)
        written.append(Path(trace_path))
    if run_path is not None:
        with output_file("--save-run", run_path) as tmp:
            save_run(result, tmp)
        written.append(Path(run_path))
    return written


def draw(kind: str, results: tuple[str, ...], out: str, x: str | None = None) -> Path:
    """Draw figure ``kind`` from the saved files ``results`` to ``out`` (PNG or SVG)."""
    if kind not in KINDS:
        raise ConfigError("kind", f"unknown {kind!r}; allowed: {', '.join(KINDS)}")
    if not results:
        raise ConfigError("results", "give at least one saved file")
    if kind in SINGLE_INPUT and len(results) > 1:
        raise ConfigError("results", f"{kind} draws one file; got {len(results)}")
    if x is not None and kind != "sweep":
        raise ConfigError("x", "only the sweep plot takes --x")
    from moesim.plots.breakdown import draw_breakdown
    from moesim.plots.common import check_output
    from moesim.plots.congestion import draw_congestion
    from moesim.plots.stragglers import draw_stragglers
    from moesim.plots.sweep import draw_sweep
    from moesim.plots.timeline import draw_timeline

    check_output(out, "-o")
    check_outputs({"-o": out}, results, make_dirs=True)
    with output_file("-o", out) as tmp:
        if kind == "congestion":
            draw_congestion(results[0], tmp)
        elif kind == "timeline":
            draw_timeline(results[0], tmp)
        elif kind == "breakdown":
            draw_breakdown(list(results), tmp)
        elif kind == "stragglers":
            draw_stragglers(list(results), tmp)
        else:
            draw_sweep(results[0], tmp, x=x)
    return Path(out)


@click.command("plot")
@click.argument("kind", type=click.Choice(KINDS))
@click.argument("results", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False),
              help="Figure file: .png or .svg.")
@click.option("--x", default=None, help="sweep: the axis column on the x axis.")
@quiet_option
def plot(kind: str, results: tuple[str, ...], out: str, x: str | None, quiet: bool) -> None:
    """Draw KIND from saved RESULTS (run records, result JSON, or a sweep CSV).

    \b
    congestion  links x time utilisation heatmap by tier (one run record)
    timeline    per-rank Gantt of one step (one run record)
    breakdown   stacked step breakdown, one bar per file (run or result records)
    stragglers  straggler excess by cause/rank/link (run or result records)
    sweep       step time and excess against --x, p50 and p1-p99 band (one sweep CSV)
    """
    try:
        with Ticker(f"plot {kind}", quiet=quiet):
            path = draw(kind, results, out, x)
    except MoesimError as exc:
        click.echo(f"moesim: {exc}", err=True)
        sys.exit(2)
    click.echo(f"wrote {path}")
