"""Run a step's SimPy environment to the end, telling whoever watches how far it has got.

``with watching(progress): run_step(...)`` makes every step simulated inside the block call
``progress(done, total)`` now and then: backward passes done over those its simulated ranks
must do. The callback travels in a context variable, so no step mode, runner or state needs
a new parameter, and nothing is set outside the block (nor seen by other threads).

The loop steps the same events as ``env.run()``, in the same order (``env.step()`` one by
one; no extra events, no clock jumps), so the result does not depend on whether anyone
watches. It reports about every ``REPORT_S`` of wall time (the chunk of events between two
reports adapts).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import simpy
from simpy.core import EmptySchedule

from moesim.engine.network import FlowNetwork
from moesim.step.linkbins import BinnedLinkStats

Progress = Callable[[float, float], None]
"""``progress(done, total)``: called now and then while a simulation runs."""

REPORT_S = 0.2
FIRST_CHUNK = 2_000

_watcher: ContextVar[Progress | None] = ContextVar("moesim_step_progress", default=None)
_bin_links: ContextVar[bool] = ContextVar("moesim_step_bin_links", default=False)


@contextmanager
def watching(progress: Progress | None, bin_links: bool = False) -> Iterator[None]:
    """Steps simulated inside the block report to ``progress`` (None: nobody watches); with
    ``bin_links`` their networks also keep link utilisation in time bins
    (:class:`moesim.step.linkbins.BinnedLinkStats`, as ``net.stats.bins``) for a trace."""
    tokens = _watcher.set(progress), _bin_links.set(bin_links)
    try:
        yield
    finally:
        _watcher.reset(tokens[0])
        _bin_links.reset(tokens[1])


def run_step_env(net: FlowNetwork, b_count: dict[tuple[int, int], int], total: int) -> None:
    """``net.env.run()``; reports backward passes done to the watcher, if there is one."""
    if _bin_links.get():
        net.stats = BinnedLinkStats(net.stats.cap_Bps, net.stats.record_timeline)
    progress = _watcher.get()
    if progress is None:
        net.env.run()
    else:
        run_reporting(net.env, b_count, total, progress)


def run_reporting(env: simpy.Environment, b_count: dict[tuple[int, int], int], total: int,
                  progress: Progress) -> None:
    """``env.run()``, calling ``progress(backward passes done, total)`` as it goes."""
    step, chunk = env.step, FIRST_CHUNK
    progress(0, total)
    try:
        while True:
            start = time.perf_counter()
            for _ in range(chunk):
                step()
            progress(sum(b_count.values()), total)
            took = time.perf_counter() - start
            chunk = max(100, int(chunk * min(4.0, REPORT_S / max(took, 1e-6))))
    except EmptySchedule:
        progress(total, total)
