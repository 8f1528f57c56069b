"""Scenarios: the one language (``version: 2``) that every simulation mode reads.

:class:`Scenario` (model + hardware + fabric + layout + router + schedule + workload, and the
mode to run it in) and its YAML loader; old files convert (:mod:`moesim.scenario.legacy`).
"""

from moesim.scenario.load import load_scenario_file, scenario_from_dict
from moesim.scenario.schema import FabricSpec, GroupSpec, GroupWorkload
from moesim.scenario.spec import MODES, Placement, Scenario, Workload

__all__ = ["MODES", "FabricSpec", "GroupSpec", "GroupWorkload", "Placement", "Scenario",
           "Workload", "load_scenario_file", "scenario_from_dict"]
