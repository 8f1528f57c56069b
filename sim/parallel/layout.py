"""Parallel layout: Megatron-Core degrees, rank grids and process groups.

Names follow Megatron-Core (conventions.md): ``tp`` tensor, ``pp`` pipeline, ``vpp`` virtual
stages per pipeline rank, ``cp`` context, ``dp`` data, ``ep`` expert, ``etp`` expert-tensor;
``edp`` (expert data parallel) is derived. ``world_size = tp * cp * dp * pp``.

Two grids over the same ranks ("MoE parallel folding", Megatron-Core
``parallel_state.initialize_model_parallel``, default order ``"tp-cp-ep-dp-pp"``, leftmost
varies fastest)::

    dense  grid  (attention, dense FFN):  rank = tp_r + tp*(cp_r + cp*(dp_r + dp*pp_r))
    expert grid  (routed experts):        rank = etp_r + etp*(ep_r + ep*(edp_r + edp*pp_r))
    edp = world_size // (etp * ep * pp)

Megatron builds the dense grid with a RankGenerator of ``ep=1`` and the expert grid with one of
``tp=etp, cp=1, dp=edp`` and the *same* order string; ``pp`` is outermost in both, so both
grids have identical pipeline groups (Megatron asserts this). The expert grid is independent of
``tp`` and ``cp``: with ``etp=1`` the EP index varies fastest, so EP groups are runs of ``ep``
consecutive ranks. E.g. tp=2, dp=4 on 8 ranks with ep=4, etp=1: TP groups {0,1},{2,3},... and
EP groups {0,1,2,3},{4,5,6,7} — an EP group spans two TP groups. That is sound because
Megatron requires sequence parallelism with TP under MoE, so the two ranks of a TP group hold
different tokens; with etp=2 the EP group of rank 0 would be {0,2,4,6}.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from moesim.errors import ConfigError
from moesim.parallel.stages import LAYOUT_FIELD, check_layout_stages, parse_layout, split_counts

if TYPE_CHECKING:
    from moesim.model.config import ModelConfig

DENSE_KINDS = ("tp", "cp", "dp", "pp")
EXPERT_KINDS = ("etp", "ep", "edp", "pp")
GROUP_KINDS = ("tp", "cp", "dp", "pp", "ep", "etp", "edp")


def _degree() -> Any:
    """A parallel degree: a positive integer, 1 (none) by default; :data:`DEGREES` lists them."""
    return field(default=1, metadata={"degree": True})


@dataclass(frozen=True)
class ParallelLayout:
    """Parallel degrees of one training job (Megatron names), and how its decoder layers split
    over the (virtual) pipeline stages: Megatron-Core's ``TransformerConfig`` options, unset by
    default (0, False, ""): :mod:`moesim.parallel.stages`."""

    tp: int = _degree()
    pp: int = _degree()
    vpp: int = _degree()
    ep: int = _degree()
    etp: int = _degree()
    cp: int = _degree()
    dp: int = _degree()
    num_layers_in_first_pipeline_stage: int = 0  # --decoder-first-pipeline-num-layers
    num_layers_in_last_pipeline_stage: int = 0  # --decoder-last-pipeline-num-layers
    account_for_embedding_in_pipeline_split: bool = False
    account_for_loss_in_pipeline_split: bool = False
    pipeline_model_parallel_layout: str = ""  # e.g. "Et*3|(tt|)*29,m|L"

    def __post_init__(self) -> None:
        for name in DEGREES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"layout.{name}", f"must be a positive integer, got "
                                  f"{value!r}")
        self._check_split()
        fold = self.etp * self.ep * self.pp
        if self.world_size % fold:
            raise ConfigError("layout.ep", f"etp*ep*pp = {fold} must divide world size "
                              f"tp*cp*dp*pp = {self.world_size} (expert grid folds onto the "
                              "same ranks)")
        if self.vpp > 1 and self.pp == 1:
            raise ConfigError("layout.vpp", "virtual pipeline stages need pp > 1")

    def _check_split(self) -> None:
        """The stage-split options' types and combinations (Megatron's rules)."""
        for name in ("num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"layout.{name}", f"must be a positive integer (0: not set), "
                                  f"got {value!r}")
        for name in ("account_for_embedding_in_pipeline_split",
                     "account_for_loss_in_pipeline_split"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"layout.{name}", f"must be true/false, got "
                                  f"{getattr(self, name)!r}")
        text = self.pipeline_model_parallel_layout
        if not isinstance(text, str) or len(text) > 10_000:
            raise ConfigError(LAYOUT_FIELD, "must be a layout string of at most 10000 "
                              "characters, e.g. \"Et*3|(tt|)*29,m|L\"")
        uneven = self.num_layers_in_first_pipeline_stage or self.num_layers_in_last_pipeline_stage
        account = (self.account_for_embedding_in_pipeline_split
                   or self.account_for_loss_in_pipeline_split)
        if (uneven or account or text) and self.pp == 1:
            raise ConfigError("layout.pp", "stage-split options need pp > 1")
        if text and (uneven or account):
            raise ConfigError(LAYOUT_FIELD, "replaces the first/last-stage and account-for "
                              "options: set one or the other")
        if uneven and account:
            raise ConfigError("layout.account_for_embedding_in_pipeline_split", "Megatron does "
                              "not combine it with num_layers_in_first/last_pipeline_stage")
        if text:
            check_layout_stages(parse_layout(text), self.pp, self.vpp)

    @property
    def custom_split(self) -> bool:
        """Whether a stage-split option is set (else moesim's default split)."""
        return bool(self.num_layers_in_first_pipeline_stage
                    or self.num_layers_in_last_pipeline_stage
                    or self.account_for_embedding_in_pipeline_split
                    or self.account_for_loss_in_pipeline_split
                    or self.pipeline_model_parallel_layout)

    def virtual_stage_layers(self, num_layers: int) -> tuple[int, ...]:
        """Decoder layers of each virtual stage ``c * pp + s`` (layers numbered in that order):
        the stage-split option set (:mod:`moesim.parallel.stages`), else :meth:`stage_layers`
        split over each stage's vpp chunks as evenly as possible (earlier chunks take the
        remainder)."""
        if self.pipeline_model_parallel_layout:
            placed = tuple(stage.count("t") for stage in
                           parse_layout(self.pipeline_model_parallel_layout))
            if sum(placed) != num_layers:
                raise ConfigError(LAYOUT_FIELD, f"places {sum(placed)} decoder layers (t); the "
                                  f"model has {num_layers}")
            return placed
        if self.custom_split:
            return split_counts(num_layers, self.pp, self.vpp,
                                self.num_layers_in_first_pipeline_stage,
                                self.num_layers_in_last_pipeline_stage,
                                self.account_for_embedding_in_pipeline_split,
                                self.account_for_loss_in_pipeline_split)
        counts = [0] * (self.pp * self.vpp)
        for s, n in enumerate(self.stage_layers(num_layers)):
            for c in range(self.vpp):
                counts[c * self.pp + s] = n // self.vpp + (1 if c < n % self.vpp else 0)
        return tuple(counts)

    def degrees(self) -> dict[str, int]:
        """The parallel degrees by name, in field order (what records and reports show)."""
        return {name: getattr(self, name) for name in DEGREES}

    @classmethod
    def of(cls, degrees: Mapping[str, int]) -> ParallelLayout:
        """The layout of these degrees (names from :data:`DEGREES`), stages split by default."""
        changes: dict[str, Any] = dict(degrees)
        return replace(cls(), **changes)

    @property
    def world_size(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    @property
    def edp(self) -> int:
        """Expert data-parallel degree: world / (etp * ep * pp)."""
        return self.world_size // (self.etp * self.ep * self.pp)

    def _grid(self, kind: str) -> tuple[tuple[int, ...], int]:
        """(grid shape slowest..fastest, axis of ``kind``) for the grid ``kind`` lives in."""
        if kind in ("tp", "cp", "dp"):
            return (self.pp, self.dp, self.cp, self.tp), ("pp", "dp", "cp", "tp").index(kind)
        if kind in ("etp", "ep", "edp", "pp"):
            order = ("pp", "edp", "ep", "etp")
            return (self.pp, self.edp, self.ep, self.etp), order.index(kind)
        raise ConfigError("layout.group", f"unknown {kind!r}; allowed: " + ", ".join(GROUP_KINDS))

    def groups(self, kind: str) -> list[tuple[int, ...]]:
        """Every ``kind`` group as its sorted member ranks, ordered by first member."""
        shape, axis = self._grid(kind)
        ranks = np.arange(self.world_size).reshape(shape)
        rows = np.moveaxis(ranks, axis, -1).reshape(-1, shape[axis])
        return sorted(tuple(int(r) for r in row) for row in rows)

    def group_of(self, kind: str, rank: int) -> tuple[int, ...]:
        """The ``kind`` group that ``rank`` belongs to."""
        self._check_rank(rank)
        shape, axis = self._grid(kind)
        index = list(np.unravel_index(rank, shape))
        index[axis] = slice(None)  # type: ignore[call-overload]
        members = np.arange(self.world_size).reshape(shape)[tuple(index)]
        return tuple(int(r) for r in members)

    def dense_dp_group(self, rank: int) -> tuple[int, ...]:
        """Ranks holding the same dense parameters as ``rank``, sorted: its DP x CP group
        (Megatron reduces dense gradients and shards the distributed optimizer over data *and*
        context parallel ranks)."""
        self._check_rank(rank)
        shape, _ = self._grid("dp")
        pp, _, _, tp = np.unravel_index(rank, shape)
        members = np.arange(self.world_size).reshape(shape)[pp, :, :, tp]
        return tuple(int(r) for r in np.sort(members, axis=None))

    def coords(self, rank: int) -> dict[str, int]:
        """Coordinates of ``rank`` in both grids: tp, cp, dp, pp, etp, ep, edp."""
        self._check_rank(rank)
        tp_r, rest = rank % self.tp, rank // self.tp
        cp_r, rest = rest % self.cp, rest // self.cp
        dp_r, pp_r = rest % self.dp, rest // self.dp
        etp_r, rest = rank % self.etp, rank // self.etp
        ep_r, rest = rest % self.ep, rest // self.ep
        edp_r = rest % self.edp
        return {"tp": tp_r, "cp": cp_r, "dp": dp_r, "pp": pp_r,
                "etp": etp_r, "ep": ep_r, "edp": edp_r}

    def dense_rank(self, *, tp: int = 0, cp: int = 0, dp: int = 0, pp: int = 0) -> int:
        """Global rank of dense-grid coordinates."""
        return tp + self.tp * (cp + self.cp * (dp + self.dp * pp))

    def expert_rank(self, *, etp: int = 0, ep: int = 0, edp: int = 0, pp: int = 0) -> int:
        """Global rank of expert-grid coordinates."""
        return etp + self.etp * (ep + self.ep * (edp + self.edp * pp))

    def _check_rank(self, rank: int) -> None:
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < self.world_size:
            raise ConfigError("rank", f"must be in [0, {self.world_size}), got {rank!r}")

    def stage_layers(self, num_layers: int) -> tuple[int, ...]:
        """Decoder layers on each pipeline stage (all virtual chunks of a stage together).

        With a stage-split option set, what it gives (:meth:`virtual_stage_layers`). Else even
        when ``pp`` divides ``num_layers``. Otherwise the middle stages get
        ``ceil(L / pp)`` each and the first and last share the rest (first gets the larger half),
        which is what Megatron's ``--decoder-first-pipeline-num-layers`` /
        ``--decoder-last-pipeline-num-layers`` express: e.g. 61 layers on pp=8 -> 7, 8 x 6, 6.
        """
        pp = self.pp
        if self.custom_split:
            chunks = self.virtual_stage_layers(num_layers)
            return tuple(sum(chunks[s::pp]) for s in range(pp))
        if num_layers < pp * self.vpp:
            raise ConfigError("layout.pp", f"{num_layers} layers cannot fill pp*vpp = "
                              f"{pp * self.vpp} (virtual) stages")
        if num_layers % pp == 0 or pp == 1:
            return (num_layers // pp,) * pp
        for middle in (-(-num_layers // pp), num_layers // pp):
            rest = num_layers - (pp - 2) * middle
            first, last = -(-rest // 2), rest // 2
            if min(first, last) >= self.vpp:
                return (first, *([middle] * (pp - 2)), last)
        raise ConfigError("layout.pp", f"cannot split {num_layers} layers over pp={pp} "
                          f"stages of vpp={self.vpp} chunks")

    def validate(self, model: ModelConfig | None = None) -> ParallelLayout:
        """Check the layout against ``model``; returns self so calls can chain."""
        if model is None:
            return self
        self.stage_layers(model.num_layers)
        _check_divides("layout.tp", self.tp, "num_attention_heads", model.num_attention_heads)
        if model.attention != "mla":
            _check_divides("layout.tp", self.tp, "num_key_value_heads",
                           model.num_key_value_heads)
        if model.n_dense_layers:
            _check_divides("layout.tp", self.tp, "intermediate_size", model.intermediate_size)
        if not model.is_moe:
            if self.ep > 1 or self.etp > 1:
                raise ConfigError("layout.ep", f"{model.name} has no experts; ep and etp must "
                                  "be 1")
            return self
        experts = model.n_routed_experts
        if experts % self.ep:
            divisors = [d for d in range(1, experts + 1) if experts % d == 0]
            raise ConfigError("layout.ep", f"{experts} experts do not divide over ep="
                              f"{self.ep}; ep must divide {experts} (e.g. "
                              + ", ".join(map(str, divisors[-6:])) + ")")
        _check_divides("layout.etp", self.etp, "moe_intermediate_size",
                       model.moe_intermediate_size)
        return self

    def megatron_args(self, num_layers: int | None = None) -> list[str]:
        """Megatron-LM command-line flags for this layout (DP is what remains of the world).

        ``num_layers`` is needed with vpp > 1 (``--num-layers-per-virtual-pipeline-stage``) and
        to spell an uneven pipeline split. ``--sequence-parallel`` is added when tp > 1, as
        Megatron requires it for MoE with TP (and moesim's memory model assumes it).
        """
        args = ["--tensor-model-parallel-size", str(self.tp),
                "--pipeline-model-parallel-size", str(self.pp),
                "--context-parallel-size", str(self.cp),
                "--expert-model-parallel-size", str(self.ep),
                "--expert-tensor-parallel-size", str(self.etp)]
        if self.tp > 1:
            args.append("--sequence-parallel")
        if self.custom_split:
            return args + self._split_args()
        if num_layers is None:
            if self.vpp > 1:
                raise ConfigError("num_layers", "needed to spell vpp > 1 as "
                                  "--num-layers-per-virtual-pipeline-stage")
            return args
        stages = self.stage_layers(num_layers)
        if len(set(stages)) > 1:
            args += ["--decoder-first-pipeline-num-layers", str(stages[0]),
                     "--decoder-last-pipeline-num-layers", str(stages[-1])]
        if self.vpp > 1:
            if num_layers % (self.pp * self.vpp):
                raise ConfigError("layout.vpp", f"--num-layers-per-virtual-pipeline-stage "
                                  f"needs num_layers ({num_layers}) divisible by pp*vpp = "
                                  f"{self.pp * self.vpp}")
            args += ["--num-layers-per-virtual-pipeline-stage",
                     str(num_layers // (self.pp * self.vpp))]
        return args


    def _split_args(self) -> list[str]:
        """The stage-split option's flags (the layout string implies vpp)."""
        if self.pipeline_model_parallel_layout:
            return ["--pipeline-model-parallel-layout", self.pipeline_model_parallel_layout]
        args = [flag for flag, on in (
            ("--account-for-embedding-in-pipeline-split",
             self.account_for_embedding_in_pipeline_split),
            ("--account-for-loss-in-pipeline-split", self.account_for_loss_in_pipeline_split))
            if on]
        for flag, n in (("--decoder-first-pipeline-num-layers",
                         self.num_layers_in_first_pipeline_stage),
                        ("--decoder-last-pipeline-num-layers",
                         self.num_layers_in_last_pipeline_stage)):
            if n:
                args += [flag, str(n)]
        if self.vpp > 1:
            args += ["--num-virtual-stages-per-pipeline-rank", str(self.vpp)]
        return args


DEGREES = tuple(f.name for f in fields(ParallelLayout) if f.metadata.get("degree"))
"""The parallel degrees (``tp pp vpp ep etp cp dp``); the other fields split layers over stages."""


def _check_divides(field: str, degree: int, what: str, value: int) -> None:
    if value % degree:
        name = field.split(".")[-1]
        raise ConfigError(field, f"{name}={degree} must divide {what}={value}")


def layout_from_dict(data: Mapping[str, Any]) -> ParallelLayout:
    """Build a layout from a mapping (e.g. YAML); unknown keys are an error."""
    if not isinstance(data, Mapping):
        raise ConfigError("layout", f"expected a mapping, got {type(data).__name__}")
    allowed = [f.name for f in fields(ParallelLayout)]
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise ConfigError(f"layout.{unknown[0]}", "unknown field; allowed: " + ", ".join(allowed))
    return ParallelLayout(**data)
