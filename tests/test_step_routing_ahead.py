"""MoE layers drawn ahead in worker threads (moesim.step.routing_ahead) or a child process
(moesim.step.routing_fork): the same routings as routing them one by one, in any thread count
and order of asking, never more than LOOKAHEAD layers ahead, and an error surfaces where a
serial run's would."""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

from moesim.errors import ConfigError
from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.router import Draw, RoutingResult
from moesim.step import StepSpec, plan, routing_ahead, routing_fork, routing_wire
from moesim.step.fast import fast_plan
from moesim.step.plan import draw_layer, route_layer
from moesim.step.routing_ahead import RoutingAhead
from moesim.step.routing_fork import DrawProcess


def _spec(layers: int = 6) -> StepSpec:
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=layers,
                                moe_layers=(False,) + (True,) * (layers - 1))
    return StepSpec(model=model, layout=ParallelLayout(ep=8, dp=8), seq_len=512,
                    microbatches=2)


def _arrays(r: RoutingResult) -> list[np.ndarray]:
    return [r.tokens, r.dropped, r.rank_tokens, r.rank_tokens_dedup, r.node_tokens_dedup]


@pytest.mark.parametrize("threads", [0, 1, 2, 3])
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
    monkeypatch.setattr(routing_ahead, "ROUTING_THREADS", 0)
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
    no layer more than LOOKAHEAD past the last one asked for is started, and the block's end
    waits for the draws in flight (slowed here so that the error is out before they end)."""
    spec = _spec(layers=40)
    started: list[int] = []

    def fake(s: StepSpec, layer: int) -> Draw:
        started.append(layer)
        if layer == 3:
            raise ConfigError("router.kind", "layer 3 fails")
        if layer > 3:
            time.sleep(0.5)
        return draw_layer(s, layer)

    monkeypatch.setattr(routing_ahead, "draw_layer", fake)
    with (pytest.raises(ConfigError, match="layer 3 fails"),
          RoutingAhead(spec, threads=2) as ahead):
        assert ahead(spec, 1) is not None and ahead(spec, 2) is not None
        ahead(spec, 3)
    assert {1, 2, 3} <= set(started) <= set(range(1, 3 + routing_ahead.LOOKAHEAD + 1))
    assert ahead.ahead is not None and not any(t.is_alive() for t in ahead.ahead.threads)


def test_layers_asked_out_of_order_are_routed_in_the_caller() -> None:
    """A layer asked for before any worker started it is routed by the caller (the workers
    skip it); one started is handed over: the same routings either way, no worker left."""
    spec = _spec(layers=12)
    with RoutingAhead(spec, threads=1) as ahead:
        got = {layer: ahead(spec, layer) for layer in (9, 1, 10, 2, 11)}
    assert ahead.ahead is not None and not any(t.is_alive() for t in ahead.ahead.threads)
    for layer, routing in got.items():
        for a, b in zip(_arrays(routing), _arrays(route_layer(spec, layer)), strict=True):
            assert np.array_equal(a, b)


def _workers_in_child(_: int) -> int:
    return routing_ahead.routing_threads()


def test_no_worker_thread_inside_a_pool_process() -> None:
    """A pool's worker processes (design, sweep, validate) already use the cores: they draw
    their layers in the calling thread; the parent keeps its workers (2+ cores)."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.map(_workers_in_child, [0]) == [0]
    cores = len(os.sched_getaffinity(0))
    assert routing_ahead.routing_threads() == (min(routing_ahead.ROUTING_THREADS, cores)
                                               if cores > 1 else 0)


@pytest.mark.parametrize("draws", [None, 2])
def test_layers_routed_in_a_child_process_are_the_serial_draws(draws: int | None) -> None:
    """moesim.step.routing_fork: the same routings, read-only as the parent's; the child is
    reaped when the block ends."""
    spec = _spec()
    moe = [i for i, m in enumerate(spec.model.moe_layers) if m]
    with RoutingAhead(spec, draws, threads=2, fork=True) as ahead:
        assert isinstance(ahead.ahead, DrawProcess)
        pid = ahead.ahead.pid
        got = [ahead(spec, layer) for layer in moe]
    assert ahead.ahead.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid or -1, os.WNOHANG)
    for k, (layer, routing) in enumerate(zip(moe, got, strict=True)):
        want = route_layer(spec, moe[k % draws] if draws else layer)
        for a, b in zip(_arrays(routing), _arrays(want), strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b) and not a.flags.writeable


def test_a_child_process_error_surfaces_in_the_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child stops at the layer that fails; the parent routes it again and raises there,
    after the layers before it were handed over."""
    spec = _spec(layers=12)

    def fake(s: StepSpec, layer: int) -> Draw:
        if layer == 3:
            raise ConfigError("router.kind", "layer 3 fails")
        return draw_layer(s, layer)

    monkeypatch.setattr(routing_ahead, "draw_layer", fake)
    monkeypatch.setattr(plan, "draw_layer", fake)
    with (pytest.raises(ConfigError, match="layer 3 fails"),
          RoutingAhead(spec, threads=1, fork=True) as ahead):
        assert ahead(spec, 1) is not None and ahead(spec, 2) is not None
        ahead(spec, 3)


def test_the_parent_routes_what_a_killed_child_did_not_send() -> None:
    spec = _spec(layers=12)
    with RoutingAhead(spec, threads=1, fork=True) as ahead:
        first = ahead(spec, 1)
        assert isinstance(ahead.ahead, DrawProcess) and ahead.ahead.pid
        os.kill(ahead.ahead.pid, signal.SIGKILL)
        got = {layer: ahead(spec, layer) for layer in range(2, 12)} | {1: first}
    for layer, routing in got.items():
        for a, b in zip(_arrays(routing), _arrays(route_layer(spec, layer)), strict=True):
            assert np.array_equal(a, b)


def test_only_large_steps_fork() -> None:
    """can_fork: a step routing at least FORK_TOKENS token routings (on Linux)."""
    small = _spec()
    big = dataclasses.replace(small, seq_len=1 << 17)
    moe = sum(small.model.moe_layers)
    assert moe * 8 * small.tokens_per_microbatch < routing_fork.FORK_TOKENS
    assert not routing_fork.can_fork(small, moe)
    alone = threading.active_count() == 1  # another test may have left a daemon thread
    assert routing_fork.can_fork(big, moe) == (sys.platform == "linux" and alone)


def test_no_fork_while_another_thread_runs() -> None:
    """A fork copies only the forking thread, and every lock as it stands: with another Python
    thread alive (a Dask worker, a threaded caller) the layers are drawn in threads instead."""
    big = dataclasses.replace(_spec(), seq_len=1 << 17)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not routing_fork.can_fork(big, sum(big.model.moe_layers))
    finally:
        stop.set()
        other.join()


def test_a_stuck_child_is_killed_and_the_parent_routes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that sends nothing for STALL_S (here stopped by SIGSTOP, as one deadlocked on
    a lock copied held would be) is given up: killed, reaped, its layers routed here."""
    monkeypatch.setattr(routing_fork, "STALL_S", 0.5)
    spec = _spec(layers=12)
    with RoutingAhead(spec, threads=1, fork=True) as ahead:
        assert isinstance(ahead.ahead, DrawProcess) and ahead.ahead.pid
        os.kill(ahead.ahead.pid, signal.SIGSTOP)
        got = {layer: ahead(spec, layer) for layer in range(1, 12)}
    assert ahead.ahead.pid is None
    for layer, routing in got.items():
        for a, b in zip(_arrays(routing), _arrays(route_layer(spec, layer)), strict=True):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("array", [
    np.zeros((3, 4), dtype=np.int64), np.array([[-1, 5], [300, 2]], dtype=np.int64),
    np.array([1 << 40, -7], dtype=np.int64), np.arange(70000, dtype=np.int64),
    np.zeros((0, 0), dtype=np.int64), np.array([0.25, 1e-300, np.nan]),
    np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4))])
def test_arrays_cross_the_pipe_unchanged(array: np.ndarray) -> None:
    """routing_fork packs integer arrays into the narrowest type holding them (nothing for
    all zeros); unpacked they are the same dtype, shape and values."""
    packed = routing_wire.pack(array)
    back = routing_wire.unpack(packed)
    assert back.dtype == array.dtype and back.shape == array.shape
    assert np.array_equal(back, array, equal_nan=True)
    if array.dtype.kind == "i" and array.size and array.any():
        assert packed[2] is not None and packed[2].itemsize <= array.itemsize


def test_a_layer_message_round_trips_and_foreign_bytes_are_refused() -> None:
    """moesim.step.routing_wire: plain data only. A packed routing and a failure marker come
    back as sent; a header naming a non-numeric dtype, and a short message, end the stream."""
    import io
    import json
    import struct

    arrays = (np.array([[3, 0], [70000, 2]], dtype=np.int64), np.zeros(4, dtype=np.int64),
              np.array([0.5, 2.0]))
    buf = io.BytesIO()
    routing_wire.write_layer(buf, 7, tuple(map(routing_wire.pack, arrays)))
    routing_wire.write_layer(buf, 8, None)
    buf.seek(0)
    layer, fields = routing_wire.read_layer(buf)
    assert layer == 7 and fields is not None
    for a, b in zip(map(routing_wire.unpack, fields), arrays, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert routing_wire.read_layer(buf) == (8, None)
    with pytest.raises(EOFError):
        routing_wire.read_layer(buf)
    head = json.dumps({"layer": 1, "arrays": [["|O", [1], "|O"]]}).encode()
    with pytest.raises(ValueError, match="not numeric"):
        routing_wire.read_layer(io.BytesIO(struct.pack("<I", len(head)) + head + b"x" * 8))
    whole = buf.getvalue()
    with pytest.raises(EOFError):
        routing_wire.read_layer(io.BytesIO(whole[:20]))
