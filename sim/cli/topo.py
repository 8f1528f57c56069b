"""``moesim topo``: list the fabric presets, or describe one (a preset name or a YAML file)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from moesim import topologies
from moesim.cli.files import check_outputs, output_file
from moesim.cli.progress import quiet_option
from moesim.errors import ConfigError


@click.command("topo")
@click.argument("name", required=False)
@click.option("--list", "as_list", is_flag=True,
              help="One line per shipped preset: GPUs, hosts, NVLink domain, NIC rate, "
                   "oversubscription.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON.")
@click.option("--draw", type=click.Path(dir_okay=False), default=None,
              help="Draw the fabric to a PNG/SVG file.")
@quiet_option
def topo(name: str | None, as_list: bool, as_json: bool, draw: str | None, quiet: bool) -> None:
    """Describe fabric NAME (a preset or a fabric YAML file): GPUs, NICs, switches and links
    per tier, bisection bandwidth, oversubscription. With --list: every shipped preset."""
    from moesim.cli.progress import Ticker
    from moesim.topologies.describe import block, fabric_record, one_line

    if as_list == (name is not None):
        raise ConfigError("topo", "give a preset name (or a fabric .yaml file) or --list")
    if as_list:
        names = topologies.preset_names()
        with Ticker("topo --list", quiet=quiet):
            recs = {n: fabric_record(topologies.load_preset(n), _about(n), bisection=False)
                    for n in names}
        click.echo(json.dumps(list(recs.values()), indent=2) if as_json
                   else "\n".join(one_line(n, r) for n, r in recs.items()))
        return
    assert name is not None
    if draw:
        _check_draw(draw, name)
    with Ticker(f"topo {name}", quiet=quiet):
        graph = topologies.load_preset(name)
        rec = fabric_record(graph, _about(name))
        if draw:
            from moesim.plots.fabric import draw_fabric

            with output_file("--draw", draw) as tmp:
                draw_fabric(graph, tmp)
    click.echo(json.dumps(rec, indent=2) if as_json else "\n".join(block(rec)))


def _check_draw(draw: str, name: str) -> None:
    """``--draw``: a PNG/SVG/PDF path that can be written and is not the fabric file read."""
    from moesim.plots.fabric import FORMATS

    check_outputs({"--draw": draw}, [name] if Path(name).exists() else [])
    if Path(draw).suffix.lower() not in FORMATS:
        raise ConfigError("--draw", f"unsupported extension {Path(draw).suffix!r}; allowed: "
                          f"{', '.join(FORMATS)}")


def _about(name: str) -> str:
    return str(topologies.registry.read_preset(name).get("description") or "")
