"""`moesim step --trace/--chakra`: the Chrome trace obeys the trace-event rules, and the Chakra
ET files read back with mlc-chakra's own decoder, one per rank, with matching send/recv pairs."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from moesim.cli import main

chakra_pb = pytest.importorskip("chakra.schema.protobuf.et_def_pb2")  # in the dev extra
protolib = pytest.importorskip("chakra.src.third_party.utils.protolib")

SMALL = {"version": 2, "name": "tiny", "model": "mixtral-8x7b", "hardware": {"gpu": "H800"},
         "fabric": {"preset": "rail-h800-64", "params": {"hosts": 1}, "multipath": "dmodk"},
         "layout": {"tp": 2, "pp": 2, "ep": 2, "dp": 2},
         "workload": {"global_batch": 4, "seq_len": 256}, "mode": "full"}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    root = tmp_path_factory.mktemp("exports")
    scn = root / "tiny.yaml"
    scn.write_text(yaml.safe_dump(SMALL))
    trace, et = root / "t.json", root / "et"
    out = CliRunner().invoke(main, ["step", str(scn), "--json", "--trace", str(trace),
                                    "--chakra", str(et)])
    assert out.exit_code == 0, out.output
    return trace, et, json.loads(out.stdout)


def test_trace_follows_the_trace_event_format(exported) -> None:  # type: ignore[no-untyped-def]
    trace, _, step = exported
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    assert doc["displayTimeUnit"] == "ns" and doc["otherData"]["sampling"]["ranks_kept"] == 8
    for ev in events:
        assert ev["ph"] in {"X", "M", "C", "s", "f"} and isinstance(ev["pid"], int)
        if ev["ph"] != "M":
            assert isinstance(ev["ts"], float | int) and ev["ts"] >= 0
        if ev["ph"] == "X":
            assert ev["dur"] >= 0 and isinstance(ev["tid"], int) and ev["name"]
    tracks: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for ev in events:
        if ev["ph"] == "X":
            tracks.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
    for spans in tracks.values():  # on one thread, spans nest or are disjoint
        open_ends: list[float] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while open_ends and open_ends[-1] <= start + 1e-6:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1] + 1e-6, (start, end, open_ends[-1])
            open_ends.append(end)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"compute", "a2a", "tp", "pp", "dp", "critical path"} <= names
    assert any(e["ph"] == "C" for e in events)  # link utilisation counters
    flows = Counter(e["ph"] for e in events if e["ph"] in "sf")
    assert flows["s"] == flows["f"] > 0  # the critical path as arrows
    end_us = max(e["ts"] + e["dur"] for e in events if e["ph"] == "X")
    assert end_us == pytest.approx(step["step_time_s"] * 1e6, rel=1e-6)


def read_et(path: Path) -> tuple[object, list[object]]:
    """Decode one ET file with chakra's length-prefixed protobuf reader."""
    with path.open("rb") as f:
        meta = chakra_pb.GlobalMetadata()
        assert protolib.decodeMessage(f, meta)
        nodes = []
        while True:
            node = chakra_pb.Node()
            if not protolib.decodeMessage(f, node):
                return meta, nodes
            nodes.append(node)


def attrs(node: object) -> dict[str, object]:
    return {a.name: getattr(a, a.WhichOneof("value")) for a in node.attr}  # type: ignore[attr-defined]


def test_chakra_files_read_back_with_matching_pairs(exported) -> None:  # type: ignore[no-untyped-def]
    _, et, _ = exported
    files = sorted(et.glob("tiny.*.et"))
    assert len(files) == 8
    groups = json.loads((et / "tiny.comm_groups.json").read_text())
    sends, recvs, kinds = Counter(), Counter(), Counter()
    for path in files:
        meta, nodes = read_et(path)
        assert meta.version and nodes
        rank = int(path.name.split(".")[1])
        for i, n in enumerate(nodes):
            assert n.id == i and all(d < i for d in n.data_deps)
            a = attrs(n)
            kinds[chakra_pb.NodeType.Name(n.type)] += 1
            if n.type == chakra_pb.COMP_NODE:
                assert n.duration_micros > 0
            elif n.type == chakra_pb.COMM_COLL_NODE:
                assert a["comm_size"] > 0 and rank in groups[a["pg_name"]]
                assert chakra_pb.CollectiveCommType.Name(a["comm_type"]) in {
                    "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL"}
            elif n.type == chakra_pb.COMM_SEND_NODE:
                assert a["comm_src"] == rank
                sends[(a["comm_src"], a["comm_dst"], a["comm_tag"], a["comm_size"])] += 1
            elif n.type == chakra_pb.COMM_RECV_NODE:
                assert a["comm_dst"] == rank
                recvs[(a["comm_src"], a["comm_dst"], a["comm_tag"], a["comm_size"])] += 1
    assert sends == recvs and sum(sends.values()) > 0  # every send has its receive
    assert kinds["COMP_NODE"] and kinds["COMM_COLL_NODE"] and kinds["COMM_SEND_NODE"]


def test_large_runs_are_sampled_and_say_so() -> None:
    from moesim.export.chrome_step import step_trace
    from moesim.export.record import Comm, Span, StepRecord

    spans = tuple(Span(r, i * 1e-3, (i + 1) * 1e-3, "compute", f"c{i}") for r in range(40)
                  for i in range(5))
    comm = Comm("all_gather", "tp", (0, 1), 1e6)
    spans += (Span(7, 0.0, 1e-3, "tp", "ag", comm),)
    crit = ({"rank": 7, "start_s": 0.0, "end_s": 1e-3, "category": "tp", "what": "ag"},)
    rec = StepRecord("s", "full", 40, tuple(range(40)), spans, critical=crit)
    doc = step_trace(rec, max_spans=50)
    sampling = doc["otherData"]["sampling"]
    pids = {e["pid"] for e in doc["traceEvents"] if e["ph"] == "X"}
    assert sampling["ranks_kept"] == len(pids) < 40 and 7 in pids  # the path's rank is kept
    assert "every 5th simulated rank" in sampling["rule"]
    assert step_trace(rec)["otherData"]["sampling"]["ranks_kept"] == 40


def test_balanced_all_to_all_is_one_collective(tmp_path: Path) -> None:
    from moesim.export.chakra_et import write_chakra
    from moesim.export.record import Comm, Span, StepRecord

    def a2a(rank: int, sizes: tuple[float, ...]) -> Span:
        comm = Comm("all_to_all", "ep", (0, 1, 2), sum(sizes) - sizes[rank], sizes, sizes)
        return Span(rank, 0.0, 1e-3, "a2a", "dispatch a2a L0 F mb0 vs0", comm)

    rec = StepRecord("b", "full", 3, (0, 1, 2),
                     (*tuple(a2a(r, (5.0, 5.0, 5.0)) for r in range(3)), a2a(0, (0.0, 7.0, 5.0))))
    write_chakra(rec, tmp_path, "b")
    nodes = read_et(tmp_path / "b.0.et")[1]
    coll = [n for n in nodes if n.type == chakra_pb.COMM_COLL_NODE]
    assert len(coll) == 1 and attrs(coll[0])["comm_type"] == chakra_pb.ALL_TO_ALL
    assert attrs(coll[0])["comm_size"] == 10  # what rank 0 sends to its two peers
    pairs = [n for n in nodes if n.type in (chakra_pb.COMM_SEND_NODE, chakra_pb.COMM_RECV_NODE)]
    assert len(pairs) == 4 and list(pairs[0].data_deps) == [coll[0].id]  # the skewed one
    groups = json.loads((tmp_path / "b.comm_groups.json").read_text())
    assert groups[attrs(coll[0])["pg_name"]] == [0, 1, 2]
