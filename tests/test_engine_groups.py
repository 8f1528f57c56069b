"""Completion groups made in bulk (:meth:`CompletionGroups.expect_many`) are the groups that
one :meth:`CompletionGroups.expect` call per group gives."""

from __future__ import annotations

import numpy as np
import simpy

from moesim.engine.groups import CompletionGroups


def _columns(groups: CompletionGroups) -> dict[str, list[float]]:
    return {k: groups[k].tolist() for k in ("left", "finish_s", "last_flow")}


def test_expect_many_is_expect_per_group() -> None:
    env_a, env_b = simpy.Environment(), simpy.Environment()
    one, many = CompletionGroups(env_a), CompletionGroups(env_b)
    ids_one = [one.expect(3)[0] for _ in range(5)]
    ids_many, events = many.expect_many(5, 3)
    assert ids_many.tolist() == ids_one and len(events) == 5
    assert _columns(many) == _columns(one)
    # every flow of group 2 arrives: its event (and only its) fires
    many.arrive(np.array([7, 8, 9]), np.array([2, 2, 2]), np.array([0.5, 1.5, 1.0]))
    env_b.run()
    assert [e.triggered for e in events] == [False, False, True, False, False]
    assert events[2].value == 8  # the flow that arrived last


def test_expect_many_of_empty_groups_fires_them_at_once() -> None:
    env = simpy.Environment()
    ids, events = CompletionGroups(env).expect_many(3, 0)
    assert ids.tolist() == [0, 1, 2] and all(e.triggered for e in events)
