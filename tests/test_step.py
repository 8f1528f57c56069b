"""The whole-step simulation: breakdown, equivalence with the MoE stack, bubble, faults."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst

from moesim.errors import ConfigError
from moesim.model import ModelConfig, get_model
from moesim.parallel.layout import ParallelLayout
from moesim.runner.group import simulate
from moesim.scenario.schema import FabricSpec, GroupSpec, GroupWorkload
from moesim.schedule.ops import Pass
from moesim.step import DEFAULT_FABRIC, StepSpec, run_step, simulate_step
from moesim.step.plan import build_plan, chunk_layers
from moesim.step.state import CATEGORIES, Generated, StepState

SEQ = 1024


def _model(layers: int = 4) -> ModelConfig:
    return dataclasses.replace(
        get_model("mixtral-8x7b"), num_layers=layers, moe_layers=(True,) * layers
    )


def _spec(layout: ParallelLayout, **kw: object) -> StepSpec:
    base: dict[str, object] = dict(model=_model(), layout=layout, seq_len=SEQ)
    base.update(kw)
    return StepSpec(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "layout, schedule, m",
    [
        (ParallelLayout(ep=8, dp=8), "1f1b", 1),
        (ParallelLayout(ep=4, dp=4, pp=2), "1f1b", 3),
        (ParallelLayout(ep=4, dp=4, pp=2, vpp=2), "interleaved", 4),
        (ParallelLayout(ep=4, dp=4, pp=2), "dualpipe", 4),
    ],
)
def test_breakdown_sums_to_step_time(layout: ParallelLayout, schedule: str, m: int) -> None:
    r = run_step(_spec(layout, schedule=schedule, microbatches=m))
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-9)
    assert r.breakdown_s["tp_exposed"] == 0.0
    assert all(v >= 0 for v in r.breakdown_s.values())
    assert max(r.stage_makespan_s) <= r.step_time_s
    d = json.loads(json.dumps(r.to_dict()))
    assert set(d["breakdown_s"]) >= {
        "compute", "a2a_exposed", "tp_exposed", "bubble", "dp_exposed", "optimizer"
    }
    assert 0 < d["mfu"] < 1


def test_pp1_m1_equals_moe_stack_simulation() -> None:
    """pp=1, m=1, no LM head, DP after the backward: every rank's schedule ends exactly where
    the MoE-stack replay of the same layers (same routing seed, same flows) ends; the
    DP/optimizer tail comes after. (With dp_overlap the gradient reduce-scatters share the
    fabric with the backward all-to-alls, so the two no longer match exactly.)"""
    spec = _spec(ParallelLayout(ep=8, dp=8), lm_head=False, dp_overlap=False,
                 recompute="none")  # the MoE-stack simulation recomputes nothing
    scn = GroupSpec(
        name="eq", model=spec.model, gpu="H100", fabric=DEFAULT_FABRIC, ep=8,
        workload=GroupWorkload(layers=4, tokens_per_rank=SEQ, seq_len=SEQ),
        seed=spec.seed,
    )
    stack = simulate(scn)
    st = simulate_step(spec)
    per_rank_stack = np.nanmax(stack.trace.end_s, axis=0)
    np.testing.assert_allclose(st.last_op_s, per_rank_stack, rtol=1e-9)
    assert (st.end_s > st.last_op_s).all()  # the DP tail (dense grads over 8 ranks) is not free


def test_bubble_matches_one_f_one_b_fraction() -> None:
    """Near-constant costs (uniform routing, NVLink a2a, no LM head): 1F1B idles the first
    stage (p - 1) / (m + p - 1) of its pipeline time."""
    pp, m = 2, 4
    st = simulate_step(_spec(ParallelLayout(ep=4, dp=4, pp=pp), microbatches=m, lm_head=False))
    rank0_bubble = st.time_s[0, 3]
    expected = (pp - 1) / (m + pp - 1)
    assert rank0_bubble / st.last_op_s[0] == pytest.approx(expected, rel=0.05)


def test_degraded_dp_link_slows_the_step() -> None:
    """Two hosts, EP inside each: a quarter-speed NIC link on host 1 slows the EDP/DP rings."""
    layout = ParallelLayout(ep=8, dp=16)
    fabric = FabricSpec(preset="rail-h800-64", params=(("hosts", 2), ("gpu", "H100")),
                        multipath="dmodk", batch_window_rel=0.02)
    fault = (("factor", 0.25), ("kind", "degrade"), ("link", ("h1/gpu0", "h1/nic0")))
    healthy = run_step(_spec(layout, fabric=fabric))
    degraded = run_step(_spec(layout, fabric=dataclasses.replace(fabric, faults=(fault,))))
    assert degraded.step_time_s > healthy.step_time_s * 1.01
    assert degraded.breakdown_s["dp_exposed"] > healthy.breakdown_s["dp_exposed"]


def test_deterministic() -> None:
    spec = _spec(ParallelLayout(ep=4, dp=4, pp=2), microbatches=2)
    assert run_step(spec).step_time_s == run_step(spec).step_time_s


def test_more_microbatches_raise_throughput() -> None:
    """The bubble's share shrinks with m, so tokens/s grows."""
    lay = ParallelLayout(ep=4, dp=4, pp=2)
    few = run_step(_spec(lay, microbatches=1))
    many = run_step(_spec(lay, microbatches=4))
    assert many.tokens_per_s > few.tokens_per_s
    assert many.breakdown_s["bubble"] / many.step_time_s < (
        few.breakdown_s["bubble"] / few.step_time_s
    )


def test_chunk_layers_interleaved_order() -> None:
    # virtual stage c * pp + s: stage 0 holds layers 0 and 2, stage 1 holds 1 and 3
    assert chunk_layers(ParallelLayout(ep=4, dp=4, pp=2, vpp=2), 4) == ((0,), (1,), (2,), (3,))
    # 61 layers on pp=8: 7, 8 x 6, 6 (moesim.parallel.layout.stage_layers)
    assert [len(c) for c in chunk_layers(ParallelLayout(pp=8), 61)] == [7] + [8] * 6 + [6]


@settings(max_examples=60, deadline=None)
@given(pp=hst.integers(1, 8), vpp=hst.integers(1, 4), extra=hst.integers(0, 40))
def test_chunk_layers_cover_every_layer_once(pp: int, vpp: int, extra: int) -> None:
    vpp = vpp if pp > 1 else 1
    lay = ParallelLayout(pp=pp, vpp=vpp)
    n = pp * vpp + extra
    try:
        chunks = chunk_layers(lay, n)
    except ConfigError:
        return  # an uneven split the layout cannot express
    assert [i for c in chunks for i in c] == list(range(n))
    assert all(len(c) >= 1 for c in chunks)
    per_stage = [sum(len(chunks[c * pp + s]) for c in range(vpp)) for s in range(pp)]
    assert tuple(per_stage) == lay.stage_layers(n)


def test_params_per_stage_add_up() -> None:
    spec = _spec(ParallelLayout(ep=4, dp=4, pp=2), microbatches=1)
    plan = build_plan(spec)
    from moesim.model import param_counts

    counts = param_counts(spec.model)
    assert sum(plan.dense_params) == counts.dense
    assert sum(plan.expert_params) * spec.layout.ep == counts.expert
    assert plan.act_bytes == 2 * SEQ * spec.model.hidden_size


def test_mfu_is_model_flops_over_peak() -> None:
    spec = _spec(ParallelLayout(ep=8, dp=8))
    r = run_step(spec)
    from moesim.model import training_flops

    flops = training_flops(spec.model, 8 * SEQ, SEQ, include_mtp=False)
    assert r.tflops_per_gpu == pytest.approx(flops / r.step_time_s / 8 / 1e12)
    assert r.mfu == pytest.approx(r.tflops_per_gpu / 989.0, rel=0.01)  # H100 SXM dense BF16
    assert r.tokens_per_s == pytest.approx(8 * SEQ / r.step_time_s)


@pytest.mark.parametrize(
    "kw, field",
    [
        (dict(layout=ParallelLayout(tp=3, ep=8, dp=8)), "layout.tp"),  # 32 heads
        (dict(layout=ParallelLayout(ep=4, dp=4, pp=2), schedule="interleaved"),
         "schedule.virtual_stages"),
        (dict(layout=ParallelLayout(ep=4, dp=4, pp=2, vpp=2), schedule="interleaved",
              microbatches=3), "schedule.microbatches"),
        (dict(layout=ParallelLayout(ep=3, dp=3)), "layout.ep"),
        (dict(layout=ParallelLayout(ep=8, dp=8), microbatches=0), "step.microbatches"),
        (dict(layout=ParallelLayout(ep=8, dp=8), schedule="zip"), "schedule"),
    ],
)
def test_bad_specs_name_the_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as err:
        _spec(**kw)  # type: ignore[arg-type]
    assert err.value.field == field


def test_layout_larger_than_fabric_is_an_error() -> None:
    spec = _spec(ParallelLayout(ep=8, dp=16))
    with pytest.raises(ConfigError) as err:
        run_step(spec)
    assert err.value.field == "layout"


def test_dp_overlap_hides_gradient_reduction() -> None:
    """Per-layer reduce-scatters during the backward leave less DP time after the last op."""
    lay = ParallelLayout(ep=8, dp=16)
    fabric = FabricSpec(preset="rail-h800-64", params=(("hosts", 2), ("gpu", "H100")),
                        multipath="dmodk", batch_window_rel=0.02)
    late = run_step(_spec(lay, fabric=fabric, dp_overlap=False))
    early = run_step(_spec(lay, fabric=fabric, dp_overlap=True))
    assert early.breakdown_s["dp_exposed"] < late.breakdown_s["dp_exposed"]
    assert early.step_time_s < late.step_time_s
    assert sum(early.breakdown_s.values()) == pytest.approx(early.step_time_s, rel=1e-9)


def test_dense_and_moe_layers_mix() -> None:
    """A first dense layer (DeepSeek-style) runs its FFN GEMMs and has no all-to-all."""
    base = _model()
    mixed = dataclasses.replace(base, moe_layers=(False, True, True, True),
                                intermediate_size=14336)
    spec = _spec(ParallelLayout(ep=4, dp=4, pp=2), model=mixed, microbatches=2)
    plan = build_plan(spec)
    assert plan.layers[0].moe is None and plan.layers[0].dense_fwd_s > 0
    assert plan.layers[0].dense_bwd_s > plan.layers[0].dense_fwd_s
    assert plan.layer_params[0][1] == 0
    r = run_step(spec)
    assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=1e-9)


def test_slow_gpu_sets_the_step_end() -> None:
    """A 1.5x slower GPU in stage 1 delays the step; stage 0 (which ends the step, draining
    the backwards) sees it as a longer bubble, its own compute unchanged."""
    lay = ParallelLayout(ep=4, dp=4, pp=2)
    healthy = run_step(_spec(lay, microbatches=2))
    slow = run_step(_spec(lay, microbatches=2, slow_gpus=((5, 1.5),)))
    assert slow.step_time_s > healthy.step_time_s * 1.1
    assert slow.last_rank < 4 and healthy.last_rank < 4  # stage 0 ends both steps
    assert slow.breakdown_s["compute"] == pytest.approx(healthy.breakdown_s["compute"])
    assert slow.breakdown_s["bubble"] > healthy.breakdown_s["bubble"] * 1.2
    with pytest.raises(ConfigError) as err:
        _spec(lay, slow_gpus=((8, 2.0),))
    assert err.value.field == "slow_gpus.8"


DUALPIPE_FABRIC = FabricSpec(preset="rail-h800-64",
                             params=(("hosts", 2), ("gpus_per_host", 4), ("gpu", "H100")),
                             multipath="dmodk", batch_window_rel=0.02)


def test_dualpipe_overlap_hides_all_to_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """EP across 2 hosts of 4 GPUs, with an all-to-all that takes no SMs from compute: FB ops
    that overlap one pass's all-to-all with the other's compute expose less all-to-all than
    the same order run pass after pass; compute and the DP tail are unchanged."""
    monkeypatch.setattr("moesim.step.state.OVERLAP_DISPATCHER_SMS", 0)
    fabric = dataclasses.replace(DUALPIPE_FABRIC, params=(("hosts", 4), ("gpus_per_host", 4),
                                                          ("gpu", "H100")))
    lay = ParallelLayout(ep=8, dp=8, pp=2)  # EP over 2 hosts; 3 FB ops per rank at m = 6
    kw: dict[str, object] = dict(model=_model(2), fabric=fabric, schedule="dualpipe",
                                 microbatches=6)
    # (no recompute: the overlap's mechanics alone)
    serial = run_step(_spec(lay, fb_overlap=False, recompute="none", **kw))
    overlap = run_step(_spec(lay, recompute="none", **kw))
    hidden_s = serial.breakdown_s["a2a_exposed"] - overlap.breakdown_s["a2a_exposed"]
    assert overlap.breakdown_s["a2a_exposed"] < 0.7 * serial.breakdown_s["a2a_exposed"]
    # (measured 2.8 vs 4.5 ms; the step shorter by about what was hidden)
    assert serial.step_time_s - overlap.step_time_s > 0.5 * hidden_s
    assert sum(overlap.breakdown_s.values()) == pytest.approx(overlap.step_time_s, rel=1e-9)
    # every rank computes the same in both orders (the rank that ends last may differ)
    busy = [simulate_step(_spec(lay, fb_overlap=fb, **kw)).time_s[:, CATEGORIES.index("compute")]
            for fb in (False, True)]
    np.testing.assert_allclose(busy[0], busy[1], rtol=1e-9)


def test_overlapped_all_to_all_takes_sms_from_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatcher of an FB op holds 20 of the H100's 132 SMs (moesim.calibration): compute
    inside FB ops takes 132/112 as long, compute outside them is unchanged."""
    lay = ParallelLayout(ep=4, dp=4, pp=2)
    spec = _spec(lay, fabric=DUALPIPE_FABRIC, schedule="dualpipe", microbatches=4)
    compute = CATEGORIES.index("compute")
    with_sms = simulate_step(spec)
    assert with_sms.overlap_compute_factor == pytest.approx(132 / 112, rel=1e-15)
    monkeypatch.setattr("moesim.step.state.OVERLAP_DISPATCHER_SMS", 0)
    free = simulate_step(spec)
    serial = simulate_step(_spec(lay, fabric=DUALPIPE_FABRIC, schedule="dualpipe",
                                 microbatches=4, fb_overlap=False))
    np.testing.assert_allclose(free.time_s[:, compute], serial.time_s[:, compute], rtol=1e-9)
    in_fb = (with_sms.time_s[:, compute] - free.time_s[:, compute]) / (132 / 112 - 1)
    assert (in_fb > 0).all() and (in_fb < free.time_s[:, compute]).all()
    assert with_sms.end_s.max() > free.end_s.max()


def test_dualpipe_books_ops_by_kind_and_steps_two_stages() -> None:
    """Each rank's time in its F, B, W, FB ops plus its pipeline waits is its time to the end
    of its last op; a DualPipe rank holds stages s and pp-1-s, each sharded over both copies'
    DP groups, so it steps the 1F1B ranks' mean optimizer shard (the step is linear in it)."""
    lay = ParallelLayout(ep=4, dp=4, pp=2)
    dual = simulate_step(_spec(lay, schedule="dualpipe", microbatches=4, recompute="none"))
    plain = simulate_step(_spec(lay, schedule="1f1b", microbatches=4, recompute="none"))
    bubble, opt = CATEGORIES.index("bubble"), CATEGORIES.index("optimizer")
    assert len(dual.op_kind_s) == lay.world_size
    for r, kinds in dual.op_kind_s.items():
        assert sum(kinds.values()) + dual.time_s[r, bubble] == pytest.approx(dual.last_op_s[r])
        assert min(kinds.values()) > 0  # every kind runs (pp = 2, m = 4: one FB per rank)
    plan = dual.plan  # pp = 2: every rank holds both stages (what the DP rings carry)
    assert dual.held_params(0) == dual.held_params(lay.world_size - 1) == (
        sum(plan.dense_params), sum(plan.expert_params))
    assert plain.held_params(0) == (plan.dense_params[0], plan.expert_params[0])
    assert plain.time_s[0, opt] != pytest.approx(plain.time_s[-1, opt])
    np.testing.assert_allclose(dual.time_s[:, opt], plain.time_s[:, opt].mean(), rtol=1e-9)


def test_fb_op_waits_for_both_inputs_before_computing(monkeypatch: pytest.MonkeyPatch) -> None:
    """DualPipe's ``_forward_backward_chunk`` receives both passes' inputs and waits for them
    before it computes either (deepseek-ai/DualPipe dualpipe.py @bb214e8): when an FB op's
    passes start, every input they need is there (the wait before was the op's bubble)."""
    from moesim.step import program
    seen: list[bool] = []
    overlapped = program._overlapped

    def spy(st: StepState, rank: int, passes: tuple[Pass, ...]) -> Generated:
        for p in passes:
            vs = st.place.vstage(st.coords[rank]["pp"], p.chunk)
            if vs != (0 if p.kind == "F" else st.place.n_virtual - 1):
                seen.append(st.mailbox(p.kind, p.microbatch, vs, rank).triggered)
        return overlapped(st, rank, passes)

    monkeypatch.setattr(program, "_overlapped", spy)
    simulate_step(_spec(ParallelLayout(ep=2, dp=2, pp=4), fabric=DUALPIPE_FABRIC,
                        schedule="dualpipe", microbatches=8, recompute="none"))
    assert len(seen) > 20 and all(seen)
