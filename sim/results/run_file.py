"""A run's record on disk: the result's summary keys and the evidence they were read from.

``moesim run --save-run FILE`` writes one JSON object: every key of
:meth:`moesim.results.result.Result.to_dict`, ``format``, and ``evidence`` (the
:class:`~moesim.results.group_record.GroupEvidence` or
:class:`~moesim.results.walk_record.WalkRecord` as plain types; null in fast mode). Group mode
adds the timeline keys the figures read (:mod:`moesim.results.timeline`, format
``moesim-run/1``); full and fast mode write format ``moesim-step-run/1``.

:func:`load_evidence` reads the evidence back; :func:`reread` recomputes what the record's
summary holds from it (attribution in group mode, the critical path in full mode) without
the simulator, and gives the same values as the live run (tests/test_run_record.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from moesim.errors import ConfigError
from moesim.io import load_json_text, read_text, short
from moesim.results.attribution import attribute
from moesim.results.critical_path import CriticalPath, walk
from moesim.results.group_record import GroupEvidence
from moesim.results.result import CollectiveStat, Result, Straggler
from moesim.results.walk_record import WalkRecord

STEP_FORMAT = "moesim-step-run/1"
RECORD_BYTES = 1 << 30
"""Size bound of a saved record read back: full-mode walk records hold every span (about
150 bytes of JSON each)."""

Evidence = GroupEvidence | WalkRecord


def evidence_dict(result: Result) -> dict[str, Any] | None:
    """``result``'s evidence in plain types (None if its mode keeps none)."""
    return result.evidence.to_dict() if result.evidence is not None else None


def step_run_record(result: Result) -> dict[str, Any]:
    """The saved record of a full- or fast-mode ``result`` (module docstring)."""
    return {"format": STEP_FORMAT, **result.to_dict(), "evidence": evidence_dict(result)}


def save_step_run(result: Result, path: str | Path) -> Path:
    """Write :func:`step_run_record` of ``result`` to ``path`` (strict JSON)."""
    out = Path(path)
    out.write_text(json.dumps(step_run_record(result), separators=(",", ":"), allow_nan=False))
    return out


def evidence_from(plain: dict[str, Any] | None) -> Evidence | None:
    """The evidence record of a saved run's ``evidence`` value."""
    if plain is None:
        return None
    kinds: dict[str, type[GroupEvidence] | type[WalkRecord]] = {"group": GroupEvidence,
                                                                "walk": WalkRecord}
    kind = plain.get("kind") if isinstance(plain, dict) else None
    if kind not in kinds:
        raise ConfigError("evidence", f"unknown record kind {kind!r}; allowed: "
                          + ", ".join(kinds))
    try:
        return kinds[kind].from_dict(plain)
    except (TypeError, ValueError) as exc:
        raise ConfigError("evidence", f"malformed {kind} record: {short(str(exc))}") from None


def load_evidence(path: str | Path) -> Evidence | None:
    """The evidence of the run saved at ``path`` (None if its mode kept none)."""
    data = load_json_text(read_text(path, "run record", max_bytes=RECORD_BYTES), "run record",
                          short(str(path)))
    if not isinstance(data, dict) or "evidence" not in data:
        raise ConfigError("run record", f"{short(str(path))} is not a saved run (no evidence); "
                          "write one with `moesim run --save-run FILE`")
    return evidence_from(data["evidence"])


def reread(ev: Evidence) -> tuple[list[Straggler], list[CollectiveStat]] | CriticalPath:
    """What the run's summary was read from ``ev``: group evidence -> (stragglers,
    collectives); a walk record -> the critical path."""
    return attribute(ev) if isinstance(ev, GroupEvidence) else walk(ev)
