"""Read a user's input file: a regular file, at most ``file_bytes`` long, UTF-8 text.

``/dev/zero`` or a FIFO would never end (or never start), a multi-gigabyte file would be read
whole into memory, and bytes that are not UTF-8 would surface as a traceback deep in a parser.
:func:`read_text` refuses each with one line naming the file's role (``what``):

* not a regular file (device, FIFO, socket, directory): refused before it is opened for
  reading (a FIFO is opened non-blocking, so a FIFO without a writer cannot hang);
* longer than the limit: at most limit + 1 bytes are read, then refused;
* not UTF-8 (binary, UTF-16, Latin-1): refused, naming the byte offset; a UTF-8 byte-order
  mark is accepted and dropped.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from moesim.errors import ConfigError
from moesim.io.limits import LIMITS
from moesim.io.quote import short

_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def read_bytes(path: str | os.PathLike[str], what: str, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (ConfigError naming ``what`` otherwise)."""
    limit = LIMITS["file_bytes"].value if max_bytes is None else max_bytes
    name = short(str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(what, f"cannot read {name}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise ConfigError(what, f"{name} is {kind}; give a file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise ConfigError(what, f"cannot read {name}: {exc.strerror}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise ConfigError(what, f"{name} is over the limit of {limit} bytes")
    return b"".join(chunks)


def decode_utf8(data: bytes, what: str, name: str = "the file") -> str:
    """``data`` as text; anything but UTF-8 (with or without a BOM) is ConfigError."""
    if data.startswith(_UTF16_BOMS):
        raise ConfigError(what, f"{name} is UTF-16 text; save it as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        hint = "a binary file?" if b"\0" in data[:4096] else "save it as UTF-8"
        raise ConfigError(what, f"{name} is not UTF-8 (byte {exc.start}: "
                          f"0x{data[exc.start]:02x}); {hint}") from None
    if "\0" in text:
        raise ConfigError(what, f"{name} holds a NUL character; a binary file?")
    return text.removeprefix("\ufeff")


def read_text(path: str | os.PathLike[str], what: str, max_bytes: int | None = None) -> str:
    """The UTF-8 text of the regular file ``path``, within the size limit."""
    return decode_utf8(read_bytes(path, what, max_bytes), what, short(str(Path(path))))
