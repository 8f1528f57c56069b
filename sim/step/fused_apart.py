"""Fast mode's closed-form layers where CP K/V sends leave the stage's own links: an
approximation, with its error bound (:mod:`moesim.step.fused_layer`).

The closed form is exact when each of its transfers is alone on its links. Where a stage's
CP ring leaves the host (CP4 and up of TP4 on 8-GPU hosts), its cross-host K/V sends can
meet the pipeline sends on NIC / leaf links and other stages' K/V sends on spine links
(:func:`cp_watch`, the links where that can happen). Fast mode then runs the layers fused
anyway, timing each such K/V send as if it had its links to itself: on a watched link no
transfer waits for another (:class:`moesim.step.fused_layer.LinkClock`), so the step can come
out early by the time two transfers really shared a watched link. Where TP rings would use a
watched link too, the step runs with flows, as it did before (:func:`cp_watch` gives None).

Error bound: :func:`overlap_s`, the summed pairwise overlap of the watched transfers with
each other and with the pipeline-send flows (LinkClock logs their intervals when asked:
``LinkClock.held``). Each overlap of ``d`` seconds on a work-conserving link delays a
transfer in it by at most ``d``; knock-on delays are not counted, so the bound is first-order,
and it is loose (in the tests' cut-down cases it is ~70% of the step while the fused step is
~1% early). Tested against the flow path (every TP chunk and CP send a flow,
``Fast(fuse_tp=False)``) in ``tests/test_step_fused_apart.py``: TP4 CP4 -1.02%, interleaved
-0.97%, TP4 CP8 -0.96%, each within its bound. On the ModelZoo long-context rows at 64k / 128k
with 8 micro-batches both paths give the same step time bit for bit (the K/V sends hide under
the attention core: ``cp_exposed`` 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from moesim.engine.fabric import load_links
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.parallel.layout import ParallelLayout
from moesim.step.groups import group

if TYPE_CHECKING:
    from moesim.fabric.subfabric import GraphIndex

__all__ = ["cp_watch", "overlap_s", "shared_links"]


def _sends(lay: ParallelLayout) -> list[tuple[int, int]]:
    """Pipeline sends between the representative's stages (dense-grid ``dp == 0``, either
    direction, the interleaved wrap-around included)."""
    pairs = [(lay.dense_rank(tp=t, cp=c, dp=0, pp=p), lay.dense_rank(tp=t, cp=c, dp=0,
                                                                     pp=(p + 1) % lay.pp))
             for p in range(lay.pp) for c in range(lay.cp) for t in range(lay.tp)
             if lay.pp > 1 and (p + 1 < lay.pp or lay.vpp > 1)]
    return pairs + [(b, a) for a, b in pairs]


def _edges(lay: ParallelLayout, kinds: tuple[str, ...]) -> list[tuple[int, int, int]]:
    """(member, its ring successor, stage) of every ``kinds`` ring of the representative."""
    return [(r, g[(g.index(r) + 1) % len(g)], p) for kind in kinds if getattr(lay, kind) > 1
            for p in range(lay.pp) for c in range(lay.cp) for t in range(lay.tp)
            for r in [lay.dense_rank(tp=t, cp=c, dp=0, pp=p)] for g in [group(lay, kind, r)]]


def shared_links(lay: ParallelLayout, router: Router, kinds: tuple[str, ...]) -> np.ndarray:
    """The links (implied links as their partner) that a pipeline send between the
    representative's stages and a ``kinds`` ring transfer ("tp", "cp") between its members
    both use; empty when there are no sends or no such transfers."""
    pairs, edges = _sends(lay), _edges(lay, kinds)
    if not edges or lay.pp == 1 or not pairs:
        return np.zeros(0, dtype=np.int64)
    load_of = load_links(router.fabric)
    sends = router.routes(*np.array(pairs).T).link
    ring = router.routes(*np.array(edges)[:, :2].T).link
    return np.intersect1d(load_of[sends], load_of[ring])


def cp_watch(index: GraphIndex, lay: ParallelLayout, router: Router) -> np.ndarray | None:
    """Per link, whether a CP K/V send of one stage uses it beside a pipeline send or
    another stage's K/V sends, on an NVLink fabric whose TP rings use none of those links
    (else None: the step runs with flows)."""
    if lay.cp == 1 or index.graph.graph.get("nvlink_domain_size") is None:
        return None
    load_of, edges = load_links(router.fabric), np.array(_edges(lay, ("cp",)))
    rs = router.routes(edges[:, 0], edges[:, 1])
    on = set(zip(load_of[rs.link].tolist(),
                 np.repeat(edges[:, 2], np.diff(rs.ptr)).tolist(), strict=True))
    stages = np.bincount([link for link, _ in on], minlength=load_of.size)
    watch = stages > 1
    watch[shared_links(lay, router, ("cp",))] = True
    tp = _edges(lay, ("tp",))
    if tp and watch[load_of[router.routes(*np.array(tp)[:, :2].T).link]].any():
        return None
    return watch if watch.any() else None


def overlap_s(net: FlowNetwork, load_of: np.ndarray, held: list[tuple[np.ndarray, ...]]
              ) -> float:
    """Seconds of link time that two of the fused transfers ``held`` ((links, start_s,
    drain_s) on watched links), or one of them and a flow of ``net``, held a watched link at
    once, summed over every such pair (open intervals: one ending when the other starts adds
    nothing). 0: every fused transfer ran alone on its watched links, as the closed form
    assumes."""
    if not held:
        return 0.0
    links, start, end = (np.concatenate(col) for col in zip(*held, strict=True))
    fl, n = net.flows.col, net.flows.n
    plen = fl["pair_len"][:n]
    hop = np.repeat(fl["pair_ptr"][:n] - np.cumsum(plen) + plen, plen) + np.arange(plen.sum())
    f_link = load_of[net.pairs.link[hop]]
    watched = np.zeros(load_of.size, dtype=bool)
    watched[links] = True
    on = watched[f_link]
    f_start = np.repeat(fl["start_s"][:n], plen)[on]
    f_end = np.repeat(np.nan_to_num(fl["drain_s"][:n], nan=np.inf), plen)[on]
    # sweep every watched link's interval ends and starts (ends first at a tie): between
    # two events, a fused transfers and b flows overlap pairwise a (a - 1) / 2 + a b times
    f_link, k = f_link[on], start.size
    at = np.concatenate([start, end, f_start, f_end])
    link = np.concatenate([links, links, f_link, f_link])
    step = np.concatenate([np.ones(k), -np.ones(k), np.ones(f_start.size),
                           -np.ones(f_start.size)])
    fused = np.concatenate([np.ones(2 * k, dtype=bool), np.zeros(2 * f_start.size, dtype=bool)])
    order = np.lexsort((step, at, link))
    a = np.cumsum(np.where(fused, step, 0.0)[order])
    b = np.cumsum(np.where(fused, 0.0, step)[order])
    dt = np.diff(np.where(np.isfinite(at[order]), at[order], at[order][np.isfinite(at)].max()))
    pairs = (a * (a - 1) / 2 + a * b)[:-1]
    return float((dt * pairs).sum())
