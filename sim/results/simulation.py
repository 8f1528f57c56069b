"""What the group run's readers (attribution, run record, Chrome trace) read of a simulated
layer-stack run: a structural type, so that these records sit below the simulators that
produce the run (:class:`moesim.runner.group.Simulation` is the one that does).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from moesim.engine.fabric import Fabric
from moesim.engine.network import FlowNetwork
from moesim.router import RoutingResult


class GroupRun(Protocol):
    """One simulated layer-stack run: its scenario (``name``, ``seed``, ...), the fabric, the
    EP ranks' GPUs and slowdowns, the routings, the phase trace and the flow network."""

    scenario: Any
    fabric: Fabric
    gpus: np.ndarray
    slowdown: np.ndarray
    routings: list[RoutingResult]
    trace: Any  # moesim.workload.moe_stack.StackTrace: phases, start_s/end_s, a2a
    net: FlowNetwork

    @property
    def step_time_s(self) -> float: ...
