"""RingJob (fast mode's phases: a gradient ring job with each rank's own finish time) against
the engine's chunked rings (moesim.collectives.ring): every rank's finish, uncongested (the
closed form), beside other rings on a rail fabric, and with ranks joining one by one."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from test_engine_support import star

from moesim.collectives.ring import ring_all_gather, ring_reduce_scatter
from moesim.engine.copies import CopiesRouter
from moesim.engine.fabric import fabric_from_graph
from moesim.engine.network import FlowNetwork
from moesim.engine.routing import Router
from moesim.fabric.build import build_graph
from moesim.fabric.subfabric import GraphIndex
from moesim.parallel.layout import ParallelLayout
from moesim.scenario.schema import FabricSpec
from moesim.step.ringjob import RingJob

RAIL32 = FabricSpec(preset="rail-h800-64", params=(("hosts", 8), ("gpus_per_host", 4),
                                                  ("hosts_per_su", 2), ("spines", 2),
                                                  ("oversubscription", 2.0)))
LAYOUT = ParallelLayout(ep=8, dp=16, pp=2)  # stage 0 on hosts 0-3: DP rings of 16, EDP of 2


def _job(base: Router, rings: list[tuple[int, ...]], size: float, copies: bool = False
         ) -> tuple[simpy.Environment, RingJob]:
    env = simpy.Environment()
    router = CopiesRouter(base, np.zeros((1, 0), dtype=np.int64))
    net = FlowNetwork(env, router, record_timeline=False)
    gpus = np.array(rings, dtype=np.int64)
    ids = router.extend(gpus if copies else gpus.reshape(1, -1)).reshape(-1, gpus.shape[1])
    return env, RingJob(net, ids, gpus, size)


def _engine_done(ring: object) -> np.ndarray:
    return np.array([float(e.value) for e in ring.rank_done])  # type: ignore[attr-defined]


def test_uncongested_ring_is_the_closed_form() -> None:
    """n ranks on one switch: every rank done at (n - 1)(c / B + L), as the engine's ring."""
    n, size, bw, lat_ns = 8, 8e8, 100.0, 500.0
    base = Router(fabric_from_graph(star(n, bw, lat_ns)), "ecmp")
    env, job = _job(base, [tuple(range(n))], size)
    job.join(np.ones((1, n), dtype=bool))
    env.run()
    closed = (n - 1) * (size / n / (bw * 1e9) + 2 * lat_ns * 1e-9)
    np.testing.assert_allclose(job.gpu_done_s(), closed, rtol=1e-9)
    eng_env = simpy.Environment()
    ring = ring_reduce_scatter(FlowNetwork(eng_env, base), list(range(n)), size)
    eng_env.run()
    np.testing.assert_allclose(_engine_done(ring), closed, rtol=1e-9)


@pytest.fixture(scope="module")
def rail() -> Router:
    return GraphIndex(build_graph(RAIL32), RAIL32, "H800").whole()


def _stage_rings(kind: str) -> list[tuple[int, ...]]:
    return sorted({LAYOUT.group_of(kind, r) for r in range(16)})


def test_each_rank_finishes_as_in_the_engine_beside_other_rings(rail: Router) -> None:
    """Stage 0's DP ring (16 ranks over 4 hosts, 2 SUs on a 2:1 spine) reduce-scatters beside
    its 8 EDP rings; the engine runs every chunk. Each rank's finish within 2 % of the job,
    and the ranks finish in the engine's order (behind the slowest edge, last)."""
    dp, edp = 4e8, 1.6e9
    env = simpy.Environment()
    net = FlowNetwork(env, rail, record_timeline=False)
    ring = ring_reduce_scatter(net, _stage_rings("dp")[0], dp)
    for g in _stage_rings("edp"):
        ring_reduce_scatter(net, g, edp)
    env.run()
    want = _engine_done(ring)
    ph_env = simpy.Environment()
    router = CopiesRouter(rail, np.zeros((1, 0), dtype=np.int64))
    ph_net = FlowNetwork(ph_env, router, record_timeline=False)
    jobs = []
    for rings, size in ((_stage_rings("dp"), dp), (_stage_rings("edp"), edp)):
        gpus = np.array(rings)
        job = RingJob(ph_net, router.extend(gpus.reshape(1, -1)).reshape(gpus.shape), gpus, size)
        job.join(np.ones(gpus.shape, dtype=bool))
        jobs.append(job)
    ph_env.run()
    got = jobs[0].gpu_done_s()[0]
    assert np.abs(got - want).max() < 0.02 * want.max()
    assert want.max() - want.min() > 0.1 * want.max()  # the spread is real
    assert np.argmax(got) == np.argmax(want)


def test_ranks_joining_one_by_one_as_in_the_engine(rail: Router) -> None:
    """An all-gather whose ranks join one by one, upstream neighbour after neighbour (as
    behind a slow reduce-scatter edge), beside a long flow on the spine: every rank's finish
    within 3 % of the job's span."""
    rings = _stage_rings("dp")
    members, size = rings[0], 8e8
    order = [members[(7 - k) % 16] for k in range(16)]  # rank 7 first, then 6, 5, ...
    join_s = {g: 0.002 * k for k, g in enumerate(order)}
    env = simpy.Environment()
    net = FlowNetwork(env, rail, record_timeline=False)
    ring = ring_all_gather(net, members, size, start=False)
    net.transfer(members[7], members[8], 4e9)  # the same path as edge 7 -> 8

    def start(local: int) -> simpy.events.ProcessGenerator:
        yield env.timeout(join_s[members[local]])
        ring.start_rank(local)

    for local in range(16):
        env.process(start(local))
    env.run()
    want = _engine_done(ring)
    ph_env, job = _job(rail, [members], size)
    ph_env.process(_joiner(ph_env, job, members, join_s))
    job.net.transfer(int(job.src[7]), int(job.src[8]), 4e9)  # endpoints 7 -> 8
    ph_env.run()
    got = job.gpu_done_s()[0]
    assert np.abs(got - want).max() < 0.03 * want.max()


def _joiner(env: simpy.Environment, job: RingJob, members: tuple[int, ...],
            join_s: dict[int, float]) -> simpy.events.ProcessGenerator:
    for g, t in sorted(join_s.items(), key=lambda kv: kv[1]):
        yield env.timeout(t - env.now)
        job.join(job.gpus == g)
