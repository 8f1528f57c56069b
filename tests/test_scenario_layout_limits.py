"""The layout's world-size limit counts tp x cp x dp x pp, as ParallelLayout.world_size does:
EP folds into dp, so a 9,216-GPU EP64 layout is 9,216 GPUs, not 9,216 x 64."""

from __future__ import annotations

import pytest

from moesim.errors import ConfigError
from moesim.parallel.layout import ParallelLayout
from moesim.scenario.checks import check_layout_limits


def test_ep_folds_into_the_world() -> None:
    check_layout_limits(ParallelLayout(pp=16, ep=64, dp=576))  # 9,216 GPUs
    check_layout_limits(ParallelLayout(tp=2, pp=12, vpp=8, ep=16, dp=384))


def test_a_world_over_the_limit_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"layout: 262144 is over the limit of 131072 GPUs"):
        check_layout_limits(ParallelLayout(tp=8, pp=32, dp=1024))
