"""A scenario -> the input of the simulator that runs it in a given mode.

Group mode takes the scenario's :meth:`~moesim.scenario.spec.Scenario.group_spec`; full and
fast modes take a :class:`~moesim.step.spec.StepSpec`, built here (the step sits above the
scenario language). A field the step refuses is named as the scenario file spells it
(``workload.compute_dtype``, not the step's ``step.compute_dtype``).
"""

from __future__ import annotations

import dataclasses

from moesim.errors import ConfigError
from moesim.scenario.schema import GroupSpec
from moesim.scenario.spec import MODES, Placement, Scenario, Workload
from moesim.step.spec import StepSpec

WORKLOAD_FIELDS = {f.name for f in dataclasses.fields(Workload)}


def spec_for(scn: Scenario, mode: str | None = None) -> StepSpec | GroupSpec:
    """What the simulator of ``mode`` (default: the scenario's) takes; ConfigError naming the
    field if the scenario cannot run so."""
    mode = mode or scn.mode
    if mode not in MODES:
        raise ConfigError("mode", f"unknown {mode!r}; allowed: {', '.join(MODES)}")
    return scn.group_spec() if mode == "group" else step_spec(scn)


def step_spec(scn: Scenario) -> StepSpec:
    """The whole step of ``scn`` (full and fast modes)."""
    try:
        return _step_spec(scn)
    except ConfigError as exc:
        where, _, name = exc.field.partition(".")
        if where == "step" and name in WORKLOAD_FIELDS:
            raise ConfigError(f"workload.{name}", exc.problem) from exc
        raise


def _step_spec(scn: Scenario) -> StepSpec:
    """The whole step of this scenario (full and fast modes)."""
    wl = scn.workload
    if scn.placement != Placement():
        raise ConfigError("placement", "only mode group places ranks; full and fast "
                          "modes run rank r on GPU r")
    if wl.tokens_per_rank is not None:
        raise ConfigError("workload.tokens_per_rank", "mode group only; a whole step holds "
                          "micro_batch_size x seq_len / (tp x cp) tokens per rank")
    if not wl.backward:
        raise ConfigError("workload.backward", "a whole step always runs the backward; "
                          "false is for mode group")
    return StepSpec(
        model=scn.cut_model(), layout=scn.layout, gpu=scn.gpu, fabric=scn.fabric,
        schedule=scn.schedule, microbatches=wl.microbatches(scn.layout.dp),
        micro_batch_size=wl.micro_batch_size, seq_len=wl.seq_len, router=scn.router,
        dispatch_dtype=wl.dispatch_dtype, combine_dtype=wl.combine_dtype,
        grad_reduce_dtype=wl.grad_reduce_dtype, compute_dtype=wl.compute_dtype,
        dispatcher=wl.dispatcher, dedup=wl.dedup, lm_head=wl.lm_head,
        dp_overlap=wl.dp_overlap, fb_overlap=wl.fb_overlap, slow_gpus=scn.slow_gpus,
        seed=scn.seed, recompute=wl.recompute, mtp_layers=wl.mtp_layers,
    )

