"""DeepEP low-latency cases: bytes by hand, the finish batching against the exact solve."""

from __future__ import annotations

import numpy as np
import pytest

from moesim import topologies
from moesim.validate.cases import CASES, LL_CASES
from moesim.validate.deepep_ll import (
    BATCH_WINDOW_REL,
    LowLatencySetup,
    _batch,
    receive_pass_bytes,
    selections,
    simulate_low_latency,
)
from moesim.validate.flows import run_flows, with_loopbacks


def test_messages_and_logical_bytes_by_hand() -> None:
    """Every rank sends 128 x 8 messages (no dedup); DeepEP counts 7168 + 7168/128*4 + 16 =
    7408 bytes per FP8 selection, 14336 per BF16 one, its own selections included."""
    s = LowLatencySetup(16)
    sel = selections(s)
    np.testing.assert_array_equal(sel.sum(axis=1), 128 * 8)
    assert s.message_bytes("dispatch") == 7408 and s.message_bytes("combine") == 14336
    res = simulate_low_latency(s, "dispatch")
    assert res.logical_bytes == 128 * 8 * 7408
    # 2 nodes: about half the messages leave the node, all through the sender's NIC at no
    # more than its line rate (400 Gb/s = 50 GB/s): a floor on the kernel time
    cross = sel[:8, 8:].sum(axis=1).max() * 7408
    assert res.time_s > cross / 50e9 and res.busiest[0][0] == "nic"


def test_finish_batching_within_2_percent_of_exact_at_ep32() -> None:
    s = LowLatencySetup(32)
    graph = with_loopbacks(topologies.load_preset("rail-h800-64", hosts=4))
    batch = _batch(selections(s) * s.message_bytes("dispatch"), "dispatch", loop=True)
    exact = run_flows(graph, batch).time_s
    batched = run_flows(graph, batch, batch_window_rel=BATCH_WINDOW_REL).time_s
    assert batched == pytest.approx(exact, rel=0.02)


def test_cases_are_the_table_out_of_sample() -> None:
    assert len(LL_CASES) == 12 and all(c in CASES for c in LL_CASES)
    assert {c.group for c in LL_CASES} == {"out_of_sample"}
    assert all(c.lower_is_faster and c.source.startswith("deepseek-ai/DeepEP") for c in LL_CASES)


def test_receive_pass_bytes_by_hand() -> None:
    """Two ranks; rank 0 sends 3 messages to itself and 1 to rank 1, rank 1 sends 2 to itself.
    Dispatch: each rank receives 3 messages, reads 7408 B of each and writes its 7168 FP8 bytes,
    56 x 4 B of scales and a 4 B source index: 3 x (7408 + 7396) = 44,412 B. Combine: rank 0
    reads back its 4 BF16 rows and writes 128 tokens, (4 + 128) x 14,336 B; rank 1 (2 + 128)."""
    s = LowLatencySetup(2)
    sel = np.array([[3.0, 1.0], [0.0, 2.0]])
    np.testing.assert_array_equal(receive_pass_bytes(s, sel, "dispatch"), [44_412, 44_412])
    np.testing.assert_array_equal(receive_pass_bytes(s, sel, "combine"),
                                  [1_892_352, 1_863_680])


def test_receive_pass_follows_the_last_byte_at_the_hbm_rate() -> None:
    """EP8 dispatch: a rank receives 1,024 messages on average (128 tokens x 8 selections, 8
    ranks), so the busiest rank's pass is at least 1,024 x 14,804 B at 0.84 x 3,350 GB/s =
    5.39 us; it sits in the kernel time on top of the flows: at least 7/8 of 7.59 MB leave
    each rank's NVLink port at no more than 160 GB/s (41.5 us)."""
    res = simulate_low_latency(LowLatencySetup(8), "dispatch")
    assert 5.39e-6 <= res.receive_pass_s < 6.5e-6
    assert res.time_s > res.receive_pass_s + 128 * 8 * 7408 * 7 / 8 / 160e9
