"""The CDP engine on a CUDA GPU (Cugola & Margara, JPDC 2012, sec. 5.3 to 5.5).

:class:`GPUCDPEngine` is :class:`~specula.detectors.rules.cdp.CDPEngine` with the scans
moved to the GPU. The CPU keeps its copy of every column (which the snapshot, the
pruning and the binary searches use); each column also lives on the device as a
preallocated circular buffer of the parameter keys and aggregated values, into which
new events are copied as they arrive and from which pruned events leave by moving the
head. A full buffer is reallocated twice as large and refilled from the CPU copy (the
paper sizes buffers statically for the worst case; this grows them instead).

When terminators arrive, each step runs as in sec. 5.3: the CPU finds every partial
sequence's window by binary search on its copy, then one kernel launch checks all
(sequence, event) pairs in parallel, on a two-dimensional grid (y: the sequence, x: its
window). Multiple selection (``each``) appends fitting pairs to an output array at an
index taken with ``cuda.atomic.add``; single selection keeps one index per sequence,
raised by ``cuda.atomic.max`` (``last``, from -1) or lowered by ``cuda.atomic.min``
(``first``, from a sentinel). Aggregates and negations are reduced per match in shared
memory, block by block and then over the blocks' results until one value is left
(sec. 5.4); a negation is a count.

Readings chosen here:

* Sequences are kept as (parent, chosen event) pairs rather than copied event arrays;
  the CPU sorts the pairs a multiple-selection launch returns (the atomic counter hands
  out slots in no particular order), so matches come in the same order as on the CPU.
* Windows are exact per sequence, so threads check parameters only.
* Copies to the device are synchronous (the paper's are asynchronous).
* Sums and averages add in tree order, so they can differ from the CPU engine's in the
  last bits of non-integer values; minima, maxima, counts and integer sums are equal.

Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, set before Numba is imported) runs
the same kernels on the CPU, for tests; there the default block is 8 threads.
"""

from __future__ import annotations

import math

import numpy as np
from numba import config, cuda

from specula.detectors.rules import _cdp_gpu_kernels as _gk
from specula.detectors.rules import _cdp_kernels as _k
from specula.detectors.rules._cdp_plan import Reduction, Step
from specula.detectors.rules.ast import Rule
from specula.detectors.rules.cdp import CDPEngine
from specula.events import TypeRegistry

__all__ = ["GPUCDPEngine"]

_MAX_GRID_Y = 65535
_RING_CAPACITY = 1024  # events a device column holds before its first reallocation


def _padded(a: np.ndarray) -> np.ndarray:
    """``a`` with at least one element (device arrays of size 0 are avoided)."""
    return a if len(a) else np.zeros(1, a.dtype)


class _Ring:
    """A column on the device: circular buffers of keys and values, logical index 0 at
    physical index ``head``."""

    def __init__(self, n_enc: int, n_num: int, capacity: int | None = None) -> None:
        capacity = capacity or _RING_CAPACITY
        self.n_enc, self.n_num = n_enc, n_num
        self.capacity = capacity
        self.enc = cuda.device_array((max(1, n_enc), capacity), np.int64)
        self.num = cuda.device_array((max(1, n_num), capacity), np.float64)
        self.head = 0
        self.size = 0

    def push(self, enc: np.ndarray, num: np.ndarray, live_enc: np.ndarray,
             live_num: np.ndarray) -> None:
        """Append the events ``enc``/``num`` (one column each); ``live_*`` are the CPU
        copy of the whole column, new events included, to refill a grown buffer."""
        r = enc.shape[1]
        if self.size + r > self.capacity:
            self.reload(live_enc, live_num)
            return
        pos = (self.head + self.size) % self.capacity
        first = min(r, self.capacity - pos)
        self._write(pos, enc[:, :first], num[:, :first])
        if first < r:
            self._write(0, enc[:, first:], num[:, first:])
        self.size += r

    def drop(self, k: int) -> None:
        """Forget the ``k`` oldest events."""
        self.head = (self.head + k) % self.capacity
        self.size -= k

    def reload(self, live_enc: np.ndarray, live_num: np.ndarray) -> None:
        """Hold exactly ``live_*``, reallocating if they do not fit."""
        n = live_enc.shape[1]
        if n > self.capacity:
            self.__init__(self.n_enc, self.n_num, max(2 * self.capacity, 2 * n))
        self.head = 0
        self.size = 0
        self._write(0, live_enc, live_num)
        self.size = n

    def _write(self, pos: int, enc: np.ndarray, num: np.ndarray) -> None:
        w = enc.shape[1]
        if w == 0:
            return
        for a in range(self.n_enc):
            self.enc[a, pos:pos + w].copy_to_device(np.ascontiguousarray(enc[a]))
        for a in range(self.n_num):
            self.num[a, pos:pos + w].copy_to_device(np.ascontiguousarray(num[a]))


class GPUCDPEngine(CDPEngine):
    """Column-based detection (CDP) of one rule with the scans on a CUDA GPU.

    Parameters
    ----------
    rule : Rule
        The rule to detect.
    registry : TypeRegistry
        Registry in which every type the rule reads is registered.
    ticks_per_second : float, optional
        Converts windows written with a unit.
    threads_per_block : int, optional
        A power of two up to 1024; 128 on a GPU and 8 in Numba's CUDA simulator by
        default.

    Raises
    ------
    RuntimeError
        If Numba finds no CUDA GPU (and the simulator is off).

    Notes
    -----
    Output, snapshots and their format are those of :class:`CDPEngine` (see
    :mod:`specula.detectors.rules.cdp_gpu` for how sums may differ).
    """

    def __init__(self, rule: Rule, registry: TypeRegistry,
                 ticks_per_second: float | None = None, *,
                 threads_per_block: int | None = None) -> None:
        if not cuda.is_available():
            raise RuntimeError(
                "GPUCDPEngine needs a CUDA GPU and Numba finds none on this machine "
                "(numba.cuda.is_available() is False); use CDPEngine (engine='cdp'), "
                "the same algorithm on the CPU, or set NUMBA_ENABLE_CUDASIM=1 before "
                "Numba is imported to run the kernels in Numba's CUDA simulator (slow)")
        if threads_per_block is None:
            threads_per_block = 8 if config.ENABLE_CUDASIM else 128
        if not (1 <= threads_per_block <= 1024
                and threads_per_block & (threads_per_block - 1) == 0):
            raise ValueError(f"threads_per_block must be a power of two from 1 to 1024, "
                             f"got {threads_per_block}")
        self.threads_per_block = threads_per_block
        super().__init__(rule, registry, ticks_per_second)
        self._reduce_column, self._reduce_partials = _gk.reductions(threads_per_block)
        self._rings = [_Ring(len(s.enc), len(s.num)) for s in self._plan.stores]
        self._device_checks = {
            id(x): (cuda.to_device(_padded(x.chk_col)), cuda.to_device(_padded(x.chk_par)),
                    len(x.chk_col))
            for x in [*self._plan.steps, *self._plan.reductions]}

    # ----------------------------------------------------------- device columns

    def _appended(self, store: int, count: int) -> None:
        s = self._stores[store]
        enc, num = s.live_enc, s.live_num
        self._rings[store].push(enc[:, -count:], num[:, -count:], enc, num)

    def _dropped(self, store: int, count: int) -> None:
        self._rings[store].drop(count)

    def _reloaded(self) -> None:
        for ring, s in zip(self._rings, self._stores, strict=True):
            ring.reload(s.live_enc, s.live_num)

    # ----------------------------------------------------------------- kernels

    def _windows(self, ts: np.ndarray, start: np.ndarray, stop: np.ndarray,
                 bound: np.ndarray, chk_par: np.ndarray, chk_nan: np.ndarray):
        """Per sequence the window ``[lo, hi)`` of ``start <= ts < stop``, by binary
        search on the CPU copy; empty where a NaN parameter value matches nothing."""
        lo = np.searchsorted(ts, start, side="left")
        hi = np.maximum(np.searchsorted(ts, stop, side="left"), lo)
        nan = chk_nan.nonzero()[0]
        if len(nan):
            blocked = (bound[:, chk_par[nan]] == _k.NAN_KEY).any(axis=1)
            hi[blocked] = lo[blocked]
        return lo.astype(np.int64), hi.astype(np.int64)

    def _grid(self, width: int, m: int) -> tuple[int, int]:
        return math.ceil(width / self.threads_per_block), min(m, _MAX_GRID_Y)

    def _step(self, st: Step, anchor: np.ndarray, bound: np.ndarray):
        store, ring = self._stores[st.store], self._rings[st.store]
        ts = store.live_ts
        lo, hi = self._windows(ts, anchor - st.window, anchor, bound, st.chk_par, st.chk_nan)
        m = len(anchor)
        width = int((hi - lo).max()) if m else 0
        if width == 0:
            empty = np.zeros(0, np.int64)
            return empty, empty, bound[:0], empty
        chk_col, chk_par, nchk = self._device_checks[id(st)]
        args = (ring.enc, ring.head, ring.capacity, cuda.to_device(lo), cuda.to_device(hi),
                cuda.to_device(bound if bound.shape[1] else np.zeros((m, 1), np.int64)),
                chk_col, chk_par, nchk)
        grid = self._grid(width, m)
        tpb = self.threads_per_block
        if st.selection == _k.EACH:
            capacity = max(1024, 2 * m)
            while True:
                counter = cuda.to_device(np.zeros(1, np.int64))
                out_parent = cuda.device_array(capacity, np.int64)
                out_chosen = cuda.device_array(capacity, np.int64)
                _gk.multi_select[grid, tpb](*args, counter, out_parent, out_chosen)
                count = int(counter.copy_to_host()[0])
                if count <= capacity:
                    break
                capacity = count
            parent = out_parent.copy_to_host()[:count]
            chosen = out_chosen.copy_to_host()[:count]
            order = np.lexsort((chosen, parent))
            parent, chosen = parent[order], chosen[order]
        else:
            last = st.selection == _k.LAST
            none = -1 if last else _gk.NO_INDEX_FIRST
            index = cuda.to_device(np.full(m, none, np.int64))
            _gk.single_select[grid, tpb](*args, last, index)
            found = index.copy_to_host()
            parent = np.flatnonzero(found != none)
            chosen = found[parent]
        new_bound = bound[parent]
        for col, par in zip(st.bind_col, st.bind_par, strict=True):
            new_bound[:, par] = store.live_enc[col, chosen]
        return parent, chosen, new_bound, ts[chosen]

    def _reduce(self, red: Reduction, start: np.ndarray, stop: np.ndarray,
                bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        store, ring = self._stores[red.store], self._rings[red.store]
        lo, hi = self._windows(store.live_ts, start, stop, bound, red.chk_par, red.chk_nan)
        m = len(start)
        width = int((hi - lo).max()) if m else 0
        if width == 0:
            neutral = {_k.MIN: np.inf, _k.MAX: -np.inf}.get(red.op, 0.0)
            return np.full(m, neutral), np.zeros(m, np.int64)
        chk_col, chk_par, nchk = self._device_checks[id(red)]
        per_block = 2 * self.threads_per_block
        blocks = math.ceil(width / per_block)
        value = cuda.device_array((m, blocks), np.float64)
        count = cuda.device_array((m, blocks), np.int64)
        self._reduce_column[(blocks, min(m, _MAX_GRID_Y)), self.threads_per_block](
            ring.enc, ring.num, red.vrow, ring.head, ring.capacity, cuda.to_device(lo),
            cuda.to_device(hi),
            cuda.to_device(bound if bound.shape[1] else np.zeros((m, 1), np.int64)),
            chk_col, chk_par, nchk, red.op, value, count)
        while blocks > 1:
            blocks = math.ceil(blocks / per_block)
            next_value = cuda.device_array((m, blocks), np.float64)
            next_count = cuda.device_array((m, blocks), np.int64)
            self._reduce_partials[(blocks, min(m, _MAX_GRID_Y)), self.threads_per_block](
                value, count, red.op, next_value, next_count)
            value, count = next_value, next_count
        return value.copy_to_host()[:, 0], count.copy_to_host()[:, 0]
