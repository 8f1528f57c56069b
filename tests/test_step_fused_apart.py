"""Fast mode's closed-form layers where CP K/V sends leave the stage's host
(moesim.step.fused_apart) against the same step with every TP chunk and CP send a flow."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from moesim.fabric.spec import FabricSpec
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.step import Fast, StepSpec, run_step
from moesim.step import fast as fast_mod
from moesim.step.fast import simulate_fast
from moesim.step.fused_apart import overlap_s
from moesim.step.fused_layer import LinkClock

FABRIC = FabricSpec(preset="rail-h100-64", params=(("hosts", 16), ("gpu", "H100")),
                    multipath="dmodk")


def _spec(cp: int, **kw: object) -> StepSpec:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=8,
                                moe_layers=(False, *([True] * 7)))
    base = dict(model=model, layout=ParallelLayout(tp=4, cp=cp, ep=8, dp=128 // (8 * cp), pp=2),
                seq_len=8192, fabric=FABRIC, microbatches=4)
    base.update(kw)
    return StepSpec(**base)  # type: ignore[arg-type]


CASES = {
    "tp4 cp4 (CP ring over 2 hosts)": _spec(4),
    "tp4 cp4 interleaved": _spec(4, layout=ParallelLayout(tp=4, cp=4, ep=8, dp=4, pp=2, vpp=2),
                                 schedule="interleaved"),
    "tp4 cp8 (4 hosts)": _spec(8, microbatches=2, fabric=dataclasses.replace(
        FABRIC, params=(("hosts", 32), ("gpu", "H100"))), layout=ParallelLayout(
            tp=4, cp=8, ep=8, dp=4, pp=2)),
}


class _Logged(LinkClock):
    """A LinkClock that logs its watched transfers (overlap_s needs them)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.held = []


@pytest.mark.parametrize("name", list(CASES))
def test_watched_cp_sends_are_the_flow_path_within_the_overlap(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The layers run fused (CP sends off the host timed alone), and the step time and every
    category equal the flow path's (every TP chunk and CP send a flow, as fast mode ran
    these layouts before) within the summed overlap of the watched transfers with each other
    and the pipeline sends (the stated bound), with a fraction of the flows."""
    spec = CASES[name]
    monkeypatch.setattr(fast_mod, "LinkClock", _Logged)
    st, _ = simulate_fast(spec, 1)
    clock = st.link_clock
    assert st.fuse_layers and clock is not None and clock.watch is not None
    assert clock.held and clock.late_n == 0
    bound = overlap_s(st.net, clock.load_of, clock.held)
    fused, flows = run_step(spec, Fast()), run_step(spec, Fast(fuse_tp=False))
    tol = bound + 1e-9 * flows.step_time_s
    assert abs(fused.step_time_s - flows.step_time_s) <= tol
    for k, v in flows.breakdown_s.items():
        assert abs(fused.breakdown_s[k] - v) <= tol, k
    assert fused.engine["flows"] < flows.engine["flows"] / 3


def test_cp_inside_the_host_is_not_watched() -> None:
    """CP2 x TP4 stays on its host: the layers fuse as before, with nothing watched."""
    st, _ = simulate_fast(_spec(2), 1)
    assert st.fuse_layers and st.link_clock is not None and st.link_clock.watch is None


class _Net:
    """The two columns and the pair store overlap_s reads from a FlowNetwork."""

    def __init__(self, starts: list[float], drains: list[float], links: list[int]) -> None:
        n = len(starts)
        self.flows = type("F", (), {"n": n, "col": {
            "start_s": np.array(starts, dtype=float), "drain_s": np.array(drains, dtype=float),
            "pair_ptr": np.arange(n), "pair_len": np.ones(n, dtype=np.int64)}})()
        self.pairs = type("P", (), {"link": np.array(links, dtype=np.int64)})()


def test_overlap_s_sums_pairwise_overlaps_by_hand() -> None:
    """Link 0: fused [0, 2) and [1, 4) overlap 1 s, flow [3, 5) overlaps the second 1 s;
    fused [5, 6) only touches the flow (0); link 1: fused [0, 1) alone; the flow [0, 9) on
    link 2 is on no watched link."""
    load_of = np.arange(3)
    held = [(np.array([0, 1]), np.array([0.0, 0.0]), np.array([2.0, 1.0])),
            (np.array([0]), np.array([1.0]), np.array([4.0])),
            (np.array([0]), np.array([5.0]), np.array([6.0]))]
    net = _Net([3.0, 0.0], [5.0, 9.0], [0, 2])
    assert overlap_s(net, load_of, held) == pytest.approx(2.0)  # type: ignore[arg-type]
    assert overlap_s(_Net([], [], []), load_of, held[2:]) == 0.0  # type: ignore[arg-type]


