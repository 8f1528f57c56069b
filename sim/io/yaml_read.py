"""YAML without surprises: the safe loader, a small alias budget, bounded nesting.

``yaml.safe_load`` executes nothing, but it does build what a "billion laughs" file asks
for: nine aliases of nine aliases share nodes cheaply in memory, and the first ``str()``,
``json.dumps`` or deep copy of the value expands them into billions. Deep nesting overflows
the composer's recursion. So the event stream is checked *before* anything is composed:

* at most ``yaml_aliases`` aliases, and at most ``yaml_nodes`` values once every alias is
  counted as the size of what it names (so nothing can expand past that);
* an alias to a collection that is still open (a recursive value) is refused;
* at most ``nesting_depth`` levels of nested mappings and lists.

The file itself is read by :func:`moesim.io.read.read_text` (regular file, size limit,
UTF-8).
"""

from __future__ import annotations

import os
from typing import Any

import yaml

from moesim.errors import ConfigError
from moesim.io.limits import LIMITS
from moesim.io.quote import short
from moesim.io.read import read_text

_safe_loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # never the full Loader
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def read_yaml(path: str | os.PathLike[str], what: str) -> object:
    """The parsed YAML of the file ``path``; any problem is one ConfigError naming ``what``."""
    return load_yaml_text(read_text(path, what), what, short(str(path)))


def load_yaml_text(text: str, what: str, name: str = "the file") -> object:
    """Parse ``text`` (checked as described in the module docstring)."""
    try:
        check_yaml_events(text, what, name)
        return yaml.load(text, Loader=_safe_loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise ConfigError(what, f"{name} is not valid YAML{where}: {short(problem)}") from None
    except RecursionError:
        raise ConfigError(what, f"{name} is nested too deeply") from None


def check_yaml_events(text: str, what: str, name: str) -> None:
    """Refuse alias bombs, recursive aliases and deep nesting, from the event stream."""
    max_aliases, max_nodes = LIMITS["yaml_aliases"].value, LIMITS["yaml_nodes"].value
    max_depth = LIMITS["nesting_depth"].value
    sizes: dict[str, int] = {}
    stack: list[tuple[str | None, int]] = []  # open collections: (anchor, nodes so far)
    aliases = total = 0
    for event in yaml.parse(text, Loader=_safe_loader):
        size = 0
        if isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > max_aliases:
                raise ConfigError(what, f"{name} has more than {max_aliases} YAML aliases")
            if event.anchor not in sizes:
                raise ConfigError(what, f"{name}: alias *{short(event.anchor)} refers to a "
                                  "value that is not complete (recursive) or not defined")
            size = sizes[event.anchor]
        elif isinstance(event, yaml.ScalarEvent):
            size = 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, _OPEN):
            stack.append((event.anchor, 1))
            if len(stack) > max_depth:
                raise ConfigError(what, f"{name} is nested deeper than {max_depth} levels")
            continue
        elif isinstance(event, _CLOSE):
            anchor, size = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
        else:
            continue
        if stack:
            anchor, inner = stack[-1]
            stack[-1] = (anchor, inner + size)
        total = max(total, size + sum(n for _, n in stack))
        if total > max_nodes:
            raise ConfigError(what, f"{name} expands to more than {max_nodes} YAML values "
                              "(aliases of aliases?)")
