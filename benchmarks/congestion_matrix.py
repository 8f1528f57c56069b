"""Fast mode against full mode on the rail fabrics of ``tests/test_step_congestion.py`` (issue 15's
done-when matrix), one line per case: both steps, the gap, the top links.

Command (from the repository root; full mode takes 7-55 s of CPU a case, ~8 minutes in all)::

    .venv/bin/python benchmarks/congestion_matrix.py              # all 17 cases
    .venv/bin/python benchmarks/congestion_matrix.py 512:4:0 dmodk

A case is ``GPUS:OVERSUBSCRIPTION:PXN`` (the test's spec: moe-1t, one MoE layer per stage,
PP = GPUS / 64, EP32, 2 micro-batches, H800 rail fat tree, ECMP) or ``dmodk`` (128 GPUs 1:1
under D-mod-K). Fast mode as the tests run it: ``Fast(phases="fabric")`` where oversubscribed,
``Fast()`` on 1:1. The issue asks within 5 % and the same top straggler link oversubscribed
(the link full mode's critical path names from the stage fast mode ends last, where that stage
ends within the same 5 % of full mode's step: ``straggler_link`` in the test), within 2 % on
1:1. Each line: full / fast step (ms), gap, HOLDS or MISS on the step, full mode's top link,
fast mode's, full mode's from fast mode's last stage, whether their classes agree, the two
last stages, CPU seconds of each run.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from congestion_fixtures import (  # the tests' specs are the source
    STAGE_GPUS,
    STEP_REL,
    congestion_spec,
    link_class,
    straggler_link,
)

from moesim.step import Fast, StepSpec, run_step

ONE_TO_ONE_REL = 0.02
CASES = ([f"{g}:{o}:{p}" for g in (128, 256, 512) for o in (2, 4) for p in (0, 1)]
         + ["128:1:0", "256:1:0", "512:1:0", "128:1:1", "dmodk"])


def casecongestion_spec(case: str) -> tuple[StepSpec, float]:
    """The test's spec of ``case`` and its oversubscription."""
    if case == "dmodk":
        spec = congestion_spec(128, 1.0, False)
        return dataclasses.replace(spec, fabric=dataclasses.replace(
            spec.fabric, multipath="dmodk")), 1.0
    gpus, over, pxn = case.split(":")
    return congestion_spec(int(gpus), float(over), pxn == "1"), float(over)


def main() -> None:
    for case in sys.argv[1:] or CASES:
        spec, over = casecongestion_spec(case)
        t0 = time.process_time()
        full = run_step(spec)
        full_s, t0 = time.process_time() - t0, time.process_time()
        fast = run_step(spec, Fast(phases="fabric") if over > 1 else Fast())
        fast_s = time.process_time() - t0
        gap = fast.step_time_s / full.step_time_s - 1
        rel = STEP_REL if over > 1 else ONE_TO_ONE_REL
        stage = fast.last_rank // STAGE_GPUS
        seen = straggler_link(full, stage, STEP_REL) if over > 1 else ""
        same = link_class(fast.top_link) == link_class(seen) if seen else "-"
        print(f"{case}: full {full.step_time_s * 1e3:.2f} fast {fast.step_time_s * 1e3:.2f} ms "
              f"({gap * 100:+.2f} %, {'HOLDS' if abs(gap) <= rel else 'MISS'}); top full "
              f"{full.top_link or '-'} / fast {fast.top_link or '-'}; full from stage {stage}: "
              f"{seen or '-'} same={same}; last stages {full.last_rank // STAGE_GPUS} / {stage}; "
              f"cpu {full_s:.0f} / {fast_s:.1f} s", flush=True)


if __name__ == "__main__":
    main()
