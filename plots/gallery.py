"""Draw the figure gallery from saved files: ``python -m moesim.plots.gallery --out DIR``.

Reads only what ``moesim gallery --out DIR`` (:mod:`moesim.cli.gallery`) ran and saved:
``DIR/runs/<case>.run.json`` and ``.result.json`` of each case, and ``DIR/sweeps/<name>.csv``
of each sweep. Draws ``DIR/<case>-congestion.png``, ``-timeline.png`` and
``-stragglers.png`` per case, one ``breakdown.png`` over all cases, ``sweep-<name>.png`` per
sweep, and the index ``DIR/README.md`` with each case's top stragglers. Nothing here
simulates; drawing the same files again gives the same figures.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moesim.plots.breakdown import draw_breakdown
from moesim.plots.common import load_json
from moesim.plots.congestion import draw_congestion
from moesim.plots.stragglers import draw_stragglers
from moesim.plots.sweep import draw_sweep
from moesim.plots.timeline import draw_timeline

CASE_FIGURES = ("timeline", "congestion", "stragglers")


def saved_cases(out: Path) -> list[str]:
    """Cases with a saved run record under ``out/runs``, in name order."""
    return sorted(p.name.removesuffix(".run.json") for p in (out / "runs").glob("*.run.json"))


def saved_sweeps(out: Path) -> list[Path]:
    """Sweep results under ``out/sweeps`` (their Monte Carlo summaries left out)."""
    return sorted(p for p in (out / "sweeps").glob("*.csv") if not p.stem.endswith(".summary"))


def draw_case(out: Path, case: str) -> list[Path]:
    """The three figures of one saved case."""
    run_path = out / "runs" / f"{case}.run.json"
    return [draw_timeline(run_path, out / f"{case}-timeline.png"),
            draw_congestion(run_path, out / f"{case}-congestion.png"),
            draw_stragglers([run_path], out / f"{case}-stragglers.png")]


def case_index(record: dict[str, Any]) -> list[str]:
    """A case's section of the index: its step, counterfactuals and top stragglers."""
    name = record["scenario"]
    lines = [f"## {name}", "",
             f"step {record['step_time_s'] * 1e3:.1f} ms; balanced router "
             f"{record['balanced_step_time_s'] * 1e3:.1f} ms; uncongested core "
             f"{record['uncongested_step_time_s'] * 1e3:.1f} ms.", ""]
    for s in sorted(record["stragglers"], key=lambda s: -s["excess_s"])[:3]:
        lines.append(f"- {s['cause']}, {s['excess_s'] * 1e3:.1f} ms: {s['detail']}")
    return [*lines, "", *(f"![{name} {k}]({name}-{k}.png)" for k in CASE_FIGURES), ""]


def write_index(out: Path, records: list[dict[str, Any]], sweeps: list[Path]) -> Path:
    lines = ["# moesim gallery", "", f"Regenerate with `moesim gallery --out {out}` (runs the "
             f"cases and sweeps, then draws); `python -m moesim.plots.gallery --out {out}` "
             "redraws from the saved files.", ""]
    for record in records:
        lines += case_index(record)
    lines += ["## Step breakdown", "", "![breakdown](breakdown.png)", ""]
    lines += [f"![{p.stem}]({p.name})" for p in sweeps]
    index = out / "README.md"
    index.write_text("\n".join(lines) + "\n")
    return index


def draw_gallery(out: str | Path, cases: Sequence[str] | None = None) -> list[Path]:
    """Draw every figure of the saved ``cases`` (default: all saved) and sweeps into ``out``."""
    root = Path(out)
    names = list(cases) if cases is not None else saved_cases(root)
    drawn = [fig for case in names for fig in draw_case(root, case)]
    if names:
        drawn.append(draw_breakdown([root / "runs" / f"{n}.run.json" for n in names],
                                    root / "breakdown.png"))
    sweeps = [draw_sweep(csv, root / f"sweep-{csv.stem}.png") for csv in saved_sweeps(root)]
    records = [load_json(root / "runs" / f"{n}.result.json") for n in names]
    write_index(root, records, sweeps)
    return sorted(drawn + sweeps)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m moesim.plots.gallery", description=__doc__)
    parser.add_argument("--out", default="docs/gallery", help="gallery folder")
    args = parser.parse_args(argv)
    figures = draw_gallery(args.out)
    print(f"{len(figures)} figures in {args.out}")


if __name__ == "__main__":
    main()
