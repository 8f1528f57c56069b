"""JSON input with the same guarantees as YAML: regular file, size limit, UTF-8, bounded depth.

Python's ``json`` parser recurses once per nesting level; a file of ten thousand ``[`` is a
``RecursionError`` (and a traceback), not an answer. :func:`json_depth` measures the nesting
first, with numpy over the bytes (strings masked out), so nothing deep is ever parsed.
"""

from __future__ import annotations

import json
import os
import re

import numpy as np

from moesim.errors import ConfigError
from moesim.io.limits import LIMITS
from moesim.io.quote import short
from moesim.io.read import read_text

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON ``text`` (brackets inside strings ignored)."""
    bare = _STRING.sub('""', text).encode("utf-8", "replace")
    codes = np.frombuffer(bare, dtype=np.uint8)
    steps = (np.isin(codes, (ord("["), ord("{"))).astype(np.int64)
             - np.isin(codes, (ord("]"), ord("}"))).astype(np.int64))
    return int(np.cumsum(steps).max(initial=0))


def load_json_text(text: str, what: str, name: str = "the file") -> object:
    """Parse JSON ``text``; too deep or invalid is one ConfigError naming ``what``."""
    max_depth = LIMITS["nesting_depth"].value
    if json_depth(text) > max_depth:
        raise ConfigError(what, f"{name} is nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=lambda c: _no_constant(c, what))
    except json.JSONDecodeError as exc:
        raise ConfigError(what, f"{name} is not valid JSON at line {exc.lineno}: "
                          f"{exc.msg}") from None
    except RecursionError:
        raise ConfigError(what, f"{name} is nested too deeply") from None


def read_json(path: str | os.PathLike[str], what: str) -> object:
    """The parsed JSON of the file ``path`` (see :func:`load_json_text`)."""
    return load_json_text(read_text(path, what), what, short(str(path)))


def _no_constant(name: str, what: str) -> object:
    raise ConfigError(what, f"{name} is not a JSON number; give a finite number")
