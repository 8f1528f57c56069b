"""Completion groups: the flows one waiter waits for (an all-to-all's, a ring step's).

A group's event fires when the last byte of its last flow arrives (drain + path latency), with
that flow's id as value; :meth:`CompletionGroups.drained` fires earlier, when that flow's
bytes have left every link. Groups are rows of numpy columns (how many flows are still out,
the latest arrival so far, which flow it was), so a batch of arrivals is booked at once.
"""

from __future__ import annotations

import numpy as np
import simpy

from moesim.engine.flowtable import Columns

GROUP_COLUMNS: dict[str, tuple[type, float]] = {
    "left": (np.int64, 0),
    "finish_s": (np.float64, 0.0),
    "last_flow": (np.int64, -1),
}


class CompletionGroups(Columns):
    """The completion groups of one flow network, as columns ``left``, ``finish_s``,
    ``last_flow``; rows are group ids."""

    def __init__(self, env: simpy.Environment) -> None:
        super().__init__(GROUP_COLUMNS, capacity=256)
        self.env = env
        self._event: list[simpy.Event] = []
        self._drained: dict[int, simpy.Event] = {}  # groups someone waits to drain

    def expect(self, n_flows: int) -> tuple[int, simpy.Event]:
        """A group awaiting ``n_flows`` flows; returns (group id, event)."""
        gid = self.append_row(left=n_flows, finish_s=self.env.now)
        event = self.env.event()
        self._event.append(event)
        if n_flows == 0:
            event.succeed(-1)
        return gid, event

    def expect_many(self, count: int, n_flows: int) -> tuple[np.ndarray, list[simpy.Event]]:
        """``count`` groups awaiting ``n_flows`` flows each, in one append: what ``count``
        calls of :meth:`expect` give (ids in order, one event each)."""
        if n_flows <= 0:
            pairs = [self.expect(n_flows) for _ in range(count)]
            return np.array([g for g, _ in pairs], dtype=np.int64), [e for _, e in pairs]
        gids = self.append(left=np.full(count, n_flows), finish_s=np.full(count, self.env.now))
        events = [self.env.event() for _ in range(count)]
        self._event.extend(events)
        return gids, events

    def drained(self, gid: int) -> simpy.Event:
        """An event that fires when group ``gid``'s last flow drains: its bytes have left
        every link (the group's own event fires a path latency later, on arrival). A sender
        that keeps one transfer on the wire at a time starts the next one here."""
        if gid not in self._drained:
            self._drained[gid] = self.env.event()
        return self._drained[gid]

    def arrive(self, ids: np.ndarray, groups: np.ndarray, finish_s: np.ndarray) -> None:
        """Flows ``ids`` of groups ``groups`` (-1: none) arrive at ``finish_s``; fire every
        group whose last flow this was."""
        if ids.size == 1:  # one flow (a ring chunk, a send): no sorting
            self.arrive_one(int(ids[0]), int(groups[0]), float(finish_s[0]))
            return
        mine = groups >= 0
        ids, groups, finish = ids[mine], groups[mine], finish_s[mine]
        if ids.size == 0:
            return
        gc = self.col
        order = np.lexsort((ids, finish, groups))  # per group, the last arrival comes last
        in_order = groups[order]
        ends = np.append(in_order[1:] != in_order[:-1], True).nonzero()[0]
        last, g_last = order[ends], in_order[ends]  # each group once, ascending
        later = finish[last] >= gc["finish_s"][g_last]
        gc["finish_s"][g_last[later]] = finish[last][later]
        gc["last_flow"][g_last[later]] = ids[last][later]
        gc["left"][g_last] -= np.diff(ends, prepend=-1)  # its flows among these
        for gid in g_last[gc["left"][g_last] == 0].tolist():
            self._fire(gid)

    def arrive_one(self, fid: int, gid: int, finish_s: float) -> None:
        """:meth:`arrive` of one flow."""
        if gid < 0:
            return
        gc = self.col
        if finish_s >= gc["finish_s"][gid]:
            gc["finish_s"][gid] = finish_s
            gc["last_flow"][gid] = fid
        gc["left"][gid] -= 1
        if gc["left"][gid] == 0:
            self._fire(gid)

    def _fire(self, gid: int) -> None:
        event, last = self._event[gid], int(self.col["last_flow"][gid])
        drained = self._drained.pop(gid, None)
        if drained is not None:
            drained.succeed(last)  # callbacks run after this instant's engine update
        delay = max(float(self.col["finish_s"][gid]) - self.env.now, 0.0)

        def fire(_: simpy.events.Event) -> None:
            event.succeed(last)

        self.env.timeout(delay).callbacks.append(fire)
