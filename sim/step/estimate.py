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

Ring reduce-scatter / all-gather (:class:`RingTimer`): a ring of ``n`` ranks moves
``size / n`` per rank per step for ``n - 1`` steps between the same neighbour pairs. All
replicas reach a layer's gradient reduction together (symmetry), so the rings of a kind (the
DP ring and every EDP ring of the stage) run at once. Under ECMP the timer routes every ring
edge of the stage (:func:`stage_ring_pairs`, :func:`stage_ring_timer`: on the whole fabric's
routes, so ECMP draws the uplinks full mode draws); under D-mod-K and spray, the ring edges
that start or end on the representative rank's host (:func:`ring_pairs`,
:func:`stage_wide_rings` says why). It shares each link equally among the jobs with
bytes left on it (processor sharing of each job's ``(n - 1) * size / n * pairs_on_link``, as
the engine shares a link between one in-flight chunk of each ring); a job ends at the later of
``(n - 1)`` back-to-back loads of its busiest link, ``n - 1`` dependent hops (mean of the
rings' sends: ``size / n / idle rate + latency``), and the last of its links' shared drains:
the slowest of the rings it routed, as the step waits for its slowest replica. Interference with
all-to-all traffic is not modelled, nor another stage's rings. Measured against the engine
(all DP and EDP rings of a stage started together, 32 GPUs, tests/test_step_fast.py): each
ring within 1 %, alone or beside the other.

Why the whole stage under ECMP (the host was the scope everywhere before 2026-12-03):
a ring's cross-host edges meet the other hosts' on leaf uplinks and spines, and ECMP hashes
some of them onto one uplink while another idles, on a 1:1 fabric too. 128 GPUs, 1:1 rail
fabric with ECMP (``tests/test_step_congestion.py``): three of the DP ring's four cross-host
edges of an SU hash onto one leaf uplink and four EDP edges onto another; full mode's step
535.32 ms, the host's rings 431.86 ms (-19.3 %), the stage's rings 528.73 ms (-1.2 %). The
draw must be the whole fabric's (:mod:`moesim.fabric.subfabric` hashes whole-fabric ids):
the stage's rings on a sub-fabric that hashed its own node numbers gave 451.59 ms. At 256
and 512 GPUs (1:1, PP 4 and 8) the stage's rings are -4.5 % and -3.0 % (full 645.85 and
864.18 ms). At 256 GPUs, stage 0 (the last to end): full mode starts its gradient tail 14 ms
later (all-to-alls beside other traffic), and its embedding's reduce-scatter ranks finish one
after another over 479-575 ms, all-gathers ending 606-646 ms, where the one job per ring
kind here ends them at 520 and 615 ms: the per-rank spread that :mod:`moesim.step.ringjob`
times (the whole-fabric phases: +0.9 % at 256 GPUs 1:1, 20-50x the estimate's cost). Full
mode with every rank made to wait for its whole ring gives 630.65 ms: the per-rank tail is
15 of the 29 ms; the other half comes before the tail (stage 0 starts it 14 ms later in full
mode; stage 2's all-to-alls wait 60.5 ms there, 48.9 here: traffic the all-to-all estimate
does not put beside them). ``Fast(phases="replicas")`` (what ``Fast()`` runs under ECMP on a
1:1 fabric since 2026-12-04) sees both: :mod:`moesim.step.ringflows`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simpy

from moesim.engine.routing import Router
from moesim.fabric.spec import FabricSpec
from moesim.fabric.subfabric import GraphIndex
from moesim.parallel.layout import ParallelLayout
from moesim.step.groups import ring_group

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
        self.entry = (self.src * n + self.dst)[pair]  # flat [sender, receiver] of each entry
        self.unit = bool(np.all(rs.weight == 1.0))  # one path per pair (not spray)
        self.sender_link = self.src[pair] * links.size + self.link
        self.inv_cap = 1.0 / router.fabric.cap_Bps[links]
        self.latency_s = float(rs.latency_s.max(initial=0.0))
        self._cache: dict[int, float] = {}
        self._digest: dict[int, tuple[np.ndarray, int]] = {}  # id -> (the array, its hash)

    def time_s(self, size_bytes: np.ndarray, offsets_s: np.ndarray) -> float:
        """Seconds from the group's common reference time to the last byte's arrival."""
        held = self._digest.get(id(size_bytes))
        if held is None:  # hash each array once; holding it keeps its id from being reused
            held = self._digest[id(size_bytes)] = (size_bytes, hash(size_bytes.tobytes()))
        content = held[1]
        key = hash((content, offsets_s.tobytes()))
        if key not in self._cache:
            self._cache[key] = self._bound(size_bytes, offsets_s) + self.latency_s
        return self._cache[key]

    def _bound(self, size_bytes: np.ndarray, offsets_s: np.ndarray) -> float:
        per_entry = np.take(size_bytes, self.entry)  # x 1.0 (unit weights) changes no bit
        if not self.unit:
            per_entry *= self.weight
        load = np.bincount(self.sender_link, weights=per_entry,  # int64 when empty (EP1)
                           minlength=self.n * self.n_links).astype(np.float64, copy=False)
        load = load.reshape(self.n, self.n_links)
        last_first = np.argsort(offsets_s, kind="stable")[::-1]
        drain = load[last_first]  # one scratch matrix, summed in place: same sums, same order
        drain *= self.inv_cap
        if not offsets_s.any():  # no releases: the running sums only grow, the last is the max
            return float(np.add.reduce(drain, axis=0).max(initial=0.0))  # rows in order, as below
        for row in range(1, drain.shape[0]):  # = cumsum(axis=0), 4x cheaper than numpy's
            np.add(drain[row - 1], drain[row], out=drain[row])  # strided axis-0 accumulate
        drain += offsets_s[last_first][:, None]
        return float(drain.max(initial=0.0))


@dataclass(frozen=True)
class RingPairs:
    """Ring sends (neighbour pairs) per ring kind, and the ranks per ring."""

    pairs: dict[str, set[tuple[int, int]]]
    outgoing: dict[str, set[tuple[int, int]]]  # those whose mean hop sets the dependent hops
    members: dict[str, int]  # ranks per ring

    @property
    def ends(self) -> list[int]:
        return sorted({g for found in self.pairs.values() for p in found for g in p})


def ring_pairs(host_ranks: list[int], ring_group: RingGroup) -> RingPairs:
    """The DP and EDP ring neighbour pairs of every rank in ``host_ranks`` (sends into and
    out of them; ``outgoing``: out of them)."""
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


def stage_ring_pairs(ranks: list[int], ring_group: RingGroup) -> RingPairs:
    """Every edge of every DP and EDP ring through ``ranks`` (a whole pipeline stage), each
    ring looked up once: what :func:`ring_pairs` of all of them gives, in O(ranks)."""
    pairs: dict[str, set[tuple[int, int]]] = {"dp": set(), "edp": set()}
    members: dict[str, int] = {}
    for kind, found in pairs.items():
        seen: set[int] = set()
        for x in ranks:
            if x in seen:
                continue
            ring = ring_group(kind, x)
            seen.update(ring)
            members[kind] = len(ring)
            if len(ring) > 1:
                found.update(zip(ring, ring[1:] + ring[:1], strict=True))
    return RingPairs(pairs, {kind: set(found) for kind, found in pairs.items()}, members)


def stage_wide_rings(fabric: FabricSpec) -> bool:
    """Whether fast mode times a stage's rings over every ring edge of the stage
    (:func:`stage_ring_timer`) rather than over the representative host's (module docstring):
    under ECMP, whose hash puts other hosts' ring edges on this host's uplinks. D-mod-K and
    spray spread a ring's cross-host edges (shifts between hosts) over the uplinks: on the
    128-GPU 1:1 rail fabric the two scopes give the same step
    (tests/test_step_congestion.py), and routing a whole stage's ring edges costs ~0.2 s per
    576-GPU stage at 9,216 GPUs (the benchmark step of benchmarks/bench_step.py, 16 stages:
    with ECMP 3.2-3.8 s CPU before, 4.9-5.4 s with the stage's rings, step 10.491 ->
    11.697 s), so they keep the host's."""
    return fabric.multipath == "ecmp"


def stage_ring_timer(env: simpy.Environment, index: GraphIndex, lay: ParallelLayout,
                     stage: int) -> RingTimer:
    """The :class:`RingTimer` of every DP and EDP ring of pipeline stage ``stage`` (its ranks
    are consecutive: pp is the outermost coordinate), routed as on the whole fabric
    (:meth:`GraphIndex.global_router`: on the stage's sub-fabric where that routes alike)."""
    per = lay.world_size // lay.pp
    ranks = list(range(stage * per, (stage + 1) * per))
    rp = stage_ring_pairs(ranks, lambda ring, r: ring_group(lay, ring, r))
    return RingTimer(env, index.global_router(ranks), rp)


class RingTimer:
    """DP / EDP ring jobs over the pairs ``rp`` (a stage's: :func:`stage_ring_timer`),
    sharing each link fairly (module docstring); ``router`` must cover ``rp.ends``."""

    def __init__(self, env: simpy.Environment, router: Router, rp: RingPairs) -> None:
        self.env = env
        self.members = rp.members
        # every kind's pairs in one router call: each destination's path search done once
        lists = {kind: sorted(found) for kind, found in rp.pairs.items()}
        sizes = [len(lst) for lst in lists.values()]
        pairs = np.array([p for lst in lists.values() for p in lst], dtype=np.int64)
        rs = router.routes(*pairs.reshape(-1, 2).T)
        # the links the rings use, numbered 0..k-1 (the sharing below is per link of these)
        links, at = np.unique(rs.link, return_inverse=True)
        self.inv_cap = 1.0 / router.fabric.cap_Bps[links]
        owner = np.repeat(np.repeat(np.arange(len(sizes)), sizes), np.diff(rs.ptr))
        first = np.cumsum([0, *sizes])
        self.count: dict[str, np.ndarray] = {}
        self.latency_s: dict[str, float] = {}
        self.hop: dict[str, tuple[float, float]] = {}  # ring sends: mean 1/cap, latency
        for i, (kind, lst) in enumerate(lists.items()):
            on = owner == i
            self.count[kind] = np.bincount(at[on], weights=rs.weight[on], minlength=links.size)
            rows = slice(first[i], first[i + 1])
            self.latency_s[kind] = float(rs.latency_s[rows].max(initial=0.0))
            if lst:
                out = np.array([p in rp.outgoing[kind] for p in lst])
                self.hop[kind] = (float(np.mean(1.0 / rs.cap_Bps[rows][out])),
                                  float(rs.latency_s[rows][out].mean()))
        self.jobs: dict[tuple[str, int], simpy.Event] = {}
        self._left: dict[tuple[str, int], np.ndarray] = {}  # link seconds left per live job
        self._floor: dict[tuple[str, int], tuple[float, float]] = {}  # (alone end, latency)
        self._t_last = env.now
        self._gen = 0

    def join(self, kind: str, item: int, size_bytes: float) -> simpy.Event:
        """The ring job ``kind`` (dp_rs, edp_ag, ...) of ``item``; fires when done
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
