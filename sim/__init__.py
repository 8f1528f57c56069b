"""moesim: a discrete-event simulator of MoE training steps on GPU fabrics.

The Python API (:mod:`moesim.api`), imported on first use so that ``import moesim`` stays
cheap: ``moesim.load_scenario``, ``moesim.simulate``, ``moesim.design``, ``moesim.sweep``.

>>> import moesim
>>> sorted(moesim.__all__)
['design', 'load_scenario', 'simulate', 'sweep']
"""

from __future__ import annotations

from typing import Any

if __name__ != "moesim":  # sim/ installs as moesim, not as a top-level name
    raise ImportError("import moesim: moesim installs sim/ under its own name")

__version__ = "0.1.0"
__all__ = ["design", "load_scenario", "simulate", "sweep"]


def __getattr__(name: str) -> Any:
    """PEP 562: the API functions load :mod:`moesim.api` (and the simulator) when first used."""
    if name in __all__:
        from moesim import api

        return getattr(api, name)
    raise AttributeError(f"module 'moesim' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
