"""``moesim gallery --out DIR``: run the gallery's cases and sweeps, save them, draw them.

The cases are shipped scenarios (group mode: their result records carry the counterfactual
attribution): ep8-hot-expert (router imbalance), ep32-rail-4to1 (all-to-all congestion at
4:1), ep32-rail-4to1-pxn (the same with PXN) and ep32-rail-1to1-slow-gpu-degraded-link (two
planted faults). The sweeps are the shipped imbalance, mitigation and oversubscription ones,
kept under ``DIR/sweeps/``: a rerun resumes them, or starts one again when its fingerprint
(moesim's model code or its base scenario) changed. Then :mod:`moesim.plots.gallery` draws
every figure from the saved files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import click

CASES = ("ep8-hot-expert", "ep32-rail-4to1", "ep32-rail-4to1-pxn",
         "ep32-rail-1to1-slow-gpu-degraded-link")
SWEEP_KEYS = ("imbalance", "oversub", "mitigation")

Log = Callable[[str], None]


def run_case(name: str, out: Path) -> Path:
    """Run shipped scenario ``name``; save its result and run records under ``out/runs``."""
    from moesim.cli.plot import write_run_files
    from moesim.runner.run import run_scenario
    from moesim.runner.specs import spec_for
    from moesim.scenario import load_scenario_file
    from moesim.scenario.schema import GroupSpec
    from moesim.scenarios import resolve

    scn = load_scenario_file(resolve(name))
    spec = spec_for(scn)
    if not isinstance(spec, GroupSpec):
        raise click.UsageError(f"gallery case {name} must be a group-mode scenario")
    res = run_scenario(scn, timeline=True)
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    (runs / f"{name}.result.json").write_text(res.to_json())
    write_run_files(res, run_path=runs / f"{name}.run.json")
    return runs / f"{name}.run.json"


def sweep_files() -> list[Path]:
    from moesim.scenarios import SCENARIO_DIR

    files = sorted((SCENARIO_DIR / "sweeps").glob("*.yaml"))
    return [p for p in files if any(k in p.stem for k in SWEEP_KEYS)]


def run_sweeps(out: Path, jobs: int, log: Log) -> None:
    """Run (or resume) each gallery sweep into ``out/sweeps/<name>.csv``."""
    from moesim.sweep.fingerprint import sweep_fingerprint
    from moesim.sweep.runner import run_sweep
    from moesim.sweep.spec import load_sweep_file
    from moesim.sweep.store import stale_fingerprints

    for path in sweep_files():
        spec = load_sweep_file(path)
        csv_path = out / "sweeps" / f"{path.stem}.csv"
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        if stale_fingerprints(csv_path, sweep_fingerprint(spec.scenario)):
            log(f"sweep {path.stem}: results of another scenario or build, recomputed")
            csv_path.unlink()
        t0 = time.perf_counter()
        outcome = run_sweep(spec, csv_path, jobs=jobs)
        log(f"sweep {path.stem}: {outcome.total} points ({outcome.ran} run, "
            f"{outcome.failed} failed) in {time.perf_counter() - t0:.1f} s")


def build_gallery(out: str | Path, cases: Sequence[str] = CASES, sweeps: bool = True,
                  jobs: int = 4, log: Log = click.echo) -> list[Path]:
    """Run the cases (and sweeps) into ``out`` and draw every figure; the figure paths."""
    from moesim.plots.gallery import draw_gallery

    root = Path(out)
    for name in cases:
        t0 = time.perf_counter()
        run_case(name, root)
        log(f"{name}: {time.perf_counter() - t0:.1f} s")
    if sweeps:
        run_sweeps(root, jobs, log)
    return draw_gallery(root, sorted(cases))  # the order a redraw from the files takes


@click.command("gallery")
@click.option("--out", default="docs/gallery", show_default=True, help="Gallery folder.")
@click.option("--no-sweeps", is_flag=True, help="Skip the sweep curves.")
@click.option("-j", "--jobs", type=int, default=4, show_default=True,
              help="Sweep worker processes.")
def gallery(out: str, no_sweeps: bool, jobs: int) -> None:
    """Run the failure-mode cases and sweeps and draw the figure gallery into OUT."""
    t0 = time.perf_counter()
    figures = build_gallery(out, sweeps=not no_sweeps, jobs=jobs)
    click.echo(f"{len(figures)} figures in {out} ({time.perf_counter() - t0:.0f} s)")
