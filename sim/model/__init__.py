"""Model configurations and parameter/FLOP accounting (per-GPU memory: moesim.parallel.memory)."""

from moesim.model.accounting import ParamBreakdown, ParamCounts, param_counts
from moesim.model.config import ModelConfig, model_from_dict
from moesim.model.flops import FlopCounts, flops_per_token, training_flops
from moesim.model.hf import model_from_hf
from moesim.model.presets import MODELS, get_model, register_model

__all__ = [
    "MODELS",
    "FlopCounts",
    "ModelConfig",
    "ParamBreakdown",
    "ParamCounts",
    "flops_per_token",
    "get_model",
    "model_from_dict",
    "model_from_hf",
    "param_counts",
    "register_model",
    "training_flops",
]
