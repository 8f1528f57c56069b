"""The CLI's output files: checked before the work, written whole, the result never lost.

Every command that writes files calls :func:`check_outputs` (:mod:`moesim.io.outputs`) on
its output flags and input paths *before* simulating, so a bad ``--out`` costs nothing and
no output can replace an input. After the work, :func:`emit` writes the files (each
atomically) and prints the result whatever happens to them: a file that could not be
written is then reported in one line (exit 2), after the result.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import click

from moesim.errors import ConfigError
from moesim.io import atomic_target, check_limit, check_outputs, short

__all__ = ["check_flag_count", "check_outputs", "emit", "output_file"]


@contextlib.contextmanager
def output_file(flag: str, path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path to write ``flag``'s output to; it replaces ``path`` on success."""
    try:
        with atomic_target(path) as tmp:
            yield tmp
    except OSError as exc:
        raise ConfigError(flag, f"cannot write {short(os.fspath(path))}: "
                          f"{exc.strerror or exc}") from None


def emit(text: str, writes: list[Callable[[], object]]) -> None:
    """Run ``writes``, print ``text`` in any case, then raise the first write error."""
    error: ConfigError | None = None
    for write in writes:
        try:
            write()
        except ConfigError as exc:
            error = error or exc
    click.echo(text)
    if error is not None:
        raise error


def check_flag_count(value: int | None, kind: str, flag: str, minimum: int = 1) -> None:
    """A numeric flag (``--microbatches``, ``-j``): at least ``minimum``, within its limit."""
    if value is None:
        return
    if value < minimum:
        raise ConfigError(flag, f"must be an integer >= {minimum}, got {value}")
    check_limit(kind, value, flag)
