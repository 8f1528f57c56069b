"""The ModelZoo layout comparison: its rows reach the step as stated, the layout moesim cannot
express is listed (not simulated), and the ranking check orders by speed (no step simulated)."""

from __future__ import annotations

import pytest

from moesim.validate.case import Case
from moesim.validate.ranking import ranking_verdicts
from moesim.validate.runners import run_case
from moesim.validate.step import bridge_spec
from moesim.validate.zoo import RANKING, ZOO_CASES


@pytest.mark.parametrize("case", [ZOO_CASES[0], ZOO_CASES[2]], ids=["tp2ep32", "tp4ep8"])
def test_rows_reach_the_step(case) -> None:  # type: ignore[no-untyped-def]
    a = dict(case.args)
    spec = bridge_spec(case)
    for key, value in dict(a["layout"]).items():
        assert getattr(spec.layout, key) == value
    assert spec.layout.world_size == 256 and spec.layout.dp * spec.layout.tp * spec.layout.pp == 256
    assert spec.microbatches * spec.layout.dp == 2048 and spec.micro_batch_size == 1
    assert (spec.compute_dtype, spec.recompute, spec.dispatcher) == ("bf16", "none", "deepep")
    assert case.lower_is_faster and case.ranking == RANKING and case.unit == "s per step"


def test_pp32_vpp3_over_94_layers_is_listed_not_simulated() -> None:
    predicted, detail = run_case(ZOO_CASES[1])
    assert predicted is None
    assert "layout.pp" in detail and "94 layers" in detail


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
