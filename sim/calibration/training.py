"""Training-step, memory and analysis factors that used to live beside the code using them.

Every constant here is listed with its unit, source and kind in
:data:`moesim.calibration.CONSTANTS`.
"""

from __future__ import annotations

GIB = 2**30

#: Mixed-precision Adam state per parameter held by the optimizer: FP32 master weight 4 +
#: Adam m 4 + v 4 = 12 B (Megatron-LM ``docs/source/api-guide/dist_optimizer.md``, core_r0.9:
#: "fp32 main params, fp32 exp_avg, fp32 exp_avg_sq"). Sharded over DP by the distributed
#: optimizer (:mod:`moesim.parallel.memory`).
OPTIMIZER_STATE_BYTES_PER_PARAM = 12

#: FP32 ``main_grad`` per parameter (same Megatron document: gradients accumulated in fp32).
GRAD_BYTES_PER_PARAM = 4

#: HBM traffic of one Adam step per parameter of the local shard: read FP32 master, m, v and
#: the FP32 grad (16 B), write master, m, v (12 B), write the BF16 copy (2 B) = 30 B.
#: Counting, from the same state layout; the step is memory-bound
#: (:func:`moesim.hardware.memory_bound_time_s`).
OPTIMIZER_STEP_BYTES_PER_PARAM = 30.0

#: CUDA context, cuBLAS/Transformer-Engine workspaces and NCCL communicator buffers per GPU.
#: Assumption (engineering estimate, not a measurement): ~0.5 GiB context + ~0.5 GiB
#: workspaces + ~2 GiB NCCL buffers.
WORKSPACE_BYTES = 3 * GIB

#: Share of HBM the memory plan leaves unplanned (allocator fragmentation, transient peaks).
#: Assumption: 10%, the design's default reserve.
HBM_RESERVE_FRACTION = 0.1

#: The layout estimate's exposed share of ring-attention K/V passes. Assumption: half (used
#: only by the planner's pruning estimate, :mod:`moesim.plan.estimate`; the step simulator
#: times ring attention as flows).
CP_EXPOSED_FRACTION = 0.5

#: Attribution threshold: a rank whose share of the bytes or tokens of a phase is this many
#: times the mean counts as hot (names stragglers; changes no step time). Assumption: 10%.
HOT_RATIO = 1.1

#: The "uncongested core" counterfactual multiplies switch-to-switch link bandwidth by this
#: (attribution of congestion; changes no step time). Assumption: 1000x = no congestion.
UNCONGESTED_FACTOR = 1e3
