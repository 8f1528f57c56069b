"""The `moesim` command line: one module per command group, `main` the click group."""

from moesim.cli.main import main

__all__ = ["main"]
