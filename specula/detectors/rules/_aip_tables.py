"""The storage of the AIP engine: append-only tables with lazy deletion, and their bytes.

:class:`~specula.detectors.rules.aip.AIPEngine` keeps everything in tables
(:class:`Table`): the rule's event store, one table of instances per automaton state,
and one table per aggregate or negation column. Rows arrive in time order and leave from
the front, so a table is a set of NumPy arrays with a live range ``[start, n)``:
deleting is moving ``start``, and the arrays are compacted or grown only when an append
needs room. Row ids survive compaction (``base``), so instances can refer to stored
events by id.

:func:`snapshot_tables` and :func:`restore_tables` turn a list of tables into bytes and
back; the engine decides which tables and how far back each is still needed.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Table", "restore_tables", "snapshot_tables"]

_MIN_CAPACITY = 64


class Table:
    """Rows appended in time order; rows before ``start`` are deleted.

    ``spec`` lists ``(name, dtype, width)``; width 0 is a 1-D column, a column of width
    ``w`` is a ``(w, capacity)`` array, so that each of its ``w`` values is a contiguous
    row the kernels scan. Row ``i`` of the arrays has the logical id ``base + i``, which
    survives compaction.
    """

    __slots__ = ("base", "cols", "n", "spec", "start")

    def __init__(self, spec: tuple[tuple[str, np.dtype, int], ...]) -> None:
        self.spec = spec
        self.cols = {name: np.empty(_shape(_MIN_CAPACITY, w), dtype) for name, dtype, w in spec}
        self.start = 0
        self.n = 0
        self.base = 0

    def __len__(self) -> int:
        return self.n - self.start

    def reserve(self, extra: int) -> None:
        """Make room for ``extra`` more rows, compacting or growing the arrays."""
        capacity = len(self.cols["ts"])
        if self.n + extra <= capacity:
            return
        live = self.n - self.start
        size = max(capacity, _MIN_CAPACITY)
        while size < 2 * (live + extra):
            size *= 2
        for name, dtype, w in self.spec:
            old = self.cols[name]
            new = old if size == capacity else np.empty(_shape(size, w), dtype)
            new[..., :live] = old[..., self.start:self.n]
            self.cols[name] = new
        self.base += self.start
        self.n = live
        self.start = 0

    def cut(self, horizon: int) -> int:
        """Index of the first row with ``ts >= horizon``."""
        ts = self.cols["ts"]
        return self.start + int(np.searchsorted(ts[self.start:self.n], horizon))

    def keep(self, mask: np.ndarray) -> None:
        """Keep the live rows where ``mask`` (one flag per live row) holds, in their
        order; the others are deleted (state shedding). Ids of the rows after a deleted
        one shift, so only tables no one refers to by id (the states) may use it."""
        kept = int(np.count_nonzero(mask))
        for name, _, _ in self.spec:
            col = self.cols[name]
            col[..., self.start:self.start + kept] = col[..., self.start:self.n][..., mask]
        self.n = self.start + kept

    def live(self, start: int) -> list[np.ndarray]:
        return [self.cols[name][..., start:self.n] for name, _, _ in self.spec]


def _shape(n: int, width: int) -> tuple[int, ...]:
    return (width, n) if width else (n,)


def snapshot_tables(tables: list[tuple[Table, int]], now: int | None) -> bytes:
    """The live rows of ``tables`` (each with its horizon, ticks before ``now``) as bytes.

    Rows older than a table's horizon are left out even where lazy deletion still keeps
    them, so equal states give equal bytes. The header holds ``now`` and the logical id
    of the first live row of the first table (the engine's event store).
    """
    starts = [t.start if now is None else t.cut(now - h) for t, h in tables]
    header = [0 if now is None else 1, now or 0, tables[0][0].base + starts[0]]
    header += [t.n - s for (t, _), s in zip(tables, starts, strict=True)]
    parts = [np.array(header, np.int64).tobytes()]
    for (table, _), start in zip(tables, starts, strict=True):
        parts += [np.ascontiguousarray(c).tobytes() for c in table.live(start)]
    return b"".join(parts)


def restore_tables(state: bytes, tables: list[tuple[Table, int]]) -> int | None:
    """Refill ``tables`` from the bytes of :func:`snapshot_tables`; return its ``now``."""
    head = np.frombuffer(state, np.int64, count=3 + len(tables))
    now = int(head[1]) if head[0] else None
    offset = head.nbytes
    for (table, _), rows in zip(tables, head[3:].tolist(), strict=True):
        table.start = table.n = table.base = 0
        table.reserve(rows)
        for name, dtype, w in table.spec:
            count = rows * max(w, 1)
            data = np.frombuffer(state, dtype, count=count, offset=offset)
            table.cols[name][..., :rows] = data.reshape(_shape(rows, w))
            offset += data.nbytes
        table.n = rows
    tables[0][0].base = int(head[2])
    return now
