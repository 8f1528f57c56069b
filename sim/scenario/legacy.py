"""The two old scenario languages -> the one language (``version: 2``).

Before version 2 a layer-stack file (``scenarios/*.yaml``, ``moesim run``) and a whole-step
file (``scenarios/steps/*.yaml``, ``moesim step``) had their own keys. :func:`convert` maps
either onto the one language, keeping every value and writing out the defaults where the old
language's differed from the new one's (a layer-stack file: ECMP, exact timing, 4 layers,
EP8; a step file: D-mod-K with 2% finish batching when it named no fabric). Keys it does not
know are carried over to where they would sit, so the loader names them.

>>> convert({"workload": {"ep": 4, "layers": 2}})["layout"]
{'ep': 4, 'dp': 4}
>>> convert({"layout": {"pp": 2, "ep": 4, "dp": 4}, "global_batch": 8})["workload"]
{'global_batch': 8}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from moesim.scenario.checks import check_count

LEGACY_NOTICE = "old scenario format (no version:), converted to version 2; see moesim.scenario"
COMMON = ("name", "description", "seed", "model", "router")
HARDWARE = ("gpu", "slow_gpus")
STEP_TOP = ("layout", "schedule", "mode")
STEP_WORKLOAD = ("global_batch", "micro_batch_size", "seq_len", "dispatch_dtype",
                 "combine_dtype", "grad_reduce_dtype", "compute_dtype", "dispatcher", "dedup",
                 "lm_head", "dp_overlap", "fb_overlap", "recompute", "mtp_layers")
GROUP_FABRIC_DEFAULTS = {"multipath": "ecmp", "batch_window_rel": 0.0}
STEP_FABRIC_DEFAULT = {"preset": "hgx-h100", "multipath": "dmodk", "batch_window_rel": 0.02}
GROUP_WORKLOAD_DEFAULTS = {"ep": 8, "layers": 4, "tokens_per_rank": 4096, "seq_len": 4096}


def is_legacy(data: object) -> bool:
    """A mapping without ``version``: a file of one of the old languages."""
    return isinstance(data, Mapping) and "version" not in data


def is_step(data: Mapping[str, Any]) -> bool:
    """Old whole-step file (any step key), else old layer-stack file."""
    return any(k in data for k in (*STEP_TOP, *STEP_WORKLOAD))


def convert(data: Mapping[str, Any]) -> dict[str, Any]:
    """The version-2 mapping of an old layer-stack or step mapping."""
    out: dict[str, Any] = {"version": 2}
    out.update({k: data[k] for k in COMMON if k in data})
    hardware = {k: data[k] for k in HARDWARE if k in data}
    if hardware:
        out["hardware"] = hardware
    known = {*COMMON, *HARDWARE, "fabric", "workload", *STEP_TOP, *STEP_WORKLOAD}
    out.update({k: v for k, v in data.items() if k not in known})  # the loader names them
    out.update(_step(data) if is_step(data) else _group(data))
    return out


def _step(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: data[k] for k in STEP_TOP if k in data}
    out["fabric"] = data.get("fabric", STEP_FABRIC_DEFAULT)
    out.setdefault("mode", "full")
    workload = {k: data[k] for k in STEP_WORKLOAD if k in data}
    if workload:
        out["workload"] = workload
    if "workload" in data:
        out.setdefault("workload", {})["workload"] = data["workload"]  # named as unknown
    return out


def _group(data: Mapping[str, Any]) -> dict[str, Any]:
    fabric = data.get("fabric", {})
    if isinstance(fabric, Mapping):
        fabric = {**fabric, **{k: v for k, v in GROUP_FABRIC_DEFAULTS.items()
                              if k not in fabric}}
    old = data.get("workload", {})
    if not isinstance(old, Mapping):
        return {"mode": "group", "fabric": fabric, "workload": old}
    wl = {**GROUP_WORKLOAD_DEFAULTS, **old}
    ep, tokens = wl.pop("ep"), wl.pop("tokens_per_rank")
    seq = check_count(wl["seq_len"], "seq_len", "workload.seq_len")
    if check_count(tokens, "tokens_per_rank", "workload.tokens_per_rank") % seq or tokens < seq:
        wl["tokens_per_rank"] = tokens  # part of a sequence: group mode keeps the count
    else:
        wl["micro_batch_size"] = tokens // seq
    placement = {k: wl.pop(k) for k in ("first_gpu", "gpu_stride") if k in wl}
    out = {"mode": "group", "fabric": fabric, "layout": {"ep": ep, "dp": ep}, "workload": wl}
    if placement:
        out["placement"] = placement
    return out
