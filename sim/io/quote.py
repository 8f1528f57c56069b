"""Quote a user's value in an error message: a short prefix, never the whole thing.

``str()`` of a value from an alias bomb, a recursive YAML node or a megabyte string is the
hang or the wall of text an error must not be. :func:`short` bounds both the work (reprlib
stops at a depth and a count) and the length of what is printed.

>>> short("x" * 1000)
"'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' (1000 characters)"
>>> a = []; a.append(a); short(a)
'[[[[...]]]]'
"""

from __future__ import annotations

import reprlib

MAX_CHARS = 60

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_REPR.maxstring = 40
_REPR.maxother = 40
_REPR.maxlong = 40


def short(value: object, max_chars: int = MAX_CHARS) -> str:
    """A repr of ``value`` of at most about ``max_chars`` characters, one line."""
    if isinstance(value, str) and len(value) > _REPR.maxstring:
        text = repr(value[: _REPR.maxstring - 3])[:-1] + "...'"
        return f"{text} ({len(value)} characters)"
    text = _REPR.repr(value).replace("\n", " ")
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."
