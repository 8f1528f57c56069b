"""A readable text report of a whole-step record (what ``moesim run`` prints in full and fast
mode); it reads the record only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _ms(time_s: float) -> str:
    return f"{time_s * 1e3:10.1f} ms"


def _header(record: Mapping[str, Any]) -> list[str]:
    put = record["setting"]
    degrees = " ".join(f"{k}{v}" for k, v in put["layout"].items())
    return [
        f"step {record['scenario']} ({record['mode']} mode): {put['description']}".rstrip(": "),
        f"  {put['model']} on {put['world_size']} {put['gpu']}, fabric {put['fabric']}",
        f"  layout {degrees} (edp{put['edp']}), schedule {put['schedule']}, "
        f"{put['microbatches']} micro-batches x {put['micro_batch_size']} x {put['seq_len']} "
        "tokens per pipeline",
    ]


def _breakdown(record: Mapping[str, Any]) -> list[str]:
    step_s = record["step_time_s"]
    lines = [f"where the step went (rank {record['last_rank']}, which ended it last):"]
    for name, time_s in record["breakdown_s"].items():
        lines.append(f"  {name:<12}{_ms(time_s)}  {time_s / step_s:6.1%}")
    return lines


def _contributor_line(c: Mapping[str, Any]) -> str:
    where = f"rank {c['rank']}" if c["rank"] >= 0 else ""
    if c["kind"] == "link":
        where = c["link"]
    if c["kind"] == "compute":
        where = ""  # the detail names the rank and stage
    extra = f", excess {c['excess_s'] * 1e3:.2f} ms" if c["kind"] == "straggler" else ""
    if c["experts"]:
        extra += f", layer {c['layer']} experts {list(c['experts'])}"
    detail = f" ({c['detail']})" if c["detail"] else ""
    return f"  {c['cause']:<17}{where:<28}{c['time_s'] * 1e3:9.2f} ms{extra}{detail}"


def _critical(path: Mapping[str, Any]) -> list[str]:
    step_s = path["step_time_s"]
    cats = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in path["by_category_s"].items() if v > 0)
    stages = ", ".join(f"{i}:{v * 1e3:.1f}" for i, v in enumerate(path["by_stage_s"]) if v > 0)
    lines = [
        f"critical path (from rank {path['end_rank']}'s end back to t=0, "
        f"{path['n_segments']} segments, {step_s * 1e3:.1f} ms):",
        f"  by category (ms): {cats}",
        f"  by stage (ms):    {stages}",
    ]
    lead = path.get("straggler")
    if lead:
        lines.append(f"  worst straggler: {lead['cause']} on rank {lead['rank']}, "
                     f"{lead['time_s'] * 1e3:.2f} ms of waiting on the path")
    lines.append("  largest named causes (they overlap; time on the path):")
    lines += [_contributor_line(c) for c in path["contributors"]]
    return lines


def step_text(record: Mapping[str, Any]) -> str:
    """Step time, throughput, MFU, the breakdown, stage ends and the critical path."""
    lines = [
        *_header(record),
        "",
        f"  step time   {_ms(record['step_time_s'])}   {record['tokens_per_s']:,.0f} tokens/s",
        f"  MFU         {record['mfu']:10.1%}      {record['tflops_per_gpu']:.0f} TFLOP/s per GPU"
        " (model FLOPs, BF16 dense peak)",
        "",
        *_breakdown(record),
        "",
        "end of each pipeline stage's last op: "
        + ", ".join(f"{t * 1e3:.1f}" for t in record["stage_makespan_s"]) + " ms",
    ]
    path = record.get("critical_path")
    if path:
        lines += ["", *_critical(path)]
    return "\n".join(lines)
