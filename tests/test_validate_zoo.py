"""The ModelZoo layout comparison: its rows reach the step as stated (stage split included),
and the ranking check orders by speed (no step simulated)."""

from __future__ import annotations

import pytest

from moesim.validate.case import Case
from moesim.validate.ranking import ranking_verdicts
from moesim.validate.step import bridge_spec
from moesim.validate.zoo import RANKING, ZOO_CASES


@pytest.mark.parametrize("case, dispatcher", [(ZOO_CASES[0], "deepep"),
                                              (ZOO_CASES[1], "alltoall"),
                                              (ZOO_CASES[2], "deepep")],
                         ids=["tp2ep32", "pp32vpp3", "tp4ep8"])
def test_rows_reach_the_step(case, dispatcher: str) -> None:  # type: ignore[no-untyped-def]
    a = dict(case.args)
    spec = bridge_spec(case)
    for key, value in dict(a["layout"]).items():
        assert getattr(spec.layout, key) == value
    assert spec.layout.world_size == 256 and spec.layout.dp * spec.layout.tp * spec.layout.pp == 256
    assert spec.microbatches * spec.layout.dp == 2048 and spec.micro_batch_size == 1
    assert (spec.compute_dtype, spec.recompute, spec.dispatcher) == ("bf16", "none", dispatcher)
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
