"""Pipeline schedules: registry, input checks, and exact makespans from the SimPy executor."""

from __future__ import annotations

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


def run(ops, f_s, b_s, p2p_s=0.0, fb_s=None):
    return simulate_schedule(simpy.Environment(), ops, f_s, b_s, p2p_s, fb_s)


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


@pytest.mark.parametrize("m", [1, 2, 5, 9])
def test_dualpipe_hides_all_to_all_single_stage(m):
    f_s, b_s, fb_s, hidden_s = _a2a_case()
    ops = build_schedule("dualpipe", 1, m)
    assert ops[0] == (fwd(0), *(fwd_bwd(i + 1, i) for i in range(m - 1)), bwd(m - 1))
    serial = run(ops, f_s, b_s)
    overlapped = run(ops, f_s, b_s, fb_s=fb_s)
    assert serial.makespan_s == m * (f_s + b_s)
    assert overlapped.makespan_s == f_s + (m - 1) * fb_s + b_s
    assert serial.makespan_s - overlapped.makespan_s == (m - 1) * hidden_s


def test_dualpipe_hides_all_to_all_two_stages():
    # Hand timeline, pp=2 m=2: s0 F0 [0,3] F1 [3,6]; s1 F0 [3,6] FB(1,0) [6,6+T];
    # then B0 on s0 and B1 on s1 [6+T, 12+T]; B1 on s0 [12+T, 18+T].
    f_s, b_s, fb_s, hidden_s = _a2a_case()
    ops = build_schedule("dualpipe", 2, 2)
    assert ops == ((fwd(0), fwd(1), bwd(0), bwd(1)), (fwd(0), fwd_bwd(1, 0), bwd(1)))
    serial = run(ops, f_s, b_s)
    overlapped = run(ops, f_s, b_s, fb_s=fb_s)
    assert serial.makespan_s == 2 * (f_s + b_s) + (f_s + b_s)
    assert overlapped.makespan_s == 2 * (f_s + b_s) + fb_s
    assert serial.makespan_s - overlapped.makespan_s == hidden_s
    assert overlapped.makespan_s < run(build_schedule("1f1b", 2, 2), f_s, b_s).makespan_s


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
    assert run(build_schedule("dualpipe", 3, 4), 0.0, 0.0, fb_s=0.0).makespan_s == 0.0


def test_the_executor_example() -> None:
    import doctest

    import schedule_executor

    assert doctest.testmod(schedule_executor).failed == 0
