"""Old fabric parameter names, still accepted with a one-line notice on stderr.

Until 2026-12 the NIC rate keys ended in ``_gbps`` but held gigabytes per second, so
``nic_bw_gbps: 400`` (what one types for a 400G NIC) silently built an 8x NIC. Rates a
user types are now line rates in gigabits per second (``nic_gbit: 400``); an old key is
converted (x 8) and named on stderr once per process, with the key that replaces it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from moesim.topologies.constants import BITS_PER_BYTE
from moesim.topologies.errors import TopologyError

RENAMED: dict[str, str] = {"nic_bw_gbps": "nic_gbit", "link_bw_gbps": "link_gbit"}
"""Old key (GB/s) -> new key (Gbit/s line rate); the value is multiplied by 8."""

_noticed: set[str] = set()


def upgrade_params(params: Mapping[str, Any], field: str) -> dict[str, Any]:
    """``params`` with old GB/s keys replaced by their Gbit/s keys (value x 8)."""
    out = dict(params)
    for old, new in RENAMED.items():
        if old not in out:
            continue
        if new in out:
            raise TopologyError(f"{field}.{old}", f"give {new} (Gbit/s) alone; {old} is its "
                                                  f"deprecated GB/s form")
        value = out.pop(old)
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        out[new] = value * BITS_PER_BYTE if ok else value  # a bad value fails in the builder
        _notice(old, new, value, out[new])
    return out


def _notice(old: str, new: str, value: object, upgraded: object) -> None:
    if old in _noticed:
        return
    _noticed.add(old)
    print(f"moesim: {old} is deprecated (it meant GB/s); write {new}, the line rate in Gbit/s "
          f"({old}: {value} is {new}: {upgraded})", file=sys.stderr)
