"""What one MoE layer's cost model takes (:class:`LayerShape`) and gives (:class:`LayerCosts`).

The records sit below :mod:`moesim.workload.costs` and :mod:`moesim.workload.elementwise`, which
both price the layer from a shape and add to its costs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from moesim.calibration import FP8_BLOCK_WGRAD_FRACTION
from moesim.hardware.precision import get_precision
from moesim.hardware.roofline import GemmShape
from moesim.model import ModelConfig

BF16_BYTES = 2  # bytes per bf16 element: hidden states, activations, gradients on the wire
MAIN_GRAD_BYTES = 4
"""Bytes per element of the gradient buffer (``main_grad``) the weight gradients accumulate into:
fp32, Megatron-LM's default with BF16 training (``accumulate_allreduce_grads_in_fp32``; BF16
with ``--grad-reduce-in-bf16``: moesim.step.spec.GRAD_REDUCE_BYTES)."""


@dataclass(frozen=True)
class LayerShape:
    """What the costs need from the model and the micro-batch."""

    model: ModelConfig
    tokens_per_rank: int  # tokens the rank holds between layers (its TP/CP shard)
    seq_len: int
    compute_dtype: str = "bf16"  # the precision (moesim.hardware.precision.PRECISIONS)
    tp: int = 1  # tensor-parallel degree (with sequence parallelism)
    cp: int = 1  # context-parallel degree
    etp: int = 1  # expert-tensor-parallel degree
    main_grad_bytes: int = MAIN_GRAD_BYTES  # the gradient buffer the wgrads accumulate into

    @property
    def hidden(self) -> int:
        return self.model.hidden_size

    @property
    def gemm_dtype(self) -> str:
        """The GEMM rate of the precision: "bf16" or "fp8"."""
        return get_precision(self.compute_dtype).gemm_dtype

    @property
    def wgrad_out_bytes(self) -> float:
        """Bytes a wgrad GEMM moves per weight-gradient element: it reads and writes the
        ``main_grad`` element (fused accumulation, :mod:`moesim.hardware.roofline`)."""
        return 2.0 * self.main_grad_bytes

    @property
    def wgrad_rate(self) -> float:
        """The fraction of the sustained GEMM rate the precision's wgrad kernels reach: FP8
        blockwise ones less (:data:`moesim.calibration.FP8_BLOCK_WGRAD_FRACTION`), else 1."""
        return FP8_BLOCK_WGRAD_FRACTION if self.compute_dtype == "fp8-block" else 1.0

    def gemm(self, m: np.ndarray | float, n: np.ndarray | float, k: np.ndarray | float
             ) -> GemmShape:
        """A layer GEMM ``[m, k] @ [k, n]`` at this shape's precision, its wgrad accumulating
        into ``main_grad`` (:attr:`wgrad_out_bytes`) at :attr:`wgrad_rate`."""
        return GemmShape(m, n, k, self.gemm_dtype, self.wgrad_out_bytes, self.wgrad_rate)

    @property
    def gathered_tokens(self) -> int:
        """Tokens of the TP group after the sequence-parallel all-gather."""
        return self.tokens_per_rank * self.tp

    @property
    def tp_buffer_bytes(self) -> float:
        """bf16 hidden states of the gathered tokens: the TP all-gather / reduce-scatter size."""
        return float(self.gathered_tokens * self.hidden * BF16_BYTES)


@dataclass(frozen=True)
class LayerCosts:
    """Per-rank compute times (seconds) of one layer's ops, forward and backward."""

    attn_fwd: np.ndarray
    router: np.ndarray
    experts_fwd: np.ndarray
    unpermute: np.ndarray
    attn_bwd: np.ndarray
    experts_bwd: np.ndarray
