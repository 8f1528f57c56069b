"""One registry behaviour for every swappable part (moesim.registry)."""

from __future__ import annotations

import doctest

import pytest

import moesim.registry
from moesim.errors import ConfigError
from moesim.registry import Registry


def test_duplicate_name_is_an_error_and_unknown_lists_the_names() -> None:
    reg = Registry[int]("router.kind", "popularity model")
    reg.add("zipf", 1)
    reg.add("hot", 2)
    with pytest.raises(ConfigError, match="duplicate popularity model 'zipf': already registered"):
        reg.add("zipf", 3)
    with pytest.raises(ConfigError) as err:
        reg.lookup("nope")
    assert err.value.field == "router.kind"
    assert err.value.problem == "unknown 'nope'; allowed: zipf, hot"
    assert reg.names() == ("zipf", "hot") and dict(reg) == {"zipf": 1, "hot": 2}


def test_sorted_names_in_the_message() -> None:
    reg = Registry[int]("model", "model", sorted_names=True)
    for name in ("b", "a"):
        reg.add(name, 0)
    with pytest.raises(ConfigError, match="allowed: a, b"):
        reg.lookup("c")
    assert reg.names() == ("b", "a")


def test_docstring_example() -> None:
    assert doctest.testmod(moesim.registry).failed == 0
