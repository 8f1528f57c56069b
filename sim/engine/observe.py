"""Watching flows from outside the engine: observers told when watched flows change rate,
and the bytes left and rate of any flow now (:class:`Observed`, a half of
:class:`moesim.engine.network.FlowNetwork`).

A caller that times its own work from the engine's rates (fast mode's ring clocks,
:mod:`moesim.step.ringjob`) registers a callback (:meth:`Observed.observe`), marks its flows
(:meth:`Observed.watch`) and reads them (:meth:`Observed.progress`); between two calls of its
callback the rates of its flows are constant.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import simpy

from moesim.engine.active import ActiveFlows
from moesim.engine.flowtable import Columns
from moesim.engine.late import LateEvent


class Observed:
    """The observer half of :class:`moesim.engine.network.FlowNetwork` (module docstring)."""

    env: simpy.Environment
    flows: Columns
    active: ActiveFlows
    solves: int
    _pending: list[np.ndarray]
    _t_last: float

    def _init_observers(self) -> None:
        self._observers: dict[int, Callable[[], None]] = {}  # observe()
        self._observer_keys = itertools.count(1)  # never reused: old marks cannot misfire
        self._touched: list[np.ndarray] = []  # flows re-rated or finished in this update
        self._order: tuple[tuple[int, int], np.ndarray] = ((-1, -1), np.zeros(0, np.int64))

    def _on_event(self, event: simpy.events.Event) -> None:
        raise NotImplementedError

    def kick(self) -> None:
        """Solve now for flows started after this instant's update ran (an update runs at
        most once per instant on its own: ``FlowNetwork._request_update``)."""
        if self._pending:
            LateEvent(self.env, 0.0, self._on_event)

    def progress(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bytes left now, rate now) of the flows ``ids``: 0 and 0 once drained; a flow
        not yet solved has its size and rate 0. Between two calls of :attr:`observers` every
        rate is constant."""
        fl, now = self.flows.col, self.env.now
        rem, rate = fl["rem_bytes"][ids].copy(), fl["rate_Bps"][ids].copy()
        act = self.active
        live = np.zeros(ids.size, dtype=bool)
        if act.n:
            if self._order[0] != (self.solves, act.n):  # the active set changes with a solve
                self._order = ((self.solves, act.n), np.argsort(act.ids))
            order = self._order[1]
            at = order[np.minimum(np.searchsorted(act.ids, ids, sorter=order), act.n - 1)]
            live = act.ids[at] == ids
            rem[live] = act.rem[at[live]] - act.rate[at[live]] * (now - self._t_last)
            rate[live] = act.rate[at[live]]
        gone = ~np.isnan(fl["drain_s"][ids])
        queued = ~live & ~gone
        if self._pending and queued.any():
            queued &= np.isin(ids, np.concatenate(self._pending))
            solo = ~live & ~gone & ~queued
        else:
            solo, queued = queued, np.zeros(ids.size, dtype=bool)
        # a solo flow has run at its rate since it started (moesim.engine.solo)
        rem[solo] = fl["size_bytes"][ids[solo]] - rate[solo] * (now - fl["start_s"][ids[solo]])
        rate[queued] = 0.0
        rem[gone], rate[gone] = 0.0, 0.0
        return np.maximum(rem, 0.0), rate

    def observe(self, callback: Callable[[], None]) -> int:
        """A key for :meth:`watch`: ``callback`` runs after every update of the network that
        re-rates or finishes a flow watched under it (so between two calls the rates of
        those flows are constant)."""
        key = next(self._observer_keys)
        self._observers[key] = callback
        return key

    def unobserve(self, key: int) -> None:
        self._observers.pop(key, None)

    def watch(self, ids: np.ndarray, key: int) -> None:
        """Tell the observer ``key`` (:meth:`observe`) when the flows ``ids`` change rate."""
        self.flows.col["observer"][ids] = key

    def _notify(self, ids: np.ndarray) -> None:
        keys = self.flows.col["observer"][ids]
        for key in np.unique(keys[keys > 0]).tolist():
            callback = self._observers.get(key)
            if callback is not None:
                callback()
