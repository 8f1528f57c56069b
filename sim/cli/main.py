"""The `moesim` command line. Bad input: one line naming the field, exit status 2."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click

from moesim import topologies
from moesim.cli.files import check_flag_count
from moesim.cli.oneline import OneLineGroup
from moesim.cli.progress import Ticker, quiet_option
from moesim.errors import MoesimError

EXIT_BAD_INPUT = 2


def _user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn user-input errors into one line on stderr and exit status 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from moesim.scenarios import UnknownScenario
        from moesim.topologies import TopologyError

        try:
            return fn(*args, **kwargs)
        except (MoesimError, UnknownScenario, TopologyError) as exc:
            click.echo(f"moesim: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper


LAZY_COMMANDS: dict[str, tuple[str, bool]] = {
    "plot": ("moesim.cli.plot:plot", False),
    "design": ("moesim.cli.design:design", False),
    "plan": ("moesim.cli.design:plan", False),
    "validate": ("moesim.cli.validate:validate", False),
    "sweep": ("moesim.cli.sweep:sweep", False),
    "gallery": ("moesim.cli.gallery:gallery", False),
    "run": ("moesim.cli.run:run", True),
    "step": ("moesim.cli.run:run", True),  # the old whole-step command, kept as an alias
    "topo": ("moesim.cli.topo:topo", True),
}
"""Commands that live in their own modules: name -> ("module:command", wrapped in
``_user_errors``). Imported when named (or listed, for ``--help``), so that ``moesim step`` does
not import the sweep, validation and design machinery (~0.05 s CPU of a fast step).
tests/test_layers.py reads these "module:command" strings as lazy imports of this module."""


class _LazyGroup(OneLineGroup):
    """The ``moesim`` group: :data:`LAZY_COMMANDS` join it when first asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(LAZY_COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        unknown = cmd_name not in self.commands and cmd_name not in LAZY_COMMANDS
        for name in LAZY_COMMANDS if unknown else (cmd_name,):  # unknown: all, for click's
            if name not in self.commands and name in LAZY_COMMANDS:  # "Did you mean"
                self.add_command(_load(*LAZY_COMMANDS[name]), name=name)
        return super().get_command(ctx, cmd_name)


_LOADED: dict[str, click.Command] = {}


def _load(target: str, wrap: bool) -> click.Command:
    """The command object of ``"module:command"`` (one per target: ``run`` and ``step``
    share it)."""
    if target not in _LOADED:
        module, _, attr = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attr)
        if wrap:
            assert command.callback is not None  # every moesim command has a function
            command.callback = _user_errors(command.callback)
        _LOADED[target] = command
    return _LOADED[target]


@click.group(cls=_LazyGroup)
@click.version_option(package_name="moesim")
def main() -> None:
    """moesim: simulate MoE training steps on GPU cluster fabrics."""
    from moesim.cli.memory import keep_freed_memory

    keep_freed_memory()  # the step's arrays reuse freed blocks (moesim.cli.memory)


@main.command("scenarios")
def list_scenarios() -> None:
    """List the shipped scenarios."""
    from moesim.scenario.load import read_yaml_file
    from moesim.scenarios import resolve, scenario_names

    for name in scenario_names():
        data = read_yaml_file(resolve(name), "scenario")
        about = data.get("description", "") if isinstance(data, dict) else ""
        mode = data.get("mode", "full") if isinstance(data, dict) else ""
        click.echo(f"  {name:<22} {mode:<5} {about}")


@main.command()
@click.argument("fabric")
@click.option("--tp", type=int, default=1, show_default=True)
@click.option("--pp", type=int, default=1, show_default=True)
@click.option("--ep", type=int, default=1, show_default=True)
@click.option("--etp", type=int, default=1, show_default=True)
@click.option("--cp", type=int, default=1, show_default=True)
@click.option("--dp", type=int, default=None, help="Default: whatever fills the fabric.")
@click.option("--json", "as_json", is_flag=True, help="Print the placement as JSON.")
@quiet_option
@_user_errors
def place(
    fabric: str, tp: int, pp: int, ep: int, etp: int, cp: int, dp: int | None, as_json: bool,
    quiet: bool,
) -> None:
    """Where each parallel group of a layout lands on fabric preset FABRIC (Megatron rank order)."""
    from dataclasses import asdict

    from moesim.parallel.layout import ParallelLayout
    from moesim.parallel.placement import place as place_groups
    from moesim.parallel.placement import placement_table

    degrees = {"tp": tp, "pp": pp, "ep": ep, "etp": etp, "cp": cp, "dp": dp}
    for name, degree in degrees.items():  # before dp is derived by dividing by them
        if degree is not None:
            check_flag_count(degree, "gpus", f"layout.{name}")
    with Ticker(f"place {fabric}", quiet=quiet):
        graph = topologies.load_preset(fabric)
        if dp is None:
            hosts = graph.graph.get("hosts", 1) * graph.graph.get("gpus_per_host", 1)
            dp = max(hosts // (tp * pp * cp), 1)
        entries = place_groups(
            ParallelLayout(tp=tp, pp=pp, ep=ep, etp=etp, cp=cp, dp=dp).validate(), graph
        )
    if as_json:
        click.echo(json.dumps([asdict(e) for e in entries], indent=2))
    else:
        click.echo(placement_table(entries))


if __name__ == "__main__":
    main()
