"""Event model: batches of events as NumPy structured arrays, typed payloads, codec.

Every component of the system (ordering units, detectors, sinks) exchanges events in
*batches*: one-dimensional NumPy structured arrays whose first fields are the core
fields in :data:`CORE_FIELDS`, followed by payload columns. Payload columns are
declared per event type in a :class:`TypeRegistry`; a batch that carries several
types has the union of their payload columns, and a row leaves the columns of other
types at zero. Keeping events columnar lets the ordering and detection kernels work
on whole arrays instead of Python objects.

The core fields carry what speculative out-of-order processing needs:

* ``ts`` is the occurrence time stamp the ordering units sort by, ``ats`` the
  arrival time stamp at the receiving unit and ``origin`` the arrival time of the
  newest raw event an event depends on, so that detection latency is
  ``ats - origin`` at the sink;
* ``producer`` and ``seq`` identify an event emitted by a detector, so that a later
  counter message can retract it (flag :data:`RETRACTION`: retract every live event
  of ``producer`` with a sequence number ``>= seq``) or replace it (flag
  :data:`UPDATE`);
* ``kplus`` (K+) says how prematurely the cause of a derived event was emitted
  (Mutschler & Philippsen, DEBS 2013, sec. 4.1); it is 0 for raw events.

Construction validates input (:class:`InvalidEvent` names the record, the field and
the reason) because a single malformed event would otherwise corrupt the ordering
state far away from where it entered. Two msgpack codecs are provided: a per-event
map for external interfaces and a raw columnar form for batches, which round-trips
arrays byte for byte.

Examples
--------
>>> registry = TypeRegistry()
>>> kick = registry.register("kick", speed=np.float64, foot=np.int8)
>>> kick.id
1
>>> events = registry.batch("kick", ts=[10, 20], key=7, speed=[3.5, 4.0])
>>> events["ts"].tolist(), events["key"].tolist(), events["foot"].tolist()
([10, 20], [7, 7], [0, 0])
>>> bool((decode_batch(encode_batch(events)) == events).all())
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

__all__ = [
    "CORE_DTYPE",
    "CORE_FIELDS",
    "LATE",
    "RETRACTION",
    "UPDATE",
    "EventType",
    "InvalidEvent",
    "TypeRegistry",
    "concat",
    "conform",
    "decode_batch",
    "decode_event",
    "empty",
    "encode_batch",
    "encode_event",
    "validate_batch",
]

CORE_FIELDS: tuple[tuple[str, type[np.generic]], ...] = (
    ("ts", np.int64),  # occurrence time stamp
    ("type", np.int32),  # event type id, from a TypeRegistry
    ("key", np.int64),  # entity id (player, sensor, ...)
    ("producer", np.int32),  # id of the producing detector instance; 0 = an external source
    ("seq", np.int64),  # the producer's event counter (unique per producer among live events)
    ("kplus", np.int64),  # K+: how prematurely the cause of this event was emitted
    ("flags", np.uint8),  # bit flags: RETRACTION, UPDATE, LATE
    ("ats", np.int64),  # arrival time stamp at the receiving unit
    ("origin", np.int64),  # arrival time of the newest raw event this event depends on
)
"""Names and dtypes of the core fields, in the order they lead every batch dtype."""

CORE_DTYPE: np.dtype = np.dtype(list(CORE_FIELDS))
"""Structured dtype of a batch without payload columns."""

RETRACTION = 1
"""Flag of a counter message: retract every live event of ``producer`` with ``seq >= seq``."""

UPDATE = 2
"""Flag of a regenerated event that replaces the live event with the same (producer, seq)."""

LATE = 4
"""Flag of records on the late side output (arrived after their slack had expired)."""

_MAX_FLAGS = RETRACTION | UPDATE | LATE

_CORE_NAMES: tuple[str, ...] = tuple(name for name, _ in CORE_FIELDS)

# Core fields a caller may set explicitly; ``type`` is always derived from the type name.
_SETTABLE_CORE: tuple[str, ...] = tuple(name for name in _CORE_NAMES if name != "type")

# Keyword names of TypeRegistry.batch that are not columns, so no payload field may use them.
_RESERVED_NAMES = frozenset({"dtype"})

_CODEC_VERSION = 1

_CODEC_KEYS = frozenset({"v", "fields", "n", "data"})


class InvalidEvent(ValueError):  # noqa: N818 - the name is part of the public API
    """An event, or a column of events, that violates the event model.

    Parameters
    ----------
    record : int or None
        Index of the offending record in the input, or None when the problem is not
        tied to one record (a scalar broadcast to every record, an unknown keyword).
    field : str or None
        Name of the offending field, or None when the record as a whole is wrong.
    reason : str
        What is wrong, e.g. ``"not an integer ('abc')"``.
    """

    def __init__(self, record: int | None, field: str | None, reason: str) -> None:
        self.record = record
        self.field = field
        self.reason = reason
        super().__init__(_invalid_message(record, field, reason))

    def __reduce__(self) -> tuple[type[InvalidEvent], tuple[int | None, str | None, str]]:
        # Exceptions pickle as ``cls(*args)``; rebuild from the attributes instead so the
        # exception survives being shipped between processes.
        return (type(self), (self.record, self.field, self.reason))


def _invalid_message(record: int | None, field: str | None, reason: str) -> str:
    parts = []
    if record is not None:
        parts.append(f"record {record}")
    if field is not None:
        parts.append(f"field {field!r}")
    return f"{', '.join(parts)}: {reason}" if parts else reason


class _ConversionError(Exception):
    """Internal signal that a single value cannot be stored in a field."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class EventType:
    """A registered event type.

    Attributes
    ----------
    name : str
        Unique type name.
    id : int
        Type id stored in the ``type`` column; ids start at 1, 0 is invalid.
    fields : tuple of (str, numpy.dtype)
        Payload fields of the type, in declaration order.
    """

    name: str
    id: int
    fields: tuple[tuple[str, np.dtype], ...]

    @property
    def field_names(self) -> tuple[str, ...]:
        """Names of the payload fields, in declaration order."""
        return tuple(name for name, _ in self.fields)


class TypeRegistry:
    """Registry of event types and their typed payload fields.

    The registry hands out the type ids stored in the ``type`` column, builds the
    batch dtypes (core fields followed by payload fields) and constructs validated
    batches. Types can only be added, never removed or changed, so an id and a dtype
    handed out once stay valid for the lifetime of the registry.

    Examples
    --------
    >>> registry = TypeRegistry()
    >>> registry.register("pos", x=np.float32, y=np.float32).id
    1
    >>> registry.register("goal", team="i4").id
    2
    >>> registry.dtype().names[-3:]
    ('x', 'y', 'team')
    >>> registry.name(2), registry.id("pos"), "goal" in registry, len(registry)
    ('goal', 1, True, 2)
    """

    def __init__(self) -> None:
        self._by_name: dict[str, EventType] = {}
        self._by_id: list[EventType] = []
        # payload field name -> (dtype, name of the first type that declared it)
        self._field_owner: dict[str, tuple[np.dtype, str]] = {}
        # sorted tuple of type ids -> batch dtype of those types
        self._dtype_cache: dict[tuple[int, ...], np.dtype] = {}

    # ------------------------------------------------------------------ registration

    def register(self, name: str, /, **fields: str | np.dtype | type) -> EventType:
        """Register an event type with typed payload fields.

        Parameters
        ----------
        name : str
            Unique, non-empty type name.
        **fields : str, numpy.dtype or scalar type
            Payload fields and their dtypes, e.g. ``speed=np.float64`` or
            ``team="i4"``. Only bool, signed/unsigned integer and float dtypes of
            at most 64 bits are allowed, because payloads must stay fixed-size
            columns and survive the msgpack codec without loss.

        Returns
        -------
        EventType
            The new type, or the existing one if ``name`` was already registered
            with exactly the same fields (so modules can declare the types they need
            independently).

        Raises
        ------
        ValueError
            If the name is empty, a field name collides with a core field or is not
            an identifier, a dtype is not numeric, a field name is already used by
            another type with a different dtype, or ``name`` is registered with
            different fields.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"event type name must be a non-empty string, got {name!r}")
        resolved = tuple(
            (field, _payload_dtype(name, field, spec)) for field, spec in fields.items()
        )

        existing = self._by_name.get(name)
        if existing is not None:
            if existing.fields == resolved:
                return existing
            raise ValueError(
                f"event type {name!r} is already registered with different fields: "
                f"{_describe_fields(existing.fields)} != {_describe_fields(resolved)}"
            )

        for field, dtype in resolved:
            owner = self._field_owner.get(field)
            if owner is not None and owner[0] != dtype:
                raise ValueError(
                    f"payload field {field!r} of event type {name!r} has dtype {dtype.name}, "
                    f"but event type {owner[1]!r} declares it as {owner[0].name}"
                )

        etype = EventType(name=name, id=len(self._by_id) + 1, fields=resolved)
        self._by_name[name] = etype
        self._by_id.append(etype)
        for field, dtype in resolved:
            self._field_owner.setdefault(field, (dtype, name))
        return etype

    # ---------------------------------------------------------------------- lookup

    def __getitem__(self, name: str) -> EventType:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"unknown event type {name!r}") from None

    def id(self, name: str) -> int:
        """Return the id of the type called ``name`` (KeyError if unknown)."""
        return self[name].id

    def name(self, type_id: int) -> str:
        """Return the name of the type with id ``type_id`` (KeyError if unknown)."""
        return self._type_by_id(type_id).name

    def __contains__(self, item: object) -> bool:
        """Whether ``item`` is a registered type name (str) or type id (int)."""
        if isinstance(item, str):
            return item in self._by_name
        if isinstance(item, int | np.integer) and not isinstance(item, bool | np.bool_):
            return 1 <= int(item) <= len(self._by_id)
        return False

    def __iter__(self) -> Iterator[EventType]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def __repr__(self) -> str:
        return f"TypeRegistry({', '.join(t.name for t in self._by_id)})"

    def types(self) -> tuple[EventType, ...]:
        """Return all registered types in registration (= id) order."""
        return tuple(self._by_id)

    def _type_by_id(self, type_id: int) -> EventType:
        if isinstance(type_id, bool | np.bool_) or not isinstance(type_id, int | np.integer):
            raise KeyError(f"event type ids are integers, got {type_id!r}")
        if not 1 <= int(type_id) <= len(self._by_id):
            raise KeyError(f"unknown event type id {int(type_id)}")
        return self._by_id[int(type_id) - 1]

    # ---------------------------------------------------------------------- dtypes

    def dtype(self, type_names: Iterable[str] | None = None) -> np.dtype:
        """Return the batch dtype for events of the given types.

        Parameters
        ----------
        type_names : iterable of str, optional
            Types the batch may contain; all registered types if None.

        Returns
        -------
        numpy.dtype
            The core fields followed by the union of the payload fields of those types,
            in registration order of the types (whatever order ``type_names`` is in),
            each field once. The result is cached, so equal requests return the same
            dtype object.

        Raises
        ------
        KeyError
            If a name is not registered.
        TypeError
            If ``type_names`` is a single string instead of a collection of names.
        """
        if isinstance(type_names, str):
            raise TypeError("type_names must be a collection of type names, not a string")
        if type_names is None:
            ids = tuple(range(1, len(self._by_id) + 1))
        else:
            ids = tuple(sorted({self[name].id for name in type_names}))
        cached = self._dtype_cache.get(ids)
        if cached is not None:
            return cached
        fields: list[tuple[str, np.dtype]] = list(CORE_DTYPE.descr)
        seen = set(_CORE_NAMES)
        for type_id in ids:
            for field, field_dtype in self._by_id[type_id - 1].fields:
                if field not in seen:
                    seen.add(field)
                    fields.append((field, field_dtype))
        result = np.dtype(fields)
        self._dtype_cache[ids] = result
        return result

    # ---------------------------------------------------------------- construction

    def batch(
        self,
        type_name: str,
        /,
        *,
        ts: Any,
        key: Any = 0,
        dtype: np.dtype | None = None,
        **columns: Any,
    ) -> np.ndarray:
        """Build a validated batch of events of one type.

        Parameters
        ----------
        type_name : str
            Registered type of all events in the batch.
        ts : array-like or int
            Occurrence time stamps; must be integers (bool and float are rejected).
        key : array-like or int, default 0
            Entity ids.
        dtype : numpy.dtype, optional
            Dtype of the result; defaults to ``self.dtype([type_name])``. A wider
            dtype (e.g. ``self.dtype()``) must contain every core field and every
            payload field of the type with the same dtypes.
        **columns : array-like or scalar
            The other core fields (``producer``, ``seq``, ``kplus``, ``flags``,
            ``ats``, ``origin``; default 0) and payload fields of the type (default 0).

        Returns
        -------
        numpy.ndarray
            A one-dimensional structured array. All columns are broadcast against each
            other with NumPy rules; if all of them are scalars the batch has one event.

        Raises
        ------
        InvalidEvent
            If a column name does not belong to the type, or a value cannot be stored
            without loss (``record`` is the row index, or None for a broadcast
            scalar).
        KeyError
            If ``type_name`` is not registered.
        ValueError
            If ``dtype`` lacks a field of the type, or a column is not one-dimensional
            or the column lengths do not broadcast.

        Notes
        -----
        Payload integer fields accept integral floats (``2.0``), as they convert
        without loss; core integer fields accept integers only. Values that are not
        NumPy arrays are checked element by element, so ``[1, 2**63]`` is reported as
        out of range instead of being silently cast.
        """
        etype = self[type_name]
        target = self.dtype([type_name]) if dtype is None else np.dtype(dtype)
        _require_type_fields(target, etype)

        payload = dict(etype.fields)
        for name in columns:
            if name not in payload and name not in _SETTABLE_CORE:
                raise InvalidEvent(None, name, f"not a field of type {etype.name!r}")

        given: dict[str, Any] = {"ts": ts, "key": key, **columns}
        lengths = [_length(name, values) for name, values in given.items()]
        try:
            # Shape () means every column is a scalar: that describes a single event.
            (n,) = np.broadcast_shapes(*[() if m is None else (m,) for m in lengths]) or (1,)
        except ValueError:
            shown = {name: m for name, m in zip(given, lengths, strict=True) if m is not None}
            raise ValueError(f"column lengths do not broadcast: {shown}") from None

        out = np.zeros(n, dtype=target)
        out["type"] = etype.id
        for name, values in given.items():
            core = name in _SETTABLE_CORE
            field_dtype = CORE_DTYPE.fields[name][0] if core else payload[name]
            out[name] = _column(values, field_dtype, name, n, strict=core)
        return out

    def from_records(
        self, records: Iterable[Mapping[str, Any]], dtype: np.dtype | None = None
    ) -> np.ndarray:
        """Build a validated batch from event records (e.g. decoded JSON or msgpack).

        Parameters
        ----------
        records : iterable of mapping
            Each record has ``"type"`` (type name or id) and ``"ts"``, optionally
            ``"key"`` and the other core fields (default 0) and payload fields of its
            type (default 0).
        dtype : numpy.dtype, optional
            Dtype of the result; defaults to the dtype of the types that occur in the
            records. It must contain every core field and the payload fields of every
            type that occurs, with the same dtypes.

        Returns
        -------
        numpy.ndarray
            One row per record, in input order.

        Raises
        ------
        InvalidEvent
            At the first invalid record: a missing or unregistered type, a missing
            ``ts``, a field that does not belong to the type, a value that cannot be
            stored without loss, or flags outside 0..7. ``record`` is the index of the
            record in ``records``.
        ValueError
            If ``dtype`` lacks a field needed by the records.

        Examples
        --------
        >>> registry = TypeRegistry()
        >>> _ = registry.register("pos", x=np.float32)
        >>> events = registry.from_records([{"type": "pos", "ts": 5, "x": 1.5}])
        >>> events["ts"].tolist(), events["type"].tolist(), events["x"].tolist()
        ([5], [1], [1.5])
        >>> try:
        ...     registry.from_records([{"type": "pos", "ts": 5.0}])
        ... except InvalidEvent as exc:
        ...     print(exc)
        record 0, field 'ts': not an integer (5.0)
        """
        rows: list[dict[str, Any]] = []
        seen_types: dict[str, EventType] = {}
        for index, record in enumerate(records):
            etype, row = self._validate_record(index, record)
            seen_types.setdefault(etype.name, etype)
            rows.append(row)

        if dtype is None:
            target = self.dtype(seen_types)
        else:
            target = np.dtype(dtype)
            for etype in seen_types.values():
                _require_type_fields(target, etype)

        out = np.zeros(len(rows), dtype=target)
        for name in target.names:
            if any(name in row for row in rows):
                out[name] = np.array([row.get(name, 0) for row in rows], dtype=target[name])
        return out

    def _resolve_type(self, index: int | None, value: Any) -> EventType:
        if isinstance(value, str):
            if value not in self._by_name:
                raise InvalidEvent(index, "type", f"unknown event type {value!r}")
            return self._by_name[value]
        if isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_):
            if not 1 <= int(value) <= len(self._by_id):
                raise InvalidEvent(index, "type", f"unknown event type id {int(value)}")
            return self._by_id[int(value) - 1]
        raise InvalidEvent(index, "type", f"not a type name or id ({_show(value)})")

    def _validate_record(self, index: int, record: Any) -> tuple[EventType, dict[str, Any]]:
        """Check one record and return its type and its values as Python scalars."""
        if not isinstance(record, Mapping):
            raise InvalidEvent(index, None, f"not a mapping ({_show(record)})")
        if "type" not in record:
            raise InvalidEvent(index, "type", "missing")
        etype = self._resolve_type(index, record["type"])
        if "ts" not in record:
            raise InvalidEvent(index, "ts", "missing")
        payload = dict(etype.fields)
        row: dict[str, Any] = {"type": etype.id}
        for name, value in record.items():
            if name == "type":
                continue
            if name in _SETTABLE_CORE:
                field_dtype, strict = CORE_DTYPE.fields[name][0], True
            elif isinstance(name, str) and name in payload:
                field_dtype, strict = payload[name], False
            elif isinstance(name, str):
                raise InvalidEvent(index, name, f"not a field of type {etype.name!r}")
            else:
                raise InvalidEvent(index, None, f"field name is not a string ({_show(name)})")
            try:
                row[name] = _convert(value, field_dtype, name, strict=strict)
            except _ConversionError as exc:
                raise InvalidEvent(index, name, exc.reason) from None
        return etype, row


# --------------------------------------------------------------------------- helpers


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


def _describe_fields(fields: tuple[tuple[str, np.dtype], ...]) -> str:
    return "(" + ", ".join(f"{name}: {dtype.name}" for name, dtype in fields) + ")"


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
    for name, field_dtype in (*CORE_DTYPE.descr, *etype.fields):
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


def _require_structured(batch: np.ndarray, what: str = "batch") -> None:
    if not isinstance(batch, np.ndarray) or batch.dtype.names is None or batch.ndim != 1:
        raise ValueError(f"{what} must be a one-dimensional structured array")


# ------------------------------------------------------------------------ batch tools


def validate_batch(
    batch: np.ndarray, registry: TypeRegistry
) -> tuple[np.ndarray, list[InvalidEvent]]:
    """Check a batch that arrived as an array (not built through the registry).

    Parameters
    ----------
    batch : numpy.ndarray
        Structured batch with at least the ``type`` and ``flags`` fields.
    registry : TypeRegistry
        Registry the type ids refer to.

    Returns
    -------
    bad : numpy.ndarray of bool
        True for rows with an unregistered type id or flags outside 0..7.
    errors : list of InvalidEvent
        One entry per problem, ordered by row (type before flags within a row).

    Raises
    ------
    ValueError
        If ``batch`` is not a one-dimensional structured array with ``type`` and
        ``flags`` fields.
    """
    _require_structured(batch)
    for name in ("type", "flags"):
        if name not in batch.dtype.names:
            raise ValueError(f"batch lacks the core field {name!r}")
    type_ids = batch["type"].astype(np.int64)
    bad_type = (type_ids < 1) | (type_ids > len(registry))
    flags = batch["flags"].astype(np.int64)
    bad_flags = (flags < 0) | (flags > _MAX_FLAGS)
    errors: list[InvalidEvent] = []
    for index in np.flatnonzero(bad_type | bad_flags).tolist():
        if bad_type[index]:
            errors.append(
                InvalidEvent(index, "type", f"unknown event type id {int(type_ids[index])}")
            )
        if bad_flags[index]:
            errors.append(
                InvalidEvent(index, "flags", f"out of range 0..{_MAX_FLAGS} ({int(flags[index])})")
            )
    return bad_type | bad_flags, errors


def empty(dtype: np.dtype = CORE_DTYPE, n: int = 0) -> np.ndarray:
    """Return a zero-filled batch of ``n`` events of ``dtype``.

    The rows are zeroed rather than uninitialised so that an unused column never
    holds garbage (type 0 is the invalid type, flags 0 is an ordinary event).
    """
    return np.zeros(n, dtype=dtype)


def conform(batch: np.ndarray, dtype: np.dtype, *, drop: bool = False) -> np.ndarray:
    """Copy a batch into a new array of another structured dtype.

    Parameters
    ----------
    batch : numpy.ndarray
        Source batch.
    dtype : numpy.dtype
        Target dtype. Fields it has and the source lacks are zero-filled.
    drop : bool, default False
        Silently drop source fields the target lacks; otherwise they are an error,
        since dropping a payload column loses data.

    Returns
    -------
    numpy.ndarray
        A new array; the source is never returned or shared.

    Raises
    ------
    ValueError
        If a source field is missing from the target (and not ``drop``), or a common
        field would have to be cast unsafely (e.g. int64 to int32).
    """
    _require_structured(batch)
    target = np.dtype(dtype)
    if target.names is None:
        raise ValueError(f"target dtype must be structured, got {target}")
    for name in batch.dtype.names:
        if name not in target.names:
            if drop:
                continue
            raise ValueError(
                f"field {name!r} of the batch is not in the target dtype "
                "(pass drop=True to drop it)"
            )
        _check_cast(name, batch.dtype[name], target[name])
    out = np.zeros(len(batch), dtype=target)
    for name in batch.dtype.names:
        if name in target.names:
            out[name] = batch[name]
    return out


def concat(batches: Sequence[np.ndarray], dtype: np.dtype | None = None) -> np.ndarray:
    """Concatenate batches whose dtypes may differ.

    Parameters
    ----------
    batches : sequence of numpy.ndarray
        Structured batches.
    dtype : numpy.dtype, optional
        Dtype of the result. By default the union of the input fields in order of
        first appearance (so batches built by one registry keep the core fields first
        and payload fields in registration order when concatenated in that order).

    Returns
    -------
    numpy.ndarray
        The rows of all batches in order; columns a batch lacks are zero. An empty
        ``batches`` gives an empty batch of ``dtype`` (or :data:`CORE_DTYPE`).

    Raises
    ------
    ValueError
        If the same field has different dtypes in two batches (without ``dtype``), or
        a batch has a field ``dtype`` lacks or cannot hold safely.
    """
    batches = list(batches)
    for batch in batches:
        _require_structured(batch)
    if dtype is None:
        target = _union_dtype([batch.dtype for batch in batches]) if batches else CORE_DTYPE
    else:
        target = np.dtype(dtype)
    out = np.zeros(sum(len(batch) for batch in batches), dtype=target)
    start = 0
    for batch in batches:
        out[start : start + len(batch)] = conform(batch, target)
        start += len(batch)
    return out


def _union_dtype(dtypes: Sequence[np.dtype]) -> np.dtype:
    fields: dict[str, np.dtype] = {}
    for dtype in dtypes:
        for name in dtype.names:
            field_dtype = dtype[name]
            if name in fields and fields[name] != field_dtype:
                raise ValueError(
                    f"field {name!r} has dtype {fields[name]} in one batch and {field_dtype} "
                    "in another"
                )
            fields.setdefault(name, field_dtype)
    return np.dtype(list(fields.items()))


def _check_cast(name: str, source: np.dtype, target: np.dtype) -> None:
    if not np.can_cast(source, target, "safe"):
        raise ValueError(f"field {name!r}: cannot cast {source} to {target} without loss")


# ----------------------------------------------------------------------------- codec


def encode_event(record: np.void | Mapping[str, Any], registry: TypeRegistry) -> bytes:
    """Encode one event as a msgpack map.

    Parameters
    ----------
    record : numpy.void or mapping
        A row of a batch, or a record as accepted by
        :meth:`TypeRegistry.from_records`.
    registry : TypeRegistry
        Registry that resolves the type.

    Returns
    -------
    bytes
        A msgpack map ``{"type": <type name>, "ts": ..., <other core fields>,
        <payload fields of the type>}`` with Python scalars only, so any msgpack
        client can read it without knowing NumPy or the type ids of this registry.

    Raises
    ------
    InvalidEvent
        If the record is not a valid event (the record is validated like input to
        :meth:`TypeRegistry.from_records`).
    TypeError
        If ``record`` is neither a structured row nor a mapping.
    """
    if isinstance(record, np.void) and record.dtype.names is not None:
        mapping = _row_values(record, registry)
    elif isinstance(record, Mapping):
        mapping = record
    else:
        raise TypeError(f"expected a structured row or a mapping, got {type(record).__name__}")
    return msgpack.packb(_event_dict(_single_row(mapping, registry), registry), use_bin_type=True)


def decode_event(data: bytes, registry: TypeRegistry) -> dict[str, Any]:
    """Decode and validate one event encoded by :func:`encode_event`.

    Parameters
    ----------
    data : bytes
        A msgpack map.
    registry : TypeRegistry
        Registry that resolves the type name.

    Returns
    -------
    dict
        ``{"type": <type name>, <all core fields>, <all payload fields of the
        type>}`` with Python scalars; fields absent from the input are 0.

    Raises
    ------
    ValueError
        If ``data`` is not a single msgpack map; :class:`InvalidEvent` (a ValueError)
        if the map is not a valid event.
    """
    decoded = _unpack(data)
    if not isinstance(decoded, dict):
        raise ValueError(f"an encoded event must be a msgpack map, got {type(decoded).__name__}")
    return _event_dict(_single_row(decoded, registry), registry)


def _row_values(row: np.void, registry: TypeRegistry) -> dict[str, Any]:
    """Fields of a batch row that make up its event: core fields and its type's payload."""
    names = row.dtype.names
    missing = [name for name in _CORE_NAMES if name not in names]
    if missing:
        raise ValueError(f"row lacks core fields {missing}")
    try:
        etype = registry._type_by_id(row["type"])
    except KeyError as exc:
        raise InvalidEvent(None, "type", exc.args[0]) from None
    values: dict[str, Any] = {name: row[name] for name in _CORE_NAMES}
    for name in etype.field_names:
        if name not in names:
            raise ValueError(f"row lacks payload field {name!r} of event type {etype.name!r}")
        values[name] = row[name]
    return values


def _single_row(record: Mapping[str, Any], registry: TypeRegistry) -> np.void:
    """Validate a single record; errors name no record index since there is only one."""
    try:
        return registry.from_records([record])[0]
    except InvalidEvent as exc:
        raise InvalidEvent(None, exc.field, exc.reason) from None


def _event_dict(row: np.void, registry: TypeRegistry) -> dict[str, Any]:
    etype = registry._type_by_id(row["type"])
    event: dict[str, Any] = {"type": etype.name}
    for name in _SETTABLE_CORE:
        event[name] = int(row[name])
    for name in etype.field_names:
        event[name] = row[name].item()
    return event


def _unpack(data: bytes) -> Any:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as exc:
        raise ValueError(f"malformed msgpack data: {exc}") from exc


def encode_batch(batch: np.ndarray) -> bytes:
    """Encode a batch as a msgpack map holding its raw little-endian columns.

    Parameters
    ----------
    batch : numpy.ndarray
        One-dimensional structured array whose fields are bool, integer or float of at
        most 64 bits.

    Returns
    -------
    bytes
        ``{"v": 1, "fields": [[name, dtype.str], ...], "n": len(batch),
        "data": <rows packed without padding, little-endian>}``. Decoding gives an
        array with the same field names, order, dtypes and bytes; the
        layout is packed, so padding or field offsets of the source are not kept.

    Raises
    ------
    ValueError
        If ``batch`` is not structured or has a field of another kind.
    """
    _require_structured(batch)
    fields = []
    for name in batch.dtype.names:
        field_dtype = batch.dtype[name]
        if field_dtype.kind not in "biuf" or field_dtype.itemsize > 8:
            raise ValueError(f"field {name!r} has unsupported dtype {field_dtype}")
        fields.append((name, field_dtype.newbyteorder("<")))
    packed = np.dtype(fields)
    if batch.dtype == packed and batch.flags.c_contiguous:
        data = batch.tobytes()
    else:
        out = np.empty(len(batch), dtype=packed)
        for name in batch.dtype.names:
            out[name] = batch[name]
        data = out.tobytes()
    message = {
        "v": _CODEC_VERSION,
        "fields": [[name, field_dtype.str] for name, field_dtype in fields],
        "n": len(batch),
        "data": data,
    }
    return msgpack.packb(message, use_bin_type=True)


def decode_batch(data: bytes) -> np.ndarray:
    """Decode a batch encoded by :func:`encode_batch`.

    Parameters
    ----------
    data : bytes
        The msgpack message.

    Returns
    -------
    numpy.ndarray
        A new, writable structured array.

    Raises
    ------
    ValueError
        If the message is not valid msgpack, lacks or has unexpected keys, has another
        version, declares an unknown, non-numeric or big-endian dtype, duplicate or
        empty field names, a data size that does not match ``n`` rows, or bool
        columns holding bytes other than 0 and 1.
    """
    message = _unpack(data)
    if not isinstance(message, dict):
        raise ValueError(f"an encoded batch must be a msgpack map, got {type(message).__name__}")
    keys = set(message)
    if keys != _CODEC_KEYS:
        missing, extra = sorted(_CODEC_KEYS - keys), sorted(keys - _CODEC_KEYS, key=repr)
        raise ValueError(f"malformed batch: missing keys {missing}, unexpected keys {extra}")
    version = message["v"]
    if version != _CODEC_VERSION or isinstance(version, bool):
        raise ValueError(f"unsupported batch encoding version {version!r}")

    dtype = _decode_fields(message["fields"])
    n = message["n"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"malformed batch: 'n' must be a non-negative integer, got {n!r}")
    payload = message["data"]
    if not isinstance(payload, bytes):
        raise ValueError(f"malformed batch: 'data' must be binary, got {type(payload).__name__}")
    if len(payload) != n * dtype.itemsize:
        raise ValueError(
            f"size mismatch: {n} rows of {dtype.itemsize} bytes need {n * dtype.itemsize} "
            f"bytes, got {len(payload)}"
        )
    batch = np.frombuffer(payload, dtype=dtype).copy()
    for name in dtype.names:
        if dtype[name].kind == "b" and (batch[name].view(np.uint8) > 1).any():
            raise ValueError(f"malformed batch: bool field {name!r} holds bytes other than 0/1")
    return batch


def _decode_fields(fields: Any) -> np.dtype:
    if not isinstance(fields, list) or not fields:
        raise ValueError("malformed batch: 'fields' must be a non-empty list")
    resolved: list[tuple[str, np.dtype]] = []
    names: set[str] = set()
    for entry in fields:
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], str)
            or not isinstance(entry[1], str)
        ):
            raise ValueError(f"malformed batch: field entry {entry!r} is not [name, dtype]")
        name, spec = entry
        if not name or name in names:
            raise ValueError(f"malformed batch: empty or duplicate field name {name!r}")
        try:
            field_dtype = np.dtype(spec)
        except (TypeError, ValueError):
            raise ValueError(f"malformed batch: unknown dtype {spec!r} of field {name!r}") from None
        if (
            field_dtype.kind not in "biuf"
            or field_dtype.itemsize > 8
            or field_dtype.byteorder == ">"
            or (field_dtype.byteorder == "=" and not np.little_endian)
        ):
            raise ValueError(
                f"malformed batch: unsupported dtype {spec!r} of field {name!r} "
                "(expected little-endian bool, integer or float)"
            )
        names.add(name)
        resolved.append((name, field_dtype))
    return np.dtype(resolved)
