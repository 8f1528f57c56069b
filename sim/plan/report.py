"""The design as a Markdown report and a JSON record."""

from __future__ import annotations

import re
from typing import Any

from moesim.model import flops_per_token
from moesim.parallel.memory import GIB
from moesim.parallel.placement import placement_table
from moesim.plan.candidates import Candidate
from moesim.plan.design import DesignResult, Ranked
from moesim.validate.step import DEEPSEEK_MEASURED_COST_RATIO, MEASURED_OVERPREDICTION

DAY_S = 86400.0
SHOWN_REJECTED = 8


def _mem(c: Candidate) -> dict[str, float] | None:
    b = c.memory
    if b is None:
        return None
    return {"weights": b.weights_gib, "grads": b.grads_gib, "optimizer": b.optimizer_gib,
            "activations": b.activations_gib, "buffers": b.buffers_gib, "total": b.total_gib}


def _layout(c: Candidate) -> dict[str, int]:
    lay = c.layout
    return {k: getattr(lay, k) for k in ("tp", "pp", "vpp", "ep", "etp", "cp", "dp")}


def _days(res: DesignResult, step_s: float) -> float:
    return res.spec.tokens / res.spec.tokens_per_step * step_s / DAY_S


def to_record(res: DesignResult) -> dict[str, Any]:
    """The JSON record (keys of issue 4 and more)."""
    ch, spec = res.chosen, res.spec
    by_cand = {id(r.cand): r for r in res.ranked}
    cands = []
    for c in res.candidates:
        r = by_cand.get(id(c))
        cands.append({"layout": _layout(c) if not c.label else c.label, "fits": c.fits,
                      "reason": c.reason, "recompute": c.recompute,
                      "memory_gib_per_gpu": _mem(c),
                      "step_time_s": r.step_time_s if r else None,
                      "estimated_step_time_s": r.est.step_time_s if r else None,
                      "simulated": bool(r and r.sim)})
    return {
        "model": res.model.name, "total_params": res.counts.total,
        "active_params": res.counts.active, "gpus": spec.gpus, "gpu": res.gpu.name,
        "fabric": spec.fabric, "layout": _layout(ch.cand), "recompute": ch.cand.recompute,
        "num_microbatches": ch.est.microbatches, "memory_gib_per_gpu": _mem(ch.cand),
        "step_time_s": ch.step_time_s, "estimated_step_time_s": ch.est.step_time_s,
        "mfu": ch.mfu, "tokens_per_s": spec.tokens_per_step / ch.step_time_s,
        "days_to_train": _days(res, ch.step_time_s),
        "validation_overprediction": MEASURED_OVERPREDICTION,
        "validation_cost_ratio_deepseek_v3": DEEPSEEK_MEASURED_COST_RATIO,
        "gpu_hours": _days(res, ch.step_time_s) * 24 * spec.gpus,
        "candidates": cands, "bill_of_materials": res.bom.to_dict(),
        "megatron_args": ch.cand.layout.megatron_args(res.model.num_layers),
        "timings_s": res.timings_s,
    }


def _fmt_layout(r: Ranked) -> str:
    return r.cand.name.replace(" etp1", "")


def _header(res: DesignResult) -> list[str]:
    c, spec, ch = res.counts, res.spec, res.chosen
    days = _days(res, ch.step_time_s)
    return [
        f"# Training-cluster design: {res.model.name} on {spec.gpus} x {res.gpu.name} "
        f"({spec.fabric})", "",
        f"- **Total parameters {c.total / 1e9:,.0f}B** (what storage, optimizer state and "
        f"checkpoints follow); **active {c.active / 1e9:,.1f}B per token** (what compute "
        f"follows): {c.active / c.total:.1%} of the model works on each token.",
        f"- Routed experts hold {c.expert / 1e9:,.0f}B ({c.expert / c.total:.0%}); the "
        f"dense remainder (attention, embeddings, shared experts, router) is "
        f"{c.dense / 1e9:,.0f}B.",
        f"- Chosen layout: **{_fmt_layout(ch)}** ({ch.cand.recompute} recompute, "
        f"{ch.est.microbatches} micro-batches of {spec.micro_batch_size} x {spec.seq_len}): "
        f"{ch.cand.memory.total_gib if ch.cand.memory else 0:.1f} GiB per GPU of "
        f"{res.gpu.hbm_gib:g}.",
        f"- Step {ch.step_time_s:.2f} s (simulated MoE, composed), MFU {ch.mfu:.1%}, "
        f"{spec.tokens_per_step / ch.step_time_s / 1e6:.2f}M tokens/s: "
        f"{spec.tokens / 1e12:g}T tokens in **{days:.1f} days** "
        f"({days * 24 * spec.gpus / 1e6:.2f}M GPU-hours; target {spec.days:g} days: "
        f"{'met' if days <= spec.days else 'missed'}).",
        f"- How far off that may be: on the end-to-end measurements checked (`moesim "
        f"validate`) the same models ran {MEASURED_OVERPREDICTION - 1:.0%} faster than "
        f"measured (Mixtral 8x7B, 64 H100, Megatron-Core) and "
        f"{DEEPSEEK_MEASURED_COST_RATIO - 1:.0%} slower (DeepSeek-V3, 2048 H800); as "
        f"optimistic as the first, training takes {days * MEASURED_OVERPREDICTION:.1f} days.",
        f"- Compute budget: {_train_flops(res):.2e} model FLOPs (3 x forward, "
        f"{_fwd_flops(res) / 1e9:.0f} GFLOP per token at {spec.seq_len}); at this MFU the "
        f"{spec.days:g}-day target needs {_gpus_for_target(res):,.0f} GPUs.", "",
    ]


def _fwd_flops(res: DesignResult) -> float:
    return flops_per_token(res.model, res.spec.seq_len).total


def _train_flops(res: DesignResult) -> float:
    return 3 * _fwd_flops(res) * res.spec.tokens


def _gpus_for_target(res: DesignResult) -> float:
    rate = res.chosen.mfu * res.gpu.peak_tflops("bf16") * 1e12
    return _train_flops(res) / (res.spec.days * DAY_S * rate)


def _memory_table(res: DesignResult) -> list[str]:
    m = _mem(res.chosen.cand) or {}
    rows = ["## State budget per GPU (chosen layout, worst pipeline stage)", "",
            "| part | GiB |", "|---|---:|"]
    rows += [f"| {k} | {v:.1f} |" for k, v in m.items()]
    b = res.chosen.cand.memory
    if b is not None:
        rows += ["", f"Stage {b.stage} holds {b.params_per_gpu_dense / 1e9:.2f}B dense + "
                 f"{b.params_per_gpu_expert / 1e9:.2f}B expert parameters per GPU; BF16 "
                 "weights 2 B + FP32 grads 4 B + Adam/master 12 B sharded over DP (dense) and "
                 f"EDP={res.chosen.cand.layout.edp} (experts); usable HBM "
                 f"{res.gpu.hbm_bytes * (1 - res.spec.hbm_reserve) / GIB:.1f} GiB.", ""]
    return rows


def _candidates_table(res: DesignResult) -> list[str]:
    rows = ["## Candidate layouts", "",
            f"{len(res.candidates)} layouts enumerated, {len(res.ranked)} fit. Step times: "
            "*est.* analytical; *sim.* with the MoE part (all-to-all + experts) from the "
            "engine's run of one EP group, composed over the stage's layers and "
            "micro-batches (the full pipelined step simulation is issue 5).", "",
            "| layout | fits | recompute | GiB/GPU | EP span | est. s | sim. s | MFU |",
            "|---|---|---|---:|---|---:|---:|---:|"]
    shown = res.ranked[:10]
    keys = {r.ep_key for r in shown}
    for r in res.ranked:  # the best of every simulated EP group, so both sides are shown
        if r.sim and r.ep_key not in keys:
            keys.add(r.ep_key)
            shown.append(r)
    for r in shown:
        span = "NVLink" if r.cand.layout.ep * r.cand.layout.etp <= res.domain else "network"
        sim = f"{r.step_time_s:.2f}" if r.sim else "-"
        mem = r.cand.memory.total_gib if r.cand.memory else 0.0
        rows.append(f"| {_fmt_layout(r)} | yes | {r.cand.recompute} | {mem:.1f} | {span} | "
                    f"{r.est.step_time_s:.2f} | {sim} | {r.mfu:.1%} |")
    rows += ["", "Rejected (examples, one per kind of reason):", ""]
    seen: set[str] = set()
    for c in res.candidates:
        key = re.sub(r"[\d.,]+", "#", c.reason)[:24]
        if c.fits or key in seen or len(seen) >= SHOWN_REJECTED:
            continue
        seen.add(key)
        rows.append(f"- {c.name}: {c.reason}")
    return [*rows, ""]


def _mapping(res: DesignResult) -> list[str]:
    rows = ["## Mapping onto the fabric", "", "```", placement_table(res.placements), "```", ""]
    for p in res.placements:
        where = "stays inside NVLink" if p.span in ("gpu", "nvlink") else \
            f"crosses the scale-out network up to the {p.span} tier"
        rows.append(f"- **{p.kind}** ({p.count} groups of {p.size}) {where}; slowest link "
                    f"{p.slowest_tier} at {p.slowest_bw_GBps:g} GB/s per GPU.")
    e = res.chosen.est
    rows += ["", f"Cost per step (estimate): all-to-all {e.a2a_s:.2f} s, TP {e.tp_s:.2f} s, "
             f"PP sends {e.pp_s:.2f} s, pipeline bubble {e.bubble_s:.2f} s, exposed DP/EDP "
             f"gradient sync {e.dp_s:.2f} s, optimizer {e.optimizer_s:.2f} s.", ""]
    sims = sorted({(r.cand.layout.ep, r.est.tokens_per_rank): r.sim for r in res.ranked
                   if r.sim}.items())
    rows += ["EP inside versus across the NVLink domain (engine, one MoE layer fwd+bwd, "
             "per micro-batch):", "", "| ep | tokens/rank | a2a ms | experts ms | span |",
             "|---:|---:|---:|---:|---|"]
    for (ep, tok), s in sims:
        if s is not None:
            span = "NVLink" if ep <= res.domain else "network"
            rows.append(f"| {ep} | {tok} | {s.a2a_s * 1e3:.2f} | {s.experts_s * 1e3:.2f} | "
                        f"{span} |")
    return [*rows, ""]


def _modes(res: DesignResult) -> list[str]:
    rows = ["## Failure modes measured on this design", "",
            "**Router skew** (Zipf popularity over experts; chosen EP group on the engine):", "",
            "| alpha | max/mean per expert | max/mean per EP rank | MoE layer ms | "
            "step excess s |", "|---:|---:|---:|---:|---:|"]
    for p in res.skew:
        rows.append(f"| {p.alpha:g} | {p.sim.expert_ratio:.2f} | {p.sim.rank_ratio:.2f} | "
                    f"{p.sim.moe_layer_s * 1e3:.2f} | {p.step_excess_s:.2f} |")
    rows += ["", "Watch: tokens per expert per layer in the router logs (Megatron "
             "`--moe-per-layer-logging`), summed per EP rank: max/mean per rank multiplies the "
             "slowest rank's grouped-GEMM time, and so the step; the per-expert ratio alone "
             "overstates it when many experts share a rank.", ""]
    if res.oversub:
        rows += [f"**Oversubscription** of the leaf uplinks (the EP{res.oversub_ep} group across "
                 "nodes on the engine, on a rail fabric of its own hosts; the chosen layout's "
                 "step re-estimated on the full fabric, where its DP, EDP and PP groups cross "
                 "the leaves):",
                 "", "| leaf oversubscription | cross-node EP a2a ms/layer | chosen step s |",
                 "|---:|---:|---:|"]
        for o in res.oversub:
            a2a = f"{o.sim.a2a_s * 1e3:.2f}" if o.sim else "-"
            rows.append(f"| {o.oversubscription:g}:1 | {a2a} | {o.step_time_s:.2f} |")
        rows += ["", "Watch: NIC and leaf-uplink counters (utilisation, port_xmit_wait, PFC "
                 "pauses) and the all-to-all kernel time per layer in the profiler.", ""]
    return rows


def _bom(res: DesignResult) -> list[str]:
    b = res.bom
    sw = ", ".join(f"{k} {v}" for k, v in b.switches.items())
    cables = ", ".join(f"{k} {v}" for k, v in b.cables.items())
    return [
        "## Bill of materials", "",
        f"- {b.gpus} x {res.gpu.name} in {b.hosts} hosts of {b.gpus_per_host}; {b.nics} NICs; "
        f"switches: {sw}; cables (port-rate links): {cables}.",
        f"- Power: {b.power_mw:.2f} MW ({res.gpu.tdp_w:g} W per GPU x 1.82 host overhead, "
        "DGX H100 10.2 kW / 8 GPUs, x PUE 1.2 assumed).",
        f"- Checkpoint: {b.checkpoint_bytes / 1e12:.1f} TB (BF16 weights + FP32 master and "
        f"Adam moments); writing it in {b.checkpoint_write_s / 60:.0f} min needs "
        f"{b.storage_write_GBps:.0f} GB/s of storage write bandwidth.",
        f"- Failures: {b.failures_per_day:.2f} interruptions per day (Llama 3: 419 in 54 days "
        f"on 16,384 GPUs), MTBF {b.mtbf_hours:.1f} h; Young/Daly checkpoint every "
        f"{b.checkpoint_interval_min:.0f} min; spare pool {b.spare_hosts} hosts "
        "(3-day repair, 3 sigma).", ""]


def to_markdown(res: DesignResult) -> str:
    """The full report."""
    args = res.chosen.cand.layout.megatron_args(res.model.num_layers)
    tail = ["## Megatron-LM arguments", "", "```",
            f"--num-layers {res.model.num_layers} " + " ".join(args)
            + f" --micro-batch-size {res.spec.micro_batch_size} --global-batch-size "
              f"{res.spec.global_batch} --seq-length {res.spec.seq_len}"
            + (" --recompute-granularity full --recompute-method uniform"
               if res.chosen.cand.recompute == "full" else "")
            + " --use-distributed-optimizer", "```", "",
            f"_Design computed in {res.timings_s.get('total', 0):.1f} s._", ""]
    parts = (_header(res) + _memory_table(res) + _candidates_table(res) + _mapping(res)
             + _modes(res) + _bom(res) + tail)
    return "\n".join(parts)
