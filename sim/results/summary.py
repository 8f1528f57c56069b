"""A readable text summary of a result record (what `moesim run` prints)."""

from __future__ import annotations

from moesim.results.result import Result
from moesim.results.step_summary import step_text


def record_text(res: Result) -> str:
    """The text report for the record's mode: the whole step's, or the EP group's."""
    return summary_text(res) if res.mode == "group" else step_text(res.to_dict())


def _ms(t_s: float) -> str:
    return f"{t_s * 1e3:.3f} ms"


def summary_text(res: Result, top: int = 5) -> str:
    """Group mode: step time, counterfactuals, straggler attribution and the busiest links."""
    if res.balanced_step_time_s is None or res.uncongested_step_time_s is None:
        raise ValueError("summary_text reads a group-mode record; record_text reads any")
    lines = [
        f"scenario {res.scenario} (seed {res.seed})",
        f"  step time        {_ms(res.step_time_s)}   ({res.tokens_per_s:,.0f} tokens/s)",
        f"  balanced router  {_ms(res.balanced_step_time_s)}   "
        f"(imbalance costs {_ms(res.step_time_s - res.balanced_step_time_s)})",
        f"  uncongested core {_ms(res.uncongested_step_time_s)}   "
        f"(fabric congestion costs {_ms(res.step_time_s - res.uncongested_step_time_s)})",
        f"  dropped tokens   {res.dropped_tokens}",
        "  where the step went: "
        + ", ".join(
            f"{k} {_ms(v)}" for k, v in sorted(res.breakdown_s.items(), key=lambda kv: -kv[1])
        ),
        "",
        "stragglers (excess over the counterfactual without that cause):",
    ]
    if not res.stragglers:
        lines.append("  none: the step is within tolerance of both counterfactuals")
    for s in res.stragglers[:top]:
        lines.append(f"  {s.cause:<17} +{_ms(s.excess_s):>12} over {s.phases} phase(s): {s.detail}")
    lines += ["", "busiest links (mean utilisation over the step):"]
    for link in res.links[:top]:
        lines.append(
            f"  {link.id:<28} {link.tier:<11} mean {link.mean_util:6.1%}"
            f"  peak {link.peak_util:6.1%}"
            f"  {link.bytes / 1e9:8.2f} GB  up to {link.peak_flows} flows"
        )
    ranks = sorted(res.ranks, key=lambda r: -r.compute_s)[:3]
    lines += ["", "ranks with the most compute (compute / a2a wait / idle):"]
    for r in ranks:
        lines.append(
            f"  rank {r.rank:<4} {r.gpu:<12} {_ms(r.compute_s)} / {_ms(r.comm_s)} / {_ms(r.idle_s)}"
        )
    return "\n".join(lines)
