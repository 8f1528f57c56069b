"""The ModelZoo layout comparison: its rows reach the step as stated (stage split included),
and the ranking check orders by speed (no step simulated)."""

from __future__ import annotations

import pytest

from moesim.model import get_model
from moesim.validate.case import Case
from moesim.validate.ranking import ranking_verdicts
from moesim.validate.step import bridge_spec, megatron_v09_flops
from moesim.validate.zoo import LONG_CONTEXT, LONG_CONTEXT_CASES, RANKING, ZOO_CASES


@pytest.mark.parametrize("case, dispatcher, recompute",
                         [(ZOO_CASES[0], "deepep", "layernorm+moe_act"),
                          (ZOO_CASES[1], "alltoall", "layernorm+moe_act"),
                          (ZOO_CASES[2], "deepep", "none")],
                         ids=["tp2ep32", "pp32vpp3", "tp4ep8"])
def test_rows_reach_the_step(case, dispatcher: str,  # type: ignore[no-untyped-def]
                             recompute: str) -> None:
    """Each row as the table states it, its recompute column ("norm, act" / empty) as
    Megatron's modules."""
    a = dict(case.args)
    spec = bridge_spec(case)
    for key, value in dict(a["layout"]).items():
        assert getattr(spec.layout, key) == value
    assert spec.layout.world_size == 256 and spec.layout.dp * spec.layout.tp * spec.layout.pp == 256
    assert spec.microbatches * spec.layout.dp == 2048 and spec.micro_batch_size == 1
    assert (spec.compute_dtype, spec.recompute, spec.dispatcher) == ("bf16", recompute,
                                                                     dispatcher)
    assert spec.dedup == (dispatcher != "alltoall")  # Megatron's alltoall: a copy per expert
    assert spec.layout.etp == 1  # the config's --expert-tensor-parallel-size 1, whatever TP
    assert case.lower_is_faster and case.ranking == RANKING and case.unit == "s per step"


def test_stages_split_with_embedding_and_loss_counted() -> None:
    """96 slots = 94 layers + embedding + loss (the config's account-for options): PP8 x VPP4
    gives the first and last virtual stages 2 layers, the rest 3; PP32 x VPP3 one each, the
    first virtual stage holding only the embedding and the last only the loss."""
    eight = bridge_spec(ZOO_CASES[0]).layout.virtual_stage_layers(94)
    assert eight == (2,) + (3,) * 30 + (2,)
    thirty_two = bridge_spec(ZOO_CASES[1]).layout.virtual_stage_layers(94)
    assert thirty_two == (0,) + (1,) * 94 + (0,)


def _result(name: str, predicted: float | None, published: float) -> tuple[Case, float | None]:
    case = Case(name, "bridge", (), published, "s per step", 0.1, "", lower_is_faster=True,
                ranking="r")
    return case, predicted


def test_ranking_by_hand() -> None:
    same = ranking_verdicts([_result("a", 15.0, 19.7), _result("b", None, 24.2),
                             _result("c", 16.0, 29.0)])[0]
    assert same.exact and same.published_order == ("a", "c") and same.n_layouts == 3
    swapped = ranking_verdicts([_result("a", 15.4, 19.7), _result("c", 13.0, 29.0)])[0]
    assert not swapped.exact and swapped.predicted_order == ("c", "a")
    assert ranking_verdicts([_result("a", 15.0, 19.7), _result("b", None, 24.2)]) == []


def test_megatron_causal_count_gives_the_4k_rows_tflops() -> None:
    """The readme's 4k rows state both a step time and a TFLOP/s per GPU: Megatron-Core's causal
    count over GBS 2048 x 4,096 tokens turns 29.0 / 19.7 / 24.2 s into 167 / 245 / 200 within
    0.6% (what lets the long-context rows' TFLOP/s stand for their step times); the v0.9
    (non-causal) count would be 12.8% above."""
    model = get_model("qwen3-235b-a22b")
    causal = megatron_v09_flops(model, 2048, 4096, causal=True)
    for step_s, tflops in ((29.0, 167.0), (19.7, 245.0), (24.2, 200.0)):
        assert causal / step_s / 256 / 1e12 == pytest.approx(tflops, rel=6e-3)
    assert megatron_v09_flops(model, 2048, 4096) / causal == pytest.approx(1.128, abs=1e-3)


def test_long_context_rows_reach_the_step() -> None:
    """TP4 PP8 VPP4 EP8 with CP as the table states, GBS 256 sequences, recompute layernorm +
    moe (the readme's command), forced balance, published as TFLOP/s per GPU."""
    assert {c.published for c in LONG_CONTEXT_CASES} <= {tf for _, tf in LONG_CONTEXT.values()}
    for case in LONG_CONTEXT_CASES:
        spec = bridge_spec(case)
        cp, tflops = LONG_CONTEXT[spec.seq_len]
        lay = spec.layout
        assert (lay.tp, lay.cp, lay.pp, lay.vpp, lay.ep, lay.etp) == (4, cp, 8, 4, 8, 1)
        assert lay.world_size == 256 and spec.microbatches * lay.dp == 256
        assert (spec.recompute, spec.dispatcher, spec.router.kind) == (
            "layernorm+moe", "deepep", "force_balanced")
        assert case.published == tflops and not case.lower_is_faster
        assert dict(case.args)["metric"] == "megatron_tflops"
