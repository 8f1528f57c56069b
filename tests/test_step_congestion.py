"""Fast mode against full mode where replicas contend: oversubscribed rail fabrics (issue 15).

Fast mode with whole-fabric phases (``Fast(phases="fabric")``, moesim.step.phased) simulates
one pipeline and solves every group's traffic of each phase at once; full mode simulates
every rank. On rail fabrics with EP groups spanning
four hosts and SUs of four hosts (so EP, DP and pipeline traffic climb to the spines), the
issue asks for fast mode's step within 5 % of full mode's with the same top link (up to
symmetry: the same switch tier, direction and rail; symmetric copies of a link tie) at 2:1 and
4:1, ECMP and PXN, and within 2 % on 1:1.

Measured on 2026-12-03 (15:2x, after the engine's solo-flow change; full / fabric phases):
128 2:1 ECMP 906.17 / 910.00 ms (+0.4 %, same link); 256 2:1 ECMP 1090.94 / 1084.57 (-0.6 %,
top link differs: full leaf.r7.su0->spine.1, fabric spine.0->leaf.r0.su6); 256 4:1 ECMP
2048.92 / 2009.29 (-1.9 %, same); 256 2:1 PXN 655.08 / 626.51 (-4.4 %, same); 128 4:1 PXN
894.75 / 844.51 (-5.6 %, same); 128 2:1 PXN 581.89 / 537.03 (-7.7 %, same); 512 4:1 ECMP
2763.48 / 2589.75 (-6.3 %, same); 512 2:1 ECMP 1458.81 / 1446.27 (-0.9 %, same class); 512
2:1 PXN 894.55 / 869.68 (-2.8 %, same); 512 4:1 PXN 1242.15 / 1220.79 (-1.7 %, same). At 128
GPUs with PXN fast
mode is low, and the gap is in the gradient rings (128 2:1 PXN: dp_exposed 291.8 vs
339.5 ms); it stays when the all-to-alls carry a thousandth of their bytes (292.9 vs
338.6 ms: not all-to-alls beside the rings) and when each ring's edges are made to move in
lockstep (one coupled flow per ring: 537.03 ms unchanged). Nor is it replicas joining
late: full mode's stage-0 ranks join the 4.7 GB reduce-scatter within 1 ms of each other and
finish it over 372.9-519.3 ms, where the phases' job takes 194.5 ms (done at 436.7 ms): the
chunked ring runs about 1.4x its slowest edge's fluid time beside the concurrent expert and
layer reduce-scatters. Not yet modelled. Only the
cheapest cases are tests; the full-mode figures in the parameters' comments are older
(before the 12:50 compute change: +1.4 ms compute); the tests compare live runs.

Each case runs full mode once: 14-33 s of CPU at 128-256 GPUs (15:2x that day; marker
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
    (128, 2.0, False),  # measured: full 906.17 ms, phases 910.00 ms (+0.4 %), same link
    pytest.param(128, 2.0, True, marks=pytest.mark.xfail(strict=True, reason=(
        "measured: full 581.89 ms, phases 537.03 ms (-7.7 %): the gradient rings under PXN "
        "(module docstring)"))),
    pytest.param(128, 4.0, True, marks=pytest.mark.xfail(strict=True, reason=(
        "measured: full 894.75 ms, phases 844.51 ms (-5.6 %): the gradient rings under PXN "
        "(module docstring)"))),
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
