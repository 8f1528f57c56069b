"""Pipeline schedules: registry, input checks, and exact makespans from the SimPy executor."""

from __future__ import annotations

import dataclasses

import pytest
import simpy
from schedule_executor import simulate_schedule

from moesim.errors import ConfigError
from moesim.schedule import (
    ONE_F_ONE_B,
    Op,
    Pass,
    PipelineSchedule,
    build_schedule,
    bwd,
    dependencies,
    fwd,
    fwd_bwd,
    get_schedule,
    register_schedule,
    schedule_names,
)


def run(ops, f_s, b_s, p2p_s=0.0, fb_s=None, w_s=0.0, place=None):
    return simulate_schedule(simpy.Environment(), ops, f_s, b_s, p2p_s, fb_s, w_s, place)


def test_registry_names_and_lookup():
    assert schedule_names()[:3] == ("1f1b", "interleaved", "dualpipe")
    assert get_schedule("1f1b") is ONE_F_ONE_B


def test_unknown_schedule_lists_allowed_names():
    with pytest.raises(ConfigError, match="allowed: 1f1b, interleaved, dualpipe") as err:
        get_schedule("gpipe-ish")
    assert err.value.field == "schedule"


def test_duplicate_schedule_name_is_an_error():
    dup = PipelineSchedule("1f1b", ONE_F_ONE_B.build, ONE_F_ONE_B.check)
    with pytest.raises(ConfigError, match="already registered"):
        register_schedule(dup)


@pytest.mark.parametrize(
    ("name", "pp", "m", "v", "field"),
    [
        ("1f1b", 4, 8, 2, "schedule.virtual_stages"),
        ("dualpipe", 4, 8, 2, "schedule.virtual_stages"),
        ("dualpipe", 3, 8, 1, "schedule.pp"),
        ("dualpipe", 4, 7, 1, "schedule.microbatches"),
        ("dualpipe", 4, 6, 1, "schedule.microbatches"),
        ("interleaved", 4, 8, 1, "schedule.virtual_stages"),
        ("interleaved", 4, 6, 2, "schedule.microbatches"),
        ("1f1b", 0, 8, 1, "schedule.pp"),
        ("1f1b", 4, 0, 1, "schedule.microbatches"),
    ],
)
def test_bad_inputs_raise_config_error(name, pp, m, v, field):
    with pytest.raises(ConfigError) as err:
        build_schedule(name, pp, m, v)
    assert err.value.field == field


def test_op_validation_and_passes():
    assert fwd_bwd(3, 1).passes() == (Pass("F", 3, 0), Pass("B", 1, 0))
    with pytest.raises(ConfigError):
        Op("FB", 3, 0)
    with pytest.raises(ConfigError):
        Op("F", 3, 0, bwd_microbatch=1, bwd_chunk=0)


def test_1f1b_order_pp2_m3():
    ops = build_schedule("1f1b", 2, 3)
    assert ops[0] == (fwd(0), fwd(1), bwd(0), fwd(2), bwd(1), bwd(2))
    assert ops[1] == (fwd(0), bwd(0), fwd(1), bwd(1), fwd(2), bwd(2))


def test_interleaved_order_pp2_m2_v2():
    # Megatron: stage 0 warm-up (2-0-1)*2 + (2-1)*2 = 4 = all forwards; stage 1 warm-up 2.
    ops = build_schedule("interleaved", 2, 2, 2)
    assert ops[0] == (
        fwd(0, 0), fwd(1, 0), fwd(0, 1), fwd(1, 1),
        bwd(0, 1), bwd(1, 1), bwd(0, 0), bwd(1, 0),
    )  # fmt: skip
    assert ops[1] == (
        fwd(0, 0), fwd(1, 0), fwd(0, 1), bwd(0, 1),
        fwd(1, 1), bwd(1, 1), bwd(0, 0), bwd(1, 0),
    )  # fmt: skip


def test_dependencies_of_interleaved_wrap_around():
    deps = dependencies(build_schedule("interleaved", 2, 2, 2))
    assert deps[(0, Pass("F", 1, 1))] == ((1, Pass("F", 1, 0)),)
    assert deps[(0, Pass("F", 1, 0))] == ()
    assert deps[(1, Pass("B", 0, 0))] == ((1, Pass("F", 0, 0)), (0, Pass("B", 0, 1)))
    assert deps[(1, Pass("B", 0, 1))] == ((1, Pass("F", 0, 1)),)


@pytest.mark.parametrize(("pp", "m"), [(1, 1), (2, 2), (2, 5), (3, 7), (4, 3), (4, 8), (8, 16)])
@pytest.mark.parametrize(("f_s", "b_s"), [(1.0, 2.0), (1.0, 1.0), (3.0, 1.0)])
def test_1f1b_bubble_matches_closed_form(pp, m, f_s, b_s):
    result = run(build_schedule("1f1b", pp, m), f_s, b_s)
    assert result.makespan_s == (m + pp - 1) * (f_s + b_s)
    assert result.bubble_fraction() == pytest.approx((pp - 1) / (m + pp - 1), abs=1e-12)
    assert result.bubble_fraction() == pytest.approx(1 - m * (f_s + b_s) / result.makespan_s)


@pytest.mark.parametrize(
    ("pp", "m", "v"), [(2, 2, 2), (2, 4, 2), (4, 4, 2), (4, 8, 2), (4, 8, 3), (4, 4, 4), (3, 6, 2)]
)
def test_interleaving_shrinks_bubble_by_virtual_stage_factor(pp, m, v):
    # Per-chunk times f/v, b/v; Narayanan et al. 2021: makespan = (m + (p-1)/v) * (f + b).
    f_chunk_s, b_chunk_s = 1.0, 2.0
    f_s, b_s = v * f_chunk_s, v * b_chunk_s
    result = run(build_schedule("interleaved", pp, m, v), f_chunk_s, b_chunk_s)
    assert result.makespan_s == pytest.approx((m + (pp - 1) / v) * (f_s + b_s), abs=1e-9)
    plain = run(build_schedule("1f1b", pp, m), f_s, b_s)
    work_s = m * (f_s + b_s)
    assert result.makespan_s - work_s == pytest.approx((plain.makespan_s - work_s) / v)


def test_p2p_delay_on_one_microbatch_two_stages():
    # F on s0, hop, F on s1, B on s1, hop, B on s0.
    result = run(build_schedule("1f1b", 2, 1), 1.0, 2.0, p2p_s=0.5)
    assert result.makespan_s == 2 * (1.0 + 2.0) + 2 * 0.5
    assert [(s.start_s, s.end_s) for s in result.spans[1]] == [(1.5, 2.5), (2.5, 4.5)]


def _a2a_case():
    # Per micro-batch per stage: compute and all-to-all of forward and backward.
    compute_f_s, a2a_f_s, compute_b_s, a2a_b_s = 2.0, 1.0, 4.0, 2.0
    f_s, b_s = compute_f_s + a2a_f_s, compute_b_s + a2a_b_s  # not overlapped: 3, 6
    fb_s = max(compute_f_s + compute_b_s, a2a_f_s + a2a_b_s)  # overlapped: 6
    return f_s, b_s, fb_s, a2a_f_s + a2a_b_s


def _order(ops) -> list[str]:
    """Compact op names: F3.0 = forward of micro-batch 3 in chunk 0; Bw = B deferring its W;
    FB = (forward, backward)."""
    def name(op):
        if op.kind == "FB":
            return f"FB{op.microbatch}.{op.chunk}/{op.bwd_microbatch}.{op.bwd_chunk}"
        return f"{op.kind}{'w' if op.defer_w else ''}{op.microbatch}.{op.chunk}"
    return [name(op) for op in ops]


def test_dualpipe_order_pp4_m8_by_hand():
    # deepseek-ai/DualPipe dualpipe.py, DualPipe.step with 4 ranks and 8 micro-batches:
    # chunk 0 carries micro-batches 0-3 from rank 0, chunk 1 carries 4-7 from rank 3.
    # Rank 0 (h = 0): step 1 two near F; step 2 one (near F, far F); step 3 far B deferring
    # its W, that W, far F; step 4 one FB(near F, far B), FB(far F, near B); step 5 far B,
    # FB(far F, near B); step 6 far B, near B (W deferred from the near B: h even); step 7
    # W, near B deferred; step 8 the last W.
    ops = build_schedule("dualpipe", 4, 8)
    assert _order(ops[0]) == [
        "F0.0", "F1.0", "F2.0", "F4.1", "Bw4.1", "W4.1", "F5.1", "FB3.0/5.1", "FB6.1/0.0",
        "B6.1", "FB7.1/1.0", "B7.1", "Bw2.0", "W2.0", "Bw3.0", "W3.0"]
    # Rank 1 (h = 1, a middle rank): no step 1, 3, 5, 7; its first step-4 pair runs apart.
    assert _order(ops[1]) == [
        "F0.0", "F4.1", "F1.0", "F5.1", "F2.0", "B4.1", "FB6.1/0.0", "FB3.0/5.1",
        "FB7.1/1.0", "B6.1", "B2.0", "Bw7.1", "Bw3.0", "W7.1", "W3.0"]
    # The second half mirrors the first: chunks swapped, micro-batches of the other half.
    def mirror(op):
        other = {"microbatch": (op.microbatch + 4) % 8, "chunk": 1 - op.chunk}
        if op.kind == "FB":
            other |= {"bwd_microbatch": (op.bwd_microbatch + 4) % 8, "bwd_chunk": 1 - op.bwd_chunk}
        return dataclasses.replace(op, **other)

    for r in (2, 3):
        assert ops[r] == tuple(mirror(op) for op in ops[3 - r])


@pytest.mark.parametrize("pp", [4, 8, 16])
@pytest.mark.parametrize("fb_s", [2.0, 2.5, 3.0])
def test_dualpipe_bubble_is_the_papers_formula(pp, fb_s):
    # DeepSeek-V3 report Table 2: DualPipe's bubble (PP/2 - 1)(F&B + B - 3W), with B the whole
    # backward and W its weight part; at the report's proportions F = W = B/2 (dgrad and wgrad
    # each cost a forward), F&B from no overlap gain (F + B) down to B. The most idle rank
    # idles exactly that (each rank runs m forwards and m backwards).
    f_s, b_s, w_s, m = 1.0, 2.0, 1.0, 4 * pp
    ops = build_schedule("dualpipe", pp, m)
    place = get_schedule("dualpipe").placement(pp)
    result = run(ops, f_s, b_s, fb_s=fb_s, w_s=w_s, place=place)
    idle = [result.makespan_s - result.busy_s(s) for s in range(pp)]
    assert max(idle) == pytest.approx((pp / 2 - 1) * (fb_s + b_s - 3 * w_s), abs=1e-9)
    if fb_s == f_s + b_s:  # no overlap gain: every rank is busy m (F + B)
        assert all(result.busy_s(s) == m * (f_s + b_s) for s in range(pp))
        assert result.makespan_s == m * (f_s + b_s) + (pp / 2 - 1) * (fb_s + b_s - 3 * w_s)
    # plain 1F1B with the same per-pass times idles (pp - 1)(F + B) on every stage
    plain = run(build_schedule("1f1b", pp, m), f_s, b_s)
    assert plain.makespan_s - plain.busy_s(0) == (pp - 1) * (f_s + b_s) > max(idle)


def test_dualpipe_places_mirrored_chunks():
    place = get_schedule("dualpipe").placement(4)
    assert [place.vstages_of(s) for s in range(4)] == [(0, 3), (1, 2), (2, 1), (3, 0)]
    assert place.owner(1, 1) == (2, 1) and place.owner(1, 0) == (1, 0)
    deps = dependencies(build_schedule("dualpipe", 4, 8), place)
    # reverse direction (chunk 1): micro-batch 4 enters at rank 3 and walks down
    assert deps[(3, Pass("F", 4, 1))] == ()
    assert deps[(2, Pass("F", 4, 1))] == ((3, Pass("F", 4, 1)),)
    assert deps[(0, Pass("B", 4, 1))] == ((0, Pass("F", 4, 1)),)  # its last stage: the loss
    assert deps[(3, Pass("B", 4, 1))] == ((3, Pass("F", 4, 1)), (2, Pass("B", 4, 1)))
    assert deps[(0, Pass("W", 4, 1))] == ((0, Pass("B", 4, 1)),)


def test_deadlocked_op_list_raises():
    # Stage 1 wants B0 before its own F0 can have run: waits forever.
    ops = ((fwd(0), bwd(0)), (bwd(0), fwd(0)))
    with pytest.raises(ConfigError, match="deadlock"):
        run(ops, 1.0, 1.0)


def test_missing_pass_raises():
    ops = ((fwd(0), bwd(0)), (bwd(0),))
    with pytest.raises(ConfigError, match="never scheduled"):
        run(ops, 1.0, 1.0)


def test_negative_time_raises():
    with pytest.raises(ConfigError) as err:
        run(build_schedule("1f1b", 2, 2), -1.0, 1.0)
    assert err.value.field == "schedule.f_time_s"


def test_zero_times_run_in_zero_time():
    ops, place = build_schedule("dualpipe", 4, 8), get_schedule("dualpipe").placement(4)
    assert run(ops, 0.0, 0.0, fb_s=0.0, place=place).makespan_s == 0.0


def test_the_executor_example() -> None:
    import doctest

    import schedule_executor

    assert doctest.testmod(schedule_executor).failed == 0
