"""Fast mode against full mode where replicas contend: oversubscribed rail fabrics (issue 15).

Fast mode with whole-fabric phases (``Fast(phases="fabric")``, moesim.step.phased) simulates
one pipeline and solves every group's traffic of each phase at once; full mode simulates
every rank. On rail fabrics with EP groups spanning
four hosts and SUs of four hosts (so EP, DP and pipeline traffic climb to the spines), the
issue asks for fast mode's step within 5 % of full mode's with the same top link (up to
symmetry: the same switch tier, direction and rail; symmetric copies of a link tie) at 2:1 and
4:1, ECMP and PXN, and within 2 % on 1:1.

What closed the last gaps (128 GPUs with PXN, -7.7 % and -5.6 % before): a chunked ring's
ranks do not finish together. Behind its slowest edge they finish one after another (the one
right after it last), and each goes on to its optimizer step and its all-gathers while the slow
edge is still sending, on the same uplinks (128 2:1 PXN, full mode: the 4.7 GB reduce-scatter's
ranks done over 373-519 ms, their all-gathers from 376 ms; made to wait for the whole ring,
full mode gives 535.2 ms, where the phases then gave 537.0 ms). The phases now time each rank of
a ring job and start its tail at its own time (moesim.step.ringjob).

Measured on 2026-12-04 05:0x, after f90343f's uniform-router draw (full / fabric phases, ms;
top link class same unless said), and again at 09:2x, the same figures
(``benchmarks/congestion_matrix.py`` runs these specs and prints them):
128: 2:1 ECMP 905.31 / 908.06 (+0.3 %); 2:1 PXN 581.95 / 586.54 (+0.8 %); 4:1 ECMP 1686.06 /
1657.35 (-1.7 %); 4:1 PXN 894.74 / 897.29 (+0.3 %).
256: 2:1 ECMP 1093.25 / 1084.94 (-0.8 %); 2:1 PXN 655.34 / 678.26 (+3.5 %); 4:1 PXN 958.57 /
983.11 (+2.6 %); 4:1 ECMP 2084.48 / 2006.85 (-3.7 %; before that draw 2042.64 / 2006.76).
The "top link" there is judged per straggler (:func:`straggler_link`): two stages' DP tails
end the step within 0.74 % of each other in full mode (stage 0 at 2084.48 ms, stage 3 at
2069.15 ms); full mode's critical path walked back from stage 0's last rank names the uplink
leaf.r7.su0->spine.1 (1137 ms on it), from stage 3's spine.0->leaf.r0.su6 (1430 ms). The
phases end stage 3 last (2006.85 ms, stage 0 1964.72: 2.1 % apart) and name
spine.0->leaf.r0.su6, stage 3's own; their stage 0 ring's busiest link is
leaf.r7.su0->spine.1, full mode's. A step allowed 5 % of error cannot order two stragglers
0.74 % apart, so the test asks for the link full mode names from the straggler fast mode
finds last, where that straggler ends within the same 5 % of full mode's step. (The order
flips because the phases' pipeline ends early on stage 0, last op 807 vs 921-944 ms: the
mechanism of 512 GPUs 4:1 ECMP below.)
512: 2:1 ECMP 1468.31 / 1445.28 (-1.6 %, same class); 2:1 PXN 894.62 / 914.63 (+2.2 %);
4:1 PXN 1242.17 / 1291.79 (+4.0 %); 4:1 ECMP 2769.61 / 2588.88 (-6.5 %, was a strict xfail:
full mode's stages reach their gradient tails 100-200 ms later: the EP groups' members are
replicas whose pipeline inputs arrive spread out in full mode, ECMP stacking some sends on one
uplink and the next micro-batch's all-to-all starving them there; fast mode's replicas arrived
together).
Since 2026-12-07 the phases time each replica's pipeline input on its own route beside the
all-to-alls there (moesim.step.replica_inputs); ``benchmarks/congestion_matrix.py`` on ecmp
5647c91 (full / fabric phases, ms; every top straggler link of the same class):
128: 2:1 ECMP 905.31 / 913.87 (+0.95 %); 2:1 PXN 581.95 / 587.78 (+1.00 %); 4:1 ECMP
1686.06 / 1681.47 (-0.27 %); 4:1 PXN 894.74 / 899.47 (+0.53 %).
256: 2:1 ECMP 1093.25 / 1100.76 (+0.69 %); 2:1 PXN 655.34 / 679.09 (+3.62 %); 4:1 ECMP
2084.48 / 2055.91 (-1.37 %, stage 3 last, its link as above); 4:1 PXN 958.57 / 985.53 (+2.81 %).
512: 2:1 ECMP 1468.31 / 1483.76 (+1.05 %); 2:1 PXN 894.62 / 915.87 (+2.38 %); 4:1 ECMP
2769.61 / 2675.31 (-3.40 %); 4:1 PXN 1242.17 / 1293.86 (+4.16 %). The 1:1 cases below unchanged.
64 GPUs (one stage, the default suite's case): 4:1 ECMP 1790.74 / 1808.44 (+1.0 %, same link).
1:1, ``Fast()`` as users get it (under ECMP since 2026-12-04 ``Fast(phases="replicas")``: the
estimates' all-to-alls, the pipeline's sends as copies over every replica and the gradient
rings as flows beside them, the DP tail's ranks each on its own clock, moesim.step.ringflows;
was the estimates with the stage's ring timer): 128 ECMP 535.32 / 542.35 (+1.3 %, was
-1.2 %), 256 ECMP 645.85 / 651.36 (+0.9 %, was -4.5 %), 512 ECMP 864.18 / 871.31 (+0.8 %, was
-3.0 %), 128 PXN 440.01 / 439.92 (-0.0 %, was -2.8 %); 128 D-mod-K 436.57 / 428.13 (-1.9 %,
the estimates with the host's ring timer: D-mod-K spreads the replicas; ``"replicas"`` there
430.11 ms). After f90343f (the uniform router's count-level draw): 128 ECMP 535.50 / 542.21,
256 ECMP 645.71 / 651.17, 512 ECMP 865.15 / 872.07, 128 PXN 439.77 / 439.86; the
oversubscribed figures above predate it.
Each case above runs full mode once: 10-12 s of CPU at 128 GPUs, 22-27 s at 256, 50-70 s at
512 (marker ``congestion``; CI runs the 128-GPU ones, ``-m "not congestion"`` skips them
locally; the 256- and 512-GPU ones are also marked ``congestion_large``, deselected by default
and run with ``pytest -m congestion_large``); the 64-GPU case (5 s of CPU) runs in the default
suite.
"""

from __future__ import annotations

import dataclasses

import pytest
from congestion_fixtures import (
    STAGE_GPUS,
    STEP_REL,
    congestion_spec,
    link_class,
    straggler_link,
)

from moesim.fabric.build import build_table
from moesim.fabric.spec import FabricSpec
from moesim.fabric.subfabric import GraphIndex
from moesim.step import Fast, StepResult, run_step
from moesim.step.fast import prepare
from moesim.step.phased import declares_oversubscription, oversubscribed
from moesim.topologies.registry import preset_names, read_preset


def _both(gpus: int, over: float, pxn: bool) -> tuple[StepResult, StepResult]:
    """(full mode, fast mode with whole-fabric phases) of :func:`congestion_spec`."""
    spec = congestion_spec(gpus, over, pxn)
    return run_step(spec), run_step(spec, Fast(phases="fabric"))


def _case(gpus: int, over: float, pxn: bool) -> object:
    """One case of the matrix; the 256- and 512-GPU ones (full mode 22-27 and 50-70 s of CPU
    each) are also marked ``congestion_large``, which the default run deselects (pyproject
    addopts) to keep CI near ten minutes: ``pytest -m congestion_large`` runs them."""
    marks = [pytest.mark.congestion_large] if gpus >= 256 else []
    return pytest.param(gpus, over, pxn, marks=marks)


CASES = [_case(gpus, over, pxn) for gpus in (128, 256, 512) for over in (2.0, 4.0)
         for pxn in (False, True)]


@pytest.mark.congestion
@pytest.mark.parametrize("gpus, over, pxn", CASES)
def test_fast_sees_the_contention_full_mode_sees(gpus: int, over: float, pxn: bool) -> None:
    full, fast = _both(gpus, over, pxn)
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=STEP_REL)
    full_link = straggler_link(full, fast.last_rank // STAGE_GPUS, STEP_REL)
    assert full_link and link_class(fast.top_link) == link_class(full_link)


def test_fast_sees_the_contention_on_one_stage() -> None:
    """64 GPUs (PP 1: EP32 over 4 hosts, DP 64 over 2 SUs) on a 4:1 spine, fast mode as users
    get it (``Fast()``: the phases, the fabric being oversubscribed): within 5 % of full mode
    with the same top link (measured: +1.0 %; the estimates -43.1 %)."""
    spec = congestion_spec(64, 4.0, False)
    full, fast = run_step(spec), run_step(spec, Fast())
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=0.05)
    assert full.top_link and link_class(fast.top_link) == link_class(full.top_link)


@pytest.mark.parametrize("over, blocking", [(1.0, False), (2.0, True), (4.0, True)])
def test_auto_phases_follow_the_oversubscription(over: float, blocking: bool) -> None:
    """``Fast()`` runs the whole-fabric phases where a switch is oversubscribed, elsewhere
    the estimates with every replica's copies under ECMP (the same step as naming them)."""
    spec = congestion_spec(64, over, True)
    assert declares_oversubscription(spec.fabric) is blocking
    assert oversubscribed(prepare(spec)[0]) is blocking
    chosen = Fast(phases="fabric" if blocking else "replicas")
    assert run_step(spec, Fast()).step_time_s == run_step(spec, chosen).step_time_s


def _one_to_one(gpus: int, pxn: bool) -> object:
    """A 1:1 case; all but 128 GPUs ECMP are ``congestion_large``."""
    marks = [] if (gpus, pxn) == (128, False) else [pytest.mark.congestion_large]
    return pytest.param(gpus, pxn, marks=marks)


@pytest.mark.congestion
@pytest.mark.parametrize("gpus, pxn", [_one_to_one(g, p) for g, p in
                                       ((128, False), (256, False), (512, False), (128, True))])
def test_fast_agrees_on_a_non_blocking_fabric(gpus: int, pxn: bool) -> None:
    """1:1 with ECMP, fast mode as users get it (``Fast()``: ``phases="replicas"`` there,
    moesim.step.ringflows). Measured on main 6980b05 (after f90343f's router draw): 128 GPUs
    full 535.50 ms, Fast() 542.21 ms (+1.3 %); 256 GPUs 645.71 / 651.17 (+0.8 %); 512 GPUs
    865.15 / 872.07 (+0.8 %); 128 GPUs with PXN 439.77 / 439.86 (+0.0 %)."""
    spec = congestion_spec(gpus, 1.0, pxn)
    full, fast = run_step(spec), run_step(spec, Fast())
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=0.02)


@pytest.mark.congestion_large
@pytest.mark.congestion
def test_fast_agrees_on_a_non_blocking_fabric_with_dmodk() -> None:
    """1:1, D-mod-K, 128 GPUs: full 436.46 ms, Fast() 427.97 ms (-1.95 %; before f90343f's
    router draw 436.57 / 428.13)."""
    spec = congestion_spec(128, 1.0, False)
    spec = dataclasses.replace(spec, fabric=dataclasses.replace(spec.fabric, multipath="dmodk"))
    full, fast = run_step(spec), run_step(spec, Fast())
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=0.02)


@pytest.mark.parametrize("multipath", ["dmodk", "spray"])
def test_host_ring_timer_agrees_with_ring_flows_without_ecmp(multipath: str) -> None:
    """D-mod-K and spray spread the replicas' copies over the uplinks, so ``Fast()`` keeps the
    representative's own sends and the host's ring timer there (moesim.step.estimate);
    every replica's copies with the rings as flows (``Fast(phases="replicas")``, what it
    runs under ECMP: moesim.step.ringflows) gives a step within 1 % (measured at 128 GPUs 1:1:
    428.13 ms, replicas 430.11 ms, +0.46 %; full mode under D-mod-K 436.57 ms)."""
    spec = congestion_spec(128, 1.0, False)
    spec = dataclasses.replace(spec, fabric=dataclasses.replace(spec.fabric,
                                                                multipath=multipath))
    host = run_step(spec, Fast())
    flows = run_step(spec, Fast(phases="replicas"))
    assert flows.step_time_s != host.step_time_s  # the other model did run
    assert flows.step_time_s == pytest.approx(host.step_time_s, rel=0.01)


def test_link_class_blanks_copies_only() -> None:
    assert link_class("leaf.r7.su1->spine.0") == link_class("leaf.r7.su0->spine.1")
    assert link_class("leaf.r7.su1->spine.0") != link_class("leaf.r6.su1->spine.0")
    assert link_class("h12/nic3->leaf.r3.su3") == "h#/nic3->leaf.r3.su#"
    assert link_class("spine.0->leaf.r1.su0") != link_class("leaf.r1.su0->spine.0")


@pytest.mark.parametrize("preset", preset_names())
def test_declared_oversubscription_is_the_fabrics(preset: str) -> None:
    """Fast(phases="auto") reads the preset's oversubscription parameters instead of building
    the fabric: on every shipped preset (small: 8 hosts where it takes hosts) they say what
    the built fabric's switches do."""
    params = (("hosts", 8),) if "hosts" in read_preset(preset)["params"] else ()
    fabric = FabricSpec(preset=preset, params=params)
    index = GraphIndex(build_table(fabric), fabric, "H800")
    assert declares_oversubscription(fabric) is oversubscribed(index)
