"""One sweep per results file: an advisory lock file beside it, held for the sweep's life.

``<results>.lock`` holds the owner's pid, host and start time (JSON), and the owner holds an
exclusive ``flock`` on it. A second sweep on the same results file finds the lock held and
stops with one line naming the owner. A lock left by a sweep that died (SIGKILL, power loss)
is stale: its ``flock`` is gone with the process, and on this host its pid no longer runs;
the next sweep takes it over and says so. A lock naming another host whose ``flock`` cannot
be seen from here (some network file systems) is not guessed at: the message names it and
asks the user to remove it once that sweep is known to be dead.

The lock is released (the file removed) when the sweep ends, however it ends; the file is
only removed by its owner, after checking that the path still names the file it locked.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from moesim.errors import ConfigError
from moesim.io import short


def lock_path(results: str | Path) -> Path:
    """``r.csv`` -> ``r.csv.lock``."""
    results = Path(results)
    return results.with_name(results.name + ".lock")


def _owner(fd: int) -> dict[str, object]:
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        data = json.loads(os.read(fd, 4096).decode("utf-8", "replace") or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _describe(owner: dict[str, object]) -> str:
    pid, host = owner.get("pid", "?"), owner.get("host", "?")
    return f"pid {short(pid)} on host {short(host)} (since {short(owner.get('started', '?'))})"


def pid_running(pid: object) -> bool:
    """Whether process ``pid`` exists on this host."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def results_lock(results: str | Path, flag: str = "--out") -> Iterator[Path]:
    """Hold the lock of ``results`` for the ``with`` block; ConfigError naming ``flag`` when
    another live sweep holds it."""
    path = lock_path(results)
    fd = _acquire(path, flag, results)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                path.unlink()
        os.close(fd)


def _acquire(path: Path, flag: str, results: str | Path) -> int:
    host = socket.gethostname()
    for _ in range(10):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            owner = _owner(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise ConfigError(flag, f"cannot lock {short(str(path))}: {exc.strerror}") \
                    from None
            raise ConfigError(flag, f"{short(str(results))} is in use by another sweep, "
                              f"{_describe(owner)}; wait for it or give another --out") from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if not same:  # the owner removed it between our open and our flock: try again
            os.close(fd)
            continue
        owner = _owner(fd)
        if owner and owner.get("host") not in (host, None):
            os.close(fd)
            raise ConfigError(flag, f"{short(str(results))} is locked by {_describe(owner)}; "
                              f"if that sweep is dead, delete {short(str(path))}")
        if owner and owner.get("pid") != os.getpid():
            state = "still runs but holds no lock" if pid_running(owner.get("pid")) else "is gone"
            print(f"moesim: taking over the stale lock of {_describe(owner)}: that process "
                  f"{state}", file=sys.stderr)
        _write_owner(fd, host)
        return fd
    raise ConfigError(flag, f"cannot lock {short(str(path))}: it keeps changing")


def _write_owner(fd: int, host: str) -> None:
    record = {"pid": os.getpid(), "host": host,
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(record).encode())
    os.fsync(fd)
