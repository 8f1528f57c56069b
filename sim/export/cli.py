"""Write the exports ``moesim step --trace/--chakra`` asked for, and say where."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from moesim.export.chakra_et import write_chakra
from moesim.export.chrome_step import write_step_trace
from moesim.export.record import StepRecord


def write_exports(record: StepRecord, step: dict[str, Any], trace_path: str | None,
                  chakra_dir: str | None) -> None:
    """The Chrome trace and/or the Chakra files of ``record``; one line each on stderr."""
    if trace_path:
        extra = {"step_time_s": step["step_time_s"], "seed": step["seed"]}
        path = write_step_trace(record, trace_path, extra=extra)
        print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, Chrome trace: "
              f"ui.perfetto.dev)", file=sys.stderr)
    if chakra_dir:
        prefix = record.scenario or "moesim"
        paths = write_chakra(record, chakra_dir, prefix)
        size_mb = sum(p.stat().st_size for p in paths) / 1e6
        print(f"wrote {len(paths)} Chakra ET files ({size_mb:.1f} MB) and "
              f"{Path(chakra_dir) / (prefix + '.comm_groups.json')}", file=sys.stderr)
