"""Runners by case kind: each turns a :class:`~moesim.validate.cases.Case` into a prediction.

A runner returns ``(predicted, detail)``; ``predicted`` is None when the case cannot be
simulated yet. Runners are found by name in :data:`RUNNERS` (a duplicate name is an error).
"""

from __future__ import annotations

from collections.abc import Callable

from moesim.errors import ConfigError
from moesim.hardware import GemmShape, gemm_flops, gemm_time_s, get_gpu
from moesim.model import get_model, param_counts
from moesim.registry import Registry
from moesim.validate.cases import Case
from moesim.validate.checkpoint import checkpoint_elements, fp8_scale_elements
from moesim.validate.deepep import DeepEPSetup, simulate_deepep
from moesim.validate.deepep_ll import LowLatencySetup, simulate_low_latency
from moesim.validate.nccl import simulate_alltoall
from moesim.validate.step import (
    bridge_spec,
    host_detail,
    simulate_bridge,
    simulate_gpu_hours,
    simulate_mixtral,
    stage_phases,
    step_detail,
)

Prediction = tuple[float | None, str]
Runner = Callable[[Case], Prediction]

RUNNERS = Registry[Runner]("validate.kind", "runner")


def register_runner(kind: str, runner: Runner) -> Runner:
    """Add ``runner`` for case ``kind``; a name already taken is an error."""
    return RUNNERS.add(kind, runner)


def run_case(case: Case) -> Prediction:
    """The prediction of ``case`` by its kind's runner."""
    return RUNNERS.lookup(case.kind)(case)


def _deepep(case: Case) -> Prediction:
    res = simulate_deepep(DeepEPSetup(ep=int(str(case.arg("ep")))), str(case.arg("kernel")))
    sides = ", ".join(f"{tier} {rate:.1f} GB/s ({util:.0%})" for tier, rate, util in res.busiest)
    implied = ", ".join(f"{tier} {rate:.1f}" for tier, rate in
                        res.implied_GBps(case.published).items())
    detail = (f"kernel {res.time_s * 1e3:.3f} ms, {res.logical_bytes / 1e6:.1f} MB logical/rank;"
              f" busiest link per tier: {sides}: {res.binding_tier}-bound; the published "
              f"figure implies {implied} GB/s; "
              f"{res.bw_no_local_charge_GBps:.1f} GB/s if local copies were free")
    return res.bw_GBps, detail


def _deepep_ll(case: Case) -> Prediction:
    res = simulate_low_latency(LowLatencySetup(ep=int(str(case.arg("ep")))),
                               str(case.arg("kernel")))
    sides = ", ".join(f"{tier} {rate:.1f} GB/s ({util:.0%})" for tier, rate, util in res.busiest)
    published_GBps = res.logical_bytes / (case.published * 1e-6) / 1e9
    detail = (f"{res.bw_GBps:.1f} GB/s logical vs {published_GBps:.1f} published, "
              f"{res.logical_bytes / 1e6:.2f} MB/rank; busiest link per tier: {sides}: "
              f"{res.busiest[0][0]}-bound; incl. {res.receive_pass_s * 1e6:.1f} us receive-phase "
              f"HBM pass; {res.time_no_local_charge_s * 1e6:.1f} us if local copies were free")
    return res.time_s * 1e6, detail


def _nccl(case: Case) -> Prediction:
    hosts = int(str(case.arg("hosts")))
    res = simulate_alltoall(hosts)
    value = res.bus_bw_GBps if hosts == 1 else res.nic_bw_GBps
    detail = f"algBw {res.alg_bw_GBps:.1f}, busBw {res.bus_bw_GBps:.1f} GB/s"
    return value, detail


def _params(case: Case) -> Prediction:
    counts = param_counts(get_model(str(case.arg("model"))))
    return float(counts.total), f"active {counts.active / 1e9:.2f}B (MTP excluded)"


def _checkpoint(case: Case) -> Prediction:
    model = get_model(str(case.arg("model")))
    counts, scales = param_counts(model), fp8_scale_elements(model)
    detail = (f"{counts.total / 1e9:.2f}B params + {counts.mtp_stored / 1e9:.2f}B MTP as stored"
              f" + {scales / 1e9:.4f}B fp32 block scales; {case.note}")
    return float(checkpoint_elements(model)), detail


def _gemm(case: Case) -> Prediction:
    gpu, size, dtype = get_gpu(str(case.arg("gpu"))), int(str(case.arg("size"))), str(
        case.arg("dtype"))
    square = GemmShape(size, size, size, dtype)
    time_s, flops = float(gemm_time_s(gpu, square)), float(gemm_flops(square))
    return flops / time_s / 1e12, f"{time_s * 1e3:.3f} ms incl. one launch"


def _training_cost(case: Case) -> Prediction:
    scenario = str(case.arg("scenario"))
    hours, result = simulate_gpu_hours(scenario)
    detail = f"{step_detail(result)}; {case.note}"
    if dict(case.args).get("phases"):  # the published per-phase breakdown of the same step
        detail += f"; {stage_phases(scenario).line()}"
    return hours, detail


def _bridge(case: Case) -> Prediction:
    try:
        bridge_spec(case)
    except ConfigError as err:  # a layout moesim cannot express yet: listed, not simulated
        return None, f"not expressible yet: {err.field}: {err.problem}"
    value, result = simulate_bridge(case)
    return value, f"{step_detail(result)}; {host_detail(case, value, result)}; {case.note}"


def _step(case: Case) -> Prediction:
    tflops, result = simulate_mixtral(int(str(case.arg("microbatches"))))
    return tflops, f"{step_detail(result)}; {case.note}"


for _kind, _runner in (("deepep", _deepep), ("deepep_ll", _deepep_ll), ("nccl_alltoall", _nccl),
                       ("params", _params), ("checkpoint", _checkpoint), ("gemm", _gemm),
                       ("step", _step), ("training_cost", _training_cost), ("bridge", _bridge)):
    register_runner(_kind, _runner)
