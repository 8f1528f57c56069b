"""The command line's allocator setting: freed blocks are kept for reuse, not handed back.

glibc's malloc serves a block over its mmap threshold (128 KiB at start, raised as such blocks
are freed, up to 32 MiB) with a fresh ``mmap`` and unmaps it when it is freed, and hands the
top of its heap back to the kernel past the trim threshold (twice the mmap threshold). A step
makes and drops numpy arrays of a few hundred KiB by the thousand (each MoE layer's routing
draws, the rate solver's matrices), so every such array's pages were faulted in afresh:
~94,000 page faults and ~0.4 s of system CPU for the 9,216-GPU fast step
(benchmarks/bench_step.py --cli). With the thresholds fixed at :data:`MMAP_THRESHOLD_BYTES`
and :data:`TRIM_THRESHOLD_BYTES` (``mallopt``; fixing them also stops the dynamic raise) the
same step takes ~38,000 faults, about its peak resident pages, and ~0.25 s of system CPU, at
+7 MiB peak (161 -> 168 MiB); results are the same bytes. Set by the ``moesim`` command for
its process (a library user's process is left alone); a no-op off glibc.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1
"""glibc ``malloc.h``: the ``mallopt`` parameter of the heap-trim threshold."""
M_MMAP_THRESHOLD = -3
"""glibc ``malloc.h``: the ``mallopt`` parameter of the mmap threshold."""
MMAP_THRESHOLD_BYTES = 32 << 20
"""Blocks from this size up get their own mapping (glibc's ceiling for its dynamic raise)."""
TRIM_THRESHOLD_BYTES = 64 << 20
"""Free memory at the heap's top kept up to this size (twice the mmap threshold, as glibc
sets it when it raises that threshold)."""


def keep_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (module docstring); True when
    set, False off glibc (nothing changed)."""
    try:
        if not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return False
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError, ValueError):  # no confstr name, no libc symbol
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
                and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))
