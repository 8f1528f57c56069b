"""The critical path of a finished step state: its walk record, walked.

The walk (:mod:`moesim.results.critical_path`) reads only the step's walk record
(:class:`moesim.results.walk_record.WalkRecord`); this module is the one line between them for
callers that hold the live state: :func:`critical_path` records ``st``
(:func:`moesim.step.critical_record.walk_record`) and walks the record. The result's
``record`` is that record, which a saved run keeps (:mod:`moesim.results.run_file`).
"""

from __future__ import annotations

from moesim.results.critical_path import (
    PATH_CATEGORIES,
    Contributor,
    CriticalPath,
    PathSegment,
    walk,
)
from moesim.step.critical_record import walk_record
from moesim.step.state import StepState

__all__ = ["PATH_CATEGORIES", "Contributor", "CriticalPath", "PathSegment", "critical_path"]


def critical_path(st: StepState) -> CriticalPath:
    """Record the finished step ``st`` and walk the record back from the step's end."""
    return walk(walk_record(st))
