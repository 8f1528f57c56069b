"""ParallelLayout: Megatron rank order, folded expert grid, validation, flags."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from moesim.errors import ConfigError
from moesim.model.presets import DEEPSEEK_V3, KIMI_K2, MIXTRAL_8X7B, QWEN3_235B_A22B
from moesim.parallel.layout import GROUP_KINDS, ParallelLayout, layout_from_dict


def test_tp1_ep8_on_64_ranks_ep_groups_are_nodes() -> None:
    # 64 ranks with tp=1 (pp=cp=1) means dp=64; the expert grid then has ep=8 x edp=8.
    lay = ParallelLayout(tp=1, ep=8, dp=64)
    assert (lay.world_size, lay.edp) == (64, 8)
    assert lay.groups("ep") == [tuple(range(8 * i, 8 * i + 8)) for i in range(8)]
    assert lay.groups("edp")[0] == tuple(range(0, 64, 8))
    assert lay.groups("dp")[0] == tuple(range(64))
    assert lay.groups("tp") == [(r,) for r in range(64)]


def test_tp2_ep4_folding() -> None:
    # Dense grid: tp fastest -> TP groups {0,1},{2,3},... Expert grid ignores tp: with etp=1
    # the EP index varies fastest, so EP groups are 4 consecutive ranks spanning two TP groups
    # (the TP pair holds different tokens under sequence parallelism).
    lay = ParallelLayout(tp=2, ep=4, dp=4)
    assert lay.edp == 2
    assert lay.groups("tp") == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert lay.groups("ep") == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert lay.groups("edp") == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert lay.groups("dp") == [(0, 2, 4, 6), (1, 3, 5, 7)]
    # With etp=2 the expert-TP pair is fastest and the EP group of rank 0 strides by 2.
    lay2 = ParallelLayout(tp=2, ep=4, etp=2, dp=4)
    assert lay2.edp == 1
    assert lay2.group_of("ep", 0) == (0, 2, 4, 6)
    assert lay2.group_of("etp", 0) == (0, 1)


def test_pp_outermost_in_both_grids() -> None:
    lay = ParallelLayout(tp=2, pp=4, ep=4, dp=2)  # 16 ranks, edp = 16/(4*4) = 1
    assert lay.groups("pp")[0] == (0, 4, 8, 12)
    assert lay.coords(13) == {"tp": 1, "cp": 0, "dp": 0, "pp": 3, "etp": 0, "ep": 1,
                              "edp": 0}


def test_cp_between_tp_and_dp() -> None:
    lay = ParallelLayout(tp=2, cp=2, dp=2)
    assert lay.groups("cp") == [(0, 2), (1, 3), (4, 6), (5, 7)]
    assert lay.groups("dp") == [(0, 4), (1, 5), (2, 6), (3, 7)]


def _maybe_layout(**kw: int) -> ParallelLayout | None:
    try:
        return ParallelLayout(**kw)
    except ConfigError:
        return None


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.sampled_from([1, 2, 3, 4]),
       st.sampled_from([1, 2, 3]), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]))
def test_grid_invariants(tp: int, cp: int, dp: int, pp: int, ep: int, etp: int) -> None:
    lay = _maybe_layout(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep, etp=etp)
    if lay is None:
        assert (tp * cp * dp * pp) % (etp * ep * pp) != 0
        return
    world = set(range(lay.world_size))
    sizes = {"tp": tp, "cp": cp, "dp": dp, "pp": pp, "ep": ep, "etp": etp, "edp": lay.edp}
    for kind in GROUP_KINDS:
        groups = lay.groups(kind)
        assert all(len(g) == sizes[kind] and list(g) == sorted(g) for g in groups)
        members = [r for g in groups for r in g]
        assert len(members) == len(world) and set(members) == world
    for rank in range(lay.world_size):
        c = lay.coords(rank)
        assert lay.dense_rank(tp=c["tp"], cp=c["cp"], dp=c["dp"], pp=c["pp"]) == rank
        assert lay.expert_rank(etp=c["etp"], ep=c["ep"], edp=c["edp"], pp=c["pp"]) == rank
    # members of a TP group agree on every other dense coordinate
    for group in lay.groups("tp"):
        keys = {tuple(lay.coords(r)[k] for k in ("cp", "dp", "pp")) for r in group}
        assert len(keys) == 1


def test_constructor_rejects() -> None:
    with pytest.raises(ConfigError) as info:
        ParallelLayout(tp=0)
    assert info.value.field == "layout.tp"
    with pytest.raises(ConfigError) as info:
        ParallelLayout(dp=2, ep=3)
    assert info.value.field == "layout.ep"
    with pytest.raises(ConfigError) as info:
        ParallelLayout(vpp=2)
    assert info.value.field == "layout.vpp"
    with pytest.raises(ConfigError):
        ParallelLayout(tp=True)


def test_validate_against_models() -> None:
    with pytest.raises(ConfigError) as info:
        ParallelLayout(dp=3, ep=3).validate(DEEPSEEK_V3)
    assert info.value.field == "layout.ep"
    assert info.value.problem.startswith("256 experts do not divide over ep=3; ep must "
                                         "divide 256")
    with pytest.raises(ConfigError) as info:
        ParallelLayout(tp=3).validate(MIXTRAL_8X7B)  # 32 heads
    assert info.value.field == "layout.tp"
    with pytest.raises(ConfigError) as info:
        ParallelLayout(tp=8).validate(QWEN3_235B_A22B)  # 4 KV heads
    assert "num_key_value_heads=4" in info.value.problem
    with pytest.raises(ConfigError) as info:
        ParallelLayout(dp=2, ep=2, etp=3, tp=3).validate(MIXTRAL_8X7B)
    assert info.value.field in ("layout.tp", "layout.etp")
    with pytest.raises(ConfigError) as info:
        ParallelLayout(pp=32, vpp=2).validate(DEEPSEEK_V3)  # 61 < 64 virtual stages
    assert info.value.field == "layout.pp"
    dense = dataclasses.replace(MIXTRAL_8X7B, moe_layers=(False,) * 32, n_routed_experts=0,
                                top_k=0, moe_intermediate_size=0)
    with pytest.raises(ConfigError, match="no experts"):
        ParallelLayout(ep=2, dp=2).validate(dense)
    ok = ParallelLayout(tp=1, pp=16, ep=64, dp=128)
    assert ok.validate(DEEPSEEK_V3) is ok
    assert ParallelLayout(pp=4, vpp=8, ep=8, dp=16).validate(MIXTRAL_8X7B)


def test_stage_layers() -> None:
    assert ParallelLayout(pp=8).stage_layers(61) == (7, 8, 8, 8, 8, 8, 8, 6)
    assert ParallelLayout(pp=16).stage_layers(61) == (3,) + (4,) * 14 + (2,)
    assert ParallelLayout(pp=2).stage_layers(61) == (31, 30)
    assert ParallelLayout(pp=4).stage_layers(32) == (8, 8, 8, 8)
    assert ParallelLayout(pp=4).stage_layers(5) == (2, 1, 1, 1)
    for pp in range(1, 20):
        stages = ParallelLayout(pp=pp).stage_layers(61)
        assert sum(stages) == 61 and len(stages) == pp and min(stages) >= 1


def test_megatron_args() -> None:
    args = ParallelLayout(tp=1, pp=4, vpp=8, ep=8, dp=16).megatron_args(num_layers=32)
    assert args == ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "4",
                    "--context-parallel-size", "1", "--expert-model-parallel-size", "8",
                    "--expert-tensor-parallel-size", "1",
                    "--num-layers-per-virtual-pipeline-stage", "1"]
    args = ParallelLayout(tp=2, pp=8, ep=8, dp=8).megatron_args(num_layers=61)
    assert "--sequence-parallel" in args
    assert args[-4:] == ["--decoder-first-pipeline-num-layers", "7",
                         "--decoder-last-pipeline-num-layers", "6"]
    with pytest.raises(ConfigError) as info:
        ParallelLayout(pp=4, vpp=2).megatron_args()
    assert info.value.field == "num_layers"
    with pytest.raises(ConfigError) as info:
        ParallelLayout(pp=4, vpp=2).megatron_args(num_layers=61)
    assert info.value.field == "layout.vpp"


def test_layout_from_dict_and_errors() -> None:
    assert layout_from_dict({"tp": 2, "dp": 4}) == ParallelLayout(tp=2, dp=4)
    with pytest.raises(ConfigError) as info:
        layout_from_dict({"tp": 2, "zp": 1})
    assert info.value.field == "layout.zp" and "allowed: tp, pp" in info.value.problem
    with pytest.raises(ConfigError):
        ParallelLayout().groups("xp")
    with pytest.raises(ConfigError):
        ParallelLayout(dp=2).coords(2)
    assert KIMI_K2.n_routed_experts % ParallelLayout(ep=64, dp=64).ep == 0


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(GROUP_KINDS), st.integers(0, 63))
def test_group_of_matches_groups(kind: str, rank: int) -> None:
    lay = ParallelLayout(tp=2, cp=2, dp=4, pp=4, ep=4, etp=2)  # 64 ranks, edp = 1
    assert lay.group_of(kind, rank) in lay.groups(kind)
    assert rank in lay.group_of(kind, rank)
