"""Sweeps: many scenarios from one base, run in parallel, saved row by row, resumable.

* :mod:`moesim.sweep.spec` - sweep files (base, ``set``, ``grid``, ``zip``, ``seeds``) -> points
* :mod:`moesim.sweep.paths` - dotted scenario paths (``router.alpha``), checked and applied
* :mod:`moesim.sweep.row` - one flat results row per point
* :mod:`moesim.sweep.execute` - executors: inline, process pool, Dask distributed
* :mod:`moesim.sweep.store` - the append-only CSV with resume (+ Parquet at the end)
* :mod:`moesim.sweep.montecarlo` - seed replicas -> mean / p50 / p99
* :mod:`moesim.sweep.runner` - :func:`run_sweep`, tying them together
"""

from moesim.sweep.montecarlo import summarize, summary_path
from moesim.sweep.runner import SweepOutcome, run_sweep, sweep_rows
from moesim.sweep.spec import Point, SweepSpec, load_sweep_file, point_scenario, sweep_from_dict
from moesim.sweep.store import ResultStore, read_rows

__all__ = [
    "Point",
    "ResultStore",
    "SweepOutcome",
    "SweepSpec",
    "load_sweep_file",
    "point_scenario",
    "read_rows",
    "run_sweep",
    "summarize",
    "summary_path",
    "sweep_from_dict",
    "sweep_rows",
]
