"""Tools for batches that did not come from a registry: check, allocate, convert, join."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from specula.events.core import _MAX_FLAGS, CORE_DTYPE, InvalidEvent, fields_of
from specula.events.registry import TypeRegistry

#: A batch of up to this many rows (a live feed's step) is read through Python ints
#: (``tolist``) on the per-step paths: a NumPy call costs more than a loop over so few.
FEW_ROWS = 8

__all__ = ["SameDtype", "check_raw", "concat", "concat_records", "conform", "distinct", "empty",
           "select_records", "stamp_arrival", "validate_batch", "validate_raw"]


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
        True for rows with an unregistered type id or flags outside 0..31.
    errors : list of InvalidEvent
        One entry per problem, ordered by row (type before flags within a row).

    Raises
    ------
    ValueError
        If ``batch`` is not a one-dimensional structured array with ``type`` and
        ``flags`` fields.
    """
    names = _require_structured(batch)
    for name in ("type", "flags"):
        if name not in names:
            raise ValueError(f"batch lacks the core field {name!r}")
    type_ids, whole_type = _integers(batch["type"])
    bad_type = ~whole_type | (type_ids < 1) | (type_ids > len(registry))
    flags, whole_flags = _integers(batch["flags"])
    bad_flags = ~whole_flags | (flags < 0) | (flags > _MAX_FLAGS)
    errors: list[InvalidEvent] = []
    for index in np.flatnonzero(bad_type | bad_flags).tolist():
        if bad_type[index]:
            shown = int(type_ids[index]) if whole_type[index] else batch["type"][index]
            errors.append(InvalidEvent(index, "type", f"unknown event type id {shown}"))
        if bad_flags[index]:
            shown = int(flags[index]) if whole_flags[index] else batch["flags"][index]
            errors.append(InvalidEvent(index, "flags", f"out of range 0..{_MAX_FLAGS} ({shown})"))
    return bad_type | bad_flags, errors


def validate_raw(batch: np.ndarray) -> tuple[np.ndarray, list[InvalidEvent]]:
    """Check that a batch can enter a graph as raw input: plain events from outside it.

    A raw event's ``producer`` must be 0: producers 1, 2, ... are the graph's detector
    instances, and a consumer would take a raw event with such an id as that detector's
    output (a retraction of the detector's counters would remove it). A source's own
    counter goes in ``seq``. Its ``flags`` must be 0: retractions, updates, revocations
    and punctuations are messages between detectors, and late is the graph's verdict.

    Returns the rows that cannot enter, and one :class:`InvalidEvent` per problem,
    ordered by row (producer before flags within a row).
    """
    names = _require_structured(batch)
    bad_producer = (batch["producer"] != 0) if "producer" in names \
        else np.zeros(len(batch), bool)
    bad_flags = (batch["flags"] != 0) if "flags" in names \
        else np.zeros(len(batch), bool)
    errors: list[InvalidEvent] = []
    for index in np.flatnonzero(bad_producer | bad_flags).tolist():
        if bad_producer[index]:
            errors.append(InvalidEvent(
                index, "producer",
                f"a raw event's producer must be 0, not {batch['producer'][index]} (1, 2, ... "
                "are the graph's detectors; a source's counter goes in 'seq')"))
        if bad_flags[index]:
            errors.append(InvalidEvent(
                index, "flags",
                f"a raw event's flags must be 0, not {batch['flags'][index]} (retractions, "
                "updates, revocations and punctuations pass only between detectors)"))
    return bad_producer | bad_flags, errors


def check_raw(batch: np.ndarray, where: str = "raw input") -> None:
    """Refuse a batch that cannot enter a graph as raw input (:func:`validate_raw`).

    Raises
    ------
    InvalidEvent
        For the first problem, with ``where`` and the number of rows refused in its
        reason; quarantine such rows before (:func:`validate_raw`) to keep the rest.
    """
    bad, errors = validate_raw(batch)
    if errors:
        first = errors[0]
        raise InvalidEvent(first.record, first.field,
                           f"{where}: {first.reason}; {int(bad.sum())} of {len(batch)} rows "
                           "cannot enter the graph")


def _integers(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``column`` as int64, and which of its values are whole numbers (a float column
    may hold NaN, infinities or fractions, which no cast reads right)."""
    if column.dtype.kind in "iub":
        return column.astype(np.int64), np.ones(len(column), bool)
    values = np.asarray(column, np.float64)
    whole = np.isfinite(values) & (values == np.round(values)) & (np.abs(values) < 2.0**62)
    return np.where(whole, values, 0).astype(np.int64), whole


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
    out = np.zeros(len(batch), dtype=target)
    for name in _common_fields(batch.dtype, target, drop):
        out[name] = batch[name]
    return out


@functools.lru_cache(maxsize=1024)
def _common_fields(source: np.dtype, target: np.dtype, drop: bool) -> tuple[str, ...]:
    """The fields :func:`conform` copies from ``source`` to ``target``, checked once per
    pair of dtypes (a graph moves batches between a few dtypes, very often)."""
    if target.names is None:
        raise ValueError(f"target dtype must be structured, got {target}")
    common = []
    for name in fields_of(source):
        if name not in target.names:
            if drop:
                continue
            raise ValueError(
                f"field {name!r} of the batch is not in the target dtype "
                "(pass drop=True to drop it)"
            )
        _check_cast(name, source[name], target[name])
        common.append(name)
    return tuple(common)


def concat_records(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Concatenate record arrays of one dtype as raw bytes: ``np.concatenate`` of
    structured arrays promotes their dtypes field by field first, which costs more than
    the copy for small batches (and 10x more for large ones)."""
    dtype = parts[0].dtype
    raw = np.dtype((np.void, dtype.itemsize))
    return np.concatenate([p.view(raw) for p in parts]).view(dtype)


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct integers of a one-dimensional array, ascending: ``np.unique`` of
    integers, without its options. NumPy 2.3 and later find them by hashing, which for
    integers costs 10-100x a sort (20k values: ~0.2-4 ms against 16-84 µs; 750k: ~2 s
    against 20 ms).

    >>> distinct(np.array([7, 3, 7, 5])).tolist()
    [3, 5, 7]
    """
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    first = np.empty(len(ordered), bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]


def select_records(batch: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The rows of a record array where ``keep`` (a boolean mask) is True, or at the
    positions ``keep`` (an integer array), as a new array.

    ``np.take`` copies each row as one block of bytes; a mask or an index array in
    ``batch[...]`` copies a structured array field by field, which at a few hundred rows
    of twenty fields costs 4-7x as much.
    """
    if keep.dtype == np.bool_:
        keep = np.flatnonzero(keep)
    return np.take(batch, keep)


class SameDtype:
    """Tells whether a dtype is ``dtype``: an equal one apart (a raw batch's, say) is
    remembered by identity, as comparing two dtypes field by field costs more than a
    few rows' step."""

    __slots__ = ("_seen", "dtype")

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        self._seen = dtype

    def __call__(self, other: np.dtype) -> bool:
        if other is self.dtype or other is self._seen:
            return True
        if other != self.dtype:
            return False
        self._seen = other
        return True


def stamp_arrival(rows: np.ndarray, arrived: int) -> None:
    """Stamp raw ``rows`` (writable) with their arrival, ``arrived``: their ``ats``, and
    their ``origin``, which for a raw event is its own arrival."""
    rows["ats"] = rows["origin"] = arrived


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
        for name in fields_of(dtype):
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


def _require_structured(batch: np.ndarray, what: str = "batch") -> tuple[str, ...]:
    """Raise ValueError unless ``batch`` is a one-dimensional structured array; return its
    field names."""
    names = batch.dtype.names if isinstance(batch, np.ndarray) else None
    if names is None or batch.ndim != 1:
        raise ValueError(f"{what} must be a one-dimensional structured array")
    return names
