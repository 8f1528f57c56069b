"""The flow network's own events: they fire after every ordinary event of their instant.

Starts and finishes at one simulated instant are batched into one rate solve
(:mod:`moesim.engine.network`); scheduling that solve at ``LATE`` priority puts it after every
process that starts or waits on flows at that instant, however SimPy orders them.
"""

from __future__ import annotations

import simpy

LATE = 2
"""SimPy priority of the network's own events: after URGENT (0) and NORMAL (1)."""


class LateEvent(simpy.events.Event):
    """An event that fires at ``now + delay`` after all ordinary events of that instant."""

    def __init__(
        self, env: simpy.Environment, delay_s: float, callback: object, value: int = -1
    ) -> None:
        super().__init__(env)
        self._ok = True
        self._value = value
        self.callbacks.append(callback)  # type: ignore[arg-type]
        env.schedule(self, simpy.events.EventPriority(LATE), delay_s)
