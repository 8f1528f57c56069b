"""The fabric a design runs on: a rail fat tree built for its GPU count, a preset, or a file.

``fabric="auto"`` (the default) builds an HGX rail-optimized fat tree
(:func:`moesim.topologies.rail.rail_fat_tree`, through the ``rail-h200-4096`` preset's builder
with its parameters overridden) for exactly ``gpus / 8`` hosts:

* two tiers while the rail leaves fit under one spine layer (leaves = 8 rails x SUs of 32
  hosts <= switch radix 64: up to 256 hosts, 2,048 GPUs), three tiers beyond (pods of 4 SUs;
  a 64-port core reaches 64 pods = 65,536 GPUs, the largest count answered);
* leaf ``oversubscription`` (downlink : uplink bandwidth) and the NIC line rate
  ``nic_gbit`` as asked; switch ports run at the NIC rate (NVIDIA Quantum-2 QM9700: 64 x
  400 Gb/s; Spectrum-X SN5600: 64 x 800 Gb/s Ethernet; Quantum QM8700: 40 x 200 Gb/s is
  approximated by the same 64-port radix, an assumption).

A preset name, or a topology YAML file in the presets' format (``builder`` + ``params``,
:mod:`moesim.topologies.registry`), is taken as it is (the count must fit in it). All three
are what a step scenario's ``fabric.preset`` reads, so the chosen design re-runs there.
"""

from __future__ import annotations

import math

from moesim import topologies
from moesim.errors import ConfigError
from moesim.fabric.spec import FabricSpec

AUTO = "auto"
RAIL_PRESET = "rail-h200-4096"  # builder rail_fat_tree; every sizing parameter is overridden
HGX_GPUS_PER_HOST = 8
HOSTS_PER_SU = 32
RADIX = 64
NIC_GBITS = (200, 400, 800)  # ConnectX-6 HDR, ConnectX-7 NDR, ConnectX-8 XDR line rates
MULTIPATH = "dmodk"  # InfiniBand fat trees route by destination (as the step scenarios do)
BATCH_WINDOW_REL = 0.02  # finish batching of the shipped step scenarios
MAX_PODS = RADIX  # a core switch has one port per pod's spine of its group


def tiers_for(hosts: int) -> int:
    """2 while the rail leaves (8 per SU) fit on one spine's ports, else 3."""
    leaves = math.ceil(hosts / HOSTS_PER_SU) * HGX_GPUS_PER_HOST
    return 2 if leaves <= RADIX else 3


def max_rail_gpus() -> int:
    """GPUs of the largest 3-tier rail fat tree of :data:`RADIX`-port switches."""
    sus_per_pod = (RADIX // 2) // HGX_GPUS_PER_HOST
    return MAX_PODS * sus_per_pod * HOSTS_PER_SU * HGX_GPUS_PER_HOST


def check_gpus(gpus: int) -> None:
    """ConfigError unless ``gpus`` fills whole HGX hosts of a buildable rail fat tree."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < HGX_GPUS_PER_HOST:
        raise ConfigError("gpus", f"must be a whole number of {HGX_GPUS_PER_HOST}-GPU HGX "
                          f"hosts (8, 16, ..., {max_rail_gpus()}), got {gpus!r}")
    if gpus % HGX_GPUS_PER_HOST:
        lo = gpus - gpus % HGX_GPUS_PER_HOST
        raise ConfigError("gpus", f"{gpus} is not a whole number of {HGX_GPUS_PER_HOST}-GPU "
                          f"HGX hosts; use {lo} or {lo + HGX_GPUS_PER_HOST}")
    if gpus > max_rail_gpus():
        raise ConfigError("gpus", f"{gpus} exceeds the largest 3-tier rail fat tree of "
                          f"{RADIX}-port switches ({max_rail_gpus()} GPUs)")


def rail_fabric(gpus: int, gpu: str, nic_gbit: int = 400,
                oversubscription: float = 1.0) -> FabricSpec:
    """The rail fat tree for ``gpus`` HGX GPUs (module docstring)."""
    check_gpus(gpus)
    if nic_gbit not in NIC_GBITS:
        raise ConfigError("nic_gbit", f"must be one of {', '.join(map(str, NIC_GBITS))} "
                          f"(Gb/s per NIC), got {nic_gbit!r}")
    if not 1.0 <= oversubscription <= 16.0:
        raise ConfigError("oversubscription", f"must be in [1, 16] (leaf down:up), got "
                          f"{oversubscription!r}")
    if gpu not in topologies.constants.HGX_GPUS:
        raise ConfigError("gpu", f"{gpu} does not come in HGX hosts for a rail fat tree; "
                          f"allowed: {', '.join(topologies.constants.HGX_GPUS)}")
    hosts = gpus // HGX_GPUS_PER_HOST
    params = {"hosts": hosts, "gpu": gpu, "gpus_per_host": HGX_GPUS_PER_HOST,
              "hosts_per_su": HOSTS_PER_SU, "oversubscription": float(oversubscription),
              "tiers": tiers_for(hosts), "spine_oversubscription": 1.0, "radix": RADIX,
              "nic_gbit": nic_gbit, "fabric": "ib"}
    return FabricSpec(preset=RAIL_PRESET, params=tuple(sorted(params.items())),
                      multipath=MULTIPATH, batch_window_rel=BATCH_WINDOW_REL)


def fabric_spec(fabric: str, gpus: int, gpu: str, nic_gbit: int = 400,
                oversubscription: float = 1.0) -> FabricSpec:
    """``auto``, a preset name or a YAML file of a ``fabric:`` mapping -> a FabricSpec."""
    if fabric == AUTO:
        return rail_fabric(gpus, gpu, nic_gbit, oversubscription)
    try:
        topologies.registry.read_preset(fabric)  # a shipped name or a YAML file
    except topologies.TopologyError as exc:
        raise ConfigError("fabric", f"{exc.problem}; or use --fabric auto") from exc
    return FabricSpec(preset=fabric, multipath=MULTIPATH, batch_window_rel=BATCH_WINDOW_REL)


def fabric_label(fs: FabricSpec) -> str:
    """A short human name: the preset, or the rail fat tree's shape for ``auto``."""
    p = dict(fs.params)
    if fs.preset == RAIL_PRESET and "hosts" in p:
        over = float(p.get("oversubscription", 1.0))
        nic = float(p.get("nic_gbit", 400))
        return (f"rail fat tree, {p['hosts']} x HGX {p.get('gpu', 'H200')}, {p['tiers']} tiers, "
                f"{over:g}:1, {nic:g}G NICs")
    return fs.preset
