"""Which forward compute each layer runs again before its backward (``StepSpec.recompute``).

``recompute`` is ``auto`` (the memory plan's choice), ``none``, ``selective``, ``full``, or a
list of Megatron-LM ``--recompute-modules`` names joined by ``+`` (Megatron-LM
``TransformerConfig.recompute_modules``, with ``--recompute-granularity selective``), of
those modelled here:

* ``core_attn``: the attention core's forward (what ``selective`` runs);
* ``mla_up_proj`` (MLA models): the query and key/value up-projection GEMMs with their input
  casts (:func:`moesim.workload.costs.mla_up_proj_s`; the RoPE part is not charged again);
* ``mlp``: the dense MLP's forward, on dense layers only: Megatron-LM's ``TransformerLayer``
  (``megatron/core/transformer/transformer_layer.py``, 2025 versions: ``if "mlp" in
  self.config.recompute_modules: if not self.is_moe_layer: self.recompute_mlp = True``; the
  version read is not pinned) skips MoE layers, which have ``moe`` and ``shared_experts``;
* ``layernorm``: the input and pre-MLP layernorms (``recompute_input_layernorm``,
  ``recompute_pre_mlp_layernorm`` in the same ``TransformerLayer``): two memory-bound norm
  kernels over the rank's own tokens, each reading and writing the hidden states in BF16
  (``2 x tokens x hidden x 2 B``; :func:`moesim.workload.costs.norms_recompute_s`);
* ``moe_act``: the routed experts' activation (``TEGroupedMLP.activation_recompute``,
  ``megatron/core/transformer/moe/experts.py``): the SwiGLU between fc1 and fc2 over the
  token copies each EP rank received, as its forward costs it
  (:func:`moesim.workload.costs.moe_act_s`);
* ``shared_experts``: the shared experts' forward (MoE layers with shared experts);
* ``moe``: the MoE layer's forward compute (router, routed experts, unpermute, shared
  experts); as with ``full``, the dispatch and combine all-to-alls Megatron runs again inside
  it are not simulated again (optimistic). With ``moe`` in the list, ``moe_act`` and
  ``shared_experts`` add nothing more (they are inside it).

``auto`` is what the memory plan chooses for this layout
(:func:`moesim.parallel.memory.choose_recompute`, the rule ``moesim plan memory`` applies:
selective if it fits the GPU's HBM, else full), with the step's own schedule and precision.
``selective`` is Megatron ``--recompute-granularity selective`` with its default module
``core_attn``; ``mla_up_proj`` is what DeepSeek-V3 recomputes (report section 3.4, with the
RMSNorms, left out: memory-bound, ~0.1 ms per layer at 4096 tokens). ``full``
(``--recompute-granularity full --recompute-method uniform --recompute-num-layers 1``) runs
each layer's whole forward compute again (attention, router, experts, unpermute;
the all-to-alls Megatron's full recompute also re-runs are not simulated again). A step given
modules is not checked against the memory plan (the plan neither chooses nor counts them).
The FP8 casts Megatron adds when a recomputed norm or activation feeds an FP8 GEMM
(``set_for_recompute_input_layernorm``, ``set_save_original_input``) are not charged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

import numpy as np

from moesim.errors import ConfigError
from moesim.hardware import GpuSpec
from moesim.model import ModelConfig
from moesim.parallel.memory import RECOMPUTE_ORDER
from moesim.workload.costs import ffn_s, mla_up_proj_s, moe_act_s, norms_recompute_s
from moesim.workload.shape import LayerCosts, LayerShape

RECOMPUTE_MODULES = ("core_attn", "mla_up_proj", "mlp", "layernorm", "moe_act",
                     "shared_experts", "moe")
"""The Megatron ``--recompute-modules`` names the step models."""

RECOMPUTES = ("auto", "none", *RECOMPUTE_ORDER, *RECOMPUTE_MODULES)
"""The single-word values of ``StepSpec.recompute`` (modules may also be joined by ``+``)."""


def modules(recompute: str) -> tuple[str, ...]:
    """The modules of a ``+``-joined ``recompute`` (``selective`` is ``core_attn``); () for
    ``none``, ``full`` or ``auto``."""
    if recompute in ("auto", "none", "full"):
        return ()
    if recompute == "selective":
        return ("core_attn",)
    return tuple(recompute.split("+"))


def check_recompute(recompute: str, model: ModelConfig) -> None:
    """ConfigError unless ``recompute`` is one of :data:`RECOMPUTES` or distinct modules of
    :data:`RECOMPUTE_MODULES` joined by ``+``; ``mla_up_proj`` needs an MLA model."""
    names = modules(recompute) if isinstance(recompute, str) else ("?",)
    if recompute not in RECOMPUTES and (
            len(names) < 2 or len(set(names)) != len(names)
            or any(n not in RECOMPUTE_MODULES for n in names)):
        raise ConfigError("step.recompute", f"unknown {recompute!r}; allowed: "
                          + ", ".join(RECOMPUTES) + ", or distinct modules of "
                          + ", ".join(RECOMPUTE_MODULES) + " joined by '+'")
    if "mla_up_proj" in names and model.attention != "mla":
        raise ConfigError("step.recompute", f"mla_up_proj needs an MLA model; "
                          f"{model.name} has {model.attention} attention")


class Layer(Protocol):
    """What :func:`recompute_s` reads of a layer (``moesim.step.plan.LayerPlan``)."""

    @property
    def moe(self) -> LayerCosts | None: ...
    @property
    def dense_fwd_s(self) -> float: ...
    @property
    def ffn_fwd_s(self) -> float: ...
    @property
    def core_fwd_s(self) -> float: ...
    @property
    def routed_copies(self) -> np.ndarray | None: ...


@dataclass(frozen=True)
class ModuleCosts:
    """The per-layer forward costs of the modules that do not come with the layer's plan:
    ``up_proj_s`` (MLA up-projections), ``norms_s`` (both layernorms), ``shared_fwd_s`` (the
    shared experts of a MoE layer) and ``act_s`` (the routed experts' activation, per EP rank,
    from the token copies each received)."""

    up_proj_s: float = 0.0
    norms_s: float = 0.0
    shared_fwd_s: float = 0.0
    act_s: Callable[[np.ndarray], np.ndarray] | None = None

    @classmethod
    def of(cls, model: ModelConfig, gpu: GpuSpec, shape: LayerShape, names: tuple[str, ...]
           ) -> ModuleCosts:
        """The costs of the modules in ``names`` (the others stay 0 / None)."""
        shared = model.shared_expert_intermediate_size * model.n_shared_experts
        return cls(
            mla_up_proj_s(shape, gpu) if "mla_up_proj" in names else 0.0,
            norms_recompute_s(shape, gpu) if "layernorm" in names else 0.0,
            ffn_s(shape, gpu, shared, 1.0, False) if shared and "shared_experts" in names
            else 0.0,
            partial(moe_act_s, shape, gpu) if "moe_act" in names else None,
        )


def recompute_s(layer: Layer, recompute: str, costs: ModuleCosts) -> np.ndarray | None:
    """The forward compute ``recompute`` runs again before ``layer``'s backward, per EP rank
    of a MoE layer (``LayerPlan.recompute_s``; None: nothing): the sum of its modules' (module
    docstring; ``costs``: those not in the layer's plan), or every forward kernel (``full``)."""
    if recompute == "none":
        return None
    if recompute == "full":
        if layer.moe is None:
            return np.array([layer.dense_fwd_s])
        c = layer.moe
        return np.asarray(c.attn_fwd + c.router + c.experts_fwd + c.unpermute + layer.ffn_fwd_s,
                          dtype=float)
    names = modules(recompute)
    ranks = 1 if layer.moe is None else layer.moe.attn_fwd.size
    total = np.zeros(ranks)
    for name in names:  # a short list of names, not a hot path
        total = total + _module_s(layer, name, costs, "moe" in names)
    return total


def _module_s(layer: Layer, name: str, costs: ModuleCosts, whole_moe: bool
              ) -> np.ndarray | float:
    """One module's forward seconds on ``layer`` (per EP rank where it varies)."""
    moe = layer.moe
    if name == "core_attn":
        return layer.core_fwd_s
    if name == "mla_up_proj":
        return costs.up_proj_s
    if name == "layernorm":
        return costs.norms_s
    if name == "mlp":
        return layer.ffn_fwd_s if moe is None else 0.0
    if moe is None or (whole_moe and name in ("moe_act", "shared_experts")):
        return 0.0  # MoE modules: nothing on a dense layer; inside ``moe`` when it is listed
    if name == "shared_experts":
        return costs.shared_fwd_s
    if name == "moe_act":
        copies = layer.routed_copies
        return 0.0 if copies is None or costs.act_s is None else costs.act_s(copies)
    # "moe": TP-sharded shared experts sit in ffn_fwd_s, unsharded ones in experts_fwd
    return np.asarray(moe.router + moe.experts_fwd + moe.unpermute + layer.ffn_fwd_s,
                      dtype=float)
