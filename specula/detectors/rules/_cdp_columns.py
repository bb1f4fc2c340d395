"""The columns of the CDP engine: growable arrays of rows, and how event rows enter them.

A :class:`Store` is one column: rows in stream order with, beside them, the arrays the
kernels scan (time stamps, parameter keys, aggregated values), appended at the end and
dropped from the front, and the equality index (:mod:`~specula.detectors.rules._cdp_index`)
of the key rows that steps and reductions look up. :func:`encode` turns parameter values
into the int64 keys the kernels compare, and :func:`convert` gives rows the fields of a
target dtype (one ``astype`` through a view when it can). The GPU engine mirrors these
columns on the device.
"""

from __future__ import annotations

import functools
import struct

import numpy as np

from specula.detectors.rules import _cdp_index as _ix
from specula.detectors.rules import _cdp_kernels as _k
from specula.events import fields_of

__all__ = ["NO_INDEX", "Store", "convert", "encode", "encode_one", "same_fields", "take"]


def encode(values: np.ndarray, is_float: bool) -> np.ndarray:
    """Parameter keys of ``values``: int64 values, or the bits of float64 values."""
    if not is_float:
        return values.astype(np.int64)
    f = values.astype(np.float64)
    f = np.where(f == 0.0, 0.0, f)
    keys = f.view(np.int64).copy()
    keys[np.isnan(f)] = _k.NAN_KEY
    return keys


def encode_one(value: float, is_float: bool) -> int:
    """:func:`encode` of one value, as a Python int."""
    if not is_float:
        key = int(value)
        return key - (1 << 64) if key >= 1 << 63 else key  # uint64 wraps, as in encode
    f = float(value)
    if f != f:  # NaN
        return int(_k.NAN_KEY)
    return _BITS.unpack(_FLOAT.pack(f + 0.0))[0]  # + 0.0 folds -0.0 into 0.0


_FLOAT, _BITS = struct.Struct("<d"), struct.Struct("<q")


class Store:
    """One column: rows in stream order in growable arrays, live part ``[start, end)``.

    ``indexed`` names the rows of ``enc`` that carry an equality index: ``link[i]``
    holds, for each event, the absolute position of the previous event with the same
    key in row ``indexed[i]``, and ``tables[i]`` the hash table from key to newest
    position (see :mod:`~specula.detectors.rules._cdp_index`). The event at array index
    ``j`` has absolute position ``base + j``. ``version`` counts the times the column
    replaced its arrays (grown) or a table (rebuilt): a caller that keeps them knows
    when to fetch them again.
    """

    __slots__ = ("base", "enc", "end", "indexed", "link", "num", "rows", "start", "tables",
                 "ts", "version")

    def __init__(self, dtype: np.dtype, n_enc: int, n_num: int, capacity: int = 256,
                 indexed: tuple[int, ...] = ()) -> None:
        self.rows = np.zeros(capacity, dtype)
        self.ts = np.zeros(capacity, np.int64)
        self.enc = np.zeros((n_enc, capacity), np.int64)
        self.num = np.zeros((n_num, capacity), np.float64)
        self.indexed = indexed
        self.link = np.zeros((len(indexed), capacity), np.int64)
        self.tables = [_empty_table(64) for _ in indexed]
        self.start = 0
        self.end = 0
        self.base = 0
        self.version = 0

    def __len__(self) -> int:
        return self.end - self.start

    @property
    def live_ts(self) -> np.ndarray:
        return self.ts[self.start:self.end]

    @property
    def live_enc(self) -> np.ndarray:
        return self.enc[:, self.start:self.end]

    @property
    def live_num(self) -> np.ndarray:
        return self.num[:, self.start:self.end]

    @property
    def live_rows(self) -> np.ndarray:
        return self.rows[self.start:self.end]

    def index_of(self, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """What a kernel needs to look keys of ``enc`` row ``row`` up: the table's keys
        and positions, the live links and the absolute position of the first live event.
        Empty arrays when the row has no index (the kernel then scans)."""
        if row not in self.indexed:
            return NO_INDEX
        i = self.indexed.index(row)
        slot_key, slot_pos, _ = self.tables[i]
        return slot_key, slot_pos, self.link[i, self.start:self.end], self.base + self.start

    def append(self, rows: np.ndarray, enc: np.ndarray, num: np.ndarray) -> None:
        r = len(rows)
        self._reserve(r)
        self.rows[self.end:self.end + r] = rows
        self.ts[self.end:self.end + r] = rows["ts"]
        self.enc[:, self.end:self.end + r] = enc
        self.num[:, self.end:self.end + r] = num
        for i, row in enumerate(self.indexed):
            self._index(i, enc[row])
        self.end += r

    def append_one(self, row: tuple, ts: int, enc: list[int], num: list[float]) -> None:
        """:meth:`append` of one row, its fields ``row`` (in the rows' dtype), time stamp,
        keys and values given as Python scalars: a live feed's step brings a row or two
        to a column, where setting scalars costs a fraction of copying arrays."""
        self._reserve(1)
        end = self.end
        self.rows[end] = row
        self.ts[end] = ts
        for r, key in enumerate(enc):
            self.enc[r, end] = key
        for r, value in enumerate(num):
            self.num[r, end] = value
        for i, at in enumerate(self.indexed):
            self._index(i, self.enc[at, end:end + 1])
        self.end = end + 1

    def _reserve(self, r: int) -> None:
        """Make room for ``r`` rows behind :attr:`end`: move the live rows to the front,
        into arrays twice as large when they fill more than half."""
        capacity = len(self.ts)
        if self.end + r > capacity:
            live = self.end - self.start
            if live + r > capacity // 2:
                capacity = 2 * (live + r)
                self.version += 1
            for name in ("rows", "ts", "enc", "num", "link"):
                old = getattr(self, name)
                new = old if capacity == old.shape[-1] else np.zeros(
                    (*old.shape[:-1], capacity), old.dtype)
                new[..., :live] = old[..., self.start:self.end]
                setattr(self, name, new)
            self.base += self.start
            self.start, self.end = 0, live

    def _index(self, i: int, keys: np.ndarray) -> None:
        """Link the new events (keys of index ``i``) before :attr:`end` moves past them;
        rebuild the table for the live keys when it fills up."""
        first, live_first = self.base + self.end, self.base + self.start
        link = self.link[i, self.end:self.end + len(keys)]
        slot_key, slot_pos, used = self.tables[i]
        used = _ix.append(keys, first, live_first, link, slot_key, slot_pos, used)
        if used < 0:
            # one live event per live key links below the live part: its oldest
            distinct = int(np.count_nonzero(self.link[i, self.start:self.end] < live_first))
            capacity = 1 << max(6, int(4 * (distinct + len(keys)) - 1).bit_length())
            live = self.enc[self.indexed[i], self.start:self.end]
            slot_key, slot_pos, used = _ix.rebuild(live, live_first, capacity)
            self.version += 1
            used = _ix.append(keys, first, live_first, link, slot_key, slot_pos, used)
        self.tables[i] = (slot_key, slot_pos, used)

    def drop_before(self, ts: int) -> int:
        """Forget the events older than ``ts``; return how many."""
        k = int(np.searchsorted(self.live_ts, ts, side="left"))
        self.start += k
        if self.start == self.end:
            self.base += self.end
            self.start = self.end = 0
        return k


NO_INDEX = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), 0)
"""What :meth:`Store.index_of` gives for a row without an index."""


def _empty_table(capacity: int) -> tuple[np.ndarray, np.ndarray, int]:
    return np.zeros(capacity, np.int64), np.full(capacity, -1, np.int64), 0


def convert(rows: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``rows`` with the fields of ``dtype`` (a copy in that dtype unless it already is)."""
    if rows.dtype == dtype:
        return rows
    picker = _picker(rows.dtype, dtype)
    if picker is not None:
        return rows.view(picker).astype(dtype)
    out = np.empty(len(rows), dtype)
    for name in fields_of(dtype):
        out[name] = rows[name]
    return out


def take(rows: np.ndarray, positions: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The rows at ``positions`` with the fields of ``dtype``, as a new array: each row
    is taken as one block of bytes (``take``), then packed; selecting a structured
    array by a mask or an index array would copy it field by field, ~3x slower."""
    if rows.dtype == dtype:
        return rows.take(positions)
    picker = _picker(rows.dtype, dtype)
    if picker is not None:
        return rows.view(picker).take(positions).astype(dtype)
    return convert(rows.take(positions), dtype)


def same_fields(source: np.dtype, target: np.dtype) -> bool:
    """Whether rows of ``source`` hold every field of ``target`` with the same type."""
    return source == target or _picker(source, target) is not None


@functools.lru_cache(maxsize=64)
def _picker(source: np.dtype, target: np.dtype) -> np.dtype | None:
    """A dtype that views rows of ``source`` as just the fields of ``target``, in its
    order (so one ``astype`` copies them), or None when a field differs in type."""
    names, fields, wanted = fields_of(target), source.fields, target.fields
    assert fields is not None and wanted is not None, "structured dtypes"
    if any(name not in fields or fields[name][0] != wanted[name][0] for name in names):
        return None
    return np.dtype({"names": list(names),
                     "formats": [fields[name][0] for name in names],
                     "offsets": [fields[name][1] for name in names],
                     "itemsize": source.itemsize})
