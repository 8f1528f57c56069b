"""Which fabric a run uses: a topology preset plus overrides, how it routes, what is broken."""

from __future__ import annotations

from dataclasses import dataclass

from moesim.engine.routing import MULTIPATH_MODES
from moesim.errors import ConfigError


@dataclass(frozen=True)
class FabricSpec:
    """Which fabric (a topology preset plus overrides), how it routes, what is broken."""

    preset: str = "hgx-h100"
    params: tuple[tuple[str, object], ...] = ()  # overrides of the preset's builder params
    multipath: str = "ecmp"
    batch_window_rel: float = 0.0  # 0 = exact; see moesim.engine.network
    pxn: bool = False  # cross-rail traffic via NVLink to the rail-matched GPU (NCCL PXN)
    derate: bool = True  # apply the achievable-bandwidth calibration per link tier
    faults: tuple[tuple[tuple[str, object], ...], ...] = ()

    def __post_init__(self) -> None:
        if self.multipath not in MULTIPATH_MODES:
            allowed = ", ".join(MULTIPATH_MODES)
            raise ConfigError("fabric.multipath", f"unknown '{self.multipath}'; allowed: {allowed}")
        if not 0 <= self.batch_window_rel <= 0.2:
            raise ConfigError("fabric.batch_window_rel", "must be in [0, 0.2] (0 = exact)")
