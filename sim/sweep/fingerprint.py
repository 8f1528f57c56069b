"""What a sweep's rows were computed from: its base scenario and moesim's own source.

Resume skips the points already in a results file, and a point's id hashes only its axis
values. Without more, a sweep resumed after its base scenario was edited, or after moesim
itself changed, would mix rows of two models into one table. Each row therefore carries the
fingerprint of the resolved base scenario and of the simulator's source files (``sim/`` and
``topologies/``, Python and YAML), and :class:`moesim.sweep.store.ResultStore` refuses a file
whose rows carry another.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import moesim as sim
from moesim import topologies

FINGERPRINT_COLUMN = "fingerprint"
SOURCE_SUFFIXES = (".py", ".yaml")


@lru_cache(maxsize=1)
def code_sha() -> str:
    """SHA-256 over moesim's source files (relative path and bytes, in path order)."""
    h = hashlib.sha256()
    for package in (sim, topologies):
        root = Path(str(package.__file__)).resolve().parent
        for path in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES):
            h.update(f"{package.__name__}/{path.relative_to(root).as_posix()}\0".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def sweep_fingerprint(base: Mapping[str, Any]) -> str:
    """12 hex digits naming the base scenario mapping (``set`` applied; keys sorted) and the
    build. A model given as a path to a Hugging Face ``config.json`` enters by its path, not
    its contents."""
    text = json.dumps(base, sort_keys=True, default=str)
    return hashlib.sha256(f"{code_sha()}\0{text}".encode()).hexdigest()[:12]
