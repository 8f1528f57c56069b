"""Link-load estimates of collectives that span DP replicas (fast mode, :mod:`moesim.step.fast`).

All-to-all (:class:`A2ATimer`): member ``j`` of an EP group sends its row of the byte matrix
from ``t_sync + o_j`` (``o_j``: its release offset). Every link ``l`` must carry the bytes
routed over it; a link can carry at most its capacity, and bytes released at ``o_k`` cannot
cross it earlier, so the last byte drains no earlier than
``max_l max_k (o_k + sum_{j: o_j >= o_k} bytes_jl / cap_l)`` (the preemptive single-machine
bound with release dates, per link). The estimate is that bound plus the largest path latency
of the group. Measured against the exact engine (eps = 0, tests/test_step_fast.py) on 8
GPUs (HGX H100; rail, 2 hosts x 4), 32 (rail, 8 x 4) and 64 (rail-h800-64) with uniform,
zipf (alpha 1.2) and hot (one expert x 8) routing: with simultaneous sends it *is* the
max-min makespan (gap < 0.02 %: on these fabrics each flow's bottleneck stays saturated);
with releases staggered over 0-0.2 ms it stays below the engine, by up to 1.5 % (rail, zipf),
4.4 % (rail, hot), 5.4 % (HGX, hot) and 12.9 % (HGX, zipf).

Ring reduce-scatter / all-gather (:class:`HostRingTimer`): a ring of ``n`` ranks moves
``size / n`` per rank per step for ``n - 1`` steps between the same neighbour pairs. All
replicas reach a layer's gradient reduction together (symmetry), so the rings of a kind (the
DP ring and every EDP ring of the stage) run at once. The timer routes every ring pair that
starts or ends on the representative rank's host (GPUs and hosts never transit, so those are
exactly the flows on that host's NVLink, PCIe and NIC links; deeper links see only part of
their load, so oversubscribed uplinks are under-counted) and shares each link equally among
the jobs with bytes left on it (processor sharing of each job's ``(n - 1) * size / n *
pairs_on_link``, as the engine shares a link between one in-flight chunk of each ring); a job
ends at the later of ``(n - 1)`` back-to-back loads of its busiest link, ``n - 1`` dependent
hops (mean of the host's ring sends: ``size / n / idle rate + latency``), and the last of its
links' shared drains. Interference with all-to-all traffic is not modelled. Measured against
the engine (all DP and EDP rings of a stage started together, 32 GPUs, tests/test_step_fast.py):
each ring within 1 %, alone or beside the other. (The per-link FIFO this replaced gave the same
end of both but let the DP ring beside the EDP ring end about 2x too early.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from moesim.engine.routing import Router

RingGroup = Callable[[str, int], tuple[int, ...]]
"""(ring kind "dp" or "edp", rank) -> the ring's ranks, in ring order."""


class A2ATimer:
    """Link-load bound of one EP group's all-to-all, for any byte matrix and release offsets."""

    def __init__(self, router: Router, gpus: np.ndarray) -> None:
        n = gpus.size
        src, dst = np.divmod(np.arange(n * n), n)
        off = src != dst
        self.src, self.dst = src[off], dst[off]
        rs = router.routes(gpus[self.src], gpus[self.dst])
        pair = np.repeat(np.arange(self.src.size), np.diff(rs.ptr))
        links, self.link = np.unique(rs.link, return_inverse=True)
        self.n, self.n_links = n, links.size
        self.pair, self.weight = pair, rs.weight
        self.sender_link = self.src[pair] * links.size + self.link
        self.inv_cap = 1.0 / router.fabric.cap_Bps[links]
        self.latency_s = float(rs.latency_s.max(initial=0.0))
        self._cache: dict[int, float] = {}
        self._digest: dict[int, int] = {}

    def time_s(self, size_bytes: np.ndarray, offsets_s: np.ndarray) -> float:
        """Seconds from the group's common reference time to the last byte's arrival."""
        content = self._digest.get(id(size_bytes))
        if content is None:  # the plan's arrays live as long as the step; hash each once
            content = self._digest[id(size_bytes)] = hash(size_bytes.tobytes())
        key = hash((content, offsets_s.tobytes()))
        if key not in self._cache:
            self._cache[key] = self._bound(size_bytes, offsets_s) + self.latency_s
        return self._cache[key]

    def _bound(self, size_bytes: np.ndarray, offsets_s: np.ndarray) -> float:
        per_entry = size_bytes[self.src, self.dst][self.pair] * self.weight
        load = np.bincount(self.sender_link, weights=per_entry,  # int64 when empty (EP1)
                           minlength=self.n * self.n_links).astype(np.float64, copy=False)
        load = load.reshape(self.n, self.n_links)
        last_first = np.argsort(offsets_s, kind="stable")[::-1]
        drain = load[last_first]  # one scratch matrix, summed in place: same sums, same order
        drain *= self.inv_cap
        for row in range(1, drain.shape[0]):  # = cumsum(axis=0), 4x cheaper than numpy's
            np.add(drain[row - 1], drain[row], out=drain[row])  # strided axis-0 accumulate
        drain += offsets_s[last_first][:, None]
        return float(drain.max(initial=0.0))


@dataclass(frozen=True)
class RingPairs:
    """The ring sends that start or end on one host's ranks, per ring kind."""

    pairs: dict[str, set[tuple[int, int]]]
    outgoing: dict[str, set[tuple[int, int]]]  # those sent from the host
    members: dict[str, int]  # ranks per ring

    @property
    def ends(self) -> list[int]:
        return sorted({g for found in self.pairs.values() for p in found for g in p})


def ring_pairs(host_ranks: list[int], ring_group: RingGroup) -> RingPairs:
    """The DP and EDP ring neighbour pairs of every rank in ``host_ranks``."""
    pairs: dict[str, set[tuple[int, int]]] = {"dp": set(), "edp": set()}
    outgoing: dict[str, set[tuple[int, int]]] = {"dp": set(), "edp": set()}
    members: dict[str, int] = {}
    for kind in pairs:
        for x in host_ranks:
            ring = ring_group(kind, x)
            n, i = len(ring), ring.index(x)
            members[kind] = n
            if n > 1:
                pairs[kind] |= {(ring[i - 1], x), (x, ring[(i + 1) % n])}
                outgoing[kind].add((x, ring[(i + 1) % n]))
    return RingPairs(pairs, outgoing, members)


class HostRingTimer:
    """DP / EDP ring jobs of every rank on one host, sharing each link fairly (see module
    docstring); ``router`` must cover ``rp.ends``."""

    def __init__(self, env: simpy.Environment, router: Router, rp: RingPairs) -> None:
        self.env = env
        self.members = rp.members
        n_links = router.fabric.n_links
        self.inv_cap = 1.0 / router.fabric.cap_Bps
        self.count: dict[str, np.ndarray] = {}
        self.latency_s: dict[str, float] = {}
        self.hop: dict[str, tuple[float, float]] = {}  # host's ring sends: mean 1/cap, latency
        for kind, found in rp.pairs.items():
            if not found:
                self.count[kind], self.latency_s[kind] = np.zeros(n_links), 0.0
                continue
            src, dst = (np.array(side, dtype=np.int64) for side in zip(*sorted(found),
                                                                         strict=True))
            rs = router.routes(src, dst)
            self.count[kind] = np.bincount(rs.link, weights=rs.weight, minlength=n_links)
            self.latency_s[kind] = float(rs.latency_s.max())
            out = np.array(sorted(rp.outgoing[kind]), dtype=np.int64)
            hop = router.routes(out[:, 0], out[:, 1])
            self.hop[kind] = (float(np.mean(1.0 / hop.cap_Bps)), float(hop.latency_s.mean()))
        self.jobs: dict[tuple[str, int], simpy.Event] = {}
        self._left: dict[tuple[str, int], np.ndarray] = {}  # link seconds left per live job
        self._floor: dict[tuple[str, int], tuple[float, float]] = {}  # (alone end, latency)
        self._t_last = env.now
        self._gen = 0

    def join(self, kind: str, item: int, size_bytes: float) -> simpy.Event:
        """The host's ring job ``kind`` (dp_rs, edp_ag, ...) of ``item``; fires when done
        (value: then)."""
        key = (kind, item)
        if key in self.jobs:
            return self.jobs[key]
        ring, now = kind.split("_")[0], self.env.now
        n = self.members[ring]
        used = self.count[ring] > 0
        if n == 1 or not used.any():
            self.jobs[key] = self.env.timeout(0.0, value=now)
            return self.jobs[key]
        self._advance(now)
        chunk = size_bytes / n
        step_s = chunk * self.count[ring] * self.inv_cap
        inv_cap, hop_lat = self.hop[ring]
        lat = self.latency_s[ring]
        alone = max((n - 1) * float(step_s.max()) + lat,  # the busiest link, back to back
                    (n - 1) * (chunk * inv_cap + hop_lat))  # n - 1 dependent hops
        self.jobs[key] = self.env.event()
        self._left[key] = (n - 1) * step_s
        self._floor[key] = (now + alone, lat)
        self._plan(now)
        return self.jobs[key]

    def _advance(self, now: float) -> None:
        """Serve every live job's link seconds from the last join to ``now``: each link
        shares itself equally among the jobs with work left on it (processor sharing)."""
        dt, self._t_last = now - self._t_last, now
        if dt <= 0 or not self._left:
            return
        keys = list(self._left)
        left = np.array([self._left[k] for k in keys])  # [job, link]
        level = _level(left, dt)
        for k, row in zip(keys, np.maximum(left - level, 0.0), strict=True):
            self._left[k] = row

    def _plan(self, now: float) -> None:
        """Each live job's end under sharing (the last of its links, plus its latency, and
        no earlier than alone); an event per job, the earlier plan's dropped."""
        self._gen += 1
        keys = list(self._left)
        left = np.array([self._left[k] for k in keys])
        done_s = _finish(left)  # [job, link]: seconds from now its work there is done
        for k, job_done in zip(keys, done_s.max(axis=1), strict=True):
            alone_end, lat = self._floor[k]
            end = max(now + float(job_done) + lat, alone_end)
            self.env.timeout(end - now).callbacks.append(self._ender(k, self._gen))

    def _ender(self, key: tuple[str, int], gen: int) -> Callable[[simpy.Event], None]:
        def end(_: simpy.Event) -> None:
            if gen != self._gen or key not in self._left:
                return
            self._advance(self.env.now)
            del self._left[key], self._floor[key]
            self.jobs[key].succeed(self.env.now)

        return end


def _finish(left: np.ndarray) -> np.ndarray:
    """[job, link]: when each job's work ``left`` on each link is done under processor
    sharing from now (0 where it has none): the ``i``-th smallest of ``k`` ends once every
    job has had its amount, ``sum_{j < i} w_j + (k - i) w_i``."""
    order = np.argsort(left, axis=0, kind="stable")
    w = np.take_along_axis(left, order, axis=0)
    k = left.shape[0]
    step = np.diff(w, axis=0, prepend=0.0) * (k - np.arange(k))[:, None]
    done = np.empty_like(left)
    np.put_along_axis(done, order, np.cumsum(step, axis=0), axis=0)
    return np.where(left > 0, done, 0.0)


def _level(left: np.ndarray, dt: float) -> np.ndarray:
    """Per link, the service every job with work left there has had after ``dt`` s of
    processor sharing (all of its work for those whose work is smaller)."""
    w = np.sort(left, axis=0)
    k = left.shape[0]
    step = np.diff(w, axis=0, prepend=0.0) * (k - np.arange(k))[:, None]
    at = np.cumsum(step, axis=0)  # when the level reaches w[i]; non-decreasing per link
    i = np.count_nonzero(at <= dt, axis=0)  # per link: searchsorted(at[:, link], dt, "right")
    links = np.arange(left.shape[1])
    prev = np.maximum(i - 1, 0)
    below = np.where(i > 0, w[prev, links], 0.0)
    at_below = np.where(i > 0, at[prev, links], 0.0)
    rising = below + (dt - at_below) / np.maximum(k - i, 1)
    return np.where(i >= k, w[-1], rising)
