"""Fast mode's MoE layer routings, drawn ahead in worker threads while the step counts them.

A layer's routing is a pure function of (spec, layer): :func:`moesim.step.plan.route_layer`
draws it from its own random stream (:mod:`moesim.router.streams`), so layers drawn in any
order, on any thread, give the same arrays bit for bit. It has two halves: the draw
(:func:`moesim.step.plan.draw_layer`: every token's experts; most of it numpy's random
integers, which run without the GIL) and the count (:func:`moesim.step.plan.count_layer`:
tokens per rank and expert, all-to-all sizes). :class:`RoutingAhead` has ``ROUTING_THREADS``
workers draw the distinct MoE layers in model order from the moment the step starts (at most
``LOOKAHEAD`` ahead of the layer the step is pricing), and counts each layer in the calling
thread when :func:`moesim.step.plan.build_plan` asks for it: on two free cores the draws of
the next layers run beside the count and pricing of this one. An error raised while drawing a
layer is raised when that layer is asked for, as a serial run would raise it.

On Linux, a step with many layers to route (:func:`moesim.step.routing_fork.can_fork`) draws
and counts them in a forked child process instead, its workers beside it there
(:class:`moesim.step.routing_fork.DrawProcess`): the draws then take no share of the step's
GIL (2026-12-07, 9,216-GPU step under chrt, 8 interleaved rounds: median 1.93 -> 1.58 s wall,
2.62 -> 2.27 s CPU; benchmarks/README.md).

``routing_draws = R`` (fast mode) reuses the routing of the first ``R`` MoE layers cyclically
(a stationary router); ``None`` draws every MoE layer, as full mode does.

Measured (benchmarks/bench_step.py --cli, 9,216 GPUs, every MoE layer routed): see
benchmarks/README.md.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from types import TracebackType

from moesim.router import Draw, RoutingResult
from moesim.step.plan import count_layer, draw_layer, route_layer
from moesim.step.routing_fork import DrawProcess, can_fork
from moesim.step.spec import StepSpec

ROUTING_THREADS = 2
"""Worker threads drawing layers ahead (at most the usable cores; none on one core); 0 draws
and counts each layer in the calling thread when asked. The calling thread mostly waits for
the draws (numpy's multinomial draws run without the GIL), so on two cores two workers draw
side by side: 9,216-GPU step, benchmarks/README.md."""
LOOKAHEAD = 4
"""Layers drawn ahead of the one asked for, at most (a draw holds its assignments: ~4 MB at
EP64 x 4096 tokens x top-8)."""


def routing_threads() -> int:
    """Workers for :class:`RoutingAhead`: ``ROUTING_THREADS``, at most the usable cores (none
    on one core: the calling thread's), and none in a worker process of a pool (design,
    sweep, validate: their processes already use the cores)."""
    mp = sys.modules.get("multiprocessing")  # imported by any pool; not imported here for this
    if mp is not None and mp.parent_process() is not None:
        return 0
    cores = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
             else os.cpu_count() or 1)
    return min(ROUTING_THREADS, cores) if cores > 1 else 0


class _DrawAhead:
    """Worker threads drawing ``layers`` in order, at most ``LOOKAHEAD`` past the last one
    taken; :meth:`take` hands a draw over (or its error), :meth:`close` stops the workers."""

    def __init__(self, spec: StepSpec, layers: list[int], workers: int) -> None:
        self.spec, self.layers = spec, layers
        self.index = {layer: i for i, layer in enumerate(layers)}
        self.started = 0  # layers[:started] were started or skipped
        self.passed = 0  # the caller has asked for layers[passed - 1]: start none before
        self.begun: set[int] = set()  # the layers started
        self.done: dict[int, Draw | BaseException] = {}
        self.closed = False
        self.cv = threading.Condition()
        self.threads = [threading.Thread(target=self._work, name=f"moesim-routing-{i}",
                                         daemon=True) for i in range(workers)]
        for thread in self.threads:
            thread.start()

    def _next(self) -> int | None:
        """The next layer to draw, once the window allows; None when there is none left."""
        with self.cv:
            self.cv.wait_for(lambda: self.closed or self.started >= len(self.layers)
                             or self.started < self.passed + LOOKAHEAD)
            self.started = max(self.started, self.passed)  # asked for already: not needed
            if self.closed or self.started >= len(self.layers):
                return None
            self.started += 1
            self.begun.add(self.layers[self.started - 1])
            return self.layers[self.started - 1]

    def _work(self) -> None:
        while (layer := self._next()) is not None:
            try:
                out: Draw | BaseException = draw_layer(self.spec, layer)
            except BaseException as error:  # raised where the caller asks for the layer
                out = error
            with self.cv:
                self.done[layer] = out
                self.cv.notify_all()

    def take(self, layer: int) -> Draw | None:
        """The draw of ``layer`` (raising its error); None when no worker started it."""
        with self.cv:
            self.passed = max(self.passed, self.index.get(layer, -1) + 1)
            self.cv.notify_all()
            if layer not in self.begun:
                return None
            self.begun.discard(layer)
            self.cv.wait_for(lambda: layer in self.done)
            out = self.done.pop(layer)
        if isinstance(out, BaseException):
            raise out
        return out

    def close(self) -> None:
        """Stop handing out layers and wait for the draws in flight: no worker outlives the
        step (a later fork copies no busy thread)."""
        with self.cv:
            self.closed = True
            self.cv.notify_all()
        for thread in self.threads:
            thread.join()


@contextlib.contextmanager
def _in_child(spec: StepSpec, draws: int | None, workers: int
              ) -> Iterator[Callable[[int], RoutingResult]]:
    """The forked child's router (:class:`moesim.step.routing_fork.DrawProcess`): this
    module's, its draws in ``workers`` threads there, never forking again."""
    with RoutingAhead(spec, draws, threads=workers, fork=False) as route:
        yield lambda layer: route(spec, layer)


class RoutingAhead:
    """A ``Route`` (:data:`moesim.step.plan.Route`) for ``spec`` whose MoE layers are drawn
    ahead (module docstring); a context manager that stops the workers on exit. ``threads``:
    workers (default :func:`routing_threads`); ``fork``: in a child process (default: where
    :func:`moesim.step.routing_fork.can_fork`), with ``threads`` workers there."""

    def __init__(self, spec: StepSpec, draws: int | None = None,
                 threads: int | None = None, fork: bool | None = None) -> None:
        moe = [i for i, is_moe in enumerate(spec.model.moe_layers) if is_moe]
        self.spec = spec
        self.source = {layer: moe[k % draws] if draws else layer for k, layer in enumerate(moe)}
        self.drawn: dict[int, RoutingResult] = {}
        workers = routing_threads() if threads is None else threads
        firsts = list(dict.fromkeys(self.source.values()))
        self.ahead: _DrawAhead | DrawProcess | None = None
        if workers > 0 and firsts:
            forked = can_fork(spec, len(firsts)) if fork is None else fork
            self.ahead = (DrawProcess(firsts, functools.partial(_in_child, spec, draws, workers))
                          if forked
                          else _DrawAhead(spec, firsts, workers))

    def __call__(self, spec: StepSpec, layer: int) -> RoutingResult:
        first = self.source.get(layer, layer)
        if first not in self.drawn:
            drawn = (self.ahead.take(first) if self.ahead is not None and spec is self.spec
                     else None)
            self.drawn[first] = (route_layer(spec, first) if drawn is None
                                 else drawn if isinstance(drawn, RoutingResult)
                                 else count_layer(spec, drawn))
        return self.drawn[first]

    def cancel(self) -> None:
        """Draw no more layers (an error ended the step early, or it is done) and wait for
        those in flight."""
        if self.ahead is not None:
            self.ahead.close()

    def __enter__(self) -> RoutingAhead:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.cancel()
