"""Registries by name for swappable parts: models, pipeline schedules, popularity models, ...

One behaviour for all of them: a duplicate name is an error, and an unknown name is a
:class:`moesim.errors.ConfigError` naming the field and listing the allowed names.

>>> from moesim.registry import Registry
>>> colours = Registry[int]("colour", "colour")
>>> colours.add("red", 1)
1
>>> colours.names(), colours.lookup("red"), "blue" in colours
(('red',), 1, False)
>>> colours.lookup("blue")
Traceback (most recent call last):
moesim.errors.ConfigError: colour: unknown 'blue'; allowed: red
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from moesim.errors import ConfigError

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Items by name, in registration order (a read-only mapping plus :meth:`add`)."""

    def __init__(self, field: str, what: str, *, sorted_names: bool = False) -> None:
        self.field = field  # the input field a name comes from, for error messages
        self.what = what  # what an item is ("model", "schedule", ...)
        self._sorted = sorted_names  # list the allowed names sorted, not in registration order
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        """Register ``item`` as ``name``; a name already taken is an error."""
        if name in self._items:
            raise ConfigError(self.field, f"duplicate {self.what} {name!r}: already registered")
        self._items[name] = item
        return item

    def names(self) -> tuple[str, ...]:
        """Registered names, in registration order."""
        return tuple(self._items)

    def lookup(self, name: str) -> T:
        """The item registered as ``name`` (ConfigError listing the names otherwise)."""
        if name not in self._items:
            names = sorted(self._items) if self._sorted else list(self._items)
            raise ConfigError(self.field, f"unknown {name!r}; allowed: {', '.join(names)}")
        return self._items[name]

    def __getitem__(self, name: str) -> T:
        return self._items[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
