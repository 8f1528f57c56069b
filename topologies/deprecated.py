"""Old fabric parameter names, still accepted with a one-line notice on stderr.

Until 2026-12 the NIC rate keys ended in ``_gbps`` but held gigabytes per second, so
``nic_bw_gbps: 400`` (what one types for a 400G NIC) silently built an 8x NIC. Rates a
user types are now line rates in gigabits per second (``nic_gbit: 400``). An old key is
read as what its name says, gigabits per second (``nic_bw_gbps: 400`` is ``nic_gbit: 400``,
a 400G NIC), and named on stderr once per process with the key that replaces it. The notice
also says what changed: a file written when the key held GB/s (``nic_bw_gbps: 50`` for a
400G NIC) now describes a NIC 8x slower, and must say ``nic_gbit: 400``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from moesim.topologies.errors import TopologyError

RENAMED: dict[str, str] = {"nic_bw_gbps": "nic_gbit", "link_bw_gbps": "link_gbit"}
"""Old key -> new key (Gbit/s line rate); the value is read as Gbit/s, as the old name says."""

_noticed: set[str] = set()


def upgrade_params(params: Mapping[str, Any], field: str) -> dict[str, Any]:
    """``params`` with old ``_gbps`` keys replaced by their ``_gbit`` keys (same value)."""
    out = dict(params)
    for old, new in RENAMED.items():
        if old not in out:
            continue
        if new in out:
            raise TopologyError(f"{field}.{old}", f"give {new} (Gbit/s) alone; {old} is its "
                                                  f"deprecated name")
        value = out.pop(old)
        out[new] = value  # a bad value fails in the builder, named as the new key
        _notice(old, new, value)
    return out


def _notice(old: str, new: str, value: object) -> None:
    if old in _noticed:
        return
    _noticed.add(old)
    print(f"moesim: {old} is deprecated; read as {new}: {value} (Gbit/s line rate; before "
          f"2026-12 it was read as GB/s, 8x more)", file=sys.stderr)
