"""Event types and the registry that numbers them, builds batch dtypes and batches."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from specula.events.convert import (
    _column,
    _ConversionError,
    _convert,
    _describe_fields,
    _length,
    _payload_dtype,
    _require_type_fields,
    _show,
)
from specula.events.core import (
    _CORE_NAMES,
    _SETTABLE_CORE,
    CORE_DTYPE,
    CORE_FIELDS,
    InvalidEvent,
    fields_of,
)
from specula.events.strings import StringTable, is_string_spec

__all__ = ["EventType", "TypeRegistry"]


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
    strings : frozenset of str
        The fields declared ``str``: int64 columns of string codes
        (:mod:`specula.events.strings`).
    """

    name: str
    id: int
    fields: tuple[tuple[str, np.dtype], ...]
    strings: frozenset[str] = frozenset()

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

    A field declared ``str`` holds texts as int64 codes (:mod:`specula.events.strings`);
    :attr:`strings` turns codes back into texts.

    ``ticks_per_second`` is the unit of the time stamps (``ts``, ``ats``) of these
    events, declared once here: graphs, runtimes and reports read it from the registry
    (1.0: seconds; 10**12 for the picoseconds of DEBS 2013).

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

    def __init__(self, *, ticks_per_second: float = 1.0) -> None:
        if not ticks_per_second > 0:
            raise ValueError(f"ticks_per_second must be > 0, got {ticks_per_second!r}")
        self.ticks_per_second = ticks_per_second
        self._by_name: dict[str, EventType] = {}
        self._by_id: list[EventType] = []
        # payload field name -> (dtype, is a string, name of the first type declaring it)
        self._field_owner: dict[str, tuple[np.dtype, bool, str]] = {}
        self.strings = StringTable()
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
            columns and survive the msgpack codec without loss; ``str`` (or
            ``"str"``) declares a string field, stored as int64 codes.

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
        strings = frozenset(f for f, spec in fields.items() if is_string_spec(spec))
        resolved = tuple(
            (field, _payload_dtype(name, field, np.int64 if field in strings else spec))
            for field, spec in fields.items()
        )

        existing = self._by_name.get(name)
        if existing is not None:
            if existing.fields == resolved and existing.strings == strings:
                return existing
            raise ValueError(
                f"event type {name!r} is already registered with different fields: "
                f"{_describe_fields(existing.fields, existing.strings)} != "
                f"{_describe_fields(resolved, strings)}"
            )

        for field, dtype in resolved:
            owner = self._field_owner.get(field)
            if owner is not None and owner[:2] != (dtype, field in strings):
                mine = "str" if field in strings else dtype.name
                theirs = "str" if owner[1] else owner[0].name
                raise ValueError(
                    f"payload field {field!r} of event type {name!r} has dtype {mine}, "
                    f"but event type {owner[2]!r} declares it as {theirs}"
                )

        etype = EventType(name=name, id=len(self._by_id) + 1, fields=resolved, strings=strings)
        self._by_name[name] = etype
        self._by_id.append(etype)
        for field, dtype in resolved:
            self._field_owner.setdefault(field, (dtype, field in strings, name))
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

    def fingerprint(self) -> str:
        """A digest of what the numbers in a batch of this registry mean.

        It covers the time unit and the table of (id, name, payload fields with their
        dtypes), so two registries with the same fingerprint read each other's batches
        alike, and registries with the same types in another order differ. It is stable
        across processes and runs (no Python hash), so it can travel with batches.

        >>> a, b = TypeRegistry(), TypeRegistry()
        >>> _ = a.register("x"), a.register("y"), b.register("y"), b.register("x")
        >>> a.fingerprint() == b.fingerprint(), len(a.fingerprint())
        (False, 16)
        """
        table = [repr(float(self.ticks_per_second)),
                 [[t.id, t.name, self.field_specs(t)] for t in self._by_id]]
        return hashlib.sha256(json.dumps(table).encode()).hexdigest()[:16]

    def field_specs(self, etype: EventType) -> list[list[str]]:
        """``[field, spec]`` of each payload field of ``etype``: ``"str"`` for a string
        field, else its dtype's ``str``; ``register(name, **dict(specs))`` declares the
        type again."""
        return [[f, "str" if f in etype.strings else d.str] for f, d in etype.fields]

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
        fields: list[tuple[str, npt.DTypeLike]] = list(CORE_FIELDS)
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
            field_dtype = CORE_DTYPE[name] if core else payload[name]
            if name in etype.strings:
                out[name] = self._string_column(values, name, n)
                continue
            out[name] = _column(values, field_dtype, name, n, strict=core)
        return out

    def _string_column(self, values: Any, field: str, n: int) -> np.ndarray:
        """The codes of a string field's texts (one text, or one per event)."""
        if isinstance(values, str):
            values = [values] * n
        elif _length(field, values) is None:
            raise InvalidEvent(None, field, f"not a string ({_show(values)})")
        texts = list(values)
        for index, text in enumerate(texts):
            try:
                self.strings.intern(text)
            except ValueError as exc:
                raise InvalidEvent(index, field, str(exc)) from None
        return np.broadcast_to(self.strings.codes(texts), (n,))

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
            stored without loss, or flags outside 0..31. ``record`` is the index of the
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
        for name in fields_of(target):
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
                field_dtype, strict = CORE_DTYPE[name], True
            elif isinstance(name, str) and name in etype.strings:
                try:
                    row[name] = self.strings.intern(value)
                except ValueError as exc:
                    raise InvalidEvent(index, name, str(exc)) from None
                continue
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
