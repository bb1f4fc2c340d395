"""Checks and conversions of single values and columns for the fields of a batch.

The private helpers :class:`~specula.events.registry.TypeRegistry` builds and validates
batches with: payload dtypes, lossless conversion of Python values and NumPy columns,
and the short value reprs of error messages.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from specula.events.core import _CORE_NAMES, _MAX_FLAGS, CORE_DTYPE, InvalidEvent

if TYPE_CHECKING:
    from specula.events.registry import EventType

# Keyword names of TypeRegistry.batch that are not columns, so no payload field may use them.
_RESERVED_NAMES = frozenset({"dtype"})


class _ConversionError(Exception):
    """Internal signal that a single value cannot be stored in a field."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _payload_dtype(type_name: str, field: str, spec: Any) -> np.dtype:
    """Resolve and check the dtype of a payload field; returns it in native byte order."""
    if not field.isidentifier():
        raise ValueError(
            f"payload field {field!r} of event type {type_name!r} is not an identifier"
        )
    if field in _CORE_NAMES:
        raise ValueError(
            f"payload field {field!r} of event type {type_name!r} collides with a core field"
        )
    if field in _RESERVED_NAMES:
        raise ValueError(f"payload field name {field!r} of event type {type_name!r} is reserved")
    try:
        dtype = np.dtype(spec)
    except TypeError:
        raise ValueError(
            f"payload field {field!r} of event type {type_name!r}: unknown dtype {spec!r}"
        ) from None
    if dtype.kind not in "biuf" or dtype.itemsize > 8 or dtype.names is not None:
        raise ValueError(
            f"payload field {field!r} of event type {type_name!r} must be bool, integer or "
            f"float of at most 64 bits, got {dtype}"
        )
    return dtype.newbyteorder("=")


def _describe_fields(fields: tuple[tuple[str, np.dtype], ...],
                     strings: frozenset[str] = frozenset()) -> str:
    return "(" + ", ".join(f"{name}: {'str' if name in strings else dtype.name}"
                           for name, dtype in fields) + ")"


def _show(value: Any) -> str:
    """Short repr of a value for error messages, NumPy scalars shown as Python ones."""
    if isinstance(value, np.generic) and value.dtype.kind in "biufc":
        value = value.item()
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _require_type_fields(dtype: np.dtype, etype: EventType) -> None:
    """Raise ValueError unless ``dtype`` holds the core fields and the payload of ``etype``."""
    if dtype.names is None:
        raise ValueError(f"batch dtype must be structured, got {dtype}")
    for name, field_dtype in (*((n, CORE_DTYPE[n]) for n in _CORE_NAMES), *etype.fields):
        expected = np.dtype(field_dtype)
        if name not in dtype.names:
            raise ValueError(f"batch dtype lacks field {name!r} of event type {etype.name!r}")
        if dtype[name] != expected:
            raise ValueError(
                f"batch dtype has field {name!r} as {dtype[name]}, event type "
                f"{etype.name!r} needs {expected}"
            )


def _convert(value: Any, dtype: np.dtype, field: str, *, strict: bool) -> Any:
    """Convert one value for a field of ``dtype`` to a Python scalar, or raise _ConversionError.

    ``strict`` integer fields accept only integers; otherwise integral floats are
    accepted too, because they convert without loss.
    """
    kind = dtype.kind
    if kind in "iu":
        if isinstance(value, bool | np.bool_):
            raise _ConversionError(f"not an integer ({_show(value)})")
        if isinstance(value, int | np.integer):
            number = int(value)
        elif not strict and isinstance(value, float | np.floating):
            real = float(value)
            if not (math.isfinite(real) and real.is_integer()):
                raise _ConversionError(f"not an integer ({_show(value)})")
            number = int(real)
        else:
            raise _ConversionError(f"not an integer ({_show(value)})")
        info = np.iinfo(dtype)
        if not info.min <= number <= info.max:
            raise _ConversionError(f"out of range for {dtype.name} ({number})")
        if field == "flags" and number > _MAX_FLAGS:
            raise _ConversionError(f"out of range 0..{_MAX_FLAGS} ({number})")
        return number
    if kind == "b":
        if isinstance(value, bool | np.bool_):
            return bool(value)
        if isinstance(value, int | np.integer) and int(value) in (0, 1):
            return bool(value)
        raise _ConversionError(f"not a boolean ({_show(value)})")
    # float field
    if isinstance(value, bool | np.bool_):
        raise _ConversionError(f"not a number ({_show(value)})")
    if isinstance(value, int | np.integer):
        number = int(value)
        try:
            with np.errstate(over="ignore"):
                converted = dtype.type(number)
        except OverflowError:
            raise _ConversionError(
                f"not exactly representable as {dtype.name} ({number})"
            ) from None
        if not np.isfinite(converted) or int(converted) != number:
            raise _ConversionError(f"not exactly representable as {dtype.name} ({number})")
        return float(converted)
    if isinstance(value, float | np.floating):
        real = float(value)
        with np.errstate(over="ignore"):
            converted = dtype.type(real)
        if math.isfinite(real) and not np.isfinite(converted):
            raise _ConversionError(f"overflows {dtype.name} ({real!r})")
        return real
    raise _ConversionError(f"not a number ({_show(value)})")


def _length(name: str, values: Any) -> int | None:
    """Length of a column argument, or None for a scalar."""
    if isinstance(values, np.ndarray):
        if values.ndim == 0:
            return None
        if values.ndim == 1:
            return len(values)
        raise ValueError(f"column {name!r} must be one-dimensional, got shape {values.shape}")
    if isinstance(values, Sequence) and not isinstance(values, str | bytes):
        return len(values)
    return None


def _column(values: Any, dtype: np.dtype, field: str, n: int, *, strict: bool) -> np.ndarray:
    """Convert a column argument to ``n`` values of ``dtype``, raising InvalidEvent."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "biuf":
        array = np.broadcast_to(values, (n,))
        bad = _lossy(array, dtype, strict=strict)
        if field == "flags" and array.dtype.kind in "iu":
            bad |= (array < 0) | (array > _MAX_FLAGS)
        if bad.any():
            record = int(np.argmax(bad)) if values.ndim else None
            try:
                _convert(array[np.argmax(bad)], dtype, field, strict=strict)
            except _ConversionError as exc:
                raise InvalidEvent(record, field, exc.reason) from None
            raise InvalidEvent(record, field, f"cannot be stored as {dtype.name} without loss")
        return array.astype(dtype)

    # Python values (or object/str arrays): check one by one so the exact value counts.
    if _length(field, values) is None:
        scalar = values.item() if isinstance(values, np.ndarray) else values
        try:
            converted = _convert(scalar, dtype, field, strict=strict)
        except _ConversionError as exc:
            raise InvalidEvent(None, field, exc.reason) from None
        return np.full(n, converted, dtype=dtype)
    items = list(values)
    converted_items = []
    for index, item in enumerate(items):
        try:
            converted_items.append(_convert(item, dtype, field, strict=strict))
        except _ConversionError as exc:
            raise InvalidEvent(index, field, exc.reason) from None
    return np.broadcast_to(np.array(converted_items, dtype=dtype), (n,))


def _lossy(array: np.ndarray, dtype: np.dtype, *, strict: bool) -> np.ndarray:
    """Mask of the elements of a numeric array that do not convert to ``dtype`` exactly."""
    source = array.dtype
    none = np.zeros(array.shape, dtype=bool)
    everything = np.ones(array.shape, dtype=bool)
    if dtype.kind in "iu":
        if source.kind == "b":
            return everything
        if source.kind in "iu":
            if np.can_cast(source, dtype, "safe"):
                return none
            # Compare against the bounds both dtypes can hold, so no bound overflows.
            src_info, dst_info = np.iinfo(source), np.iinfo(dtype)
            low = source.type(max(src_info.min, dst_info.min))
            high = source.type(min(src_info.max, dst_info.max))
            return (array < low) | (array > high)
        if strict:
            return everything
        info = np.iinfo(dtype)
        real = array.astype(np.float64)
        with np.errstate(invalid="ignore"):
            return (
                ~np.isfinite(real)
                | (real != np.floor(real))
                | (real < float(info.min))
                | (real >= float(info.max + 1))
            )
    if dtype.kind == "b":
        if source.kind == "b":
            return none
        if source.kind in "iu":
            return (array != 0) & (array != 1)
        return everything
    # float target
    if source.kind == "b":
        return everything
    if source.kind in "iu":
        if np.can_cast(source, dtype, "safe"):
            return none
        with np.errstate(all="ignore"):
            converted = array.astype(dtype)
            # Only values below the source's bound can be cast back safely.
            bound = float(2 ** (8 * source.itemsize - (1 if source.kind == "i" else 0)))
            safe = np.isfinite(converted) & (converted < bound) & (converted >= -bound)
            back = np.where(safe, converted, 0).astype(source)
        return ~safe | (back != array)
    if dtype.itemsize >= source.itemsize:
        return none
    with np.errstate(over="ignore"):
        converted = array.astype(dtype)
    return np.isfinite(array) & ~np.isfinite(converted)
