"""Figures drawn from saved results (JSON, CSV, Parquet); never from live simulator objects."""

if __name__ != "moesim.plots":  # plots/ installs as moesim.plots, never as a top-level name
    raise ImportError("import moesim.plots: moesim installs plots/ under its own name")
