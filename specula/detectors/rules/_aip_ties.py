"""Equal time stamps under ``ties nonstrict`` in the AIP engine.

Under ``ties nonstrict`` an event may precede another of the same time stamp whatever
their arrival order, so :class:`~specula.detectors.rules.aip.AIPEngine` evaluates a time
stamp only once all its events have arrived: :class:`Held` keeps the events of the
newest time stamp (in a :class:`~specula.detectors.rules._aip_tables.Table`, so that a
snapshot includes them) until a later time stamp arrives.
"""

from __future__ import annotations

import numpy as np

from specula.detectors.rules._aip_tables import Table
from specula.detectors.rules.engine import TieHold
from specula.events import fields_of

__all__ = ["Held"]


class Held:
    """The relevant events of the newest time stamp, until a later time stamp arrives.

    ``dtype`` holds every field the engine reads of a chain element, and ``type``.
    """

    def __init__(self, dtype: np.dtype) -> None:
        self.dtype = dtype
        self.names = fields_of(dtype)
        self.hold = TieHold(dtype)
        self.table = Table(tuple((name, dtype[name], 0) for name in self.names))

    def __len__(self) -> int:
        return len(self.table)

    def rows(self) -> np.ndarray:
        """The held events, in stream order."""
        table = self.table
        out = np.zeros(len(table), self.dtype)
        for name in self.names:
            out[name] = table.cols[name][table.start:table.n]
        return out

    def _keep(self, rows: np.ndarray) -> None:
        table = self.table
        table.start = table.n = 0
        table.reserve(len(rows))
        for name in self.names:
            table.cols[name][:len(rows)] = rows[name]
        table.n = len(rows)

    def take(self, events: np.ndarray, relevant: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hold the ``relevant`` rows of the batch ``events``; return the events whose time
        stamp is complete and their causes, as
        :meth:`~specula.detectors.rules.engine.TieHold.take` does (the table is the state
        a snapshot keeps, so the hold starts from it)."""
        new = np.zeros(len(relevant), self.dtype)
        for name in self.names:
            new[name] = events[name][relevant]
        self.hold.held = self.rows()
        done, causes = self.hold.take(new, relevant, events["ts"])
        self._keep(self.hold.held)
        return done, causes

    def flush(self) -> np.ndarray:
        """Everything held; the stream has ended."""
        rows = self.rows()
        self._keep(rows[:0])
        return rows

