"""The two MoE failure modes, measured on a design: router skew and oversubscription.

* Skew: the chosen layout's EP group simulated with a Zipf router (expert popularity
  ~ 1/rank^alpha, alpha in :data:`ZIPF_ALPHAS`; 0 = uniform); the extra per-layer MoE time
  is composed into a step-time excess like the candidates' MoE part. Operator signal:
  max/mean tokens per expert per layer in the router logs (Megatron
  ``--moe-per-layer-logging``), and the grouped-GEMM time of the slowest EP rank.
* Oversubscription: the leaf (rail) uplink oversubscription of the same fabric family set to
  :data:`OVERSUBSCRIPTIONS`; an EP group that crosses the scale-out network is simulated on
  a small rail fabric of its own hosts (the chosen group if it crosses, else the simulated
  cross-node one, for comparison), and
  the chosen layout's analytical step on the oversubscribed full fabric is re-estimated.
  Operator signal: NIC and leaf-uplink counters (port_xmit_wait / PFC pauses, uplink
  utilisation) and the all-to-all kernel time per layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.model import ModelConfig
from moesim.plan.evaluate import EpSim, ep_scenario, simulate_ep
from moesim.router import RouterConfig

ZIPF_ALPHAS = (0.0, 0.5, 1.0)
OVERSUBSCRIPTIONS = (1.0, 2.0, 4.0)


@dataclass(frozen=True)
class SkewPoint:
    alpha: float
    sim: EpSim
    step_excess_s: float


@dataclass(frozen=True)
class OversubPoint:
    oversubscription: float
    sim: EpSim | None
    step_time_s: float  # chosen layout, analytical estimate on the oversubscribed fabric


def skew_sweep(model: ModelConfig, gpu: str, fabric: str, *, ep: int, etp: int,
               tokens_per_rank: int, seq_len: int, layer_multiplier: float,
               seed: int = 1) -> list[SkewPoint]:
    """Per-layer MoE time under Zipf skew; excess = delta x layers x micro-batches."""
    points: list[SkewPoint] = []
    for alpha in ZIPF_ALPHAS:
        router = RouterConfig(kind="zipf", alpha=alpha)
        sim = simulate_ep(ep_scenario(model, gpu, fabric, ep=ep, etp=etp,
                                      tokens_per_rank=tokens_per_rank, seq_len=seq_len,
                                      router=router, seed=seed))
        base = points[0].sim.moe_layer_s if points else sim.moe_layer_s
        points.append(SkewPoint(alpha, sim, (sim.moe_layer_s - base) * layer_multiplier))
    return points


def oversub_sims(model: ModelConfig, gpu: str, fabric: str, *, ep: int, etp: int,
                 gpus_per_host: int, tokens_per_rank: int, seq_len: int,
                 seed: int = 1) -> list[EpSim]:
    """The EP group's per-layer MoE time with the leaf uplinks oversubscribed.

    The fabric is a small two-tier rail fabric of the design's family whose one scalable
    unit is exactly the group's hosts: the leaves then carry only this group, as they carry
    only all-to-all traffic like it when every EP group of the job runs at once (simulating
    one group on a leaf sized for 32 hosts would leave its uplinks idle and hide the effect).
    """
    hosts = max(1, -(-ep * etp // gpus_per_host))
    small: tuple[tuple[str, object], ...] = (("hosts", hosts), ("hosts_per_su", hosts),
                                             ("tiers", 2))
    return [simulate_ep(ep_scenario(model, gpu, fabric, ep=ep, etp=etp,
                                    tokens_per_rank=tokens_per_rank, seq_len=seq_len,
                                    overrides=(*small, ("oversubscription", o)), seed=seed))
            for o in OVERSUBSCRIPTIONS]
