"""Run a sweep: skip what the results file holds, run the rest, save each row as it finishes.

Like Mesa's ``batch_run``, a sweep is one function, :func:`run_sweep`. Killed at any moment,
it loses at most the points in flight; run again with the same ``out``, it runs exactly the
points missing from the file, so every point ends up in it once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from moesim.sweep.execute import PointTask, open_executor, run_point, run_unordered
from moesim.sweep.fingerprint import sweep_fingerprint
from moesim.sweep.montecarlo import summarize, summary_path, write_summary
from moesim.sweep.row import ERROR_COLUMN, ID_COLUMN, row_columns
from moesim.sweep.spec import SweepSpec
from moesim.sweep.store import ResultStore, read_rows, write_parquet

Progress = Callable[[int, int, int], None]
"""progress(points done, points total, points failed), called after each saved row."""


@dataclass(frozen=True)
class SweepOutcome:
    """Where a sweep's results went and how many points ran this time."""

    results: Path
    total: int
    skipped: int  # already in the results file
    ran: int
    failed: int  # failed this time (recorded with their error)
    complete: bool  # every point of the sweep is in the file
    summary: Path | None = None
    parquet: Path | None = None


def run_sweep(
    spec: SweepSpec,
    out: str | Path,
    *,
    jobs: int = 1,
    dask_address: str | None = None,
    progress: Progress | None = None,
    max_points: int | None = None,
) -> SweepOutcome:
    """Run the points of ``spec`` missing from ``out``; ``max_points`` stops early (for tests)."""
    points = spec.points()
    ran = failed = 0
    fingerprint = sweep_fingerprint(spec.scenario)
    with ResultStore(out, row_columns(spec.columns), fingerprint) as store:
        done = store.done_ids()
        todo = [PointTask(spec.scenario, p, fingerprint) for p in points if p.id not in done]
        if todo and max_points != 0:
            with open_executor(jobs, dask_address) as (executor, window):
                for row in run_unordered(executor, run_point, todo, window):
                    if not store.append(row):
                        continue  # another writer saved this point meanwhile
                    ran += 1
                    failed += bool(row[ERROR_COLUMN])
                    if progress is not None:
                        progress(len(done) + ran, len(points), failed)
                    if max_points is not None and ran >= max_points:
                        break
    complete = len(done) + ran == len(points)
    outcome = SweepOutcome(Path(out), len(points), len(done), ran, failed, complete)
    if not complete:
        return outcome
    rows = sweep_rows(spec, out)
    summary = write_summary(summary_path(out), summarize(rows, spec.group_columns))
    return replace(outcome, summary=summary, parquet=write_parquet(out))


def sweep_rows(spec: SweepSpec, out: str | Path) -> list[dict[str, str]]:
    """The rows of ``spec``'s points in ``out``, in the sweep's point order."""
    order = {p.id: i for i, p in enumerate(spec.points())}
    rows = [r for r in read_rows(out) if r[ID_COLUMN] in order]
    return sorted(rows, key=lambda r: order[r[ID_COLUMN]])
