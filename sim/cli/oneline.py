"""One line per bad input: the ``moesim`` group's error wrapper.

Click answers a bad flag with a usage block (``Usage: ...``, ``Try ... --help``, ``Error:
...``) and the commands' own errors would surface as tracebacks. :class:`OneLineGroup` runs
the command line with click's standalone mode off and turns every user-input error into one
line on stderr, ``moesim: <what is wrong>``, and exit status 2:

* click's usage errors (bad flag, bad value, missing argument), whatever command raised them;
* moesim's own :class:`~moesim.errors.MoesimError` (``ConfigError`` names the field), unknown
  scenario and topology errors.

``--help`` and ``--version`` print as usual; a command's own ``SystemExit`` (``validate``
exits 1 when a case fails) passes through. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from typing import Any

import click

EXIT_BAD_INPUT = 2


def one_line(message: object) -> str:
    """``message`` flattened to one line (click's messages may hold newlines)."""
    return " ".join(str(message).split())


def fail(message: object, code: int = EXIT_BAD_INPUT) -> None:
    """Print ``moesim: <message>`` on one stderr line and exit with ``code``."""
    click.echo(f"moesim: {one_line(message)}", err=True)
    sys.exit(code)


def user_error_types() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "bad input" (imported late: the CLI loads lazily)."""
    from moesim.errors import MoesimError
    from moesim.scenarios import UnknownScenario
    from moesim.topologies import TopologyError

    return MoesimError, UnknownScenario, TopologyError


class OneLineGroup(click.Group):
    """A click group whose errors are one line and exit status 2 (see the module docstring)."""

    def main(self, args: Any = None, prog_name: str | None = None,
             complete_var: str | None = None, standalone_mode: bool = True,
             **extra: Any) -> Any:
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            fail(exc.format_message())
        except click.Abort:
            fail("aborted", 1)
        except user_error_types() as exc:
            fail(exc)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)
