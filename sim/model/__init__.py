"""Model configurations, parameter/FLOP accounting and per-GPU memory budgets."""

from sim.model.accounting import ParamBreakdown, ParamCounts, param_counts
from sim.model.config import ModelConfig, model_from_dict
from sim.model.flops import FlopCounts, flops_per_token, training_flops
from sim.model.hf import model_from_hf
from sim.model.memory import Fit, MemoryBudget, fits, state_memory
from sim.model.presets import MODELS, get_model, register_model

__all__ = [
    "MODELS",
    "Fit",
    "FlopCounts",
    "MemoryBudget",
    "ModelConfig",
    "ParamBreakdown",
    "ParamCounts",
    "fits",
    "flops_per_token",
    "get_model",
    "model_from_dict",
    "model_from_hf",
    "param_counts",
    "register_model",
    "state_memory",
    "training_flops",
]
