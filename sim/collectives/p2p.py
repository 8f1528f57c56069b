"""Point-to-point sends (pipeline activations and gradients) as flows.

A send is one flow in its own completion group; its event fires when the last
byte has arrived at the receiver (path latency included), with the arrival time
in seconds as value. A batch of sends can share one event (:func:`send_all`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import simpy

from moesim.engine.network import FlowNetwork
from moesim.errors import ConfigError


def send(
    net: FlowNetwork, src_gpu: int, dst_gpu: int, size_bytes: float, *, tag: int = -1
) -> simpy.Event:
    """Send ``size_bytes`` from ``src_gpu`` to ``dst_gpu`` now; fires at arrival (value: time s).
    :func:`send_all` of one send, without its arrays (:meth:`FlowNetwork.start_one`)."""
    if not size_bytes >= 0:
        raise ConfigError("p2p.size_bytes", "must be >= 0")
    env = net.env
    gid, arrived = net.expect(1)
    done = env.event()

    def fire(_: simpy.Event) -> None:
        done.succeed(float(env.now))

    arrived.callbacks.append(fire)
    net.start_one(int(src_gpu), int(dst_gpu), float(size_bytes), gid, tag)
    return done


def send_all(
    net: FlowNetwork,
    src_gpu: Sequence[int] | np.ndarray,
    dst_gpu: Sequence[int] | np.ndarray,
    size_bytes: Sequence[float] | np.ndarray,
    *,
    tag: int = -1,
) -> simpy.Event:
    """Start every send now; the event fires when the last one has arrived (value: time s)."""
    src = np.asarray(src_gpu, dtype=np.int64)
    dst = np.asarray(dst_gpu, dtype=np.int64)
    size = np.asarray(size_bytes, dtype=np.float64)
    if not src.shape == dst.shape == size.shape or src.ndim != 1:
        raise ConfigError("p2p", "src_gpu, dst_gpu and size_bytes must be 1-D and equally long")
    if (size < 0).any() or np.isnan(size).any():
        raise ConfigError("p2p.size_bytes", "must be >= 0")
    env = net.env
    gid, arrived = net.expect(src.size)
    done = env.event()

    def fire(_: simpy.Event) -> None:
        done.succeed(float(env.now))

    arrived.callbacks.append(fire)
    net.start(src, dst, size, gid, tag)
    return done
