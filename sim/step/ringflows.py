"""Fast mode's DP / EDP gradient rings as flows in the representative's network, under ECMP.

Every replica reaches a layer's gradient reduction together, so every ring of a kind in a
stage runs at once. Under ECMP (:func:`moesim.step.replicas.replicas_collide`) the
representative's network routes each flow as the union of its copies in every DP replica
(:func:`moesim.step.replicas.pipeline_router`); a ring job here is one flow per ring position
on that network, standing for that position's edge in every ring of the stage
(:meth:`moesim.engine.copies.CopiesRouter.extend`: held to the slowest copy's rate), moving
the ``(n - 1) / n`` of the buffer that a chunked ring sends over each edge. So the rings share
links by max-min with each other, with other stages' rings and with the pipeline's sends on
the step's clock, as in full mode, where :class:`moesim.step.estimate.RingTimer` shares each
link among ring jobs alone (processor sharing per link, a lower bound) and the pipeline's
sends never meet a ring. A job ends when its last edge has drained, and no earlier than
``n - 1`` dependent hops (``size / n`` at each edge's path capacity plus its latency, the
mean over the edges): every rank of the stage at once, where the engine's chunked ring lets
the ranks behind a slow edge finish one after another (:mod:`moesim.step.ringjob` times
that, at 15-40x the cost: ``Fast(phases="fabric")``).

Why (1:1 rail fabric, ECMP, moe-1t cut to one MoE layer per stage, EP32, 2 micro-batches;
``tests/test_step_congestion.py``; 2026-12-04, full mode / these flows / the stage's
``RingTimer`` with the pipeline's sends as copies, ms): 128 GPUs 535.32 / 534.78 (-0.1 %) /
531.15; 256 GPUs 645.85 / 629.85 (-2.5 %) / 621.37; 512 GPUs 864.18 / 872.63 (+1.0 %) /
855.06; 128 GPUs with PXN 440.01 / 442.68 (+0.6 %) / 429.92. At 256 GPUs the rings beside
the pipeline's sends (stage ``s``'s last reduce-scatter meets its last backward send to stage
``s - 1``) put stage 0's last op at 352.56 ms (full mode's ranks 351.0-354.9 ms; the timer's
344.09); what is left is the ranks' spread: full mode with every rank made to wait for its
whole ring gives 630.65 ms (the gap is the early ranks' all-gathers on the slow edge while
it still reduce-scatters; the phases with that wait: 634.25 ms, without: 651.96 ms).
Cost: 0.5 s of CPU at 256 GPUs (the timer 0.2 s, the phases 8 s, full mode 26 s).
"""

from __future__ import annotations

import numpy as np
import simpy

from moesim.engine.copies import CopiesRouter
from moesim.engine.network import FlowNetwork
from moesim.parallel.layout import ParallelLayout
from moesim.step.groups import ring_group


class RingFlows:
    """Ring jobs of whole stages as one flow per ring position (module docstring)."""

    def __init__(self, net: FlowNetwork, lay: ParallelLayout) -> None:
        assert isinstance(net.router, CopiesRouter)
        self.net, self.env, self.lay = net, net.env, lay
        self.router: CopiesRouter = net.router
        self._edges: dict[tuple[str, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.jobs: dict[tuple[str, int, int], simpy.Event] = {}

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
            gpus = np.array(list(found.values()), dtype=np.int64)
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
        chunk = size_bytes / n
        floor_s = (n - 1) * float(np.mean(chunk * hop[0] + hop[1]))  # dependent hops
        gid, drained = self.net.expect(n)
        self.net.start(src, dst, np.full(n, (n - 1) * chunk), gid)
        done = self.jobs[key] = self.env.event()

        def end(_: simpy.Event) -> None:
            late = now + floor_s - self.env.now
            if late > 0:
                self.env.timeout(late).callbacks.append(lambda _e: done.succeed(self.env.now))
            else:
                done.succeed(self.env.now)

        drained.callbacks.append(end)
        return done
