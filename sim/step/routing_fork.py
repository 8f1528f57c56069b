"""Fast mode's MoE layer routings, drawn ahead in a forked child process.

:class:`moesim.step.routing_ahead.RoutingAhead`'s worker threads draw a layer's counts mostly
in numpy calls that release the GIL, but between them each draw takes the GIL back (~half of
its CPU), and the step's own thread, pricing and simulating in Python, holds it too: on two
cores the whole step is bound by the one GIL. A child forked when the step starts has its own
interpreter and GIL: it routes the layers (:func:`moesim.step.plan.route_layer`, its draws in
worker threads as the parent's would be) and sends each :class:`moesim.router.RoutingResult`
back through a pipe, in order, while the parent indexes the fabric, builds its host routers
and prices each layer as it arrives. The counts cross the pipe in the narrowest integer type
that holds them (:mod:`moesim.step.routing_wire`: plain data, never pickle; a 1T layer ~450
-> ~75 KiB) through a 1 MiB pipe: with
450 KiB messages through 64 KiB the child spent 0.52-0.57 s of its ~0.65 s waiting on writes
(the parent's reader thread takes each 64 KiB back under the GIL), 0.05-0.11 s now.

Same routings bit for bit: a layer's routing is a pure function of (spec, layer) (its own
random stream, :mod:`moesim.router.streams`), so it does not matter which process draws it.
A layer the child could not route (an error, or the child gone) is routed again by the
parent, which so raises the error where a serial run would. The child is killed and reaped
when the step ends (:meth:`DrawProcess.close`). Only where ``os.fork`` is safe enough to use
(Linux; numpy's OpenBLAS re-initialises its threads after a fork) and the step is large
enough to repay the fork (:data:`FORK_TOKENS`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import BinaryIO

from moesim.router import RoutingResult
from moesim.step.routing_wire import Packed, pack_routing, read_layer, unpack, write_layer
from moesim.step.spec import StepSpec

SerialRouting = AbstractContextManager[Callable[[int], RoutingResult]]
"""What the child routes with: a context manager giving layer -> routing (the caller's router,
which imports this module; passed in, so this module imports none of it)."""

FORK_TOKENS = 1 << 22
"""Token routings (MoE layers x EP ranks x tokens per rank) from which the layers are drawn in
a child process: below it, the fork's ~10-20 ms would not be repaid."""
STALL_S = 60.0
"""Longest wait for one layer from the child (a layer takes ~10 ms there at 9,216 GPUs; the
largest shipped step's slowest well under a second). A child stuck longer (a lock some other
thread of the parent held at the fork, copied held) is killed and the parent routes the rest
itself: a stall costs this once, never a hang."""
PIPE_BYTES = 1 << 20
"""The pipe's buffer (Linux's most for an unprivileged process by default): the child writes
a layer without waiting for the reader to take each 64 KiB."""


def can_fork(spec: StepSpec, layers: int) -> bool:
    """True when :class:`DrawProcess` should draw ``layers`` MoE layers of ``spec``: on Linux,
    for a step that repays the fork, and only from a process running no other Python thread
    (a fork copies every lock as it is, but only the forking thread: a lock another thread
    held, in the allocator, logging or an import, would stay held in the child for good; a
    Dask worker or a threaded caller so draws in threads instead)."""
    return (sys.platform == "linux" and hasattr(os, "fork")
            and threading.active_count() == 1
            and layers * spec.layout.ep * spec.tokens_per_microbatch >= FORK_TOKENS)


class DrawProcess:
    """A child process routing ``layers`` in order (module docstring) and a thread reading
    what it sends (so that the child never waits on a full pipe); :meth:`take` hands each
    routing over, :meth:`close` ends the child."""

    def __init__(self, layers: list[int], serial: Callable[[], SerialRouting]) -> None:
        self.pending = set(layers)  # layers the child may still send
        self.got: dict[int, tuple[Packed, ...] | None] = {}
        self.ended = False  # nothing more will come
        self.cv = threading.Condition()
        read_fd, write_fd = os.pipe()
        _widen(write_fd)
        with warnings.catch_warnings():  # 3.12+: a DeprecationWarning if threads run
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_fd)
            _child(layers, serial, write_fd)
        os.close(write_fd)
        self.pid: int | None = pid
        self.reader: BinaryIO = os.fdopen(read_fd, "rb")
        self.thread = threading.Thread(target=self._read, name="moesim-routing-reader",
                                       daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                layer, fields = read_layer(self.reader)
                with self.cv:
                    self.got[layer] = fields
                    self.cv.notify_all()
        except BaseException:  # the child's end: EOF (done or killed), or a broken message
            pass
        finally:
            with self.cv:
                self.ended = True
                self.cv.notify_all()

    def take(self, layer: int) -> RoutingResult | None:
        """The routing of ``layer`` from the child; None if the child will not send it (not
        one of its layers, an error there, or the child gone): route it here."""
        with self.cv:
            if layer not in self.pending:
                return None
            self.pending.discard(layer)
            if not self.cv.wait_for(lambda: layer in self.got or self.ended, STALL_S):
                self.ended = True  # stuck (STALL_S): no more from it; killed below
            fields = self.got.pop(layer, None)
        if fields is None and self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)  # the reader sees EOF; close() reaps
        return None if fields is None else RoutingResult(*map(unpack, fields))

    def close(self) -> None:
        """Kill the child (done or not), reap it and stop the reader."""
        if self.pid is None:
            return
        with contextlib.suppress(ProcessLookupError):  # gone already
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        self.pid = None
        self.thread.join()
        self.reader.close()


def _child(layers: list[int], serial: Callable[[], SerialRouting], write_fd: int) -> None:
    """Route ``layers`` in order with the router ``serial()`` makes (the caller's, drawing in
    its own worker threads, never forking again), sending (layer, the routing's fields) for
    each, (layer, None) for one that failed (and stop); exit."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        out = os.fdopen(write_fd, "wb")
        with serial() as route:
            for layer in layers:
                try:
                    fields: tuple[Packed, ...] | None = pack_routing(route(layer))
                except BaseException:  # the parent routes it again: raises it there
                    fields = None
                write_layer(out, layer, fields)
                if fields is None:
                    break
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _widen(pipe_fd: int) -> None:
    """Give the pipe :data:`PIPE_BYTES` of buffer where the system lets it (Linux's fcntl)."""
    with contextlib.suppress(ImportError, AttributeError, OSError):
        import fcntl

        fcntl.fcntl(pipe_fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
