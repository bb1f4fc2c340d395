"""Msgpack codecs: one event as a portable map, a batch as its raw columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack
import numpy as np

from specula.events.batches import _require_structured
from specula.events.core import _CORE_NAMES, _SETTABLE_CORE, InvalidEvent, fields_of
from specula.events.registry import TypeRegistry

__all__ = ["batch_registry", "decode_batch", "decode_event", "encode_batch", "encode_event"]

_CODEC_VERSION = 1

_CODEC_KEYS = frozenset({"v", "fields", "n", "data"})
_OPTIONAL_KEYS = frozenset({"types", "strings"})


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
    mapping: Mapping[str, Any]
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
    names = fields_of(row.dtype)
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
        values[name] = (registry.strings.text(row[name]) if name in etype.strings
                        else row[name])
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
        event[name] = (registry.strings.text(row[name]) if name in etype.strings
                       else row[name].item())
    return event


def _unpack(data: bytes) -> Any:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True)
    except Exception as exc:
        raise ValueError(f"malformed msgpack data: {exc}") from exc


def encode_batch(batch: np.ndarray, registry: TypeRegistry | None = None) -> bytes:
    """Encode a batch as a msgpack map holding its raw little-endian columns.

    Parameters
    ----------
    batch : numpy.ndarray
        One-dimensional structured array whose fields are bool, integer or float of at
        most 64 bits.
    registry : TypeRegistry, optional
        The registry the batch was made with. Its type table goes with the batch
        (``"types": {"ticks_per_second": ..., "types": [[name, [[field, dtype.str],
        ...]], ...]}``, ids in order from 1; ``"str"`` for a string field), so a reader
        can check the ids against its own registry (:func:`batch_registry`); with it go
        the texts of the string codes in the batch (``"strings": [[code, text], ...]``).

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
    names = _require_structured(batch)
    fields = []
    for name in names:
        field_dtype = batch.dtype[name]
        if field_dtype.kind not in "biuf" or field_dtype.itemsize > 8:
            raise ValueError(f"field {name!r} has unsupported dtype {field_dtype}")
        fields.append((name, field_dtype.newbyteorder("<")))
    packed = np.dtype(fields)
    if batch.dtype == packed and batch.flags.c_contiguous:
        data = batch.tobytes()
    else:
        out = np.empty(len(batch), dtype=packed)
        for name in names:
            out[name] = batch[name]
        data = out.tobytes()
    message = {
        "v": _CODEC_VERSION,
        "fields": [[name, field_dtype.str] for name, field_dtype in fields],
        "n": len(batch),
        "data": data,
    }
    if registry is not None:
        message["types"] = {
            "ticks_per_second": float(registry.ticks_per_second),
            "types": [[t.name, registry.field_specs(t)] for t in registry.types()],
        }
        columns = {f for t in registry.types() for f in t.strings} & set(names)
        if columns:
            message["strings"] = registry.strings.items(
                np.concatenate([batch[f] for f in sorted(columns)]))
    return msgpack.packb(message, use_bin_type=True)


def batch_registry(data: bytes) -> TypeRegistry | None:
    """The registry an encoded batch was made with, rebuilt from the type table
    :func:`encode_batch` wrote with it; None if it was encoded without one.

    Hand it to a runtime with the decoded batch (``run(batch, registry=...)``): the ids
    are then translated by name into the graph's registry, or refused where they do not
    fit. Raises ValueError for a malformed table.
    """
    message = _unpack(data)
    table = message.get("types") if isinstance(message, dict) else None
    if table is None:
        return None
    try:
        registry = TypeRegistry(ticks_per_second=table["ticks_per_second"])
        for name, fields in table["types"]:
            registry.register(name, **dict(fields))
        for code, text in message.get("strings", []):
            if registry.strings.intern(text) != code:
                raise ValueError(f"the code of {text!r} is not {code}")
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed batch: unreadable type table ({exc})") from None
    return registry


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
    keys = set(message) - _OPTIONAL_KEYS
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
    for name in fields_of(dtype):
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
