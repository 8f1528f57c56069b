"""User-facing errors.

Every entry point that takes user input raises :class:`ConfigError` naming the
field and what is allowed; the CLI turns it into one line and exit status 2.
"""

from __future__ import annotations


class MoesimError(Exception):
    """Base of every error moesim raises on purpose."""


class ConfigError(MoesimError, ValueError):
    """Bad user input: names the field and what would be allowed."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")


class FabricError(MoesimError):
    """The fabric cannot carry what was asked (disconnected, unknown node)."""
