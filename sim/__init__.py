"""moesim: a discrete-event simulator of MoE training steps on GPU fabrics."""

__version__ = "0.1.0"
