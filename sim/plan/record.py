"""The design as a JSON record: everything the Markdown report and the HTML/figures show.

Days to train charge the interruptions and the checkpoint cadence (the bill of materials'
goodput): ``days_to_train = ideal days / goodput``. The error band is the validation band of
the whole-step simulator's fast mode (``moesim.results.band``), when the build has one.
"""

from __future__ import annotations

from typing import Any

from moesim.plan.design import DesignResult
from moesim.plan.megatron import MEGATRON_COMMIT, megatron_args
from moesim.plan.prepare import Ranked
from moesim.plan.simulate import step_scenario

DAY_S = 86400.0
BREAKDOWN = ("compute", "a2a_exposed", "tp_exposed", "cp_exposed", "bubble", "dp_exposed",
             "optimizer")
BAND_PATH = "fast"  # the code path the design's steps run (moesim.step.fast)


def error_band() -> dict[str, Any] | None:
    """The validation error band of fast mode as a plain mapping, None when not built in."""
    try:
        from moesim.results.band import error_band as band_of
    except ImportError:
        return None
    band = band_of(BAND_PATH)
    if band is None:
        return None
    out: dict[str, Any] = band.to_dict()
    out["sentence"] = band.sentence()
    return out


def band_width(band: dict[str, Any] | None) -> float | None:
    """Relative width of the band (high - low, speed terms), None without a band or cases."""
    if not band:
        return None
    low, high = band.get("low_rel"), band.get("high_rel")
    if low is None or high is None:
        return None
    return float(high) - float(low)


def ideal_days(res: DesignResult, r: Ranked) -> float:
    """Days of pure training steps (no interruption) for ``spec.tokens``."""
    return res.spec.tokens * r.per_token_s(res.spec.seq_len) / DAY_S


def days_to_train(res: DesignResult, r: Ranked) -> float:
    """Wall days: ideal days over the goodput (interruptions and checkpoints charged)."""
    return ideal_days(res, r) / max(res.bom.goodput, 1e-9)


def within(a_s: float, b_s: float, width: float | None) -> bool | None:
    """Whether ``b_s`` is within ``width`` (relative) of ``a_s``; None without a width."""
    if width is None or width != width:  # no band, or a NaN one
        return None
    return abs(b_s - a_s) / a_s <= width


def tied(res: DesignResult, a: Ranked, b: Ranked) -> bool | None:
    """``b`` within the error band of ``a`` per token (None: no band to judge by)."""
    seq = res.spec.seq_len
    return within(a.per_token_s(seq), b.per_token_s(seq), band_width(error_band()))


def _layout(r: Ranked) -> dict[str, int]:
    return r.cand.layout.degrees()


def _mem(r: Ranked) -> dict[str, float] | None:
    b = r.cand.memory
    if b is None:
        return None
    return {"weights": b.weights_gib, "grads": b.grads_gib, "optimizer": b.optimizer_gib,
            "activations": b.activations_gib, "buffers": b.buffers_gib, "total": b.total_gib}


def candidate_record(res: DesignResult, r: Ranked) -> dict[str, Any]:
    """One fitting candidate: layout, batch, memory, estimate, simulated step."""
    sim = r.sim or {}
    return {
        "name": r.cand.name, "layout": _layout(r), "recompute": r.cand.recompute,
        "schedule": r.cand.schedule, "global_batch": r.cand.global_batch,
        "num_microbatches": r.cand.num_microbatches, "memory_gib_per_gpu": _mem(r),
        "headroom_gib": usable_gib(res) - (r.cand.memory.total_gib if r.cand.memory else 0.0),
        "estimate_step_s": r.est.step_time_s,
        "estimate_breakdown_s": {"compute": r.est.dense_compute_s + r.est.moe_s - r.est.a2a_s,
                                 "a2a": r.est.a2a_s, "tp": r.est.tp_s, "cp": r.est.cp_s,
                                 "pp": r.est.pp_s, "bubble": r.est.bubble_s, "dp": r.est.dp_s,
                                 "optimizer": r.est.optimizer_s},
        "simulated_step_s": r.simulated_step_s,
        "simulated_breakdown_s": sim.get("breakdown_s"),
        "mfu": sim.get("mfu"), "tokens_per_s": sim.get("tokens_per_s"),
        "simulation_wall_s": r.sim_wall_s or None, "simulation_error": r.sim_error or None,
        "days_to_train": days_to_train(res, r) if r.sim else None,
    }


def usable_gib(res: DesignResult) -> float:
    """HBM a layout may fill: the GPU's GiB less the reserve (allocator, NCCL, fragments)."""
    return res.gpu.hbm_bytes * (1 - res.spec.hbm_reserve) / 2**30


def to_record(res: DesignResult) -> dict[str, Any]:
    """The JSON record (issue 14's keys, and what the report and figures draw from)."""
    ch, spec = res.chosen, res.spec
    band = error_band()
    ideal = ideal_days(res, ch)
    return {
        "model": res.model.name, "total_params": res.counts.total,
        "active_params": res.counts.active, "gpu": res.gpu.name,
        "chosen_gpus": res.gpus, "gpus": res.gpus,
        "fabric_gpus": res.asked_gpus,
        "sizing": res.sizing.to_dict() if res.sizing else {
            "gpus": res.gpus, "reason": res.why_fewer or "pinned by --gpus"},
        "fabric": {"name": res.fabric_name, "preset": res.fabric.preset,
                   "params": dict(res.fabric.params)},
        "goal": {"tokens": spec.tokens, "days": spec.days, "gpu_budget": spec.gpu_budget},
        "global_batch_requested": spec.global_batch, "global_batch": ch.cand.global_batch,
        "seq_len": spec.seq_len, "micro_batch_size": spec.micro_batch_size,
        "layout": _layout(ch), "recompute": ch.cand.recompute,
        "num_microbatches": ch.cand.num_microbatches, "memory_gib_per_gpu": _mem(ch),
        "hbm_gib": res.gpu.hbm_bytes / 2**30, "usable_hbm_gib": usable_gib(res),
        "step_time_s": ch.step_time_s, "simulated_step_s": ch.simulated_step_s,
        "estimate_step_s": ch.est.step_time_s, "step_mode": "fast",
        "breakdown_s": (ch.sim or {}).get("breakdown_s"),
        "mfu": (ch.sim or {}).get("mfu"),
        "tokens_per_s": ch.cand.tokens_per_step(spec.seq_len) / ch.step_time_s,
        "ideal_days": ideal, "goodput": res.bom.goodput,
        "days_to_train": days_to_train(res, ch),
        "gpu_hours": days_to_train(res, ch) * 24 * res.gpus,
        "error_band": band,
        "runner_up_tied": tied(res, ch, res.simulated[1]) if len(res.simulated) > 1 else None,
        "simulated_count": len(res.simulated),
        "fitting_count": len(res.ranked),
        "simulate_limits": [spec.simulate_min, spec.simulate_max],
        "unsimulated_within_band": _unsimulated_within_band(res),
        "candidates": [candidate_record(res, r) for r in res.ranked],
        "rejected": [{"name": c.name, "reason": c.reason}
                     for c in res.candidates if not c.fits],
        "placements": [{"kind": p.kind, "count": p.count, "size": p.size, "span": p.span,
                        "slowest_tier": p.slowest_tier, "slowest_bw_GBps": p.slowest_bw_GBps}
                       for p in res.placements],
        "bill_of_materials": {**res.bom.to_dict(),
                              "energy_usd": _energy_usd(res, days_to_train(res, ch))},
        "megatron_args": megatron_args(res.model, ch.cand, spec.seq_len, spec.micro_batch_size,
                                       spec.precision),
        "megatron_commit": MEGATRON_COMMIT,
        "step_scenario": step_scenario(spec, res.model, ch.cand, res.fabric),
        "timings_s": res.timings_s,
    }


def _unsimulated_within_band(res: DesignResult) -> int | None:
    """Candidates not simulated whose estimate per token is within the error band of the
    winner's simulated one (the simulator could not rule them out: the cap stopped it)."""
    width, seq = band_width(error_band()), res.spec.seq_len
    if width is None or width != width:
        return None
    best = res.chosen.per_token_s(seq)
    return sum(1 for r in res.ranked if not r.sim
               and abs(r.est_per_token_s(seq) - best) / best <= width)


def _energy_usd(res: DesignResult, days: float) -> float:
    return res.bom.power_mw * 1e3 * days * 24 * res.prices.electricity_usd_per_kwh
