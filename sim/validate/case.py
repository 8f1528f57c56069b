"""One validation case: what is simulated, the published number, its source and group.

See :mod:`moesim.validate.cases` for what the fields mean and the cases themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

from moesim.errors import ConfigError

PARAMS_TOLERANCE = 0.01
"""Parameter counts: published to 3-4 significant figures (671B, 46.7B, 1026.5B)."""
KERNEL_TOLERANCE = 0.10
"""Kernel bandwidths read off benchmark tables: run-to-run and message-size spread of a
collective benchmark, about 5-10% (DeepEP's README gives 153 vs 158 GB/s for the two
directions of the same EP8 NVLink traffic); the larger end is taken."""
GROUPS = ("consistency", "out_of_sample")
SCOPES = ("end_to_end", "kernel", "accounting")
PATHS = ("", "fast", "full")
GENERATIONS: dict[str, str] = {"A100": "Ampere", "A800": "Ampere", "H100": "Hopper",
                               "H800": "Hopper", "H200": "Hopper", "H20": "Hopper",
                               "B200": "Blackwell", "GB200": "Blackwell", "GB300": "Blackwell",
                               "": "-"}



@dataclass(frozen=True)
class Case:
    """One published measurement the simulator is compared against."""

    name: str
    kind: str
    args: tuple[tuple[str, object], ...]
    published: float
    unit: str
    tolerance_rel: float
    source: str
    group: str = "out_of_sample"
    note: str = ""
    scope: str = "accounting"
    gpu: str = ""
    path: str = ""
    tolerance_why: str = ""
    assumptions: tuple[str, ...] = ()
    lower_is_faster: bool = False
    """True when the published quantity falls as the step gets faster (GPU-hours, seconds)."""
    ranking: str = ""
    """Cases sharing a ranking name are layouts of one workload on one cluster whose published
    order ``moesim validate`` checks (:mod:`moesim.validate.ranking`)."""

    def __post_init__(self) -> None:
        for field, value, allowed in (("case.group", self.group, GROUPS),
                                      ("case.scope", self.scope, SCOPES),
                                      ("case.path", self.path, PATHS),
                                      ("case.gpu", self.gpu, tuple(GENERATIONS))):
            if value not in allowed:
                raise ConfigError(field, f"unknown {value!r}; allowed: "
                                  f"{', '.join(a or repr(a) for a in allowed)}")
        if self.tolerance_rel <= 0:
            raise ConfigError("case.tolerance_rel", f"must be > 0, got {self.tolerance_rel}")
        if self.published <= 0:
            raise ConfigError("case.published", f"must be > 0, got {self.published}")

    def arg(self, key: str) -> object:
        return dict(self.args)[key]

    @property
    def generation(self) -> str:
        """The GPU generation of the measurement (Hopper, Blackwell, ...; "-" for none)."""
        return GENERATIONS[self.gpu]
