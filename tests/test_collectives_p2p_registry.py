"""Point-to-point sends and the collective-algorithm registry."""

from __future__ import annotations

import pytest
import simpy
from collective_registry import OPS, algorithm_names, make_collective, register_algorithm
from test_engine_support import star

from moesim.collectives.p2p import send, send_all
from moesim.engine.fabric import fabric_from_graph
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.errors import ConfigError

GB = 1e9



def network(n: int = 4, bw: float = 20.0, lat: float = 250.0) -> FlowNetwork:
    return FlowNetwork(simpy.Environment(), Router(fabric_from_graph(star(n, bw, lat)), "ecmp"))


def test_send_arrives_after_transfer_and_path_latency() -> None:
    net = network()
    event = send(net, 0, 1, 40e6)
    net.env.run()
    assert event.value == pytest.approx(40e6 / (20 * GB) + 2 * 250e-9, rel=1e-9)


def test_send_in_a_process_after_compute() -> None:
    net = network()
    env = net.env
    got: list[float] = []

    def stage() -> simpy.events.ProcessGenerator:
        yield env.timeout(1e-3)  # forward compute
        got.append((yield send(net, 2, 3, 20e6)))

    env.process(stage())
    env.run()
    assert got == [pytest.approx(1e-3 + 20e6 / (20 * GB) + 500e-9, rel=1e-9)]


def test_send_all_waits_for_the_last_and_shares_links() -> None:
    net = network()
    event = send_all(net, [0, 0, 1], [2, 3, 2], [10e6, 10e6, 10e6])
    net.env.run()
    # GPU 0's uplink and GPU 2's downlink (20 GB/s) each carry two flows; max-min gives
    # every flow 10 GB/s, so all drain at 1 ms
    assert event.value == pytest.approx(10e6 / (10 * GB) + 500e-9, rel=1e-9)


def test_send_to_self_and_bad_input() -> None:
    net = network()
    event = send(net, 1, 1, 5e6)
    net.env.run()
    assert event.value == 0.0
    with pytest.raises(ConfigError, match="size_bytes"):
        send(net, 0, 1, -1.0)
    with pytest.raises(ConfigError, match="equally long"):
        send_all(net, [0, 1], [1], [1.0, 2.0])


@pytest.mark.parametrize("op", OPS)
def test_registry_ring_matches_formula(op: str) -> None:
    n, size = 4, 8e6
    net = network(n)
    coll = make_collective("ring", net, range(n), size, op).start()
    net.env.run()
    steps = 2 * (n - 1) if op == "all_reduce" else n - 1
    assert coll.done.value == pytest.approx(steps * (size / n / (20 * GB) + 500e-9), rel=1e-9)


def test_registry_names_and_errors() -> None:
    assert "ring" in algorithm_names()
    net = network()
    with pytest.raises(ConfigError, match="allowed: ring"):
        make_collective("zip", net, [0, 1], 1.0, "all_reduce")
    with pytest.raises(ConfigError, match="allowed: reduce_scatter"):
        make_collective("ring", net, [0, 1], 1.0, "broadcast")
    with pytest.raises(ConfigError, match="already registered"):
        register_algorithm("ring", make_collective)  # type: ignore[arg-type]
