"""MLCommons Chakra execution traces of a simulated step: one ``<prefix>.<rank>.et`` per rank.

ASTRA-sim and other network simulators replay these (github.com/mlcommons/chakra, schema
``et_def.proto``; written with the ``mlc-chakra`` package's protobuf classes and its
length-prefixed encoder, the ``moesim[chakra]`` extra). Each file is a ``GlobalMetadata``
message and then one ``Node`` per operation of that rank, in program order:

* ``COMP_NODE``: a compute span, ``duration_micros`` as simulated;
* ``COMM_COLL_NODE``: a ring all-gather / reduce-scatter (TP, ETP, DP, EDP) or a balanced
  all-to-all (every member sends every other the same bytes): ``comm_type``, ``comm_size``
  (bytes this rank contributes: the ring's buffer, the all-to-all's row), ``pg_name``;
* ``COMM_SEND_NODE`` / ``COMM_RECV_NODE``: pipeline activations and gradients, CP K/V chunks,
  and skewed all-to-alls as per-peer pairs: ``comm_src``, ``comm_dst``, ``comm_size``, and a
  ``comm_tag`` both ends compute alike (CRC-32 of the operation's name and the pair);
* data dependencies: each node depends on the one before it (an all-to-all's sends and receives
  all on the node before, the node after on all of them): a rank's program order.

``<prefix>.comm_groups.json`` maps each ``pg_name`` to its ranks (ASTRA-sim's communicator
group file). In fast mode only the representative pipeline is simulated: files are written for
those ranks; their peers' ids appear in the groups.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

from moesim.errors import ConfigError
from moesim.export.record import Span, StepRecord

US_PER_S = 1e6
COLL_TYPES = {"all_to_all": "ALL_TO_ALL", "all_gather": "ALL_GATHER",
              "reduce_scatter": "REDUCE_SCATTER"}


def _pb() -> Any:
    try:
        from chakra.schema.protobuf import et_def_pb2
    except ImportError as exc:
        raise ConfigError("chakra", "writing Chakra traces needs the mlc-chakra package: "
                                    "pip install 'moesim[chakra]'") from exc
    return et_def_pb2


def _encoder() -> Any:
    from chakra.src.third_party.utils.protolib import encodeMessage

    return encodeMessage


def tag(*parts: object) -> int:
    """A ``comm_tag`` both ends of a send/recv compute from the same parts."""
    return zlib.crc32(" ".join(str(p) for p in parts).encode()) & 0x7FFFFFFF


def balanced(span: Span) -> bool:
    """An all-to-all whose members all send and receive the same bytes to/from each peer."""
    c = span.comm
    assert c is not None
    local = c.group.index(span.rank)
    off = [b for i, b in enumerate(c.send_bytes) if i != local]
    off += [b for i, b in enumerate(c.recv_bytes) if i != local]
    return bool(off) and max(off) == min(off)


class _RankWriter:
    """Nodes of one rank, chained in program order."""

    def __init__(self, pb: Any, rank: int, groups: dict[tuple[str, tuple[int, ...]], str]):
        self.pb, self.rank, self.groups = pb, rank, groups
        self.nodes: list[Any] = []
        self.frontier: list[int] = []

    def node(self, name: str, kind: str, **attrs: Any) -> Any:
        n = self.pb.Node(id=len(self.nodes), name=name, type=getattr(self.pb, kind))
        n.data_deps.extend(self.frontier)
        n.attr.append(self.pb.AttributeProto(name="is_cpu_op", bool_val=False))
        n.attr.extend(_attr(self.pb, key, value) for key, value in attrs.items())
        self.nodes.append(n)
        return n

    def chain(self, *nodes: Any) -> None:
        self.frontier = [n.id for n in nodes]

    def p2p(self, name: str, send: bool, peer: int, size: float, key: str) -> Any:
        src, dst = (self.rank, peer) if send else (peer, self.rank)
        return self.node(name, "COMM_SEND_NODE" if send else "COMM_RECV_NODE", comm_src=src,
                         comm_dst=dst, comm_size=int(size), comm_tag=tag(key, src, dst))

    def pairs(self, s: Span) -> list[Any]:
        """A skewed all-to-all as a send to and a receive from each peer (bytes > 0)."""
        c = s.comm
        assert c is not None
        made = []
        for peer, out_b, in_b in zip(c.group, c.send_bytes, c.recv_bytes, strict=True):
            if peer == self.rank:
                continue
            if out_b > 0:
                made.append(self.p2p(f"{s.name} >{peer}", True, peer, out_b, s.name))
            if in_b > 0:
                made.append(self.p2p(f"{s.name} <{peer}", False, peer, in_b, s.name))
        return made

    def span(self, s: Span) -> None:
        c = s.comm
        if c is None:
            n = self.node(s.name, "COMP_NODE")
            n.duration_micros = max(1, round((s.end_s - s.start_s) * US_PER_S))
            self.chain(n)
        elif c.kind == "recv":
            made = [self.p2p(s.name, False, c.peer, c.size_bytes, s.name)]
            if c.group_kind == "cp":  # each CP step also sends this rank's chunk on
                succ = c.group[(c.group.index(self.rank) + 1) % len(c.group)]
                made.append(self.p2p(s.name, True, succ, c.size_bytes, s.name))
            self.chain(*made)
        elif c.kind == "all_to_all" and not balanced(s):
            self.chain(*self.pairs(s))
        else:
            pg = self.groups.setdefault((c.group_kind, c.group), str(len(self.groups)))
            self.chain(self.node(s.name, "COMM_COLL_NODE",
                                 comm_type=getattr(self.pb, COLL_TYPES[c.kind]),
                                 comm_size=int(c.size_bytes), pg_name=pg))


def _attr(pb: Any, key: str, value: Any) -> Any:
    if isinstance(value, str):
        return pb.AttributeProto(name=key, string_val=value)
    if key in ("comm_src", "comm_dst", "comm_tag"):
        return pb.AttributeProto(name=key, int32_val=int(value))
    return pb.AttributeProto(name=key, int64_val=int(value))


def pipeline_sends(record: StepRecord) -> dict[tuple[int, str, int, int], list[Span]]:
    """(sender, pass kind, micro-batch, sender's virtual stage) -> the receivers' pp spans:
    the activation (F) or gradient (B) a pass sends on when it ends."""
    out: dict[tuple[int, str, int, int], list[Span]] = {}
    for s in record.spans:
        if s.comm is not None and s.comm.group_kind == "pp":
            kind, mb, vs = s.where
            out.setdefault((s.comm.peer, kind, mb, vs - 1 if kind == "F" else vs + 1),
                           []).append(s)
    return out


def write_chakra(record: StepRecord, out_dir: str | Path, prefix: str = "moesim") -> list[Path]:
    """One ``<prefix>.<rank>.et`` per simulated rank in ``out_dir`` (created), plus
    ``<prefix>.comm_groups.json``; the paths of the .et files."""
    pb, encode = _pb(), _encoder()
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    by_rank: dict[int, list[Span]] = {r: [] for r in record.ranks}
    for s in record.spans:
        by_rank[s.rank].append(s)
    sends, groups, paths = pipeline_sends(record), {}, []  # type: ignore[var-annotated]
    for rank, spans in by_rank.items():
        w = _RankWriter(pb, rank, groups)
        last = {s.where: i for i, s in enumerate(spans)}
        for i, s in enumerate(spans):
            w.span(s)
            if last[s.where] == i:
                for recv in sends.get((rank, *s.where), []):
                    assert recv.comm is not None
                    w.chain(w.p2p(recv.name, True, recv.rank, recv.comm.size_bytes, recv.name))
        path = root / f"{prefix}.{rank}.et"
        with path.open("wb") as f:
            encode(f, pb.GlobalMetadata(version="0.0.4", attr=[
                pb.AttributeProto(name="generator", string_val="moesim"),
                pb.AttributeProto(name="scenario", string_val=record.scenario),
                pb.AttributeProto(name="mode", string_val=record.mode)]))
            for n in w.nodes:
                encode(f, n)
        paths.append(path)
    (root / f"{prefix}.comm_groups.json").write_text(json.dumps(
        {pg: list(members) for (_, members), pg in groups.items()}, indent=1))
    return paths
