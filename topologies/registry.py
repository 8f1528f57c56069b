"""Topology builders by name, and YAML presets in ``topologies/presets/<name>.yaml``.

A preset file has ``builder`` (a registered builder name), optional ``description`` and
``params`` (keyword arguments of the builder, units in comments); anywhere a preset name is
accepted, a path to such a file (``*.yaml``) is too. ``load_preset(name,
**overrides)`` merges ``overrides`` over ``params``; unknown keys raise
:class:`~moesim.topologies.errors.TopologyError` naming the key and listing the allowed ones.
The built graph's ``name`` is the preset name unless ``name`` is overridden.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moesim.io import read_yaml
from moesim.topologies.deprecated import upgrade_params
from moesim.topologies.errors import TopologyError
from moesim.topologies.fat_tree import fat_tree, fat_tree_table
from moesim.topologies.hgx import hgx_node, hgx_table
from moesim.topologies.mpft import mpft_table, multi_plane_fat_tree
from moesim.topologies.nvl72 import nvl72, nvl72_table
from moesim.topologies.rail import rail_fat_tree, rail_table
from moesim.topologies.table import LinkGraph

if TYPE_CHECKING:
    import networkx as nx

Builder = Callable[..., "nx.DiGraph"]
PRESET_DIR = Path(__file__).parent / "presets"
PRESET_KEYS = ("builder", "description", "params")
YAML_SUFFIXES = (".yaml", ".yml")

TOPOLOGIES: dict[str, Builder] = {}


def register(name: str, builder: Builder) -> Builder:
    """Add ``builder`` under ``name``; a name already taken is an error."""
    if name in TOPOLOGIES:
        raise TopologyError("topology", f"duplicate name {name!r}; already registered")
    TOPOLOGIES[name] = builder
    return builder


for _builder in (hgx_node, rail_fat_tree, nvl72, multi_plane_fat_tree, fat_tree):
    register(_builder.__name__, _builder)

TABLES: dict[str, Callable[..., LinkGraph]] = {
    "hgx_node": hgx_table, "rail_fat_tree": rail_table, "nvl72": nvl72_table,
    "multi_plane_fat_tree": mpft_table, "fat_tree": fat_tree_table,
}
"""The shipped builders' :class:`LinkGraph` twins (same parameters, no networkx)."""


def _check_params(builder_name: str, params: Mapping[str, Any], field: str) -> None:
    allowed = list(inspect.signature(TOPOLOGIES[builder_name]).parameters)
    for key in params:
        if key not in allowed:
            raise TopologyError(f"{field}.{key}", f"unknown key for {builder_name}; allowed: "
                                                  f"{', '.join(allowed)}")


def build(topology: str, /, **params: Any) -> nx.DiGraph:
    """Build the registered ``topology`` with keyword ``params`` (``name`` names the graph)."""
    if topology not in TOPOLOGIES:
        raise TopologyError("topology",
                            f"unknown {topology!r}; allowed: {', '.join(TOPOLOGIES)}")
    params = upgrade_params(params, topology)
    _check_params(topology, params, topology)
    return TOPOLOGIES[topology](**params)


def preset_names() -> list[str]:
    """Names of the shipped presets (file stems under ``topologies/presets``)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def preset_path(name: str) -> Path:
    """The file of preset ``name``: a shipped preset, or a path to a ``.yaml``/``.yml`` file
    of the same shape (relative to the working directory)."""
    if name in preset_names():
        return PRESET_DIR / f"{name}.yaml"
    path = Path(name)
    if path.suffix not in YAML_SUFFIXES:
        raise TopologyError("preset", f"unknown {name!r}; allowed: {', '.join(preset_names())} "
                                      f"or a fabric file ending in .yaml")
    if not path.is_file():
        raise TopologyError("preset", f"no fabric file {name!r}")
    return path


def preset_label(name: str) -> str:
    """The graph name a preset gets: its name, or a fabric file's stem."""
    return name if name in preset_names() else Path(name).stem


def read_preset(name: str) -> dict[str, Any]:
    """The validated content of preset ``name`` (builder, description, params); ``name`` may
    be a shipped preset or a YAML file path (see :func:`preset_path`)."""
    data = read_yaml(preset_path(name), "preset")  # safe loader, size and alias limits
    if not isinstance(data, dict):
        raise TopologyError(f"preset {name}", "must be a mapping with builder and params")
    for key in data:
        if key not in PRESET_KEYS:
            raise TopologyError(f"preset {name}.{key}",
                                f"unknown key; allowed: {', '.join(PRESET_KEYS)}")
    if data.get("builder") not in TOPOLOGIES:
        raise TopologyError(f"preset {name}.builder", f"unknown {data.get('builder')!r}; "
                                                       f"allowed: {', '.join(TOPOLOGIES)}")
    data.setdefault("params", {})
    if isinstance(data["params"], Mapping):
        data["params"] = upgrade_params(data["params"], f"preset {name}.params")
    _check_params(data["builder"], data["params"], f"preset {name}.params")
    return data


def load_preset(preset: str, /, **overrides: Any) -> nx.DiGraph:
    """Build ``preset``, with ``overrides`` replacing its params (``name`` renames the graph).

    >>> g = load_preset("hgx-h800")
    >>> g.graph["name"], g.edges["h0/gpu0", "h0/nvsw"]["bw_GBps"]
    ('hgx-h800', 200.0)
    """
    builder, params = _preset_params(preset, overrides)
    return TOPOLOGIES[builder](**params)


def load_preset_table(preset: str, /, **overrides: Any) -> LinkGraph | None:
    """:func:`load_preset` as a :class:`LinkGraph` (the same graph, no networkx); None when
    the preset's builder was registered without one (:func:`register`)."""
    builder, params = _preset_params(preset, overrides)
    table = TABLES.get(builder)
    return None if table is None else table(**params)


def _preset_params(preset: str, overrides: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(builder name, its keyword arguments) of ``preset`` with ``overrides``."""
    data = read_preset(preset)
    overrides = upgrade_params(overrides, preset)
    _check_params(data["builder"], overrides, preset)
    return data["builder"], {"name": preset_label(preset), **data["params"], **overrides}
