"""The detector contract: what a user writes, and what an ordering unit drives.

A detector is a small class. It declares the event types it consumes (``inputs``), the
types it generates (``outputs``) and the types that advance its ordering unit's clock
(``clock``, a subset of ``inputs``), and implements :meth:`Detector.on_event`, or
:meth:`Detector.on_batch` for vectorised low-level detectors. It sees its input in
occurrence-time order; the ordering unit around it buffers, speculates, snapshots and
replays. A detector does no I/O and never reads the wall clock: time comes in through
events.

Example
-------
>>> class Doubler(Detector):
...     inputs = ("x",)
...     outputs = ("y",)
...     def on_event(self, event, emit):
...         emit("y", event.ts, event.key, value=2 * event["value"])
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np


class EventView:
    """Read-only view of one event handed to :meth:`Detector.on_event`.

    ``type`` is the type name, ``ts`` and ``key`` the core fields; payload fields are read
    with ``event["field"]`` (or as attributes).
    """

    __slots__ = ("_row", "type")

    def __init__(self, row: np.void, type_name: str) -> None:
        self._row = row
        self.type = type_name

    @property
    def ts(self) -> int:
        return int(self._row["ts"])

    @property
    def key(self) -> int:
        return int(self._row["key"])

    def __getitem__(self, field: str) -> Any:
        return self._row[field].item()

    def __getattr__(self, field: str) -> Any:
        try:
            return self._row[field].item()
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
        self.column_batches: list[tuple[str, dict[str, np.ndarray], np.ndarray]] = []

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
                   "key": np.broadcast_to(np.asarray(key, dtype=np.int64), cause.shape)}
        columns.update({name: np.broadcast_to(np.asarray(v), cause.shape)
                        for name, v in payload.items()})
        self.column_batches.append((type_name, columns, cause))
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


class Detector:
    """Base class of every detector.

    Subclasses set ``inputs``, ``outputs`` and optionally ``clock`` (default: all
    inputs), and implement ``on_event`` or ``on_batch``. State lives in instance
    attributes; the default :meth:`snapshot` pickles them, so keep state small and
    picklable, or override :meth:`snapshot` and :meth:`restore` together. Two snapshots
    that compare equal must stand for the same state: on-demand retraction stops a
    replay as soon as the replayed state equals the recorded one.

    ``num_gpus`` is a resource hint: the GPUs (a fraction is allowed) the Ray runtime
    asks for when it creates the detector's actor; 0 for CPU-only detectors.
    """

    inputs: ClassVar[tuple[str, ...]] = ()
    outputs: ClassVar[tuple[str, ...]] = ()
    clock: ClassVar[tuple[str, ...] | None] = None
    num_gpus: float = 0.0

    def clock_types(self) -> tuple[str, ...]:
        """The input types whose time stamps set the ordering unit's clock."""
        return tuple(self.inputs if self.clock is None else self.clock)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        """Process one event, in occurrence-time order; generate events with ``emit``."""
        raise NotImplementedError(f"{type(self).__name__} implements neither on_event nor on_batch")

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        """Process a time-ordered batch. The default calls :meth:`on_event` per event.

        ``type_names[type_id]`` maps the ``type`` column to names.
        """
        types = events["type"]
        for i in range(len(events)):
            emit.at(i)
            self.on_event(EventView(events[i], type_names[types[i]]), emit)

    def snapshot(self) -> Any:
        """Return the detector's state; the default pickles the instance attributes."""
        return pickle.dumps(self.__dict__, protocol=pickle.HIGHEST_PROTOCOL)

    def restore(self, state: Any) -> None:
        """Return to a state produced by :meth:`snapshot`."""
        self.__dict__.clear()
        self.__dict__.update(pickle.loads(state))
