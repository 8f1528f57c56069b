"""Regenerate the figure gallery: ``python -m moesim.plots.gallery --out docs/gallery``.

For each failure-mode case it runs the scenario (result + counterfactuals), saves the run
record and the result record under ``OUT/runs/``, and draws ``OUT/<case>-congestion.png``,
``-timeline.png`` and ``-stragglers.png``; then one breakdown over all cases. When the
sweep runner (``moesim.sweep``) and the shipped sweep files (``scenarios/sweeps/*.yaml``)
exist, the imbalance, mitigation and oversubscription sweeps are run too (results kept under
``OUT/sweeps/``; a rerun resumes them, or starts them again when moesim or the sweep's base
scenario changed since) and drawn as ``OUT/sweep-<name>.png``.
``OUT/README.md`` lists the figures with each case's top stragglers.

Cases: the shipped ep8-hot-expert (router imbalance), ep32-rail-4to1 (all-to-all
congestion at 4:1) and ep32-rail-4to1-pxn (the same with PXN), and a fault case built here:
ep32-rail-4to1 at 1:1 oversubscription with GPU 10 computing 1.5x slower and the uplink
leaf.r3.su0 -> spine.0 degraded to 25% of its bandwidth.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from moesim.plots.breakdown import draw_breakdown
from moesim.plots.congestion import draw_congestion
from moesim.plots.stragglers import draw_stragglers
from moesim.plots.sweep import draw_sweep
from moesim.plots.timeline import draw_timeline
from moesim.results.result import Result
from moesim.results.timeline import save_run
from moesim.runner.group import simulate
from moesim.runner.run import run_scenario
from moesim.scenario import Scenario, load_scenario_file
from moesim.scenarios import resolve

SHIPPED_CASES = ("ep8-hot-expert", "ep32-rail-4to1", "ep32-rail-4to1-pxn")
FAULT_CASE = "ep32-rail-1to1-slow-gpu-degraded-link"
DEGRADED_LINK = ("leaf.r3.su0", "spine.0")
SLOW_GPU = (10, 1.5)
SWEEP_KEYS = ("imbalance", "oversub", "mitigation")
SWEEPS_DIR = Path(__file__).resolve().parent.parent / "scenarios" / "sweeps"

Log = Callable[[str], None]


def fault_case() -> Scenario:
    """ep32-rail-4to1 rebuilt at 1:1 with one slow GPU and one degraded leaf uplink."""
    base = load_scenario_file(resolve("ep32-rail-4to1"))
    fault = (("factor", 0.25), ("kind", "degrade"), ("link", DEGRADED_LINK))
    fabric = replace(base.fabric, params=(("oversubscription", 1.0),), faults=(fault,))
    return replace(base, name=FAULT_CASE, fabric=fabric, slow_gpus=(SLOW_GPU,),
                   description="1:1 rail fabric, GPU 10 at 1/1.5 speed, leaf.r3 uplink at 25%")


def case_scenarios(names: Sequence[str]) -> list[Scenario]:
    return [fault_case() if n == FAULT_CASE else load_scenario_file(resolve(n)) for n in names]


def draw_case(scn: Scenario, out: Path) -> tuple[Path, Result]:
    """Run ``scn``, save its run and result records, draw its three figures."""
    res = run_scenario(scn)
    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    run_path = save_run(simulate(scn), res, runs / f"{scn.name}.run.json")
    (runs / f"{scn.name}.result.json").write_text(res.to_json())
    draw_congestion(run_path, out / f"{scn.name}-congestion.png")
    draw_timeline(run_path, out / f"{scn.name}-timeline.png")
    draw_stragglers([run_path], out / f"{scn.name}-stragglers.png")
    return run_path, res


def sweep_files() -> list[Path]:
    if not SWEEPS_DIR.is_dir():
        return []
    return [p for p in sorted(SWEEPS_DIR.glob("*.yaml")) if any(k in p.stem for k in SWEEP_KEYS)]


def draw_sweeps(out: Path, jobs: int, log: Log) -> list[Path]:
    """Run and draw the imbalance and oversubscription sweeps, when the runner exists."""
    try:
        from moesim.sweep.fingerprint import sweep_fingerprint
        from moesim.sweep.runner import run_sweep
        from moesim.sweep.spec import load_sweep_file
        from moesim.sweep.store import stale_fingerprints
    except ImportError as exc:
        log(f"sweeps skipped: the sweep runner is not available ({exc})")
        return []
    files = sweep_files()
    if not files:
        log(f"sweeps skipped: no imbalance/oversubscription sweep files in {SWEEPS_DIR}")
        return []
    drawn = []
    for path in files:
        spec = load_sweep_file(path)
        csv_path = out / "sweeps" / f"{path.stem}.csv"
        csv_path.parent.mkdir(parents=True, exist_ok=True)
        if stale_fingerprints(csv_path, sweep_fingerprint(spec.scenario)):
            log(f"sweep {path.stem}: results of another scenario or build, recomputed")
            csv_path.unlink()
        t0 = time.perf_counter()
        outcome = run_sweep(spec, csv_path, jobs=jobs)
        log(f"sweep {path.stem}: {outcome.total} points ({outcome.failed} failed) "
            f"in {time.perf_counter() - t0:.1f} s")
        drawn.append(draw_sweep(csv_path, out / f"sweep-{path.stem}.png"))
    return drawn


def write_index(out: Path, results: list[Result], sweeps: list[Path]) -> Path:
    lines = ["# moesim gallery", "", "Regenerate with `python -m moesim.plots.gallery --out "
             f"{out}`.", ""]
    for res in results:
        lines += [f"## {res.scenario}", "",
                  f"step {res.step_time_s * 1e3:.1f} ms; balanced router "
                  f"{res.balanced_step_time_s * 1e3:.1f} ms; uncongested core "
                  f"{res.uncongested_step_time_s * 1e3:.1f} ms.", ""]
        for s in sorted(res.stragglers, key=lambda s: -s.excess_s)[:3]:
            lines.append(f"- {s.cause}, {s.excess_s * 1e3:.1f} ms: {s.detail}")
        lines += ["", *(f"![{res.scenario} {k}]({res.scenario}-{k}.png)"
                        for k in ("timeline", "congestion", "stragglers")), ""]
    lines += ["## Step breakdown", "", "![breakdown](breakdown.png)", ""]
    lines += [f"![{p.stem}]({p.name})" for p in sweeps]
    index = out / "README.md"
    index.write_text("\n".join(lines) + "\n")
    return index


def build_gallery(out: str | Path, cases: Sequence[str] = (*SHIPPED_CASES, FAULT_CASE),
                  sweeps: bool = True, jobs: int = 4, log: Log = print) -> list[Path]:
    """Run the cases (and sweeps), draw every figure into ``out``; returns the figure paths."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    run_paths, results = [], []
    for scn in case_scenarios(cases):
        t0 = time.perf_counter()
        run_path, res = draw_case(scn, root)
        run_paths.append(run_path)
        results.append(res)
        log(f"{scn.name}: {time.perf_counter() - t0:.1f} s")
    drawn = [draw_breakdown(run_paths, root / "breakdown.png")]
    drawn += draw_sweeps(root, jobs, log) if sweeps else []
    write_index(root, results, [p for p in drawn if p.stem.startswith("sweep-")])
    return sorted(root.glob("*.png"))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m moesim.plots.gallery", description=__doc__)
    parser.add_argument("--out", default="docs/gallery", help="output folder")
    parser.add_argument("--no-sweeps", action="store_true", help="skip the sweep curves")
    parser.add_argument("-j", "--jobs", type=int, default=min(8, os.cpu_count() or 1),
                        help="sweep worker processes")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    figures = build_gallery(args.out, sweeps=not args.no_sweeps, jobs=args.jobs)
    print(f"{len(figures)} figures in {args.out} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
