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

``--gpu GB200`` builds NVL72 racks instead (:func:`moesim.topologies.nvl72.nvl72`): 72 GPUs
per rack on one NVLink domain, one ConnectX NIC per GPU on a rail scale-out network of 4 rails,
one rack per scalable unit (18 trays per rail leaf), 2 tiers while the 4 x racks leaves fit
on one spine's ports (up to 16 racks, 1,152 GPUs), 3 tiers beyond.

A preset name, or a topology YAML file in the presets' format (``builder`` + ``params``,
:mod:`moesim.topologies.registry`), is taken as it is (the count must fit in it). All three
are what a step scenario's ``fabric.preset`` reads, so the chosen design re-runs there.
"""

from __future__ import annotations

import math
from typing import Any

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
NVL72_PRESET = "nvl72-gb200"  # builder nvl72; every sizing parameter is overridden
NVL72_GPUS = 72  # GPUs per rack (18 trays x 4)
NVL72_TRAYS = 18
NVL72_RAILS = 4  # one NIC per GPU of a tray


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


def unit_gpus(gpu: str) -> int:
    """GPUs a cluster of ``gpu`` is bought in: an HGX host (8) or an NVL72 rack (72)."""
    return NVL72_GPUS if gpu in topologies.constants.NVL72_GPUS else HGX_GPUS_PER_HOST


def check_count(gpus: int, gpu: str) -> None:
    """ConfigError unless ``gpus`` of kind ``gpu`` make whole hosts / racks of a buildable
    scale-out network."""
    if gpu not in topologies.constants.NVL72_GPUS:
        check_gpus(gpus)
        return
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < NVL72_GPUS \
            or gpus % NVL72_GPUS:
        lo = max(NVL72_GPUS, gpus - gpus % NVL72_GPUS) if isinstance(gpus, int) else NVL72_GPUS
        raise ConfigError("gpus", f"{gpus!r} is not a whole number of {gpu} NVL72 racks of "
                          f"{NVL72_GPUS} GPUs; use {lo} or {lo + NVL72_GPUS}")
    if gpus > max_rail_gpus():
        raise ConfigError("gpus", f"{gpus} exceeds the largest 3-tier scale-out network of "
                          f"{RADIX}-port switches ({max_rail_gpus()} GPUs)")


def nvl72_fabric(gpus: int, nic_gbit: int = 400, oversubscription: float = 1.0) -> FabricSpec:
    """GB200 NVL72 racks for ``gpus`` on a rail scale-out network (module docstring)."""
    check_count(gpus, "GB200")
    _check_network(nic_gbit, oversubscription)
    racks = gpus // NVL72_GPUS
    tiers = 2 if racks * NVL72_RAILS <= RADIX else 3
    params = {"racks": racks, "gpu": "GB200", "scale_out": "rail",
              "hosts_per_su": NVL72_TRAYS, "oversubscription": float(oversubscription),
              "tiers": tiers, "radix": RADIX, "nic_gbit": nic_gbit, "fabric": "ib"}
    return FabricSpec(preset=NVL72_PRESET, params=tuple(sorted(params.items())),
                      multipath=MULTIPATH, batch_window_rel=BATCH_WINDOW_REL)


def _check_network(nic_gbit: int, oversubscription: float) -> None:
    if nic_gbit not in NIC_GBITS:
        raise ConfigError("nic_gbit", f"must be one of {', '.join(map(str, NIC_GBITS))} "
                          f"(Gb/s per NIC), got {nic_gbit!r}")
    if not 1.0 <= oversubscription <= 16.0:
        raise ConfigError("oversubscription", f"must be in [1, 16] (leaf down:up), got "
                          f"{oversubscription!r}")


def rail_fabric(gpus: int, gpu: str, nic_gbit: int = 400,
                oversubscription: float = 1.0) -> FabricSpec:
    """The rail fat tree for ``gpus`` HGX GPUs (module docstring)."""
    check_gpus(gpus)
    _check_network(nic_gbit, oversubscription)
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
    if fabric == AUTO and gpu in topologies.constants.NVL72_GPUS:
        return nvl72_fabric(gpus, nic_gbit, oversubscription)
    if fabric == AUTO:
        return rail_fabric(gpus, gpu, nic_gbit, oversubscription)
    try:
        topologies.registry.read_preset(fabric)  # a shipped name or a YAML file
    except topologies.TopologyError as exc:
        raise ConfigError("fabric", f"{exc.problem}; or use --fabric auto") from exc
    return FabricSpec(preset=fabric, multipath=MULTIPATH, batch_window_rel=BATCH_WINDOW_REL)


def fabric_label(fs: FabricSpec) -> str:
    """A short human name: the preset, or the rail fat tree's shape for ``auto``."""
    p: dict[str, Any] = dict(fs.params)
    if fs.preset == NVL72_PRESET and "racks" in p:
        return (f"{p['racks']} x GB200 NVL72 racks on a rail scale-out network, {p['tiers']} "
                f"tiers, {float(p.get('oversubscription', 1.0)):g}:1, "
                f"{float(p.get('nic_gbit', 400)):g}G NICs")
    if fs.preset == RAIL_PRESET and "hosts" in p:
        over = float(p.get("oversubscription", 1.0))
        nic = float(p.get("nic_gbit", 400))
        return (f"rail fat tree, {p['hosts']} x HGX {p.get('gpu', 'H200')}, {p['tiers']} tiers, "
                f"{over:g}:1, {nic:g}G NICs")
    return fs.preset
