"""The one error the topology library raises on purpose.

``topologies`` imports nothing from the rest of the project, so it carries its
own error type; the simulator maps it onto its own user-facing errors.
"""

from __future__ import annotations


class TopologyError(ValueError):
    """Bad topology input or an unusable fabric: names the field and what is allowed."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}")
