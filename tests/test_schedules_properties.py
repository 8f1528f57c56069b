"""Property tests: schedules cover every (micro-batch, chunk) once and run in dependency order."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st
from schedule_executor import simulate_schedule

from moesim.schedule import build_schedule, dependencies, get_schedule


@st.composite
def schedule_inputs(draw):
    name = draw(st.sampled_from(["1f1b", "interleaved", "dualpipe"]))
    pp = draw(st.integers(1, 5))
    if name == "interleaved":
        return name, pp, pp * draw(st.integers(1, 3)), draw(st.integers(2, 4))
    if name == "dualpipe":  # even pp, an even m of at least 2 pp
        pp = 2 * draw(st.integers(1, 3))
        return name, pp, 2 * draw(st.integers(pp, pp + 4)), 1
    return name, pp, draw(st.integers(1, 10)), 1


@settings(max_examples=60, deadline=None)
@given(schedule_inputs())
def test_each_stage_runs_every_pass_exactly_once(inputs):
    name, pp, m, v = inputs
    ops = build_schedule(name, pp, m, v)
    assert len(ops) == pp
    expected = Counter((k, mb, c) for k in "FB" for mb in range(m) for c in range(v))
    if name == "dualpipe":  # chunk = direction: the first half of the micro-batches in 0
        expected = Counter((k, mb, int(mb >= m // 2)) for k in "FB" for mb in range(m))
    for stage_ops in ops:
        got = Counter((p.kind, p.microbatch, p.chunk) for op in stage_ops for p in op.passes())
        deferred = Counter(("B", op.microbatch, op.chunk) for op in stage_ops if op.defer_w)
        weights = Counter(("B", p.microbatch, p.chunk) for op in stage_ops
                          for p in op.passes() if p.kind == "W")
        assert weights == deferred  # each deferred weight gradient runs once, after its B
        assert got - Counter({("W", mb, c): n for (_, mb, c), n in weights.items()}) == expected


@settings(max_examples=60, deadline=None)
@given(
    schedule_inputs(),
    st.integers(1, 4),
    st.integers(1, 4),
    st.sampled_from([0.0, 0.5, 2.0]),
    st.booleans(),
)
def test_execution_respects_dependencies(inputs, f_s, b_s, p2p_s, overlap):
    name, pp, m, v = inputs
    ops = build_schedule(name, pp, m, v)
    place = get_schedule(name).placement(pp, v)
    fb_s = max(f_s, b_s) if overlap else None
    w_s = b_s / 2  # a deferred B runs the other half
    result = simulate_schedule(simpy.Environment(), ops, float(f_s), float(b_s), p2p_s, fb_s,
                               w_s, place)
    deps = dependencies(ops, place)
    for stage, spans in enumerate(result.spans):
        assert [span.op for span in spans] == list(ops[stage])
        for prev, nxt in pairwise(spans):
            assert prev.end_s <= nxt.start_s
        for span in spans:
            for p in span.op.passes():
                assert span.start_s < result.pass_end_s[(stage, p)] <= span.end_s
                for dep in deps[(stage, p)]:
                    hop_s = p2p_s if dep[0] != stage else 0.0
                    assert span.start_s >= result.pass_end_s[dep] + hop_s - 1e-9
    assert result.makespan_s == max(result.pass_end_s.values())
    assert 0.0 <= result.bubble_fraction() < 1.0
    if overlap:  # overlapping never lengthens the step (max-plus system, shorter ops)
        serial = simulate_schedule(simpy.Environment(), ops, float(f_s), float(b_s), p2p_s,
                                   None, w_s, place)
        assert result.makespan_s <= serial.makespan_s + 1e-9
