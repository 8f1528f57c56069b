"""The small rail fabric and layout that fast mode's tests and its estimates' tests share."""

from __future__ import annotations

from moesim.parallel.layout import ParallelLayout
from moesim.scenario.schema import FabricSpec

# 32 H100 on a rail fat tree, 8 hosts of 4 GPUs
RAIL32 = FabricSpec(preset="rail-h800-64", params=(("hosts", 8), ("gpus_per_host", 4),
                                                   ("gpu", "H100")),
                    multipath="dmodk", batch_window_rel=0.02)
LAYOUT = ParallelLayout(ep=8, dp=16, pp=2)  # EP8 over 2 hosts of 4, stage 1 on hosts 4-7
