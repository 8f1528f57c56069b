"""Fast mode's per-host sub-fabric routers and all-to-all timers, built ahead in a thread.

:class:`moesim.step.fast.FastState` needs, for each host of the representative pipeline, a
router over the sub-fabric of that host's ring neighbours and its rank's EP group
(:func:`host_router`), and for each EP group an :class:`moesim.step.estimate.A2ATimer` on it
(4,032 routed pairs at EP64; together about 0.2 s of CPU at 9,216 GPUs), and the routes of the
host's DP / EDP ring pairs (:class:`moesim.step.estimate.RingTimer` off ECMP). The step asks
for them one by one as its SimPy run reaches each stage; :class:`HostRoutesAhead` builds them
in a worker thread from the moment the fabric is indexed, beside the MoE layers' routing, and
hands them over when asked. It builds only what the lazy path would build with the same
arguments: routers of hosts with exactly one representative rank (with several, the first to
ask chooses the EP group in the sub-fabric, so those stay lazy), timers of EP groups with
exactly one representative rank (on that rank's host router, as the lazy path puts them), and
nothing on fabrics that are not pruned (their one whole-fabric router is shared with the run).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait

import numpy as np

from moesim.fabric.subfabric import GraphIndex, MappedRouter
from moesim.step.estimate import A2ATimer, RingPairs, ring_pairs
from moesim.step.groups import ring_group
from moesim.step.spec import StepSpec

HostRoute = tuple[MappedRouter, RingPairs]


def host_gpus(index: GraphIndex, spec: StepSpec, host: int) -> list[int]:
    """The GPU ids of ``host`` inside the layout's world, ascending."""
    nodes = index.graph.nodes
    return sorted(int(nodes[n]["gpu"]) for n in index.host_nodes.get(host, [])
                  if nodes[n].get("kind") == "gpu"
                  and int(nodes[n]["gpu"]) < spec.layout.world_size)


def host_router(index: GraphIndex, spec: StepSpec, stage_of: Callable[[int], int],
                ep_group: tuple[int, ...], rank: int) -> HostRoute:
    """The sub-fabric router of ``rank``'s host (its stage's ring pairs and ``ep_group``, the
    EP group of ``rank``) and those ring pairs; ``stage_of`` maps GPU -> pipeline stage."""
    host = index.host_of(rank)
    ranks = [g for g in host_gpus(index, spec, host) if stage_of(g) == stage_of(rank)]
    rp = ring_pairs(ranks or [rank], lambda ring, r: ring_group(spec.layout, ring, r))
    return index.router(rp.ends + list(ep_group)), rp


class HostRoutesAhead:
    """Host routers and EP-group timers of the representative ``ranks``, built in one worker
    thread (module docstring). Start it after ``index`` has routed once (its tables are read,
    not written, from then on)."""

    def __init__(self, index: GraphIndex, spec: StepSpec, ranks: Iterable[int]) -> None:
        lay = spec.layout
        ranks = list(ranks)
        hosts = [index.host_of(r) for r in ranks]
        groups = [lay.group_of("ep", r) for r in ranks]
        self.routes: dict[int, Future[HostRoute]] = {}
        self.timers: dict[int, Future[A2ATimer]] = {}
        self.users: dict[int, Future[A2ATimer]] = {}  # host -> the timer routing on its router
        self.pool: ThreadPoolExecutor | None = None
        if not index.prunable or not any(spec.model.moe_layers) or lay.ep == 1:
            return  # the whole fabric's router is shared with the run: nothing to build here
        pool = self.pool = ThreadPoolExecutor(1, thread_name_prefix="moesim-host-routes")
        for rank, host, group in zip(ranks, hosts, groups, strict=True):
            if hosts.count(host) > 1:
                continue
            route = self.routes[host] = pool.submit(self._route, index, spec, group, rank)
            if groups.count(group) == 1:
                self.timers[group[0]] = self.users[host] = pool.submit(self._timer, route, group)

    @staticmethod
    def _route(index: GraphIndex, spec: StepSpec, group: tuple[int, ...], rank: int
               ) -> HostRoute:
        """The host's router, its ring pairs already routed (the router caches each pair's
        route, which does not depend on the pairs it was computed with)."""
        router, rp = host_router(index, spec, lambda g: spec.layout.coords(g)["pp"], group,
                                 rank)
        for found in rp.pairs.values():
            if found:
                src, dst = np.array(sorted(found), dtype=np.int64).T
                router.routes(src, dst)
        return router, rp

    @staticmethod
    def _timer(route: Future[HostRoute], group: tuple[int, ...]) -> A2ATimer:
        return A2ATimer(route.result()[0], np.asarray(group, dtype=np.int64))

    def route(self, host: int) -> HostRoute | None:
        """Host ``host``'s router and ring pairs if built here, else None. Waits for them and
        for the timer built on that router (a router is used by one thread at a time)."""
        future = self.routes.get(host)
        if future is None:
            return None
        wait([self.users[host]] if host in self.users else [])
        return future.result()

    def timer(self, first_gpu: int) -> A2ATimer | None:
        """The timer of the EP group starting at ``first_gpu`` if built here, else None."""
        future = self.timers.get(first_gpu)
        return None if future is None else future.result()

    def cancel(self) -> None:
        """Drop what was not started and wait for what is in flight (no worker outlives the
        step)."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
