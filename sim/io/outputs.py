"""Output files: checked before the work, written whole or not at all.

Before a command simulates anything, :func:`check_outputs` makes sure each output can be
written and would not destroy something the user owns: its folder exists and is writable;
the path is not a folder, a device or a FIFO, not a read-only file, not one of the command's
inputs (paths compared after following symlinks, and by inode where both exist), and no two
outputs are the same file. :func:`write_atomic` (and :func:`atomic_target` for writers that
want a path, like a figure library) writes a temporary file in the same folder, syncs it and renames
it over the target, so a crash or a full disk leaves the old file or the new one, never half
of either. A symlinked output is written through: the link stays, its target is replaced.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from moesim.errors import ConfigError
from moesim.io.quote import short

PathLike = str | os.PathLike[str]


def real(path: PathLike) -> Path:
    """``path`` with every symlink followed (the file that would actually be touched)."""
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether ``a`` and ``b`` name one file (real paths equal, or one inode)."""
    if real(a) == real(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_outputs(
    outputs: Mapping[str, PathLike | None],
    inputs: Iterable[PathLike] = (),
    *,
    make_dirs: bool = False,
) -> dict[str, Path]:
    """Check every output ``{flag: path}`` (None = not asked) against the rules above.

    Returns ``{flag: real path}`` for the outputs asked. ``make_dirs`` creates a missing
    folder (sweeps' default ``results/``) instead of refusing it.
    """
    given = [p for p in inputs if p is not None]
    checked: dict[str, Path] = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        target = check_output(flag, path, make_dirs=make_dirs)
        for source in given:
            if same_file(path, source):
                raise ConfigError(flag, f"{short(os.fspath(path))} is an input of this command"
                                  "; write the output to another file")
        for other_flag, other in checked.items():
            if other == target:
                raise ConfigError(flag, f"{short(os.fspath(path))} is also the {other_flag} "
                                  "output; give each output its own file")
        checked[flag] = target
    return checked


def check_output(flag: str, path: PathLike, *, make_dirs: bool = False) -> Path:
    """One output path: writable folder, and a regular writable file or nothing yet."""
    name = short(os.fspath(path))
    if not os.fspath(path):
        raise ConfigError(flag, "needs a file name")
    target = real(path)
    folder = target.parent
    if make_dirs and not folder.exists():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(flag, f"cannot create the folder of {name}: {exc.strerror}") from None
    if not folder.is_dir():
        raise ConfigError(flag, f"the folder of {name} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(flag, f"cannot write in the folder of {name} (permission denied)")
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise ConfigError(flag, f"cannot use {name}: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(flag, f"{name} is a folder; give a file name")
    if not stat.S_ISREG(mode):
        raise ConfigError(flag, f"{name} is not a regular file (a device or FIFO?)")
    if not os.access(target, os.W_OK):
        raise ConfigError(flag, f"{name} is read-only; it is left as it is")
    return target


@contextlib.contextmanager
def atomic_target(path: PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix) that replaces ``path`` on success."""
    target = real(path)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                    suffix=f".tmp{target.suffix}")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        _sync(tmp)
        os.chmod(tmp, _mode_for(target))
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_atomic(path: PathLike, data: str | bytes, flag: str = "output") -> Path:
    """Write ``data`` to ``path`` whole (temporary file, fsync, rename); ConfigError naming
    ``flag`` if that fails (the old file, if any, is then untouched)."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    try:
        with atomic_target(path) as tmp:
            tmp.write_bytes(payload)
    except OSError as exc:
        raise ConfigError(flag, f"cannot write {short(os.fspath(path))}: "
                          f"{exc.strerror or exc}") from None
    return Path(path)


def _sync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _mode_for(target: Path) -> int:
    """The mode the written file gets: the old file's, else 0o666 less the umask."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
