"""The expert GEMMs of every EP rank priced in one vectorised pass (moesim.workload.costs
``experts_ranks_s``, used by ``layer_costs``) equal the per-rank ``experts_s`` bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.hardware import GemmShape, get_gpu, grouped_gemm_time_s
from moesim.hardware.roofline import grouped_gemm_rows_time_s
from moesim.model import get_model
from moesim.router import RouterConfig, route_tokens
from moesim.workload.costs import LayerShape, experts_s, layer_costs

H800 = get_gpu("H800")


def _routing(ranks: int, experts: int, top_k: int, redundant: int = 0, seed: int = 3):
    cfg = RouterConfig(redundant_experts=redundant)
    return route_tokens(cfg, tokens_per_rank=512, n_ranks=ranks, n_experts=experts,
                        top_k=top_k, seed=seed, layer=1)


CASES = [  # (model, ranks, redundant experts, tp, etp, precision): shared experts or not,
    # TP / ETP, fewer and more than 8 local experts (numpy's pairwise sum unrolls from 8),
    # uneven hosts, precisions with one and two cast kernels
    ("moe-1t", 64, 0, 1, 1, "bf16"),
    ("moe-1t", 16, 0, 1, 1, "fp8-cs"),
    ("deepseek-v3", 32, 8, 1, 1, "fp8-block"),
    ("mixtral-8x7b", 4, 0, 2, 2, "bf16"),
    ("deepseek-v3", 64, 3, 2, 1, "fp8-cs"),
]


@pytest.mark.parametrize(("name", "ranks", "redundant", "tp", "etp", "precision"), CASES)
def test_layer_costs_price_each_rank_as_experts_s_does(name: str, ranks: int, redundant: int,
                                                        tp: int, etp: int, precision: str
                                                        ) -> None:
    model = get_model(name)
    shape = LayerShape(model, tokens_per_rank=512, seq_len=4096, compute_dtype=precision,
                       tp=tp, etp=etp)
    routing = _routing(ranks, model.n_routed_experts, model.top_k, redundant)
    slow = np.where(np.arange(ranks) % 5 == 2, 1.75, 1.0)
    costs = layer_costs(shape, H800, routing, slow)
    load = routing.expert_load()
    for backward, got in ((False, costs.experts_fwd), (True, costs.experts_bwd)):
        want = [experts_s(shape, H800, load[routing.experts_on(r)], float(slow[r]), backward)
                for r in range(ranks)]
        assert got.tolist() == want  # exact, not approx


def test_grouped_rows_equal_grouped_per_row_and_check_input() -> None:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 5000, size=(7, 11)).astype(float)
    tokens[2] = 0.0
    slow = np.array([1.0, 2.0, 1.0, 1.5, 1.0, 1.0, 3.0])
    for backward in (False, True):
        got = grouped_gemm_rows_time_s(H800, GemmShape(tokens, 4096, 7168, "fp8"), slow,
                                       backward=backward)
        want = [grouped_gemm_time_s(H800, GemmShape(row, 4096, 7168, "fp8"), s,
                                    backward=backward)
                for row, s in zip(tokens, slow, strict=True)]
        assert got.tolist() == want
    with pytest.raises(ConfigError, match="2-D"):
        grouped_gemm_rows_time_s(H800, GemmShape(tokens[0], 4096, 7168))
    with pytest.raises(ConfigError, match="slowdown"):
        grouped_gemm_rows_time_s(H800, GemmShape(tokens, 4096, 7168), slowdown=np.full(7, 0.5))
