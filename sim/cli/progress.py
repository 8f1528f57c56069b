"""Progress on stderr for commands that can run for seconds to minutes.

A ``tqdm`` bar, shown only when stderr is a terminal and ``--quiet`` is not given (so a pipe,
a log file or CI sees nothing), and only once a command has run for ``DELAY_S``. Two shapes:

* :class:`Bar`: a fraction, fed by a ``(done, total)`` callback that the command passes down
  (the simulator never imports tqdm; it calls the function it was given);
* :class:`Ticker`: elapsed time only, for a stage that reports nothing while it runs.

A daemon thread redraws either, so the clock moves while the simulator is busy.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import click

DELAY_S = 0.5
"""A bar appears only after this long: quick commands stay silent. The environment variable
``MOESIM_PROGRESS_DELAY_S`` (seconds, 0-60) overrides it: the tests set 0 so that a bar shows
however fast the machine runs the command."""
DELAY_ENV = "MOESIM_PROGRESS_DELAY_S"
REDRAW_S = 0.5

F = TypeVar("F", bound=Callable[..., Any])


def quiet_option(fn: F) -> F:
    """The ``--quiet/-q`` flag: no progress on stderr."""
    return click.option("--quiet", "-q", is_flag=True,
                        help="No progress on stderr (it is shown only on a terminal anyway).")(fn)


def shown(quiet: bool) -> bool:
    """Whether progress goes to stderr: a terminal, and not ``--quiet``."""
    return not quiet and sys.stderr.isatty()


def delay_s() -> float:
    """:data:`DELAY_S`, or ``MOESIM_PROGRESS_DELAY_S`` when it holds a number in 0-60."""
    try:
        value = float(os.environ.get(DELAY_ENV, DELAY_S))
    except ValueError:
        return DELAY_S
    return value if 0.0 <= value <= 60.0 else DELAY_S


def _tqdm(label: str, **kw: Any) -> Any:
    from tqdm import tqdm

    return tqdm(desc=label, file=sys.stderr, leave=False, dynamic_ncols=True, delay=delay_s(),
                **kw)


class Bar:
    """Progress of a block on stderr (nothing unless :func:`shown`).

    Used as a context manager; calling it as ``bar(done, total, **postfix)`` moves the bar
    (a callback to pass down); :meth:`stage` names what runs now. A daemon thread redraws it,
    so the elapsed time moves even while the block reports nothing.
    """

    def __init__(self, label: str, unit: str = "", quiet: bool = False) -> None:
        self.label, self.unit, self.enabled = label, unit, shown(quiet)
        self.bar: Any = None
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def __call__(self, done: float, total: float, **postfix: object) -> None:
        if self.bar is None:
            return
        self.bar.total = total
        self.bar.update(done - self.bar.n)
        if postfix:
            self.bar.set_postfix(postfix, refresh=False)

    def stage(self, label: str) -> None:
        """Name what runs now."""
        if self.bar is not None:
            self.bar.set_description_str(f"{self.label}: {label}", refresh=False)

    def __enter__(self) -> Bar:
        if self.enabled:
            self.bar = _tqdm(self.label, total=None, unit=f" {self.unit}")
            self.thread = threading.Thread(target=self._redraw, daemon=True)
            self.thread.start()
        return self

    def _redraw(self) -> None:
        while not self.stop.wait(REDRAW_S):
            self.bar.refresh()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
            self.bar.refresh()  # the final state is drawn before the bar is cleared
            self.bar.close()


class Ticker(Bar):
    """A :class:`Bar` that shows only the elapsed time (for a block that reports nothing)."""

    def __enter__(self) -> Ticker:
        if self.enabled:
            self.bar = _tqdm(self.label, total=None, bar_format="{desc} [{elapsed} elapsed]")
            self.thread = threading.Thread(target=self._redraw, daemon=True)
            self.thread.start()
        return self
