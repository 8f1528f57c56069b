"""DualPipe's batched point-to-point transfers (deepseek-ai/DualPipe dualpipe.py @bb214e8):
what each commit posts (:mod:`moesim.schedule.dualpipe`) and how the step runs them
(:func:`moesim.step.sends.commit`)."""

from __future__ import annotations

import dataclasses

import pytest

from moesim.model import get_model
from moesim.parallel.layout import ParallelLayout
from moesim.scenario.schema import FabricSpec
from moesim.schedule import build_schedule, get_schedule
from moesim.schedule.dualpipe import dualpipe_commits
from moesim.schedule.ops import Pass, Post
from moesim.step import StepSpec, simulate_step
from moesim.step.state import CATEGORIES, StepState


def _posts(text: str) -> tuple[Post, ...]:
    """'sF0.0 rB2.1' -> (send of F0 chunk 0's output, receive of B2 chunk 1's input)."""
    out = []
    for word in text.split():
        mb, chunk = word[2:].split(".")
        out.append(Post(word[0] == "s", Pass(word[1], int(mb), int(chunk))))  # type: ignore[arg-type]
    return tuple(out)


def test_rank0_commits_pp4_m8_by_hand() -> None:
    # DualPipe.step, rank 0 of 4, 8 micro-batches (h = 0, not a middle rank; chunk 0 enters
    # here, chunk 1 leaves here: no F input / B output of chunk 0, no F output / B input of
    # chunk 1). Sends are appended after a chunk computes and posted at the next commit;
    # step 2 posts its near input early and appends the near F's send after the far F;
    # step 3's W commit posts the next far F's input.
    ops = build_schedule("dualpipe", 4, 8)[0]
    commits = dualpipe_commits(4, 8, 1)[0]
    expected = ["", "sF0.0", "sF1.0", "rF4.1",  # step 1: F0.0 F1.0; step 2: F2.0 F4.1
                "sF2.0",  # step 3: B4.1 (W deferred): F2.0 leaves only now, after F4.1
                "sB4.1 rF5.1", "",  # its W, with the far F's input; F5.1
                "", "sF3.0 sB5.1 rF6.1 rB0.0",  # step 4: FB(3.0/5.1), FB(6.1/0.0)
                "", "sB6.1 rF7.1 rB1.0",  # step 5: B6.1, FB(7.1/1.0)
                "", "sB7.1 rB2.0",  # step 6: B7.1, B2.0 (W deferred)
                "", "rB3.0", "",  # step 7: W2.0, B3.0; step 8: W3.0
                ""]  # the final commit
    assert len(commits) == len(ops) + 1
    assert list(commits) == [_posts(e) for e in expected]


def test_middle_rank_defers_its_far_forwards_last_send() -> None:
    # rank 1 of 4 (h = 1, a middle rank): in step 2 each near F's output goes at the far F's
    # commit, the last far F's is held back and posted with the B of step 4 (the source's
    # _send_forward(1) after the unoverlapped near F).
    ops = build_schedule("dualpipe", 4, 8)[1]
    commits = dualpipe_commits(4, 8, 1)[1]
    assert [str(op.kind) + str(op.microbatch) for op in ops[:6]] == [
        "F0", "F4", "F1", "F5", "F2", "B4"]
    assert commits[:6] == (_posts("rF0.0"), _posts("sF0.0 rF1.0 rF4.1"),
                           _posts("sF4.1"), _posts("sF1.0 rF2.0 rF5.1"), _posts(""),
                           _posts("sF5.1 rB4.1"))
    assert commits[6][:2] == _posts("sF2.0 sB4.1")


@pytest.mark.parametrize("pp, m", [(2, 4), (4, 8), (4, 12), (8, 16), (16, 40)])
def test_every_transfer_is_posted_once_by_each_side(pp: int, m: int) -> None:
    place = get_schedule("dualpipe").placement(pp)
    sides: dict[tuple[str, int, int], list[int]] = {}
    for rank, commits in enumerate(dualpipe_commits(pp, m, 1)):
        for post in (q for c in commits for q in c):
            p, fwd = post.p, post.p.kind == "F"
            vs = place.vstage(rank, p.chunk)
            to = (vs + 1 if fwd else vs - 1) if post.send else vs
            sides.setdefault((p.kind, p.microbatch, to), []).append(int(post.send))
    # every F crossing a stage boundary and every B: (pp - 1) transfers per micro-batch each
    assert len(sides) == 2 * m * (pp - 1)
    assert all(sorted(s) == [0, 1] for s in sides.values())


FABRIC = FabricSpec(preset="rail-h800-64",
                    params=(("hosts", 2), ("gpus_per_host", 4), ("gpu", "H100")),
                    multipath="dmodk", batch_window_rel=0.02)


def _end_of(st: StepState, rank: int, kind: str, mb: int) -> float:
    """When ``rank``'s last compute span of pass ``kind`` of ``mb`` ended."""
    return max(sp[2] for sp in st.spans
               if sp[0] == rank and sp[3] == "compute" and sp[5] is not None
               and sp[5][0] == kind and sp[5][1] == mb)


def test_pp2_transfers_start_when_both_sides_commit() -> None:
    # pp = 2, m = 4, by hand from DualPipe.step: rank 0 runs F0.0 | F2.1 | F1.0 | B2.1 |
    # FB(3.1/0.0) | B3.1 | B1.0 (W deferred) | W1.0; rank 1 the mirror (micro-batches + 2).
    # Rank 0's commit before F2.1 posts F0.0's output (rank 1 posts its receive at its own
    # second commit); the middle ranks do not send F1.0 until after B2.1: its commit before
    # the FB op posts F1.0's and B2.1's outputs with the FB's two inputs.
    model = dataclasses.replace(get_model("mixtral-8x7b"), num_layers=2, moe_layers=(True,) * 2)
    spec = StepSpec(model=model, layout=ParallelLayout(ep=4, dp=4, pp=2), seq_len=1024,
                    fabric=FABRIC, schedule="dualpipe", microbatches=4, recompute="none")
    st = simulate_step(spec)
    r1 = spec.layout.dense_rank(tp=0, cp=0, dp=0, pp=1)

    def flow_start(kind: str, mb: int, vstage: int, dst: int) -> float:
        return st.mail[(kind, mb, vstage, dst)].value[1]  # (sender, start, flow)

    # F0.0 -> stage 1: both sides' second commits (rank 0 after F0.0, rank 1 after F2.1)
    assert flow_start("F", 0, 1, r1) == max(_end_of(st, 0, "F", 0), _end_of(st, r1, "F", 2))
    # F1.0 -> stage 1 leaves after rank 0's B2.1 (eagerly it would leave when F1.0 ends)
    start = flow_start("F", 1, 1, r1)
    assert start == max(_end_of(st, 0, "B", 2), _end_of(st, r1, "B", 0))
    assert start > _end_of(st, 0, "F", 1)
    # that commit's four transfers start together, and the FB op computes after all arrive
    together = [flow_start("B", 2, 0, r1), flow_start("F", 3, 1, 0), flow_start("B", 0, 0, 0)]
    assert together == [start] * 3
    arrived = max(st.net.flows.col["finish_s"][st.mail[key].value[2]] for key in (
        ("F", 1, 1, r1), ("B", 2, 0, r1), ("F", 3, 1, 0), ("B", 0, 0, 0)))
    fb_start = min(sp[1] for sp in st.spans if sp[0] == 0 and sp[3] == "compute"
                   and sp[5] is not None and (sp[5][0], sp[5][1]) in (("F", 3), ("B", 0)))
    assert fb_start >= arrived
    # the waits are bubble: each rank's categories still add up to its end
    for rank in (0, r1):
        assert st.time_s[rank].sum() == pytest.approx(st.end_s[rank], rel=1e-12)
    assert st.time_s[0, CATEGORIES.index("bubble")] > 0
