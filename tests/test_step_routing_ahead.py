"""MoE layers routed ahead in worker threads (moesim.step.routing_ahead): the same routings as
drawing them one by one, in any thread count, and an error surfaces where a serial run's would."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.router import RoutingResult
from moesim.step import StepSpec, routing_ahead
from moesim.step.fast import fast_plan
from moesim.step.plan import route_layer
from moesim.step.routing_ahead import RoutingAhead


def _spec(layers: int = 6) -> StepSpec:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=layers,
                                moe_layers=(False,) + (True,) * (layers - 1))
    return StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), seq_len=512,
                    microbatches=2)


def _arrays(r: RoutingResult) -> list[np.ndarray]:
    return [r.tokens, r.dropped, r.rank_tokens, r.rank_tokens_dedup, r.node_tokens_dedup]


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("draws", [None, 2])
def test_layers_routed_ahead_are_the_serial_draws(threads: int, draws: int | None) -> None:
    spec = _spec()
    moe = [i for i, m in enumerate(spec.model.moe_layers) if m]
    with RoutingAhead(spec, draws, threads=threads) as ahead:
        got = [ahead(spec, layer) for layer in moe]
    for k, (layer, routing) in enumerate(zip(moe, got, strict=True)):
        want = route_layer(spec, moe[k % draws] if draws else layer)
        for a, b in zip(_arrays(routing), _arrays(want), strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    if draws:
        assert got[0] is got[2] and got[1] is got[3]


def test_plans_equal_with_and_without_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec()
    serial = fast_plan(spec)
    monkeypatch.setattr(routing_ahead, "ROUTING_THREADS", 2)
    threaded = fast_plan(spec)
    for a, b in zip(threaded.layers, serial.layers, strict=True):
        assert a.a2a_bytes.keys() == b.a2a_bytes.keys()
        for phase in a.a2a_bytes:
            np.testing.assert_array_equal(a.a2a_bytes[phase], b.a2a_bytes[phase])


def test_an_error_surfaces_in_order_and_the_rest_is_dropped(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Layer 3's error is raised when layer 3 is asked for (after 1 and 2 were handed out);
    layers not started by then are cancelled when the block ends, which waits for the ones in
    flight (two workers: at most the two after layer 3, slowed here so that the error is out
    before they end; the rest never start)."""
    spec = _spec(layers=40)
    started: list[int] = []

    def fake(s: StepSpec, layer: int) -> RoutingResult:
        started.append(layer)
        if layer == 3:
            raise ConfigError("router.kind", "layer 3 fails")
        if layer > 3:
            time.sleep(1.0)
        return route_layer(s, layer)

    monkeypatch.setattr(routing_ahead, "route_layer", fake)
    with (pytest.raises(ConfigError, match="layer 3 fails"),
          RoutingAhead(spec, threads=2) as ahead):
        assert ahead(spec, 1) is not None and ahead(spec, 2) is not None
        ahead(spec, 3)
    assert {1, 2, 3} <= set(started) <= {1, 2, 3, 4, 5}
    assert ahead.pool is not None and not any(t.is_alive() for t in ahead.pool._threads)
