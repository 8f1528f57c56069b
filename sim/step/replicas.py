"""Routes for the representative pipeline's own flows, each standing for its copies in every
DP replica (fast mode's network: pipeline sends, TP / CP transfers, and under ECMP the
gradient rings, :mod:`moesim.step.ringflows`).

Every replica runs the same program, so when the representative sends an activation from
stage ``s`` to ``s + 1``, every replica sends its own at the same time. Where their routes are
images of each other under a symmetry of the fabric (D-mod-K, spray: each replica's sends on
their own uplinks), the representative alone gives the same times; under ECMP the hash puts
some replicas' flows on one leaf uplink while another idles, on a 1:1 fabric too, and the
step waits for the slowest (:func:`replicas_collide`). :func:`pipeline_router` then routes
each of the representative's flows as the union of its copies
(:class:`moesim.engine.copies.CopiesRouter`: every copy held to the slowest copy's rate), as
the whole-fabric phases do (:mod:`moesim.step.phased`).

Measured against full mode (``tests/test_step_congestion.py``, 1:1 rail fabric, ECMP, moe-1t
cut to one MoE layer per stage, EP32; 2026-12-04), the pipeline sends as copies alone (the
rings still :class:`moesim.step.estimate.RingTimer`'s over the stage's ring edges): 512 GPUs
838.11 -> 855.06 ms (full 864.18), 256 GPUs 616.65 -> 621.37 ms (full 645.85), 128 GPUs
528.73 -> 531.15 ms (full 535.32), with PXN 427.50 -> 429.92 ms (full 440.01); under D-mod-K
the same step with and without copies (128 GPUs: 428.13 ms).
"""

from __future__ import annotations

import numpy as np

from moesim.engine.copies import CopiesRouter
from moesim.engine.routing import Router
from moesim.fabric.spec import FabricSpec
from moesim.fabric.subfabric import GraphIndex
from moesim.parallel.layout import ParallelLayout


def replicas_collide(fabric: FabricSpec) -> bool:
    """Whether the DP replicas' copies of a flow may meet on a link where the representative's
    alone would not (module docstring): under ECMP, whose hash draws each copy's uplink on its
    own. D-mod-K and spray spread them (routing the copies costs ~0.2 s per 576-GPU stage of
    the 9,216-GPU benchmark step, benchmarks/bench_step.py)."""
    return fabric.multipath == "ecmp"


def replica_router(base: Router, lay: ParallelLayout, ranks: list[int]) -> CopiesRouter:
    """Routes for the representative pipeline's flows, each standing for its copies in every
    DP replica (:class:`CopiesRouter`: the rank with the same tp, cp and pp and dp = c)."""
    members = np.array([[lay.dense_rank(tp=c["tp"], cp=c["cp"], dp=d, pp=c["pp"])
                         for c in (lay.coords(r) for r in ranks)] for d in range(lay.dp)],
                       dtype=np.int64)
    endpoint_of = np.full(lay.world_size, -1, dtype=np.int64)
    endpoint_of[ranks] = np.arange(len(ranks))
    return CopiesRouter(base, members, endpoint_of)


def pipeline_router(index: GraphIndex, lay: ParallelLayout, ranks: list[int]) -> CopiesRouter:
    """The router of fast mode's representative network with ``replicas``: its flows as
    copies over every replica (:func:`replica_router` on whole-fabric routes)."""
    from moesim.step.phases import base_router  # the block router: only where it is used

    return replica_router(base_router(index, lay.world_size // lay.pp), lay, ranks)


def plain_router(router: Router) -> Router:
    """``router`` itself, or the GPU-id router under a :class:`CopiesRouter` (for routes of
    GPUs outside the representative)."""
    return router.base if isinstance(router, CopiesRouter) else router
