"""The design as a Markdown report, written from the JSON record (:mod:`moesim.plan.record`),
so the report, the JSON and the HTML/figures cannot disagree."""

from __future__ import annotations

import shlex
from typing import Any

BREAKDOWN_LABELS = {"compute": "compute", "a2a_exposed": "exposed all-to-all",
                    "tp_exposed": "TP", "cp_exposed": "CP", "bubble": "bubble",
                    "dp_exposed": "DP", "optimizer": "optimizer"}
SHOWN = 16


def _lay(layout: dict[str, int]) -> str:
    return " ".join(f"{k}{v}" for k, v in layout.items() if k != "etp" or v != 1)


def _header(rec: dict[str, Any]) -> list[str]:
    band = rec["error_band"]
    sz = rec["sizing"]
    gb = rec["global_batch"]
    lay, unit = rec["layout"], rec["layout"]["dp"] * rec["micro_batch_size"]
    rounds = lay["vpp"] > 1  # interleaved: whole rounds of pp micro-batches
    batch = ("" if gb == rec["global_batch_requested"] else
             f" (asked {rec['global_batch_requested']}: adjusted to the nearest multiple of "
             f"dp x micro-batch{' x pp' if rounds else ''} = "
             f"{unit * (lay['pp'] if rounds else 1)})")
    lines = [
        f"# Training-cluster design: {rec['model']} on {rec['chosen_gpus']} x {rec['gpu']}", "",
        f"- **Total parameters {rec['total_params'] / 1e9:,.0f}B**, **active "
        f"{rec['active_params'] / 1e9:,.1f}B per token**.",
        f"- **{rec['chosen_gpus']} GPUs**: {sz['reason']}.",
        f"- Fabric: {rec['fabric']['name']}.",
        f"- Chosen layout: **{_lay(rec['layout'])}** ({rec['recompute']} recompute, "
        f"{rec['num_microbatches']} micro-batches; global batch {gb} sequences of "
        f"{rec['seq_len']}{batch}): {rec['memory_gib_per_gpu']['total']:.1f} GiB per GPU of "
        f"{rec['usable_hbm_gib']:.1f} GiB usable ({rec['hbm_gib']:.1f} GiB that nvidia-smi "
        "reports, less the allocator/NCCL reserve).",
        f"- Step **{rec['simulated_step_s']:.2f} s** (whole-step simulator, fast mode; the "
        f"estimate said {rec['estimate_step_s']:.2f} s), MFU {rec['mfu']:.1%}, "
        f"{rec['tokens_per_s'] / 1e6:.2f}M tokens/s.",
        f"- {rec['goal']['tokens'] / 1e12:g}T tokens: {rec['ideal_days']:.1f} days of steps; "
        f"**{rec['days_to_train']:.1f} days** with interruptions and checkpoints charged "
        f"(goodput {rec['goodput']:.1%}); target {rec['goal']['days']:g} days: "
        f"{'met' if rec['days_to_train'] <= rec['goal']['days'] else _missed(rec)}.",
    ]
    if band:
        lines.append(f"- How far off that may be: {band['sentence']} (`moesim validate`; "
                     "two layouts closer than the band's width are called tied below).")
    else:
        lines.append("- Validation error band: not available in this build "
                     "(`moesim.results.band` missing); treat the step as unvalidated.")
    return [*lines, ""]


def _missed(rec: dict[str, Any]) -> str:
    """'missed', with the GPUs the target needs at this throughput per GPU (linear scaling)."""
    need = rec["chosen_gpus"] * rec["days_to_train"] / rec["goal"]["days"]
    sized = "tried" in rec["sizing"]  # the count was searched, not pinned by --gpus
    return (f"missed (at this throughput per GPU it needs about {need:,.0f} GPUs"
            + ("; the sizing above says why no larger count was taken)" if sized else
               "; run without --gpus to size the cluster)"))


def _why(rec: dict[str, Any]) -> list[str]:
    sims = [c for c in rec["candidates"] if c["simulated_step_s"] is not None]
    if len(sims) < 2:
        return []
    win, cats = sims[0], list(BREAKDOWN_LABELS)
    tied = rec["runner_up_tied"]
    verdict = {True: "**tied** with the winner within the validation error band",
               False: "outside the error band", None: "(no error band to judge a tie)"}[tied]
    rows = ["## Why this layout", "",
            f"{len(sims)} of the {rec['fitting_count']} layouts that fit ran through the "
            f"whole-step simulator (fast mode){_unsimulated(rec)}. The "
            f"runner-up, {_lay(sims[1]['layout'])}, is {verdict}: "
            f"{(sims[1]['days_to_train'] / win['days_to_train'] - 1):+.1%} days.", "",
            "| layout | sim. s | est. s | days | " + " | ".join(BREAKDOWN_LABELS.values())
            + " | headroom GiB |", "|---" * (5 + len(cats)) + "|"]
    for c in sims[:SHOWN]:
        b = c["simulated_breakdown_s"] or {}
        diffs = [f"{b.get(k, 0.0):.2f}" if c is win else
                 f"{b.get(k, 0.0) - (win['simulated_breakdown_s'] or {}).get(k, 0.0):+.2f}"
                 for k in cats]
        rows.append(f"| {_lay(c['layout'])} | {c['simulated_step_s']:.2f} | "
                    f"{c['estimate_step_s']:.2f} | {c['days_to_train']:.1f} | "
                    + " | ".join(diffs) + f" | {c['headroom_gib']:.1f} |")
    rows += ["", "The winner's row gives its breakdown in seconds; the others give their "
             "difference from it (per step; batches differ when dp does).", ""]
    return rows


def _unsimulated(rec: dict[str, Any]) -> str:
    """How many the simulator left out although the band could not rule them out."""
    n, (low, cap) = rec["unsimulated_within_band"], rec["simulate_limits"]
    if not n:
        return ""
    return (f"; {n} more are within the validation error band of the winner by estimate "
            f"and were not simulated (at least {low}, at most {cap} are: `--simulate-min`, "
            "`--simulate-max`)")


def _mapping(rec: dict[str, Any]) -> list[str]:
    rows = ["## Which group crosses which link", ""]
    for p in rec["placements"]:
        where = ("stays inside NVLink" if p["span"] in ("gpu", "nvlink") else
                 f"crosses the scale-out network up to the {p['span']} tier")
        rows.append(f"- **{p['kind']}** ({p['count']} groups of {p['size']}) {where}; "
                    f"slowest link {p['slowest_tier']} at {p['slowest_bw_GBps']:g} GB/s.")
    return [*rows, ""]


def _bom(rec: dict[str, Any]) -> list[str]:
    b = rec["bill_of_materials"]
    cost = b["cost_usd"]
    sw = ", ".join(f"{k} {v}" for k, v in b["switches"].items())
    cables = ", ".join(f"{k} {v}" for k, v in b["cables"].items())
    parts = ", ".join(f"{k} ${v / 1e6:,.1f}M" for k, v in cost.items() if k != "total")
    return [
        "## Bill of materials", "",
        f"- {b['gpus']} x {rec['gpu']} in {b['hosts']} hosts of {b['gpus_per_host']} "
        f"(+{b['spare_hosts']} spare hosts: 3-day repair, 3 sigma); {b['nics']} NICs; "
        f"switches {sw}; cables {cables}; {b['optics']} optical transceivers.",
        f"- Power {b['power_mw']:.2f} MW with PUE 1.2 (network {b['network_power_kw']:.0f} kW "
        "of it before PUE).",
        f"- Cost **${cost['total'] / 1e6:,.1f}M** ({parts}); energy for the run "
        f"${b['energy_usd'] / 1e6:,.2f}M. Prices: {b['prices_source']} (override with "
        "`--prices FILE.yaml`).",
        f"- Checkpoint {b['checkpoint_bytes'] / 1e12:.1f} TB, {b['storage_write_GBps']:.0f} GB/s "
        f"to write it in {b['checkpoint_write_s'] / 60:.0f} min; interruptions "
        f"{b['failures_per_day']:.2f}/day (Llama 3 rate), MTBF {b['mtbf_hours']:.1f} h; "
        f"checkpoint every {b['checkpoint_interval_min']:.0f} min (Young/Daly).", ""]


def _megatron(rec: dict[str, Any]) -> list[str]:
    args = rec["megatron_args"]
    lines, line = [], ""
    for tok in args:
        if tok.startswith("--") and len(line) > 70:
            lines.append(line + " \\")
            line = ""
        line = f"{line} {shlex.quote(tok)}".strip()
    lines.append(line)
    return ["## Megatron-LM arguments", "",
            f"(flag names checked against Megatron-LM {rec['megatron_commit'][:7]}; data, "
            "tokenizer and checkpoint paths are yours)", "", "```", *lines, "```", ""]


def to_markdown(rec: dict[str, Any]) -> str:
    """The report of a design record."""
    parts = _header(rec) + _why(rec) + _mapping(rec) + _bom(rec) + _megatron(rec)
    parts.append(f"_Design computed in {rec['timings_s'].get('total', 0):.1f} s._")
    return "\n".join(parts) + "\n"
