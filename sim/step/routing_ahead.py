"""Fast mode's MoE layer routings, drawn ahead in worker threads while the rest is set up.

A layer's routing is a pure function of (spec, layer): :func:`moesim.step.plan.route_layer`
draws it from its own random stream (:mod:`moesim.router.streams`), so layers drawn in any
order, on any thread, give the same arrays bit for bit. numpy releases the GIL in the heavy
parts of a draw (the random integers, element-wise passes, gathers), so with
``ROUTING_THREADS`` > 1 the layers route beside the fabric build and each other.
:class:`RoutingAhead` starts every distinct layer's routing at once (``threads`` workers, in
model order) and hands each out when :func:`moesim.step.plan.build_plan` asks, in its order;
an error raised while routing a layer is raised there, as a serial run would raise it.

``routing_draws = R`` (fast mode) reuses the routing of the first ``R`` MoE layers cyclically
(a stationary router); ``None`` draws every MoE layer, as full mode does.

Measured (benchmarks/bench_step.py --cli, 9,216 GPUs, every MoE layer routed: 60 layers of
about 22 ms of CPU each): see benchmarks/README.md.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

from moesim.router import RoutingResult
from moesim.step.plan import route_layer
from moesim.step.spec import StepSpec

ROUTING_THREADS = 1
"""Worker threads at most (each layer in flight holds ~30 MB of scratch at EP64 x 4096
tokens per rank); fewer where fewer cores are ours; 1 routes each layer when asked, in the
calling thread. Measured on the idle 2-core machine (18:59-19:01, 10 interleaved pairs of whole
``moesim step`` runs on the 9,216-GPU step, others' CPU ~0): 2 threads gave 0.95x the wall time
at 1.15x the CPU (parts of a draw hold the GIL), so the default is 1; benchmarks/bench_step.py
``--routing-threads 2`` measures the other."""


def routing_threads() -> int:
    """Workers for :class:`RoutingAhead`: ``ROUTING_THREADS``, at most the usable cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(ROUTING_THREADS, cores or 1))


class RoutingAhead:
    """A ``Route`` (:data:`moesim.step.plan.Route`) for ``spec`` whose MoE layers route ahead
    (module docstring); a context manager that cancels what was not asked for on exit."""

    def __init__(self, spec: StepSpec, draws: int | None = None,
                 threads: int | None = None) -> None:
        moe = [i for i, is_moe in enumerate(spec.model.moe_layers) if is_moe]
        self.spec = spec
        self.source = {layer: moe[k % draws] if draws else layer for k, layer in enumerate(moe)}
        self.drawn: dict[int, RoutingResult] = {}
        self.ahead: dict[int, Future[RoutingResult]] = {}
        self.pool: ThreadPoolExecutor | None = None
        workers = routing_threads() if threads is None else threads
        firsts = list(dict.fromkeys(self.source.values()))
        if workers > 1 and len(firsts) > 1:
            self.pool = ThreadPoolExecutor(workers, thread_name_prefix="moesim-routing")
            self.ahead = {layer: self.pool.submit(route_layer, spec, layer) for layer in firsts}

    def __call__(self, spec: StepSpec, layer: int) -> RoutingResult:
        first = self.source.get(layer, layer)
        if first not in self.drawn:
            future = self.ahead.pop(first, None)
            if future is None or spec is not self.spec:
                self.drawn[first] = route_layer(spec, first)
            else:
                self.drawn[first] = future.result()
        return self.drawn[first]

    def cancel(self) -> None:
        """Drop the routings not started yet (an error ended the step early) and wait for
        those in flight: no worker outlives the step (a later fork copies no busy thread)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> RoutingAhead:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.cancel()
