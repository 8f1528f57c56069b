"""Fast mode's communication phases, solved for every group of a stage at once on the fabric.

Every DP replica runs the same program (fast mode's premise), so when the representative
pipeline's rank reaches a collective, every group of that kind in its stage does too. Each
phase puts the traffic of all those groups on the fabric together, as weighted flows that
stand for the groups' identical copies (:class:`moesim.engine.copies.CopiesRouter`: exact when
the copies are images of each other under a symmetry of the fabric and its routes), and times
it with the max-min flow engine (:class:`moesim.engine.network.FlowNetwork`, the stage's
``batch_window_rel``):

* MoE all-to-alls (:class:`A2APhases`): one phase per (stage, byte matrix, release offsets),
  in a private network from the group's reference time: member ``e`` sends its row at its
  release offset ``o_e``; the phase ends with the last byte (of every copy). Cached: layers
  that share their routing and costs share it.
* DP / EDP gradient rings (:class:`RingPhases`): a ring of ``n`` ranks moves ``(n - 1) / n``
  of the buffer over every ring edge, one chunk at a time in step order; each edge is a flow
  of the chunks it may send, and each rank finishes when the chunks it needs have come round
  (:class:`moesim.step.ringjob.RingJob`: behind a slow edge the ranks finish one after
  another, as the engine's chunked rings do). Jobs are flows in the representative
  pipeline's network, on the step's clock, beside its pipeline sends (each standing for
  every DP replica's copy), so the rings of all stages, of successive layers, and the
  pipeline sends share links fairly while they overlap, as in full mode. A reduce-scatter's
  rings, joined by every rank at once, are copies of one ring (one flow per position); the
  step's last all-gathers, joined by each rank after its own reduce-scatters and optimizer
  step (:class:`moesim.step.ringjob.StageTail`), run each ring on its own.

What a phase does not see: all-to-all traffic of other stages and of other kinds at the same
time (an all-to-all beside a gradient ring or a pipeline send); full mode sees it. The tests
(``tests/test_step_congestion.py``) measure what that leaves against full mode.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import simpy

from moesim.collectives.alltoall import AllToAll
from moesim.engine.copies import CopiesRouter
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.fabric.blocks import BlockRouter
from moesim.fabric.subfabric import GraphIndex
from moesim.step.replica_inputs import LinkRows, flow_rows
from moesim.step.ringjob import RingJob


def base_router(index: GraphIndex, stage_gpus: int) -> Router:
    """Whole-fabric routes for the phases: computed per pair of stages on their sub-fabric
    where that routes as the whole fabric does (:class:`moesim.fabric.blocks.BlockRouter`;
    a prunable fabric), else on the whole fabric (PXN)."""
    if index.prunable:
        return BlockRouter(index, stage_gpus)
    return index.whole()


def busiest_link(router: Router, src: np.ndarray, dst: np.ndarray, size_bytes: np.ndarray
                 ) -> int:
    """The link whose bytes take longest at its capacity when the flows ``src -> dst`` of
    ``size_bytes`` (each weighted by its route's weights) cross it: the link a phase's
    duration rests on (-1 if none). Symmetric copies tie; the lowest link id wins."""
    rs = router.routes(src, dst)
    if not rs.link.size:
        return -1
    owner = np.repeat(np.arange(src.size), np.diff(rs.ptr))
    load = np.bincount(rs.link, weights=rs.weight * size_bytes[owner],
                       minlength=router.fabric.n_links)
    return int(np.argmax(load / router.fabric.cap_Bps))


def _shape(router: CopiesRouter, n: int) -> tuple[bytes, np.ndarray]:
    """A digest of the all-to-all problem among ``n`` endpoints that ignores which links it
    uses (each link renamed by its first appearance in the pairs' routes; capacities, weights,
    latencies and sharing kept), and the links in the order of that renaming. Stages whose
    problems digest alike have the same max-min solution, link for renamed link, so they share
    one solve (a stage's translate on a regular fabric)."""
    src, dst = np.divmod(np.flatnonzero(~np.eye(n, dtype=bool)), n)
    rs = router.routes(src, dst)
    links, first, inv = np.unique(rs.link, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    fab = router.fabric
    parts = (rs.ptr, rank[inv], rs.weight, fab.cap_Bps[rs.link], rs.latency_s)
    digest = hashlib.blake2b(b"".join(np.ascontiguousarray(p).tobytes() for p in parts),
                             digest_size=16).digest()
    return digest, links[order]


def _digest(a: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(a).tobytes(), digest_size=16).digest()


class A2APhases:
    """All-to-all phase times of every EP group of a stage at once (module docstring)."""

    def __init__(self, eps: float) -> None:
        self.eps = eps
        self._routers: dict[int, tuple[CopiesRouter, bytes, np.ndarray]] = {}
        self._digests: dict[int, tuple[np.ndarray, bytes]] = {}
        self._cache: dict[tuple[bytes, bytes, bytes], tuple[float, int, np.ndarray,
                                                             np.ndarray]] = {}
        self._rows: dict[tuple[int, bytes, bytes, bytes], LinkRows] = {}
        self.solves = 0

    def time_s(self, stage: int, router: Router, groups: np.ndarray, size_bytes: np.ndarray,
               offsets_s: np.ndarray) -> tuple[float, int]:
        """(seconds from the reference time to the last byte, its :func:`busiest_link`) of
        the all-to-all ``size_bytes`` [sender, receiver] run by every EP group
        of ``stage`` (``groups``: [group, ep rank] GPUs) with release offsets ``offsets_s``."""
        end_s, link, _, _ = self.phase(stage, router, groups, size_bytes, offsets_s)
        return end_s, link

    def phase(self, stage: int, router: Router, groups: np.ndarray, size_bytes: np.ndarray,
              offsets_s: np.ndarray) -> tuple[float, int, LinkRows, np.ndarray]:
        """:meth:`time_s`, the phase's flows on ``stage``'s links from the reference time
        (:class:`moesim.step.replica_inputs.LinkRows`: each flow's copies on a link, moving
        its bytes at its mean rate from its release to its drain), for what shares those
        links meanwhile (:class:`moesim.step.replica_inputs.ReplicaInputs`), and when each
        ep rank has all its bytes in (the latest of its copies), from the reference time."""
        held = self._digests.get(id(size_bytes))
        if held is None or held[0] is not size_bytes:  # the plan's arrays live for the step
            held = self._digests[id(size_bytes)] = (size_bytes, _digest(size_bytes))
        known = self._routers.get(stage)
        if known is None:
            copies = CopiesRouter(router, groups)
            known = self._routers[stage] = (copies, *_shape(copies, groups.shape[1]))
        copies, shape, links = known
        key = (shape, held[1], _digest(offsets_s))
        if key not in self._cache:
            end_s, link, flows, finish = self._solve(copies, size_bytes, offsets_s)
            hits = np.flatnonzero(links == link)
            self._cache[key] = end_s, int(hits[0]) if hits.size else -1, flows, finish
        end_s, at, flows, finish = self._cache[key]
        rows = self._rows.get((stage, *key))
        if rows is None:  # the solve's flows are shape-invariant: routed on this stage's links
            rows = self._rows[(stage, *key)] = flow_rows(copies, flows)
        return end_s, int(links[at]) if at >= 0 else -1, rows, finish

    def _solve(self, router: CopiesRouter, size: np.ndarray, offsets: np.ndarray
               ) -> tuple[float, int, np.ndarray, np.ndarray]:
        env = simpy.Environment()
        net = FlowNetwork(env, router, batch_window_rel=self.eps, record_timeline=False)
        n = size.shape[0]
        a2a = AllToAll(net, np.arange(n), size, 0)
        for rank in range(n):
            env.timeout(float(offsets[rank])).callbacks.append(_sender(a2a, rank))
        env.run()
        self.solves += 1
        finish = net.groups.col["finish_s"][a2a.groups]
        src, dst = np.divmod(np.flatnonzero(~np.eye(n, dtype=bool)), n)
        fl, m = net.flows.col, net.flows.n
        flows = np.stack([fl[c][:m].astype(float) for c in ("src", "dst", "size_bytes",
                                                             "start_s", "drain_s")])
        return (float(finish.max()), busiest_link(router, src, dst, size[src, dst]), flows,
                finish)


def _sender(a2a: AllToAll, rank: int) -> Callable[[simpy.Event], None]:
    def go(_: simpy.Event) -> None:
        a2a.send(rank)

    return go


class RingPhases:
    """DP / EDP ring jobs of whole stages as flows on the step's clock (module docstring),
    each rank with its own finish time (:class:`moesim.step.ringjob.RingJob`)."""

    def __init__(self, net: FlowNetwork) -> None:
        assert isinstance(net.router, CopiesRouter)
        self.env = net.env
        self.router: CopiesRouter = net.router
        self.net = net
        self._blocks: dict[tuple[str, int, bool], np.ndarray] = {}
        self.jobs: dict[tuple[str, int, int], RingJob] = {}
        self._sent: dict[int, list[tuple[np.ndarray, ...]]] = {}  # stage -> (src, dst, bytes)

    def join(self, kind: str, stage: int, item: int, size_bytes: float,
             rings: list[tuple[int, ...]]) -> simpy.Event:
        """The job ``kind`` (dp_rs, edp_ag, ...) of ``item`` over every ring of ``stage``
        (``rings``, all of one length, in ring order), every rank joining now if the job is
        new; its event fires when every rank is done (value: that time)."""
        return self.job(kind, stage, item, size_bytes, rings, joined=True).done

    def job(self, kind: str, stage: int, item: int, size_bytes: float,
            rings: list[tuple[int, ...]], *, joined: bool) -> RingJob:
        """The :class:`RingJob` of :meth:`join`, made if new (every rank joined at once if
        ``joined``, else none: :meth:`RingJob.join` lets them in)."""
        key = (kind, stage, item)
        if key in self.jobs:
            return self.jobs[key]
        ring = kind.split("_")[0]
        gpus = np.array(rings, dtype=np.int64).reshape(len(rings), -1)
        block = self._blocks.get((ring, stage, joined))
        if block is None:  # at once: the rings are copies; one by one: each ring its own
            block = self._blocks[(ring, stage, joined)] = self.router.extend(
                gpus if joined else gpus.reshape(1, -1)).reshape(-1, gpus.shape[1])
        job = self.jobs[key] = RingJob(self.net, block, gpus, size_bytes)
        n = gpus.shape[1]
        if n > 1 and size_bytes > 0:
            ends, share = block.ravel(), size_bytes * (n - 1) / n
            self._sent.setdefault(stage, []).append(
                (ends, np.roll(block, -1, axis=1).ravel(), np.full(ends.size, share)))
        if joined:
            job.join(np.ones(gpus.shape, dtype=bool))
        return job

    def busiest_name(self, stage: int) -> str:
        """The :func:`busiest_link` of all of ``stage``'s ring jobs together ("" if none)."""
        sent = self._sent.get(stage)
        if not sent:
            return ""
        src, dst, size = (np.concatenate(part) for part in zip(*sent, strict=True))
        link = busiest_link(self.router, src, dst, size)
        return self.router.fabric.link_name(link) if link >= 0 else ""
