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
  version read is not pinned) skips MoE layers, which have ``moe`` and ``shared_experts``
  for that (not modelled).

``auto`` is what the memory plan chooses for this layout
(:func:`moesim.parallel.memory.choose_recompute`, the rule ``moesim plan memory`` applies:
selective if it fits the GPU's HBM, else full), with the step's own schedule and precision.
``selective`` is Megatron ``--recompute-granularity selective`` with its default module
``core_attn``; ``mla_up_proj`` is what DeepSeek-V3 recomputes (report section 3.4, with the
RMSNorms, left out: memory-bound, ~0.1 ms per layer at 4096 tokens). ``full``
(``--recompute-granularity full --recompute-method uniform --recompute-num-layers 1``) runs
each layer's whole forward compute again (attention, router, experts, unpermute;
the all-to-alls Megatron's full recompute also re-runs are not simulated again). Not modelled:
``layernorm``, ``moe_act`` (memory-bound kernels), ``moe``, ``shared_experts``. A step given
modules is not checked against the memory plan (the plan neither chooses nor counts them).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from moesim.errors import ConfigError
from moesim.model import ModelConfig
from moesim.parallel.memory import RECOMPUTE_ORDER
from moesim.workload.shape import LayerCosts

RECOMPUTE_MODULES = ("core_attn", "mla_up_proj", "mlp")
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


def recompute_s(layer: Layer, recompute: str, up_proj_s: float) -> np.ndarray | None:
    """The forward compute ``recompute`` runs again before ``layer``'s backward, per EP rank
    of a MoE layer (``LayerPlan.recompute_s``; None: nothing): the sum of its modules' (module
    docstring; ``up_proj_s``: the MLA up-projections'), or every forward kernel (``full``)."""
    if recompute == "none":
        return None
    if recompute == "full":
        if layer.moe is None:
            return np.array([layer.dense_fwd_s])
        c = layer.moe
        return np.asarray(c.attn_fwd + c.router + c.experts_fwd + c.unpermute + layer.ffn_fwd_s,
                          dtype=float)
    per_module = {"core_attn": layer.core_fwd_s, "mla_up_proj": up_proj_s,
                  "mlp": layer.ffn_fwd_s if layer.moe is None else 0.0}
    total = 0.0
    for name in modules(recompute):  # the same kernels on every EP rank
        total += per_module[name]
    return np.full(1 if layer.moe is None else layer.moe.attn_fwd.size, total)
