"""``python -m moesim.plots KIND RESULTS... -o FILE``: the same as ``moesim plot``."""

from __future__ import annotations

from moesim.cli.plot import plot

if __name__ == "__main__":
    plot(prog_name="python -m moesim.plots")
