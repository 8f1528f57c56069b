"""moesim: a discrete-event simulator of MoE training steps on GPU fabrics."""

if __name__ != "moesim":  # sim/ installs as moesim, not as a top-level name
    raise ImportError("import moesim: moesim installs sim/ under its own name")

__version__ = "0.1.0"
