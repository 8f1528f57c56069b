"""Scenarios: the validated description of one simulation, and its YAML loader."""

from moesim.scenario.load import load_scenario_file, scenario_from_dict
from moesim.scenario.schema import FabricSpec, Scenario, WorkloadSpec

__all__ = ["FabricSpec", "Scenario", "WorkloadSpec", "load_scenario_file", "scenario_from_dict"]
