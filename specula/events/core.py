"""Core fields every batch leads with, the flags of counter messages, and InvalidEvent."""

from __future__ import annotations

import numpy as np

__all__ = ["CONTROL", "CORE_DTYPE", "CORE_FIELDS", "LATE", "PROGRESS", "RETRACTION", "REVOKE",
           "UPDATE", "InvalidEvent", "fields_of"]

CORE_FIELDS: tuple[tuple[str, type[np.generic]], ...] = (
    ("ts", np.int64),  # occurrence time stamp
    ("type", np.int32),  # event type id, from a TypeRegistry
    ("key", np.int64),  # entity id (player, sensor, ...)
    ("producer", np.int32),  # id of the producing detector instance; 0 = an external source
    ("seq", np.int64),  # the producer's event counter (unique per producer among live events)
    ("kplus", np.int64),  # K+: how prematurely the cause of this event was emitted
    ("flags", np.uint8),  # bit flags: RETRACTION, UPDATE, LATE, REVOKE, PROGRESS
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

REVOKE = 8
"""Flag of a counter message that revokes the one live event ``(producer, seq)``. It
carries the revoked version (type, time stamp, key, payload), so it is routed like that
version was: to the subscriber and partition that hold it."""

CONTROL = RETRACTION | REVOKE
"""The flags of counter messages: records that revoke events rather than carry one."""

PROGRESS = 16
"""Flag of a punctuation from ``producer``: it has handed its detector all of its input
up to time stamp ``ts``, so what it sends later stems from later input or revises what it
sent. Consumers clock each input channel by it (a low watermark over their producers)."""

_MAX_FLAGS = RETRACTION | UPDATE | LATE | REVOKE | PROGRESS

_CORE_NAMES: tuple[str, ...] = tuple(name for name, _ in CORE_FIELDS)

# Core fields a caller may set explicitly; ``type`` is always derived from the type name.
_SETTABLE_CORE: tuple[str, ...] = tuple(name for name in _CORE_NAMES if name != "type")


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


def fields_of(dtype: np.dtype) -> tuple[str, ...]:
    """The field names of a structured dtype (a batch's columns, in order).

    NumPy types ``dtype.names`` as optional because a plain dtype has none; every batch
    and row in this package is structured, so a plain one is a caller's error.
    """
    names = dtype.names
    if names is None:
        raise TypeError(f"expected a structured dtype, got {dtype}")
    return names


def _invalid_message(record: int | None, field: str | None, reason: str) -> str:
    parts = []
    if record is not None:
        parts.append(f"record {record}")
    if field is not None:
        parts.append(f"field {field!r}")
    return f"{', '.join(parts)}: {reason}" if parts else reason
