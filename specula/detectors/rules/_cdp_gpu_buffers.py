"""Device memory of the CDP engine on GPU, kept across steps and batches.

Every transfer goes through a pinned host buffer on the engine's one CUDA stream, and no
buffer is allocated per step: buffers grow (to powers of two) and stay. Numba makes
each device-array operation costly on the host (allocation, slicing, argument checks),
so the hot path takes views of fixed sizes that were cut once, and copies a power-of-two
prefix (at most twice what is needed) rather than slicing to the exact length.

* :class:`Ring` is one column on the device: circular buffers of time stamps, parameter
  keys and aggregated values. New events are staged in one flat pinned buffer, copied in one
  transfer and scattered into the ring by one kernel launch. It holds a prefix of its
  CPU column and catches up (:meth:`Ring.sync`) only before a kernel reads it, so
  batches that need no launch cost no transfer. After a restore it keeps the events it
  already holds that the restored column also holds (the CPU column it mirrored is the
  host copy they are compared with).
* :class:`Sequences` holds the partial sequences a step or a reduction works on, one
  row each: ``[lo, hi, result, parameters..., extra...]`` (a step's extra columns: the
  anchor and the position keys of the elements), copied to the device in one transfer;
  single selections write their result into the ``result`` column, which comes back
  with the same buffer; for a multiple selection it holds the sequence's first slot.
  :class:`Context` holds the values of earlier elements that the predicate programs
  read, one row per sequence.
* :class:`Pairs` is the output of multiple selections: a flag per event of every slot
  of the windows, the slots' offsets, their total and the ``(sequence, event)`` pairs,
  which come back with the total.
* :class:`Partials` holds the per-block results of the reductions, block-major, so
  that the final results are the first row.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from specula.detectors.rules import _cdp_gpu_kernels as _gk

LO, HI, RESULT, PARAMS = 0, 1, 2, 3
"""Columns of a :class:`Sequences` row (the parameters start at ``PARAMS``)."""

_MIN_ROWS = 64


def size_class(n: int, least: int = _MIN_ROWS) -> int:
    """The smallest power of two that is at least ``n`` and ``least``.

    >>> size_class(1), size_class(65), size_class(1000, 16)
    (64, 128, 1024)
    """
    return max(least, 1 << max(0, int(n) - 1).bit_length())


class _Prefixes:
    """Views of the first ``2**k`` elements of a device array, cut once each."""

    def __init__(self, array) -> None:
        self.array = array
        self._views: dict[int, object] = {}

    def __call__(self, n: int):
        size = min(size_class(n, 1), self.array.shape[0])
        view = self._views.get(size)
        if view is None:
            view = self._views[size] = self.array[:size]
        return view, size


class Ring:
    """A column on the device: ``ts`` and the ``enc`` and ``num`` rows of ``capacity``
    events, logical index 0 at physical index ``head``."""

    def __init__(self, n_enc: int, n_num: int, stream, capacity: int) -> None:
        self.n_enc, self.n_num = n_enc, n_num
        self.stream = stream
        self._allocate(capacity)

    def _allocate(self, capacity: int) -> None:
        """Empty rows of ``capacity`` events on the device."""
        n_enc, n_num, stream = self.n_enc, self.n_num, self.stream
        self.capacity = capacity
        self.ts = cuda.device_array(capacity, np.int64, stream=stream)
        self.enc = cuda.device_array((max(1, n_enc), capacity), np.int64, stream=stream)
        self.num = cuda.device_array((max(1, n_num), capacity), np.float64, stream=stream)
        self.head = 0
        self.size = 0
        self._stage_cap = 0
        self._stage(1)

    def sync(self, store) -> int:
        """Hold every live event of the CPU column ``store`` (a
        :class:`~specula.detectors.rules._cdp_columns.Store` whose first :attr:`size`
        events the ring holds); return how many events were uploaded."""
        n, held = len(store), self.size
        if n == held:
            return 0
        if n > self.capacity:
            self.fill(store.live_ts, store.live_enc, store.live_num)
            return n
        self._write((self.head + held) % self.capacity, store.live_ts[held:],
                    store.live_enc[:, held:], store.live_num[:, held:])
        self.size = n
        return n - held

    def drop(self, k: int) -> None:
        """The ``k`` oldest events of the CPU column were dropped (some of them, or
        events after them, may not have been uploaded yet)."""
        k = min(k, self.size)
        self.head = (self.head + k) % self.capacity
        self.size -= k

    def fill(self, ts: np.ndarray, enc: np.ndarray, num: np.ndarray) -> None:
        """Hold exactly ``ts``/``enc``/``num``, growing the ring if they do not fit."""
        n = enc.shape[1]
        if n > self.capacity:
            self._allocate(size_class(2 * n))
        self._write(self.head, ts, enc, num)
        self.size = n

    def resync(self, old, new) -> int:
        """The CPU column went from ``old`` to ``new`` (a restore): keep the events of
        ``new`` the ring already holds, as the first events of the ring; return how many
        events were uploaded (the rest come with the next :meth:`sync`).

        Events are matched by ``(ts, producer, seq)`` and must agree in every key and
        value; the longest run that both hold in the same order stays on the device.
        Events of ``new`` older than that run (ones the ring had already dropped) are
        written before it.
        """
        n = len(new)
        run = _common_run(old, self.size, new) if 0 < n <= self.capacity else None
        if run is None:
            self.size = 0
            return 0
        s, j, k = run  # old[s:s + k] == new[j:j + k]
        self.drop(s)
        self.size = k
        if j:
            self.head = (self.head - j) % self.capacity
            self._write(self.head, new.live_ts[:j], new.live_enc[:, :j], new.live_num[:, :j])
            self.size += j
        return j

    def _stage(self, w: int) -> None:
        """Pinned and device staging of ``w`` events (grown to a power of two)."""
        if w <= self._stage_cap:
            return
        self._stage_cap = size_class(w)
        n_enc, n_num = max(1, self.n_enc), max(1, self.n_num)
        self._host_ts = cuda.pinned_array(self._stage_cap, np.int64)
        self._dev_ts = _Prefixes(cuda.device_array(self._stage_cap, np.int64,
                                                   stream=self.stream))
        self._host_enc = cuda.pinned_array(n_enc * self._stage_cap, np.int64)
        self._host_num = cuda.pinned_array(n_num * self._stage_cap, np.float64)
        self._dev_enc = _Prefixes(cuda.device_array(n_enc * self._stage_cap, np.int64,
                                                    stream=self.stream))
        self._dev_num = _Prefixes(cuda.device_array(n_num * self._stage_cap, np.float64,
                                                    stream=self.stream))

    def _write(self, pos: int, ts: np.ndarray, enc: np.ndarray, num: np.ndarray) -> None:
        """Write events at physical index ``pos`` (wrapping around): one transfer per
        array kind and one scatter launch."""
        w = enc.shape[1]
        if w == 0:
            return
        self._stage(w)
        self.stream.synchronize()  # the staging buffers may still be in flight
        ne, nn = self.n_enc * w, self.n_num * w
        self._host_ts[:w] = ts
        self._host_enc[:ne].reshape(self.n_enc, w)[:] = enc
        self._host_num[:nn].reshape(self.n_num, w)[:] = num
        dev_ts, size_t = self._dev_ts(w)
        dev_enc, size_e = self._dev_enc(max(1, ne))
        dev_num, size_n = self._dev_num(max(1, nn))
        dev_ts.copy_to_device(self._host_ts[:size_t], stream=self.stream)
        dev_enc.copy_to_device(self._host_enc[:size_e], stream=self.stream)
        dev_num.copy_to_device(self._host_num[:size_n], stream=self.stream)
        tpb = 128
        _gk.scatter[(w + tpb - 1) // tpb, tpb, self.stream](
            self._dev_ts.array, self._dev_enc.array, self.n_enc, self._dev_num.array,
            self.n_num, w, self.ts, self.enc, self.num, pos, self.capacity)


def _common_run(old, held: int, new) -> tuple[int, int, int] | None:
    """``(s, j, k)`` with ``old[s:s + k] == new[j:j + k]`` among the first ``held``
    events of ``old``, ``s == 0 or j == 0``, and ``k`` as long as possible from there;
    None when they share no event."""
    if not held:
        return None
    ko, kn = _identity(old, held), _identity(new, len(new))
    in_old = np.flatnonzero((ko[0] == kn[0][0]) & (ko[1] == kn[1][0]) & (ko[2] == kn[2][0]))
    if len(in_old):
        s, j = int(in_old[0]), 0
    else:
        in_new = np.flatnonzero((kn[0] == ko[0][0]) & (kn[1] == ko[1][0]) & (kn[2] == ko[2][0]))
        if not len(in_new):
            return None
        s, j = 0, int(in_new[0])
    k = min(held - s, len(new) - j)
    a, b = slice(s, s + k), slice(j, j + k)
    same = ((ko[0][a] == kn[0][b]) & (ko[1][a] == kn[1][b]) & (ko[2][a] == kn[2][b])
            & (old.live_enc[:, a] == new.live_enc[:, b]).all(axis=0)
            & (old.live_num[:, a].view(np.int64) == new.live_num[:, b].view(np.int64)
               ).all(axis=0))
    differ = np.flatnonzero(~same)
    k = int(differ[0]) if len(differ) else k
    return (s, j, k) if k else None


def _identity(store, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ts, producer, seq)`` of the first ``n`` events of a column."""
    rows = store.live_rows[:n]
    return store.live_ts[:n], rows["producer"], rows["seq"]


class Sequences:
    """Rows ``[lo, hi, result, parameters..., extra...]`` of partial sequences, pinned
    on the host and on the device, in size classes of powers of two (per width)."""

    def __init__(self, n_params: int, stream) -> None:
        self.extra_at = PARAMS + n_params
        """The column of the first extra value."""
        self.stream = stream
        self._classes: dict[tuple[int, int], tuple[np.ndarray, Any]] = {}  # device: untyped

    def upload(self, lo: np.ndarray, hi: np.ndarray, bound: np.ndarray,
               result: int | np.ndarray = 0, extra: np.ndarray | None = None):
        """Copy the sequences to the device; returns ``(host, device)`` buffers of at
        least ``len(lo)`` rows (the host one is valid until the next upload)."""
        m = len(lo)
        width = self.extra_at + (0 if extra is None else extra.shape[1])
        host, dev = _pair(self._classes, (size_class(m), width), np.int64, self.stream)
        host[:m, LO] = lo
        host[:m, HI] = hi
        host[:m, RESULT] = result
        host[:m, PARAMS:self.extra_at] = bound
        if extra is not None:
            host[:m, self.extra_at:] = extra
        dev.copy_to_device(host, stream=self.stream)
        return host, dev

    def download(self, host: np.ndarray, dev) -> np.ndarray:
        """The rows back from the device (waits for the stream)."""
        dev.copy_to_host(host, stream=self.stream)
        self.stream.synchronize()
        return host


class Context:
    """The context values of partial sequences (float64, one row each), pinned on the
    host and on the device, in size classes of powers of two (per width)."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self._classes: dict[tuple[int, int], tuple[np.ndarray, Any]] = {}  # device: untyped

    def upload(self, ctx: np.ndarray):
        """Copy ``ctx`` to the device (at least one column); returns the device array."""
        m, width = ctx.shape
        host, dev = _pair(self._classes, (size_class(m), max(1, width)), np.float64,
                          self.stream)
        host[:m, :width] = ctx
        dev.copy_to_device(host, stream=self.stream)
        return dev


def _pair(classes: dict, shape: tuple[int, int], dtype, stream) -> tuple[np.ndarray, Any]:
    """The pinned and device arrays of ``shape`` in ``classes`` (made once), once the
    stream no longer reads the pinned one."""
    pair = classes.get(shape)
    if pair is None:
        pair = classes[shape] = (cuda.pinned_array(shape, dtype),
                                 cuda.device_array(shape, dtype, stream=stream))
    stream.synchronize()  # the host buffer may still be in flight
    return pair


class Pairs:
    """Output of a multiple selection: a flag per event of every slot of the windows,
    the slots' offsets, their total and the ``(sequence, event)`` pairs.

    The pairs come back with the total, in one wait for the GPU, whenever they fit in
    the prefix that held the previous launch's pairs (a stream's selectivity changes
    slowly); a second copy fetches the rest when they do not."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.total = cuda.device_array(1, np.int64, stream=stream)
        self._total = cuda.pinned_array(1, np.int64)
        self.capacity = self.slots = 0
        self.expected = _MIN_ROWS
        """Pairs copied back with the total (a power of two)."""
        self.waits = 0
        """Times :meth:`download` waited for the GPU."""
        self.flagged = 0
        self.grow(1, 1, 1)

    def grow(self, n: int, slots: int, width: int) -> None:
        """Make room for at least ``n`` pairs and ``slots`` slots of ``width`` events."""
        if slots > self.slots:
            self.slots = size_class(slots, 1024)
            self.offsets = cuda.device_array(self.slots, np.int64, stream=self.stream)
        if slots * width > self.flagged:
            self.flagged = size_class(slots * width, 1024)
            self.flags = cuda.device_array(self.flagged, np.int32, stream=self.stream)
        if n <= self.capacity:
            return
        self.capacity = size_class(n, 1024)
        self.out = cuda.device_array((self.capacity, 2), np.int64, stream=self.stream)
        self._host = cuda.pinned_array((self.capacity, 2), np.int64)
        self._prefix = _Prefixes(self.out)

    def download(self) -> np.ndarray:
        """The pairs of the last selection, as an ``(n, 2)`` array (a copy)."""
        self.total.copy_to_host(self._total, stream=self.stream)
        view, size = self._prefix(self.expected)
        view.copy_to_host(self._host[:size], stream=self.stream)
        self.stream.synchronize()
        self.waits += 1
        n = int(self._total[0])
        if n > self.capacity:
            raise AssertionError("more pairs than the output holds")  # sized by the windows
        if n > size:
            view, size = self._prefix(n)
            view.copy_to_host(self._host[:size], stream=self.stream)
            self.stream.synchronize()
            self.waits += 1
        self.expected = size_class(n)
        return self._host[:n].copy()


class Partials:
    """Two block-major buffers of per-block ``(value, count)``, used in turn by the
    levels of a reduction; the final results are row 0 of one of them."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.rows = self.blocks = 0
        self.value_host: np.ndarray | None = None  # pinned, made by ensure()
        self.count_host: np.ndarray | None = None

    def ensure(self, rows: int, blocks: int) -> None:
        """Room for ``blocks`` partials of ``rows`` sequences."""
        if rows <= self.rows and blocks <= self.blocks:
            return
        self.rows = max(self.rows, size_class(rows))
        self.blocks = max(self.blocks, size_class(blocks, 1))
        shape = (self.blocks, self.rows)
        self.value = [cuda.device_array(shape, np.float64, stream=self.stream)
                      for _ in range(2)]
        self.count = [cuda.device_array(shape, np.int64, stream=self.stream)
                      for _ in range(2)]
        self._first = [(_Prefixes(v[0]), _Prefixes(c[0]))
                       for v, c in zip(self.value, self.count, strict=True)]
        self.value_host = cuda.pinned_array(self.rows, np.float64)
        self.count_host = cuda.pinned_array(self.rows, np.int64)

    def download(self, which: int, m: int) -> tuple[np.ndarray, np.ndarray]:
        """Row 0 of buffer ``which``: the results of ``m`` sequences (copies)."""
        assert self.value_host is not None and self.count_host is not None, "ensure() first"
        (value, size), (count, _) = (prefix(m) for prefix in self._first[which])
        value.copy_to_host(self.value_host[:size], stream=self.stream)
        count.copy_to_host(self.count_host[:size], stream=self.stream)
        self.stream.synchronize()
        return self.value_host[:m].copy(), self.count_host[:m].copy()
