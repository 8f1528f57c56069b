"""Fast mode's DP / EDP gradient rings as flows in the representative's network
(``Fast(phases="replicas")``, what ``Fast()`` runs on a 1:1 ECMP fabric).

Every replica reaches a layer's gradient reduction together, so every ring of a kind in a
stage runs at once. With ``replicas`` the representative's network routes each flow as the
union of its copies in every DP replica (:func:`moesim.step.replicas.pipeline_router`); a ring
job here is one flow per ring position on that network, standing for that position's edge in
every ring of the stage (:meth:`moesim.engine.copies.CopiesRouter.extend`: held to the
slowest copy's rate), moving the ``(n - 1) / n`` of the buffer that a chunked ring sends over
each edge. So the rings share links by max-min with each other, with other stages' rings and
with the pipeline's sends on the step's clock, as in full mode, where
:class:`moesim.step.estimate.RingTimer` shares each link among ring jobs alone (processor
sharing per link) and the pipeline's sends never meet a ring. A job ends when its last edge
has drained, and no earlier than ``n - 1`` dependent hops (``size / n`` at each edge's path
capacity plus its latency, the mean over the edges), every rank at once; except a stage's
DP tail: its last reduce-scatters (the extra dense parameters, ``item < 0``) and its
all-gathers are :class:`moesim.step.ringjob.RingJob`'s (copies: one flow per position), each
rank finishing on its own clock and joining the all-gathers after its own optimizer step
(:class:`moesim.step.ringjob.StageTail`, as the phases do), once the stage's layer
reduce-scatters are done.

Why (1:1 rail fabric, ECMP, moe-1t cut to one MoE layer per stage, EP32, 2 micro-batches;
``tests/test_step_congestion.py``; 2026-12-04; full mode / ``Fast()`` before (the stage's
``RingTimer``, the representative's sends alone) / the sends as copies / + rings as flows /
+ the tail's ranks on their own clocks, ms): 128 GPUs 535.32 / 528.73 / 531.15 / 534.78 /
542.35 (+1.3 %); 256 GPUs 645.85 / 616.65 / 621.37 / 629.85 / 651.36 (+0.9 %); 512 GPUs
864.18 / 838.11 / 855.06 / 872.63 / 871.31 (+0.8 %); 128 GPUs with PXN 440.01 / 427.50 /
429.92 / 442.68 / 439.92 (-0.0 %). At 256 GPUs: every replica's pipeline sends collide on
leaf uplinks (stage 3's last op 242.50 -> 245.53 ms); stage ``s``'s last reduce-scatter meets
its last backward send to stage ``s - 1`` (stage 0's last op 352.56 ms, full mode's ranks
351.0-354.9 ms, the timer's 337.43); the tail's ranks finish one after another behind the
slow ring edge and the early ones' all-gathers share it while it still reduce-scatters (full
mode with every rank made to wait for its whole ring: 630.65 ms).
After the uniform router's count-level sampling (f90343f, another draw of the same law), full
/ ``Fast()``: 128 GPUs 535.50 / 542.21 (+1.3 %), 256 GPUs 645.71 / 651.17 (+0.8 %), 512 GPUs
865.15 / 872.07 (+0.8 %), 128 GPUs with PXN 439.77 / 439.86 (+0.0 %).
Cost (CPU s, loaded 2-core machine): 128 GPUs 2.7 (the timer 0.1, full mode 10-12), 256 GPUs
2.9-4.1 (0.2; full 22-27), 512 GPUs 2.4 (0.4; full 50-70). It grows with the replicas'
routes: the bench_step.py step with ECMP at 1,024 / 2,048 GPUs and 8 micro-batches, before
the tail's RingJobs: 0.45 -> 1.77 s and 0.50 -> 6.65 s (step +4.4 % and +9.7 %: collisions
among more replicas); at 9,216 GPUs it ran over 10 minutes. So ``Fast()`` runs it only where
ECMP makes replicas collide; ``Fast(phases="estimate")`` keeps the cheap timer.
"""

from __future__ import annotations

import numpy as np
import simpy

from moesim.engine.copies import CopiesRouter
from moesim.engine.network import FlowNetwork
from moesim.parallel.layout import ParallelLayout
from moesim.step.groups import ring_group
from moesim.step.ringjob import RingJob, StageTail


class RingFlows:
    """Ring jobs of whole stages as one flow per ring position (module docstring)."""

    def __init__(self, net: FlowNetwork, lay: ParallelLayout) -> None:
        assert isinstance(net.router, CopiesRouter)
        self.net, self.env, self.lay = net, net.env, lay
        self.router: CopiesRouter = net.router
        self._edges: dict[tuple[str, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._gpus: dict[tuple[str, int], np.ndarray] = {}  # [ring, position]
        self.jobs: dict[tuple[str, int, int], simpy.Event] = {}
        self.tail_jobs: dict[tuple[str, int, int], RingJob] = {}  # the DP tails' (per rank)
        self.tails: dict[int, StageTail | None] = {}

    def _ring_edges(self, ring: str, stage: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(source ids, destination ids, per-edge hop seconds per chunk byte and latency)
        of the rings ``ring`` of ``stage``: one flow per ring position standing for every
        ring of the stage (its copies)."""
        key = (ring, stage)
        if key not in self._edges:
            per = self.lay.world_size // self.lay.pp
            found: dict[int, tuple[int, ...]] = {}
            for r in range(stage * per, (stage + 1) * per):
                g = ring_group(self.lay, ring, r)
                found.setdefault(g[0], g)
            gpus = self._gpus[key] = np.array(list(found.values()), dtype=np.int64)
            ids = self.router.extend(gpus)
            src, dst = ids, np.roll(ids, -1)
            rs = self.router.routes(src, dst)
            self._edges[key] = (src, dst, np.stack([1.0 / rs.cap_Bps, rs.latency_s]))
        return self._edges[key]

    def join(self, kind: str, stage: int, item: int, size_bytes: float) -> simpy.Event:
        """The job ``kind`` (dp_rs, edp_ag, ...) of ``item`` over every ring of ``stage``,
        all ranks joining now; fires when done (value: then)."""
        key = (kind, stage, item)
        if key in self.jobs:
            return self.jobs[key]
        src, dst, hop = self._ring_edges(kind.split("_")[0], stage)
        n, now = src.size, self.env.now
        if n < 2 or size_bytes <= 0:
            self.jobs[key] = self.env.timeout(0.0, value=now)
            return self.jobs[key]
        if item < 0:  # the stage's last reduce-scatters (extra dense) and its all-gathers
            job = self._tail_job(kind, stage, item, size_bytes)
            if kind.endswith("rs"):
                job.join(np.ones(job.gpus.shape, dtype=bool))
            self.jobs[key] = job.done
            return job.done
        chunk = size_bytes / n
        floor_s = (n - 1) * float(np.mean(chunk * hop[0] + hop[1]))  # dependent hops
        gid, drained = self.net.expect(n)
        self.net.start(src, dst, np.full(n, (n - 1) * chunk), gid)
        done = self.jobs[key] = self.env.event()

        def fire(_: simpy.Event) -> None:
            done.succeed(self.env.now)

        def end(_: simpy.Event) -> None:
            late = now + floor_s - self.env.now
            if late > 0:
                self.env.timeout(late).callbacks.append(fire)
            else:
                fire(_)

        drained.callbacks.append(end)
        return done

    def _tail_job(self, kind: str, stage: int, item: int, size_bytes: float) -> RingJob:
        key = (kind, stage, item)
        if key not in self.tail_jobs:
            ring = kind.split("_")[0]
            src = self._ring_edges(ring, stage)[0]
            self.tail_jobs[key] = RingJob(self.net, src[None, :], self._gpus[(ring, stage)],
                                          size_bytes)
        return self.tail_jobs[key]

    def begin_tail(self, stage: int, opt_s: float, gathers: list[tuple[str, float]]) -> None:
        """Every rank of ``stage`` starts its DP tail now: each joins the
        all-gathers ``gathers`` ``opt_s`` after its own reduce-scatters are done
        (:class:`moesim.step.ringjob.StageTail`)."""
        if stage in self.tails:
            return
        self.tails[stage] = None
        per = self.lay.world_size // self.lay.pp
        scatters = [job for (kind, st, _), job in self.tail_jobs.items()
                    if st == stage and kind.endswith("rs")]
        flows = [ev for (kind, st, item), ev in self.jobs.items()
                 if st == stage and kind.endswith("rs") and item >= 0]
        ags = [self._tail_job(kind, stage, -1, size) for kind, size in gathers]

        def go(_: simpy.Event) -> None:
            self.tails[stage] = StageTail(self.env, stage * per, per, scatters, ags, opt_s)

        self.env.all_of(flows).callbacks.append(go)
