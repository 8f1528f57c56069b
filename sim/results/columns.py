"""Frozen records of numpy columns that round-trip through JSON exactly.

A run record (:mod:`moesim.results.group_record`, :mod:`moesim.results.walk_record`) is a
frozen dataclass whose fields are numpy arrays, tuples of strings, ints and floats. Its
:func:`to_plain` is strict JSON (arrays as nested lists, NaN as ``null``); :func:`from_plain`
rebuilds the arrays with the dtypes the record names (``null`` -> NaN). Python floats print
and parse back bit for bit, so a record saved and loaded holds the very numbers it was made
with.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, ClassVar, TypeVar

import numpy as np

T = TypeVar("T")
R = TypeVar("R", bound="ColumnRecord")


class ColumnRecord:
    """Base of the frozen record dataclasses: ``KIND`` names the record in its dict,
    ``DTYPES`` its array fields (name -> dtype, number of dimensions)."""

    KIND: ClassVar[str]
    DTYPES: ClassVar[dict[str, tuple[str, int]]]

    def to_dict(self) -> dict[str, Any]:
        """Plain types (strict JSON); ``kind`` says which record it is."""
        return {"kind": self.KIND, **to_plain(self)}

    @classmethod
    def from_dict(cls: type[R], plain: dict[str, Any]) -> R:
        """The record of :meth:`to_dict`'s dict."""
        return from_plain(cls, {k: v for k, v in plain.items() if k != "kind"}, cls.DTYPES)

    def equal(self, other: object) -> bool:
        """Every field the same (arrays element by element, NaN equal to NaN)."""
        return type(other) is type(self) and same(self, other, self.DTYPES)


def to_plain(record: object) -> dict[str, Any]:
    """The fields of dataclass ``record`` in plain types (arrays as nested lists)."""
    out: dict[str, Any] = {}
    for f in fields(record):  # type: ignore[arg-type]
        value = getattr(record, f.name)
        if isinstance(value, np.ndarray):
            out[f.name] = _nan_to_none(value).tolist()
        else:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def _nan_to_none(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind != "f" or not np.isnan(values).any():
        return values
    # numpy's stubs take no None scalar; None is what an object array holds for a NaN here
    return np.where(np.isnan(values), None, values.astype(object))  # type: ignore[call-overload]


def from_plain(cls: type[T], plain: dict[str, Any], dtypes: dict[str, tuple[str, int]]) -> T:
    """``cls`` rebuilt from :func:`to_plain`'s dict: fields in ``dtypes`` (name -> dtype,
    number of dimensions) become arrays (an empty one gets that many dimensions of length 0)."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    if set(plain) != names:
        raise ValueError(f"record fields differ: missing {sorted(names - set(plain))}, "
                         f"unknown {sorted(set(plain) - names)}")
    kw: dict[str, Any] = {}
    for name in names:
        value = plain[name]
        if name in dtypes:
            dtype, ndim = dtypes[name]
            arr = np.asarray(value, dtype=dtype)
            kw[name] = arr.reshape((0,) * ndim) if arr.size == 0 and arr.ndim != ndim else arr
        elif isinstance(value, list):
            kw[name] = tuple(value)
        else:
            kw[name] = value
    return cls(**kw)


def same(a: object, b: object, dtypes: dict[str, tuple[str, int]]) -> bool:
    """Records ``a`` and ``b`` hold the same values: arrays (the ``dtypes`` fields) element by
    element with NaN equal to NaN, the other fields by ``==``."""
    for f in fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name not in dtypes:
            if x != y:
                return False
        elif x.size == 0 == y.size and x.ndim == y.ndim:
            continue  # empty: JSON keeps no trailing dimensions
        elif x.shape != y.shape or not np.array_equal(x, y, equal_nan=x.dtype.kind == "f"):
            return False
    return True
