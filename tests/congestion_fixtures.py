"""The congestion matrix's cases (issue 15: fast mode vs full mode on rail fabrics), shared by
``tests/test_step_congestion.py`` and ``benchmarks/congestion_matrix.py``: the specs, how two
links compare, and which link full mode names from a given straggler."""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from moesim.fabric.spec import FabricSpec
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.results.critical_path import walk
from moesim.step import StepResult, StepSpec

EP = 32  # four hosts of 8 GPUs
STAGE_GPUS = 64  # DP 64 per pipeline stage
STEP_REL = 0.05  # the tolerance on the step, oversubscribed fabrics


def congestion_spec(gpus: int, over: float, pxn: bool) -> StepSpec:
    """moe-1t cut to one MoE layer per stage; PP = gpus / 64 (DP 64 per stage), EP32, two
    micro-batches; H800 hosts on a 2-tier rail fat tree, 4 hosts per SU, 2 spines, ECMP."""
    pp = gpus // STAGE_GPUS
    model = dataclasses.replace(get_model("moe-1t"), num_layers=pp, moe_layers=(True,) * pp)
    fabric = FabricSpec(preset="rail-h800-64", params=(
        ("hosts", gpus // 8), ("hosts_per_su", 4), ("oversubscription", over), ("spines", 2)),
        multipath="ecmp", pxn=pxn, batch_window_rel=0.02)
    return StepSpec(model=model, layout=ParallelLayout(pp=pp, ep=EP, dp=gpus // pp),
                    gpu="H800", fabric=fabric, microbatches=2, seq_len=4096)


def link_class(name: str) -> str:
    """A link's name with its host, SU and switch numbers blanked, its rail kept:
    ``leaf.r7.su1->spine.0`` -> ``leaf.r7.su#->spine.#`` (symmetric copies compare equal)."""
    return re.sub(r"(?<=su)\d+|(?<=spine\.)\d+|(?<=\bh)\d+|(?<=core\.)\d+", "#", name)


def straggler_link(full: StepResult, stage: int, rel: float) -> str:
    """Full mode's top link seen from ``stage``'s last rank: the step's (``full.top_link``)
    where that stage ends the step, else the top link of the critical path walked back from
    the stage's last rank, for a stage that ends within ``rel`` of the step ("" otherwise).

    Why: a model allowed ``rel`` of error on the step cannot be asked to order two
    stragglers that end within ``rel`` of each other in full mode; it is asked to name, for
    the straggler it finds last, the link full mode's critical path names from that same
    straggler (measured: 256 GPUs 4:1 ECMP, tests/test_step_congestion.py's docstring)."""
    assert full.critical is not None
    rec = full.critical.record
    per = rec.world_size // rec.pp
    if full.last_rank // per == stage:
        return full.top_link
    end = np.asarray(rec.end_s, dtype=float)
    mine = np.full_like(end, np.nan)
    mine[stage * per:(stage + 1) * per] = end[stage * per:(stage + 1) * per]
    if np.nanmax(mine) < (1 - rel) * np.nanmax(end):
        return ""
    path = walk(dataclasses.replace(rec, end_s=mine))
    links = [c for c in path.contributors if c.kind == "link"]
    return max(links, key=lambda c: c.time_s).link if links else ""
