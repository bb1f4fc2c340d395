"""What an ordering unit hands the detector it drives: each input event as an
:class:`EventView`, and an :class:`Emitter` that collects what the detector generates.

The unit fills in the bookkeeping of every generated event (producer, counter, K+,
origin) from the input event that caused it, which is why the emitter tracks the index
of the event being processed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from specula.events import CORE_FIELDS


class Columns(dict):
    """The fields of a batch of events as Python lists, each made on first use: a
    detector reads an event's fields one by one, and an item of a list costs a tenth of
    a field of a NumPy record (a record, its field, a NumPy scalar, its ``item``)."""

    __slots__ = ("_batch",)

    def __init__(self, batch: np.ndarray) -> None:
        super().__init__()
        self._batch = batch

    def __missing__(self, field: str) -> list[Any]:
        values = self[field] = self._batch[field].tolist()
        return values


class EventView:
    """Read-only view of one event handed to :meth:`Detector.on_event`.

    ``type`` is the type name, ``ts`` and ``key`` the core fields; payload fields are read
    with ``event["field"]`` (or as attributes). The event is row ``at`` of the batch
    ``columns`` holds (how :meth:`Detector.on_batch` hands a batch on, event by event);
    :meth:`of` views a single record.
    """

    __slots__ = ("_at", "_columns", "key", "ts", "type")

    def __init__(self, columns: Columns, type_name: str, at: int) -> None:
        self._columns = columns
        self._at = at
        self.type = type_name
        # read by nearly every detector, often more than once: attributes, not lookups
        self.ts: int = columns["ts"][at]
        self.key: int = columns["key"][at]

    @classmethod
    def of(cls, row: np.void, type_name: str) -> EventView:
        """A view of the single record ``row``, of type ``type_name``."""
        return cls(Columns(np.array([row], row.dtype)), type_name, 0)

    def __getitem__(self, field: str) -> Any:
        return self._columns[field][self._at]

    def __getattr__(self, field: str) -> Any:
        try:
            return self._columns[field][self._at]
        except (ValueError, KeyError, IndexError):
            raise AttributeError(field) from None

    def __repr__(self) -> str:
        return f"EventView({self.type}, ts={self.ts}, key={self.key})"


class Emitter:
    """Collects the events a detector generates while it processes a batch.

    A detector calls it as ``emit(type_name, ts, key=0, **payload)``. The ordering unit
    fills in producer, counter, K+ and origin from the input event being processed, which
    is why :meth:`Detector.on_batch` implementations announce it with :meth:`at`
    (or pass ``cause`` indices to :meth:`many`).
    """

    __slots__ = ("_cause", "_n", "causes", "column_batches", "rows")

    def __init__(self) -> None:
        self._cause = 0
        self._n = 0
        self.rows: list[tuple[str, int, int, dict[str, Any]]] = []
        self.causes: list[int] = []
        self.column_batches: list[tuple[str, Mapping[str, np.ndarray], np.ndarray]] = []

    @property
    def cause(self) -> int:
        """Index, in the current batch, of the input event being processed."""
        return self._cause

    def at(self, index: int) -> None:
        """Mark input ``index`` of the current batch as the cause of what follows."""
        self._cause = index

    def __call__(self, type_name: str, ts: int, key: int = 0, **payload: Any) -> None:
        self.rows.append((type_name, int(ts), int(key), payload))
        self.causes.append(self._cause)
        self._n += 1

    def many(self, type_name: str, *, ts: np.ndarray, cause: np.ndarray, key: Any = 0,
             **payload: Any) -> None:
        """Emit a column batch of one type; ``cause[i]`` is the input index behind row i.

        ``ts`` has one value per row; ``key`` and payload columns may be scalars.
        """
        cause = np.asarray(cause, dtype=np.int64)
        columns = {"ts": np.asarray(ts, dtype=np.int64),
                   "key": _column(np.asarray(key, dtype=np.int64), cause.shape)}
        columns.update({name: _column(np.asarray(v), cause.shape)
                        for name, v in payload.items()})
        self.column_batches.append((type_name, columns, cause))
        self._n += len(cause)

    def records(self, type_name: str, rows: np.ndarray, cause: np.ndarray) -> None:
        """Emit ``rows``, events of one type built whole: a structured batch with the
        core fields of :mod:`specula.events`, of which ``ts`` and ``key`` are set (the
        unit writes type, producer, counter, K+, origin and arrival), and the payload
        fields; ``cause[i]`` is the input index behind row i.

        The rows become the emitter's: where their dtype is the unit's output dtype the
        unit stamps them in place and hands them on, with no copy. They read as the
        columns :meth:`many` gives (``ts``, ``key`` and the payload, see
        :class:`Records`).
        """
        self.column_batches.append((type_name, Records(rows), cause))
        self._n += len(cause)

    def clear(self) -> None:
        if self._n:
            self.rows.clear()
            self.causes.clear()
            self.column_batches.clear()
            self._n = 0
        self._cause = 0

    def __len__(self) -> int:
        return self._n


def _column(values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``values`` as a column of ``shape``: as it is when it has that shape already
    (the common case, where ``broadcast_to`` would cost more than the rest of ``many``),
    else a scalar broadcast."""
    return values if values.shape == shape else np.broadcast_to(values, shape)


class Records(Mapping[str, np.ndarray]):
    """Events a detector built whole (:meth:`Emitter.records`), read as the columns
    :meth:`Emitter.many` gives: ``ts``, ``key`` and the payload fields; ``rows`` are
    the events themselves."""

    __slots__ = ("rows",)

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    def __getitem__(self, field: str) -> np.ndarray:
        if field not in self._fields():
            raise KeyError(field)
        return self.rows[field]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())

    def _fields(self) -> tuple[str, ...]:
        names = self.rows.dtype.names or ()
        return ("ts", "key", *(n for n in names if n not in _CORE))


_CORE = frozenset(name for name, _ in CORE_FIELDS)
