"""Published MoE model configurations, as module-level presets and a registry by name.

Each preset is its model's public Hugging Face ``config.json`` (the fields moesim reads and a
few more, values as published), shipped as data in ``sim/model/hf_configs/<name>.yaml`` with
its source URL and published parameter counts, and read by the same reader as a user's file
(:func:`moesim.model.hf.model_from_hf`): DeepSeek-V3, Kimi K2, Mixtral 8x7B, Qwen3-235B-A22B.

``moe-1t`` is moesim's default one-trillion-parameter design model. It *is* Kimi K2's
configuration under another name, so that "a 1T MoE" in a plan names one definite model
(DESIGN.md: "A '1T MoE' must first say which one it is").
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from moesim.io import read_yaml
from moesim.model.config import ModelConfig
from moesim.model.hf import model_from_hf
from moesim.registry import Registry

HF_CONFIGS = Path(__file__).with_name("hf_configs")
"""The shipped config.json data, one ``<preset name>.yaml`` a model."""


def _published(name: str) -> ModelConfig:
    """The preset ``name`` from its shipped Hugging Face config."""
    data = read_yaml(HF_CONFIGS / f"{name}.yaml", f"model {name}")
    assert isinstance(data, dict), name  # a shipped config.json: a mapping
    return model_from_hf(data, name=name)


DEEPSEEK_V3 = _published("deepseek-v3")
KIMI_K2 = _published("kimi-k2")
MIXTRAL_8X7B = _published("mixtral-8x7b")
QWEN3_235B_A22B = _published("qwen3-235b-a22b")
MOE_1T = dataclasses.replace(KIMI_K2, name="moe-1t")

MODELS = Registry[ModelConfig]("model", "model", sorted_names=True)
"""Model presets by name (a read-only mapping)."""


def register_model(cfg: ModelConfig) -> ModelConfig:
    """Add a model to :data:`MODELS`; a duplicate name is an error."""
    return MODELS.add(cfg.name, cfg)


def get_model(name: str) -> ModelConfig:
    """The registered model called ``name``."""
    return MODELS.lookup(name)


for _cfg in (DEEPSEEK_V3, KIMI_K2, MIXTRAL_8X7B, QWEN3_235B_A22B, MOE_1T):
    register_model(_cfg)
