"""What released a recorded wait (:meth:`StepState.record`), for the walk record
(:mod:`moesim.step.critical_record`).

* all-to-all: the completion group's value is the last-arriving flow into the waiting rank;
  its sender and start time, and its bottleneck link (the engine's max-min solver records
  the link each flow froze at, ``bottleneck`` in the flow table); how late the sender was
  against its peers is left to the reader of the all-to-all's send times (``a2a``, ``local``);
* pipeline input: the mailbox's value, (sending rank, send time, flow id);
* ring collective (DP/EDP all of them in one ``all_of``, or one TP ring): the ring that
  finished last for the waiting rank, its member that joined last (the start of that
  member's first chunk), and the bottleneck link holding most of the ring's flow time.

Anything else (CP K/V arrivals, fast mode's estimated collectives) names no sender.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from moesim.collectives.alltoall import AllToAll
from moesim.collectives.fused_ring import FusedRing
from moesim.collectives.ring import RingCollective
from moesim.step.state import Span, StepState


@dataclass(frozen=True)
class Release:
    """Who released a wait: ``rank`` (-1: unknown) sent at ``send_s``; the flows' ``link``
    (-1: unknown); ``excess_s``: how much later than its peers' mean it reached the op (for an
    all-to-all: from ``StepState.a2a_send_s[a2a]``, the sender being member ``local``)."""

    rank: int = -1
    send_s: float = 0.0
    link: int = -1
    excess_s: float = float("nan")
    what: str = ""  # names the collective when the span's own label does not
    a2a: int = -1  # the all-to-all's tag
    local: int = -1


class Releases:
    """Looks up the releaser of waits of one finished step."""

    def __init__(self, st: StepState) -> None:
        self.st = st
        rings = (*st.rings.items(), *st.tp_rings.items())
        self.rings = {id(ev): ring for _, ring in rings for ev in ring.rank_done}
        self.ring_key = {id(ring): key for key, ring in rings}
        self.found: dict[int, Release] = {}  # a ring releases many waits: looked up once
        self.member: dict[int, dict[int, int]] = {}  # per all-to-all: GPU -> its member index

    def of(self, sp: Span) -> Release:
        """The releaser of wait span ``sp``."""
        op, value = sp[6], sp[7]
        if isinstance(op, AllToAll) and isinstance(value, int | np.integer) and value >= 0:
            return self._a2a(op, int(value))
        if sp[3] == "bubble" and isinstance(value, tuple):
            sender, send_s, flow = value
            return Release(sender, send_s, self.bottleneck(np.array([flow])))
        events = value.events if isinstance(value, simpy.events.ConditionValue) else [op]
        done = [(ev.value, self.rings[id(ev)]) for ev in events
                if isinstance(ev, simpy.Event) and isinstance(ev.value, float)
                and id(ev) in self.rings]
        if not done:
            return Release()
        ring = max(done, key=lambda d: d[0])[1]
        if id(ring) not in self.found:
            self.found[id(ring)] = self._ring(ring)
        return self.found[id(ring)]

    def _a2a(self, a2a: AllToAll, flow: int) -> Release:
        col = self.st.net.flows.col
        sender = int(col["src"][flow])  # rank r runs on GPU r
        member = self.member.get(id(a2a))
        if member is None:  # first GPU of that id wins, as np.flatnonzero(...)[0] would
            member = self.member[id(a2a)] = {}
            for i, gpu in enumerate(a2a.gpus.tolist()):
                member.setdefault(gpu, i)
        local = member[sender]
        return Release(sender, float(col["start_s"][flow]), self.bottleneck(np.array([flow])),
                       a2a=a2a.tag, local=local)

    def _ring(self, ring: RingCollective | FusedRing) -> Release:
        if ring.n_steps == 0:
            return Release()
        # a fused ring (fast mode, whose critical path is not walked) has no flows to read
        assert isinstance(ring, RingCollective), "a fused ring has no flows"
        flows = self.st.net.groups.col["last_flow"][ring.step_groups]  # [receiver, step]: 1 flow
        first = np.roll(flows[:, 0], -1)  # member i's step-0 flow lands at member i + 1
        if (first < 0).any():
            return Release()
        joined = self.st.net.flows.col["start_s"][first]  # a member sends step 0 on joining
        late = int(np.argmax(joined))
        excess = float(joined[late] - np.delete(joined, late).mean())
        key = self.ring_key[id(ring)]
        return Release(int(ring.gpus[late]), float(joined[late]), self.bottleneck(flows.ravel()),
                       excess, f"ring {key[0]} item " + " ".join(str(k) for k in key[2:]))

    def bottleneck(self, flows: np.ndarray) -> int:
        """The bottleneck link holding ``flows`` longest (summed start-to-arrival time)."""
        col = self.st.net.flows.col
        flows = flows[flows >= 0]
        if flows.size == 1:  # one flow held for a while: its own bottleneck (the same answer)
            link, f = int(col["bottleneck"][flows[0]]), flows[0]
            if link < 0:
                return -1
            if col["finish_s"][f] - col["start_s"][f] > 0:
                return link
        links = col["bottleneck"][flows]
        keep = links >= 0
        if not keep.any():
            return -1
        dur = (col["finish_s"][flows] - col["start_s"][flows])[keep]
        return int(np.argmax(np.bincount(links[keep], weights=dur)))
