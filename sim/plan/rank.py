"""Rank a count's candidates by the whole-step simulator: which to simulate, and in what order.

The estimate (:mod:`moesim.plan.estimate`) only prunes: the layouts that fit in memory are
ordered by estimated seconds per token, and the best ``simulate_min`` run through the
whole-step simulator in fast mode (:mod:`moesim.plan.simulate`). Then every layout the
estimate cannot rule out runs too: one whose estimate, scaled by the lowest
simulated/estimated ratio seen so far, would beat the best simulated step (up to
``simulate_max``). The ranking is by simulated seconds per token.
"""

from __future__ import annotations

from collections.abc import Callable

from moesim.errors import ConfigError
from moesim.model import ModelConfig
from moesim.plan.extrapolate import probe_counts
from moesim.plan.prepare import Prepared, Ranked
from moesim.plan.simulate import Pool, SimTask, simulate_all, step_spec
from moesim.plan.spec import DesignSpec

Say = Callable[[str], None]


def to_simulate(ranked: list[Ranked], seq_len: int, first: int, cap: int) -> list[int]:
    """Indices still worth simulating: the best ``first`` by estimate, then each one whose
    estimate x the lowest simulated/estimated ratio seen beats the best simulated step."""
    done = [i for i, r in enumerate(ranked) if r.sim or r.sim_error]
    if len(done) < min(first, cap, len(ranked)):
        return [i for i in range(len(ranked)) if i not in done][: min(first, cap) - len(done)]
    sims = [ranked[i] for i in done if ranked[i].sim]
    if not sims or len(done) >= cap:
        return []
    low = min(r.step_time_s / r.est.step_time_s for r in sims)
    best = min(r.per_token_s(seq_len) for r in sims)
    todo = [i for i, r in enumerate(ranked) if i not in done
            and r.est_per_token_s(seq_len) * low < best]
    return todo[: cap - len(done)]


def work(task: SimTask) -> int:
    """A proxy of a candidate's fast-mode wall time: the representative pipeline's ranks
    (pp x tp x cp) times the micro-batch passes it runs (the two probes' when it is
    extended, :mod:`moesim.plan.extrapolate`); the order it sets only balances workers."""
    lay, m = task.step.layout, task.step.microbatches
    probes = probe_counts(task.step) if task.extrapolate and task.routing_draws else None
    return lay.pp * lay.tp * lay.cp * (sum(probes) if probes else m)


def simulate_ranked(spec: DesignSpec, model: ModelConfig, prep: Prepared, jobs: int,
                    dask: str | None, say: Say, ranked: list[Ranked] | None = None,
                    first: int | None = None, cap: int | None = None,
                    pool: Pool | None = None) -> list[Ranked]:
    """Simulate what :func:`to_simulate` asks (``first`` / ``cap``: ``spec.simulate_min`` /
    ``simulate_max``) until it asks nothing, from ``ranked`` (default ``prep.ranked``: none
    simulated yet); the ranked list, simulated first (fastest per token first)."""
    ranked = list(prep.ranked if ranked is None else ranked)
    first = spec.simulate_min if first is None else first
    cap = spec.simulate_max if cap is None else cap
    while todo := to_simulate(ranked, spec.seq_len, first, cap):
        say(f"simulating {len(todo)} candidate(s) in fast mode (-j {jobs}"
            + (f", dask {dask}" if dask else "") + ")")
        tasks = [SimTask(i, step_spec(spec, model, ranked[i].cand, prep.fabric),
                         spec.routing_draws, spec.extrapolate) for i in todo]
        tasks.sort(key=lambda t: -work(t))  # longest first: workers end together
        recs = simulate_all(tasks, jobs, dask, lambda d, n: say(f"  simulated {d}/{n}"), pool)
        for i, rec in recs.items():
            ranked[i] = Ranked(ranked[i].cand, ranked[i].est, rec.get("result"),
                               rec.get("error", ""), float(rec["wall_s"]))
    sims = sorted((r for r in ranked if r.sim), key=lambda r: r.per_token_s(spec.seq_len))
    if not sims:
        errors = "; ".join(sorted({r.sim_error for r in ranked if r.sim_error}))[:300]
        raise ConfigError("design", f"no candidate could be simulated: {errors}")
    return sims + [r for r in ranked if not r.sim]
