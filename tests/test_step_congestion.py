"""Fast mode against full mode where replicas contend: oversubscribed rail fabrics (issue 15).

Fast mode with whole-fabric phases (``Fast(phases="fabric")``, moesim.step.phased) simulates
one pipeline and solves every group's traffic of each phase at once; full mode simulates
every rank. On rail fabrics with EP groups spanning
four hosts and SUs of four hosts (so EP, DP and pipeline traffic climb to the spines), the
issue asks for fast mode's step within 5 % of full mode's with the same top link (up to
symmetry: the same switch tier, direction and rail; symmetric copies of a link tie) at 2:1 and
4:1, ECMP and PXN, and within 2 % on 1:1. Only the cases below were measured in the session
that wrote this (the other 256- and 512-GPU cases: full mode ran past the session's time on a
loaded machine); the 128-GPU 2:1 PXN case misses by 2.4 points and is marked as the known
failure it is. The full-mode figures in the comments predate a change of the compute model
(12:50 that day: compute per rank 47.0 -> 48.4 ms); the tests compare live runs.

Each case runs full mode once: 20 s to several minutes on a shared machine (marker
``congestion``; CI runs them, ``-m "not congestion"`` skips them locally).
"""

from __future__ import annotations

import dataclasses
import re

import pytest

from moesim.fabric.spec import FabricSpec
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.step import Fast, StepResult, StepSpec, run_step

EP = 32  # four hosts of 8 GPUs


def _spec(gpus: int, over: float, pxn: bool) -> StepSpec:
    """moe-1t cut to one MoE layer per stage; PP = gpus / 64 (DP 64 per stage), EP32, two
    micro-batches; H800 hosts on a 2-tier rail fat tree, 4 hosts per SU, 2 spines, ECMP."""
    pp = gpus // 64
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


def _both(gpus: int, over: float, pxn: bool) -> tuple[StepResult, StepResult]:
    """(full mode, fast mode with whole-fabric phases) of :func:`_spec`."""
    spec = _spec(gpus, over, pxn)
    return run_step(spec), run_step(spec, Fast(phases="fabric"))


@pytest.mark.congestion
@pytest.mark.parametrize("gpus, over, pxn", [
    (128, 4.0, False),  # measured: full 1682.45 ms, phases 1659.17 ms (-1.4 %), same link
    (256, 4.0, True),  # measured: full 955.77 ms, phases 925.57 ms (-3.2 %), same link
    pytest.param(128, 2.0, True, marks=pytest.mark.xfail(strict=True, reason=(
        "measured: full 580.17 ms, phases 537.03 ms (-7.4 %): full mode's replicas reach the "
        "gradient rings at different times (stage-0 all-gathers end over 43 ms), which the "
        "representative does not see"))),
])
def test_fast_sees_the_contention_full_mode_sees(gpus: int, over: float, pxn: bool) -> None:
    full, fast = _both(gpus, over, pxn)
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=0.05)
    assert full.top_link and link_class(fast.top_link) == link_class(full.top_link)


@pytest.mark.congestion
def test_fast_agrees_on_a_non_blocking_fabric() -> None:
    """Measured: full 533.46 ms, phases 535.88 ms (+0.5 %); the estimates 435.18 ms."""
    full, fast = _both(128, 1.0, False)
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=0.02)


def test_link_class_blanks_copies_only() -> None:
    assert link_class("leaf.r7.su1->spine.0") == link_class("leaf.r7.su0->spine.1")
    assert link_class("leaf.r7.su1->spine.0") != link_class("leaf.r6.su1->spine.0")
    assert link_class("h12/nic3->leaf.r3.su3") == "h#/nic3->leaf.r3.su#"
    assert link_class("spine.0->leaf.r1.su0") != link_class("leaf.r1.su0->spine.0")
