"""How the routing child (:mod:`moesim.step.routing_fork`) sends a layer's routing to the step.

Plain data only, never code: no pickle. A message is a 4-byte little-endian length, a JSON
header ``{"layer": L, "arrays": [[dtype, shape, sent dtype or null], ...] or null}`` (null:
the child could not route layer L; the step routes it itself), then each sent array's raw
bytes in C order. The reader accepts numeric dtypes only and exactly the bytes the header
announces, so a broken or foreign message ends the stream (:class:`EOFError` /
:class:`ValueError`) instead of being run.

Integer arrays travel in the narrowest signed type holding their values (a 1T layer's counts
fit int16: ~450 -> ~75 KiB a layer), all-zero arrays as nothing (:func:`pack`);
:func:`unpack` gives the same dtype, shape and values back.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from typing import BinaryIO

import numpy as np

from moesim.router import RoutingResult

Packed = tuple[str, tuple[int, ...], np.ndarray | None]
"""An array as sent: (its dtype, its shape, its values in a narrower integer type or as they
are; None when all zero)."""
LENGTH = struct.Struct("<I")
NUMERIC = "biuf"
"""dtype kinds an array may have on the wire (bool, signed, unsigned, float)."""


def pack(array: np.ndarray) -> Packed:
    """``array`` for the pipe: an integer array in the narrowest signed type holding its
    values, nothing for all zeros (nothing dropped); other arrays as they are."""
    if array.dtype.kind != "i" or array.size == 0:
        return array.dtype.str, array.shape, array
    low, high = int(array.min()), int(array.max())
    if low == high == 0:
        return array.dtype.str, array.shape, None
    for narrow in (np.int8, np.int16, np.int32):
        if np.iinfo(narrow).min <= low and high <= np.iinfo(narrow).max:
            return array.dtype.str, array.shape, array.astype(narrow)
    return array.dtype.str, array.shape, array


def unpack(packed: Packed) -> np.ndarray:
    """The array :func:`pack` sent (same dtype, shape and values)."""
    dtype, shape, values = packed
    return np.zeros(shape, dtype=dtype) if values is None else values.astype(dtype, copy=False)


def pack_routing(routing: RoutingResult) -> tuple[Packed, ...]:
    """Every field of ``routing``, packed, in field order (``RoutingResult(*unpacked)``)."""
    return tuple(pack(getattr(routing, f.name)) for f in dataclasses.fields(routing))


def write_layer(out: BinaryIO, layer: int, fields: tuple[Packed, ...] | None) -> None:
    """Send ``layer``'s packed routing (None: the child could not route it) and flush."""
    arrays = None if fields is None else [
        [dtype, list(shape), None if values is None else values.dtype.str]
        for dtype, shape, values in fields]
    head = json.dumps({"layer": layer, "arrays": arrays}).encode()
    out.write(LENGTH.pack(len(head)))
    out.write(head)
    for _, _, values in fields or ():
        if values is not None:
            out.write(np.ascontiguousarray(values).tobytes())
    out.flush()


def read_layer(reader: BinaryIO) -> tuple[int, tuple[Packed, ...] | None]:
    """The next (layer, packed routing or None) :func:`write_layer` sent; EOFError at the
    stream's end, ValueError for anything that is not such a message."""
    (size,) = LENGTH.unpack(_exactly(reader, LENGTH.size))
    head = json.loads(_exactly(reader, size))
    layer, arrays = int(head["layer"]), head["arrays"]
    if arrays is None:
        return layer, None
    return layer, tuple(_read_array(reader, *entry) for entry in arrays)


def _read_array(reader: BinaryIO, dtype: str, shape: list[int], sent: str | None) -> Packed:
    shape_t = tuple(int(n) for n in shape)
    if _numeric(dtype) and sent is None:
        return dtype, shape_t, None
    wire = _numeric(sent)
    raw = _exactly(reader, math.prod(shape_t) * wire.itemsize)
    return dtype, shape_t, np.frombuffer(raw, dtype=wire).reshape(shape_t)


def _numeric(dtype: str | None) -> np.dtype:
    if not isinstance(dtype, str):
        raise ValueError(f"routing wire: dtype {dtype!r}")
    dt = np.dtype(dtype)
    if dt.kind not in NUMERIC:
        raise ValueError(f"routing wire: dtype {dtype!r} is not numeric")
    return dt


def _exactly(reader: BinaryIO, n: int) -> bytes:
    data = reader.read(n)
    if len(data) != n:
        raise EOFError("routing wire: stream ended")
    return data
