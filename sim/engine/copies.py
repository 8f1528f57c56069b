"""Flows that stand for many identical copies: one weighted route per endpoint pair.

A collective that every replica runs at once (the same byte matrix and start times on other
GPUs) need not be simulated copy by copy. :class:`CopiesRouter` numbers the *endpoints* of one
copy ``0..k-1``; ``members[c, e]`` is the GPU of endpoint ``e`` in copy ``c`` (-1: absent in
that copy). The route of endpoint pair ``(a, b)`` is the union of the base router's routes
``members[c, a] -> members[c, b]`` over the copies, each link weighted by the summed weight of
the copies' hops on it (:mod:`moesim.engine.maxmin` takes any positive weight). A flow on it
moves ``size`` bytes *per copy* at a per-copy rate ``r`` and puts ``w x r`` on a link of weight
``w``.

Exactness: if a permutation of the fabric's links maps every copy's routes onto another
copy's routes (identical copies of a collective on a symmetric fabric, e.g. EP groups of
one stage on a rail fat tree with D-mod-K), the max-min allocation, unique, is invariant
under it; so copies of one flow have equal rates at every instant, the link constraints of
the copies' flows are exactly those of the weighted flows, and progressive filling of the
weighted problem is progressive filling of the whole one: the same rates, drains and finish
times (tested against every copy as its own flow, ``tests/test_engine_copies.py``). Without
such a symmetry (ECMP hash collisions differ from copy to copy) every copy of a flow is held
to the rate of the most loaded copy: the result is the slowest copy's, not each copy's; that
is what a step waiting on all replicas sees, and it is tested against full mode
(``tests/test_step_congestion.py``).
"""

from __future__ import annotations

import numpy as np

from moesim.engine.routing import Router, RouteSet

SHIFT = 32
"""Pair code = (source endpoint << SHIFT) | destination endpoint."""


class CopiesRouter(Router):
    """Weighted union routes of endpoint pairs over copies (module docstring).

    ``endpoint_of`` (optional) maps the ids flows are started with to endpoints (columns of
    ``members``); by default ids are the endpoints.
    """

    def __init__(self, base: Router, members: np.ndarray,
                 endpoint_of: np.ndarray | None = None) -> None:
        self.base = base
        self.fabric = base.fabric
        self.mode = base.mode
        self.members = np.atleast_2d(np.asarray(members, dtype=np.int64))
        self.endpoint_of = endpoint_of
        self._codes = np.zeros(0, dtype=np.int64)  # sorted pair codes
        self._row = np.zeros(0, dtype=np.int64)  # row of each code
        self._ptr = [np.zeros(1, dtype=np.int64)]
        self._parts: list[tuple[np.ndarray, ...]] = []  # (link, weight, latency, cap) per batch
        self._n_rows = 0
        self._flat: tuple[np.ndarray, ...] | None = None

    def extend(self, members: np.ndarray) -> np.ndarray:
        """Add endpoints whose copies are the columns of ``members`` (fewer or more copies than
        the endpoints so far: the shorter side is padded with absent GPUs); the ids to start
        their flows with (past every id ``endpoint_of`` maps, if it is set)."""
        new = np.asarray(members, dtype=np.int64)
        old = self.members
        rows = max(old.shape[0], new.shape[0])
        out = np.full((rows, old.shape[1] + new.shape[1]), -1, dtype=np.int64)
        out[:old.shape[0], :old.shape[1]] = old
        out[:new.shape[0], old.shape[1]:] = new
        self.members = out
        endpoints = np.arange(old.shape[1], out.shape[1])
        if self.endpoint_of is None:
            return endpoints
        ids = np.arange(self.endpoint_of.size, self.endpoint_of.size + endpoints.size)
        self.endpoint_of = np.concatenate((self.endpoint_of, endpoints))
        return ids

    def routes(self, src_gpu: np.ndarray, dst_gpu: np.ndarray) -> RouteSet:
        """Weighted routes of the endpoint pairs ``(src[i], dst[i])`` (ids, see class doc)."""
        src, dst = np.asarray(src_gpu, dtype=np.int64), np.asarray(dst_gpu, dtype=np.int64)
        if self.endpoint_of is not None:
            src, dst = self.endpoint_of[src], self.endpoint_of[dst]
        code = (src << SHIFT) | dst
        known = self._lookup(code) if self._codes.size else np.full(code.size, -1)
        missing = np.unique(code[known < 0])
        if missing.size:
            self._build_codes(missing)
        rows = self._row[np.searchsorted(self._codes, code)]
        link, weight, latency, cap, ptr = self._arrays()
        lens = ptr[rows + 1] - ptr[rows]
        idx = np.arange(int(lens.sum())) + np.repeat(ptr[rows] - np.cumsum(lens) + lens, lens)
        return RouteSet(ptr=np.concatenate(([0], np.cumsum(lens))), link=link[idx],
                        weight=weight[idx], latency_s=latency[rows], cap_Bps=cap[rows])

    def _lookup(self, code: np.ndarray) -> np.ndarray:
        """Row of each pair code, -1 where not built."""
        at = np.minimum(np.searchsorted(self._codes, code), self._codes.size - 1)
        return np.where(self._codes[at] == code, self._row[at], -1)

    def _build_codes(self, codes: np.ndarray) -> None:
        """Route every copy of the pairs ``codes`` at once and merge them per pair."""
        a, b = codes >> SHIFT, codes & ((1 << SHIFT) - 1)
        s, d = self.members[:, a], self.members[:, b]  # [copy, pair]
        live = (s >= 0) & (d >= 0) & (s != d)
        pair = np.broadcast_to(np.arange(codes.size), s.shape)[live]
        rs = self.base.routes(s[live], d[live])
        owner = np.repeat(pair, np.diff(rs.ptr))
        n_links = self.fabric.n_links
        key, inv = np.unique(owner * n_links + rs.link, return_inverse=True)
        weight = np.bincount(inv, weights=rs.weight)
        p_of, link = np.divmod(key, n_links)
        count = np.bincount(p_of, minlength=codes.size)
        latency = np.zeros(codes.size)
        np.maximum.at(latency, pair, rs.latency_s)
        cap = np.full(codes.size, np.inf)
        np.minimum.at(cap, p_of, self.fabric.cap_Bps[link] / weight)
        base = self._n_rows
        self._ptr.append(self._ptr[-1][-1] + np.cumsum(count))
        self._parts.append((link, weight, latency, cap))
        self._n_rows += codes.size
        all_codes = np.concatenate((self._codes, codes))
        all_rows = np.concatenate((self._row, base + np.arange(codes.size)))
        order = np.argsort(all_codes, kind="stable")
        self._codes, self._row = all_codes[order], all_rows[order]
        self._flat = None

    def _arrays(self) -> tuple[np.ndarray, ...]:
        if self._flat is None:
            link, weight, latency, cap = (np.concatenate(x) for x in zip(*self._parts,
                                                                          strict=True))
            self._flat = (link, weight, latency, cap, np.concatenate(self._ptr))
        return self._flat
