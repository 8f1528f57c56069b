"""Where sweep points run: inline, a local process pool, or a Dask distributed cluster.

Every backend is a :class:`concurrent.futures.Executor` (Dask's through
``Client.get_executor()``), so one loop, :func:`run_unordered`, drives them all. It keeps at
most ``window`` points in flight and yields rows as they finish, so each row can be saved
before the next point is even submitted (inline) or while others run.

The worker function :func:`run_point` never raises for a bad point: the error becomes the
row. An exception out of a future therefore means the backend itself failed (a worker died,
the cluster went away); it stops the sweep, and a resume reruns what was lost.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

from moesim.errors import ConfigError
from moesim.io import check_limit, short
from moesim.sweep.fingerprint import FINGERPRINT_COLUMN
from moesim.sweep.row import error_row, result_row
from moesim.sweep.spec import Point, point_mapping

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class PointTask:
    """What a worker needs for one point: the base scenario mapping and the point."""

    scenario: dict[str, Any]
    point: Point
    fingerprint: str = ""  # of the base + build the row is computed from (stamped on it)


def run_point(task: PointTask) -> dict[str, str]:
    """Run one point and return its row; any error is recorded in the row, not raised."""
    from moesim.runner.run import run_scenario
    from moesim.scenario import scenario_from_dict

    try:
        data = point_mapping(task.scenario, task.point)
        row = result_row(task.point, run_scenario(scenario_from_dict(data)))
    except Exception as exc:
        row = error_row(task.point, exc)
    return {**row, FINGERPRINT_COLUMN: task.fingerprint} if task.fingerprint else row


class InlineExecutor(Executor):
    """Runs each call at submit time, in this process (``-j 1``: easy to debug and profile)."""

    def submit(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> Future[R]:
        future: Future[R] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def run_unordered(
    executor: Executor, fn: Callable[[T], R], tasks: Iterable[T], window: int
) -> Iterator[R]:
    """``fn(task)`` for every task, yielded as each finishes, at most ``window`` in flight."""
    todo = iter(tasks)
    pending = {executor.submit(fn, t) for t in itertools.islice(todo, window)}
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        for future in done:
            yield future.result()
        pending |= {executor.submit(fn, t) for t in itertools.islice(todo, len(done))}


@contextlib.contextmanager
def open_executor(jobs: int = 1, dask_address: str | None = None) -> Iterator[tuple[Executor, int]]:
    """The executor for ``-j jobs`` / ``--dask ADDRESS`` and how many points to keep in flight."""
    if dask_address is not None:
        with _dask_executor(dask_address) as pair:
            yield pair
        return
    if jobs < 1:
        raise ConfigError("-j", f"must be >= 1, got {jobs}")
    check_limit("jobs", jobs, "-j")
    if jobs == 1:
        yield InlineExecutor(), 1
        return
    pool = ProcessPoolExecutor(max_workers=jobs)
    try:
        yield pool, 2 * jobs
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


DASK_ADDRESS = re.compile(r"^(?:(?:tcp|tls|ws|wss|ucx)://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")
"""A Dask scheduler address: [scheme://]host:port (distributed's address format)."""


def check_dask_address(address: str) -> str:
    """``address`` if it reads as ``[tcp://]host:port``; else ConfigError naming --dask."""
    match = DASK_ADDRESS.match(address)
    if match is None or not 0 < int(address.rsplit(":", 1)[1]) < 65536:
        raise ConfigError("--dask", f"not a scheduler address: {short(address)}; give "
                          "host:port or tcp://host:port (e.g. tcp://10.0.0.5:8786)")
    return address


@contextlib.contextmanager
def _dask_executor(address: str) -> Iterator[tuple[Executor, int]]:
    try:
        from distributed import Client
    except ImportError as exc:
        raise ConfigError(
            "--dask", "needs the optional 'distributed' package: pip install 'moesim[dask]'"
        ) from exc
    check_dask_address(address)
    try:
        client = Client(address, timeout="10s")
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError("--dask", f"cannot reach a Dask scheduler at {short(address)}: "
                          f"{short(str(exc), 120)}") from None
    try:
        threads = sum(client.nthreads().values()) or 1
        executor = client.get_executor(pure=False)
        try:
            yield executor, 2 * threads
        finally:
            executor.shutdown(wait=False)
    finally:
        client.close()
