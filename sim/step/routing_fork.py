"""Fast mode's MoE layer routings, drawn ahead in a forked child process.

:class:`moesim.step.routing_ahead.RoutingAhead`'s worker threads draw a layer's counts mostly
in numpy calls that release the GIL, but between them each draw takes the GIL back (~half of
its CPU), and the step's own thread, pricing and simulating in Python, holds it too: on two
cores the whole step is bound by the one GIL. A child forked when the step starts has its own
interpreter and GIL: it routes the layers (:func:`moesim.step.plan.route_layer`, its draws in
worker threads as the parent's would be) and sends each :class:`moesim.router.RoutingResult`
back through a pipe, in order, while the parent indexes the fabric, builds its host routers
and prices each layer as it arrives.

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
import dataclasses
import os
import pickle
import signal
import sys
import threading
import warnings
from typing import BinaryIO

import numpy as np

from moesim.router import RoutingResult
from moesim.step.spec import StepSpec

FORK_TOKENS = 1 << 22
"""Token routings (MoE layers x EP ranks x tokens per rank) from which the layers are drawn in
a child process: below it, the fork's ~10-20 ms would not be repaid."""


def can_fork(spec: StepSpec, layers: int) -> bool:
    """True when :class:`DrawProcess` should draw ``layers`` MoE layers of ``spec``."""
    return (sys.platform == "linux" and hasattr(os, "fork")
            and layers * spec.layout.ep * spec.tokens_per_microbatch >= FORK_TOKENS)


class DrawProcess:
    """A child process routing ``layers`` in order (module docstring) and a thread reading
    what it sends (so that the child never waits on a full pipe); :meth:`take` hands each
    routing over, :meth:`close` ends the child."""

    def __init__(self, spec: StepSpec, draws: int | None, layers: list[int], workers: int
                 ) -> None:
        self.pending = set(layers)  # layers the child may still send
        self.got: dict[int, tuple[np.ndarray, ...] | None] = {}
        self.ended = False  # nothing more will come
        self.cv = threading.Condition()
        read_fd, write_fd = os.pipe()
        with warnings.catch_warnings():  # 3.12+: a DeprecationWarning if threads run
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_fd)
            _child(spec, draws, layers, workers, write_fd)
        os.close(write_fd)
        self.pid: int | None = pid
        self.reader: BinaryIO = os.fdopen(read_fd, "rb")
        self.thread = threading.Thread(target=self._read, name="moesim-routing-reader",
                                       daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while True:
                layer, fields = pickle.load(self.reader)
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
            self.cv.wait_for(lambda: layer in self.got or self.ended)
            fields = self.got.pop(layer, None)
        return None if fields is None else RoutingResult(*fields)

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


def _child(spec: StepSpec, draws: int | None, layers: list[int], workers: int,
           write_fd: int) -> None:
    """Route ``layers`` (the distinct layers of ``draws``) in order, their draws in
    ``workers`` threads, sending (layer, the routing's fields) for each, (layer, None) for
    one that failed (and stop); exit."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        from moesim.step.routing_ahead import RoutingAhead

        out = os.fdopen(write_fd, "wb")
        with RoutingAhead(spec, draws, threads=workers, fork=False) as route:
            for layer in layers:
                try:
                    fields: tuple[np.ndarray, ...] | None = _fields(route(spec, layer))
                except BaseException:  # the parent routes it again: raises it there
                    fields = None
                pickle.dump((layer, fields), out, protocol=pickle.HIGHEST_PROTOCOL)
                out.flush()
                if fields is None:
                    break
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _fields(routing: RoutingResult) -> tuple[np.ndarray, ...]:
    return tuple(getattr(routing, f.name) for f in dataclasses.fields(routing))
