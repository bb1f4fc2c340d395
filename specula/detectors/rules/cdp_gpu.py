"""The CDP engine on a CUDA GPU (Cugola & Margara, JPDC 2012, sec. 5.3 to 5.5).

:class:`GPUCDPEngine` is :class:`~specula.detectors.rules.cdp.CDPEngine` with the scans
moved to the GPU. The CPU keeps its copy of every column (which the snapshot, the
pruning and the binary searches use); each column also lives on the device as a
circular buffer of the time stamps, parameter keys and aggregated values, into which new
events are copied as they arrive and from which pruned events leave by moving the head. A
full buffer is reallocated twice as large and refilled from the CPU copy (the paper sizes
buffers statically for the worst case; this grows them instead). A restore uploads only
the events the device columns do not already hold (the CPU columns they mirrored tell
which), so the rollbacks of a speculative ordering unit stay cheap.

When terminators arrive, each step runs as in sec. 5.3: the CPU finds every partial
sequence's window by binary search on its copy (the step's window, narrowed by the
pattern window's floor), then one kernel launch checks all (sequence, event) pairs in
parallel, on a two-dimensional grid (y: the sequence, x: its window). The terminators
of a batch are processed together, so a step costs one launch (and one copy back) for
all of them, not one per terminator. A thread checks the parameters, the ties rule
(``ties nonstrict``: not an element already taken) and the step's predicates between
elements (``b.open > c.open``, arithmetic, time stamps): each step's predicate program
(:func:`~specula.detectors.rules._cdp_plan.program`, the one the CPU kernels interpret)
is uploaded once per rule and interpreted by the selection kernels, which are compiled
once per stack depth. What a sequence carries for later predicates (the context values
of its elements, their position keys, its floor) follows on the CPU, a gather per step.
Multiple selection (``each``) flags every event of every window that passes, counts
and scans the flags of each slot of ``tpb`` events into offsets on the device, and
writes every passing pair at its slot's offset plus the passing events before it in the
slot: the pairs come out ordered by sequence, then event, as the CPU engine makes them,
with no sort on the CPU (sorting the pairs there took 11 ms for 84,000 of them, more
than the CPU engine's whole batch of the stock rule). Single selection keeps one index
per sequence, raised by ``cuda.atomic.max`` (``last``, from -1) or lowered by
``cuda.atomic.min``
(``first``, from a sentinel). Aggregates and negations are reduced per match in shared
memory, block by block and then over the blocks' results until one value is left
(sec. 5.4); a negation is a count.

Readings chosen here:

* Sequences are kept as (parent, chosen event) pairs rather than copied event arrays.
* Windows are exact per sequence, so threads check no time stamp against a window.
* All device memory is allocated once and grown, never per step; every copy goes
  through pinned host memory on the engine's own CUDA stream, and a step waits for the
  GPU once: a multiple selection's pairs come back with their count when they fit the
  size of the previous launch's (else a second wait fetches the rest).
  :mod:`~specula.detectors.rules._cdp_gpu_buffers` holds the buffers.
* A step or reduction with little work (fewer pairs to check than the bar of its
  kind: :data:`MIN_GPU_WORK_INDEXED`, :data:`MIN_GPU_WORK_SCAN_LAST`,
  :data:`MIN_GPU_WORK_SCAN_EACH`, :data:`MIN_GPU_WORK_REDUCE`) runs on the CPU copy with
  the CPU engine's kernels: a step on the device has a fixed cost of a tenth of a
  millisecond or more that a scan of a few thousand events does not repay, and the CPU
  engine answers a lookup in an equality index faster than any scan. A detection none
  of whose steps can reach its bar (bounded by the columns' sizes: a live feed's few
  terminators, or a chain looked up in equality indexes) runs in the CPU engine's one
  call for all steps. The device columns catch up with their CPU copies only before a
  launch, in one transfer.
* A multiple selection is launched over runs of sequences whose windows hold at most
  :data:`_MAX_PAIRS` events together, so its output always has room and no launch is
  repeated.
* Sums and averages add in tree order, so they can differ from the CPU engine's in the
  last bits of non-integer values; minima, maxima, counts and integer sums are equal.

Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, set before Numba is imported) runs
the same kernels on the CPU, for tests; there the default block is 8 threads.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numba import config, cuda

from specula.detectors.rules import _cdp_gpu_buffers as _b
from specula.detectors.rules import _cdp_gpu_kernels as _gk
from specula.detectors.rules import _cdp_kernels as _k
from specula.detectors.rules._cdp_columns import Store
from specula.detectors.rules._cdp_plan import Reduction, Step
from specula.detectors.rules.ast import Rule
from specula.detectors.rules.cdp import CDPEngine
from specula.events import TypeRegistry

if TYPE_CHECKING:  # what a general step advances (see CDPEngine._general_step)
    from specula.detectors.rules.cdp import _Sequences

__all__ = ["MIN_GPU_WORK_INDEXED", "MIN_GPU_WORK_REDUCE", "MIN_GPU_WORK_SCAN_EACH",
           "MIN_GPU_WORK_SCAN_LAST", "GPUCDPEngine"]

_MAX_GRID_Y = 65535
_RING_CAPACITY = 1024  # events a device column holds before its first reallocation
_MAX_PAIRS = 1 << 22  # pairs one multiple-selection launch may output (64 MiB)
MIN_GPU_WORK_INDEXED: int | None = None
"""(sequence, event) pairs a step or reduction whose first check the CPU engine looks up
in an equality index must check to be worth a launch; None: it never is. Measured with
R5 on one H100 (2026-11-27): since the CPU engine's equality index, the device took 4 to
10 times the CPU's time at every window from 1,000 to 500,000 events (333 sequences
over 167,000 events, 5.6e7 pairs, at the widest), so these stay on the CPU copy."""
MIN_GPU_WORK_SCAN_LAST: int | None = 1 << 15
"""The same for a ``last`` or ``first`` step only a scan can check (inequalities,
arithmetic, no equality index). An estimate until ``benchmarks/rules_gpu.py
--crossover`` runs on a device: a step on the device costs a fixed 0.1 to 0.2 ms
(launches through Numba, transfers, the wait; one event per call of R5 took 0.37 ms for
three device steps on one H200, 2026-11-26), the CPU engine about 6 ns a pair on a
selective inequality (``--crossover``'s CPU side, 2026-11-30)."""
MIN_GPU_WORK_SCAN_EACH: int | None = 1 << 15
"""The same for an ``each`` step only a scan can check (the CPU engine scans every
event of every window, as for ``last``; an estimate, as :data:`MIN_GPU_WORK_SCAN_LAST`)."""
MIN_GPU_WORK_REDUCE: int | None = 1 << 18
"""The same for an aggregate or negation without an equality index: the CPU engine adds
a column up at about 0.5 ns a pair (``--crossover``'s CPU side, 2026-11-30), so the
device's fixed cost takes about twelve times the pairs to repay (an estimate, as
:data:`MIN_GPU_WORK_SCAN_LAST`)."""


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
    min_gpu_work : int, optional
        Steps and reductions that check fewer (sequence, event) pairs than this (the
        number of sequences times the widest window) run on the CPU's copy of the
        columns instead. By default 0 in the simulator and, on a GPU, the bar of each
        step's kind (:data:`MIN_GPU_WORK_INDEXED` and the others).

    Attributes
    ----------
    uploaded : int
        Events copied to the device columns so far.
    launches : int
        Kernel launches of steps and reductions so far (a step's launches serve all the
        terminators of a batch: one for ``last`` or ``first``, three for ``each``, more
        only when its sequences' windows hold over :data:`_MAX_PAIRS` events together).

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
                 threads_per_block: int | None = None,
                 min_gpu_work: int | None = None) -> None:
        if not cuda.is_available():
            raise RuntimeError(
                "GPUCDPEngine needs a CUDA GPU and Numba finds none on this machine "
                "(numba.cuda.is_available() is False); use CDPEngine (engine='cdp'), "
                "the same algorithm on the CPU, or set NUMBA_ENABLE_CUDASIM=1 before "
                "Numba is imported to run the kernels in Numba's CUDA simulator (slow)")
        # numba.config sets its options at import, out of the type checker's sight
        simulated = bool(config.ENABLE_CUDASIM)  # type: ignore[attr-defined]
        if threads_per_block is None:
            threads_per_block = 8 if simulated else 128
        if not (1 <= threads_per_block <= 1024
                and threads_per_block & (threads_per_block - 1) == 0):
            raise ValueError(f"threads_per_block must be a power of two from 1 to 1024, "
                             f"got {threads_per_block}")
        self.threads_per_block = threads_per_block
        self.min_gpu_work = 0 if min_gpu_work is None and simulated else min_gpu_work
        self._stream = cuda.stream()
        super().__init__(rule, registry, ticks_per_second)
        self._reduce_column, self._reduce_partials = _gk.reductions(threads_per_block)
        self._rings = [_b.Ring(len(s.enc), len(s.num), self._stream, _RING_CAPACITY)
                       for s in self._plan.stores]
        self._sequences = _b.Sequences(len(self._plan.params), self._stream)
        self._context = _b.Context(self._stream)
        self._no_context = cuda.to_device(np.zeros((1, 1)), stream=self._stream)
        self._pairs = _b.Pairs(self._stream)
        self._partials = _b.Partials(self._stream)
        at_anchor = self._sequences.extra_at  # a general step's anchor, then its taken keys
        self._programs = {
            id(st): _Program(st, _gk.step_spec(
                st.chk_col, st.chk_par, len(st.ops) if st.general else 0,
                self._plan.strict or not st.general, max(0, st.pos_row), at_anchor,
                at_anchor + 1, depth + 1 if st.general else 0), self._stream)
            for depth, st in enumerate(self._plan.steps)}
        self._reduction_specs = {
            id(red): cuda.to_device(_gk.reduction_spec(red.chk_col, red.chk_par, red.vrow,
                                                       red.op), stream=self._stream)
            for red in self._plan.reductions}
        # a multiple selection's slots are counted and scanned in one block: as wide as a
        # GPU allows; one thread in the simulator, where a barrier takes milliseconds
        self._scan_threads = 1 if simulated else 1024
        self._slot_offsets = _gk.scans(self._scan_threads)
        self._previous: list[Store] | None = None  # the columns before a restore
        self.uploaded = 0
        self.launches = 0

    def restore(self, state: bytes) -> None:
        """As :meth:`CDPEngine.restore`; the device columns keep the events they already
        hold that the restored columns hold too, and only the others are uploaded (the
        number of events uploaded adds up in :attr:`uploaded`)."""
        self._previous = self._stores
        try:
            super().restore(state)
        finally:
            self._previous = None

    def _steps_apart(self, terminators: int) -> bool:
        """One step at a time, each placed on the device or the CPU copy, when a step
        of this detection may reach its bar; otherwise the CPU engine's one call for
        every step (a chain the CPU looks up in equality indexes, as R5's, or a live
        feed's few terminators).

        A step checks at most its sequences times its column's live events, and makes
        at most one sequence per pair checked (one per sequence for ``last`` and
        ``first``): bounds that only overestimate the work :meth:`_on_device` compares
        with the bar."""
        sequences = terminators
        for st in self._plan.steps:
            store = self._stores[st.store]
            bar = self.min_gpu_work if self.min_gpu_work is not None else _bar(st, store)
            pairs = sequences * len(store)
            if bar is not None and pairs >= bar:
                return True
            if st.selection == _k.EACH:
                sequences = pairs
        return False

    # ----------------------------------------------------------- device columns

    def _dropped(self, store: int, count: int) -> None:
        self._rings[store].drop(count)

    def _reloaded(self) -> None:
        old: Sequence[Store | None] = self._previous or [None] * len(self._stores)
        for ring, before, after in zip(self._rings, old, self._stores, strict=True):
            if before is None:
                ring.size = 0
            else:
                self.uploaded += ring.resync(before, after)

    def _ring(self, store: int) -> _b.Ring:
        """Column ``store`` on the device, with every live event uploaded."""
        ring = self._rings[store]
        self.uploaded += ring.sync(self._stores[store])
        return ring

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

    def _on_device(self, x: Step | Reduction, pairs: int) -> bool:
        """Whether a step or reduction that checks ``pairs`` pairs is worth a launch."""
        if self.min_gpu_work is not None:
            return pairs >= self.min_gpu_work
        bar = _bar(x, self._stores[x.store])
        return bar is not None and pairs >= bar

    def _grid(self, width: int, m: int) -> tuple[int, int]:
        return math.ceil(width / self.threads_per_block), min(m, _MAX_GRID_Y)

    def _step(self, st: Step, anchor: np.ndarray, bound: np.ndarray):
        store = self._stores[st.store]
        ts = store.live_ts
        lo, hi = self._windows(ts, anchor - st.window, anchor, bound, st.chk_par, st.chk_nan)
        width = int((hi - lo).max()) if len(anchor) else 0
        if width == 0:
            empty = np.zeros(0, np.int64)
            return empty, empty, bound[:0], empty
        if not self._on_device(st, len(anchor) * width):
            return super()._step(st, anchor, bound)
        parent, chosen = self._select(st, _Scan(lo, hi, bound), width)
        return (parent, chosen, _bound(st, store.live_enc, parent, chosen, bound),
                ts.take(chosen))

    def _general_step(self, seqs: _Sequences, depth: int, st: Step, anchor: np.ndarray,
                      bound: np.ndarray):
        """A step with predicates, a pattern-window floor or ``ties nonstrict`` on the
        device: the floor narrows each window (binary search on the CPU copy), the
        kernel checks parameters, ties and the predicate program, and what ``seqs``
        carries per sequence follows on the CPU."""
        store = self._stores[st.store]
        low = anchor - st.window
        if st.floor:
            low = np.maximum(low, seqs.floor)
        high = anchor if self._plan.strict else anchor + 1
        lo, hi = self._windows(store.live_ts, low, high, bound, st.chk_par, st.chk_nan)
        width = int((hi - lo).max()) if len(anchor) else 0
        if width and not self._on_device(st, len(anchor) * width):
            return super()._general_step(seqs, depth, st, anchor, bound)
        carry = depth + 1 < len(self._plan.steps)  # the last step's sequences carry nothing
        if width == 0:
            none = np.zeros(0, np.int64)
            return _advance(seqs, st, store, none, none, bound, carry)
        scan = _Scan(lo, hi, bound, np.column_stack([anchor, seqs.taken]), seqs.ctx)
        return _advance(seqs, st, store, *self._select(st, scan, width), bound, carry)

    def _select(self, st: Step, scan: _Scan, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The chosen ``(parent, chosen)`` pairs of a step, ordered as on the CPU."""
        ring = self._ring(st.store)
        if st.selection == _k.EACH:
            return self._select_each(st, ring, scan)
        return self._select_one(st, ring, scan, width)

    def _arguments(self, st: Step, scan: _Scan, run: slice) -> tuple:
        """The selection kernels' arguments from ``ctx`` to ``consts`` (see
        :func:`~specula.detectors.rules._cdp_gpu_kernels.selections`) for the sequences
        ``run`` of ``scan``."""
        program = self._programs[id(st)]
        ctx = self._no_context if scan.ctx is None else self._context.upload(scan.ctx[run])
        return ctx, program.spec, program.ops, program.consts

    def _select_one(self, st: Step, ring: _b.Ring, scan: _Scan, width: int):
        """``last``/``first``: one launch; the result comes back in the sequences' rows."""
        last = st.selection == _k.LAST
        none = -1 if last else _gk.NO_INDEX_FIRST
        m = len(scan.lo)
        host, dev = self._sequences.upload(scan.lo, scan.hi, scan.bound, none, scan.extra)
        kernel = self._programs[id(st)].single
        kernel[self._grid(width, m), self.threads_per_block, self._stream](
            ring.ts, ring.enc, ring.num, ring.head, ring.capacity, dev, m,
            *self._arguments(st, scan, slice(0, m)), last)
        self.launches += 1
        found = self._sequences.download(host, dev)[:m, _b.RESULT]
        parent = np.flatnonzero(found != none)
        return parent, found[parent]

    def _select_each(self, st: Step, ring: _b.Ring, scan: _Scan):
        """``each``: launches over runs of sequences (:func:`_runs`), so the output always
        has room; each run's pairs come in the CPU engine's order (see
        :func:`~._cdp_gpu_kernels.selections`: a flag per event, the slots' offsets, the
        pairs written at their places)."""
        tpb = self.threads_per_block
        sizes = scan.hi - scan.lo
        slots = -(-sizes // tpb)  # the slots of tpb events of each window
        first_slot = np.cumsum(slots) - slots
        program = self._programs[id(st)]
        pairs = self._pairs
        parents: list[np.ndarray] = []
        choices: list[np.ndarray] = []
        for run in _runs(sizes, slots, tpb):
            m = run.stop - run.start
            n_slots = int(slots[run].sum())
            pairs.grow(int(sizes[run].sum()), n_slots, tpb)
            _, dev = self._sequences.upload(scan.lo[run], scan.hi[run], scan.bound[run],
                                            first_slot[run] - first_slot[run.start],
                                            None if scan.extra is None else scan.extra[run])
            grid = self._grid(int(sizes[run].max()), m)
            program.flag[grid, tpb, self._stream](
                ring.ts, ring.enc, ring.num, ring.head, ring.capacity, dev, m,
                *self._arguments(st, scan, run), pairs.flags)
            self._slot_offsets[1, self._scan_threads, self._stream](
                pairs.flags, tpb, n_slots, pairs.offsets, pairs.total)
            _gk.write_pairs[grid, tpb, self._stream](dev, m, pairs.flags, pairs.offsets,
                                                     pairs.out)
            self.launches += 3
            found = pairs.download()
            parents.append(found[:, 0] + run.start)
            choices.append(found[:, 1])
        return np.concatenate(parents), np.concatenate(choices)

    def _reduce(self, red: Reduction, start: np.ndarray, stop: np.ndarray,
                bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        store = self._stores[red.store]
        lo, hi = self._windows(store.live_ts, start, stop, bound, red.chk_par, red.chk_nan)
        m = len(start)
        width = int((hi - lo).max()) if m else 0
        if width == 0:
            neutral = {_k.MIN: np.inf, _k.MAX: -np.inf}.get(red.op, 0.0)
            return np.full(m, neutral), np.zeros(m, np.int64)
        if not self._on_device(red, m * width):
            return super()._reduce(red, start, stop, bound)
        ring = self._ring(red.store)
        tpb = self.threads_per_block
        per_block = 2 * tpb
        blocks = math.ceil(width / per_block)
        partials = self._partials
        partials.ensure(m, blocks)
        _, dev = self._sequences.upload(lo, hi, bound)
        grid_y = min(m, _MAX_GRID_Y)
        self._reduce_column[(blocks, grid_y), tpb, self._stream](
            ring.enc, ring.num, ring.head, ring.capacity, dev, m,
            self._reduction_specs[id(red)], partials.value[0], partials.count[0])
        self.launches += 1
        which = 0
        while blocks > 1:
            n, blocks = blocks, math.ceil(blocks / per_block)
            self._reduce_partials[(blocks, grid_y), tpb, self._stream](
                partials.value[which], partials.count[which], n, m, red.op,
                partials.value[1 - which], partials.count[1 - which])
            self.launches += 1
            which = 1 - which
        return partials.download(which, m)


def _bar(x: Step | Reduction, store: Store) -> int | None:
    """The work from which a step or reduction of ``x``'s kind is worth a launch."""
    if len(x.chk_col) and int(x.chk_col[0]) in store.indexed:
        return MIN_GPU_WORK_INDEXED
    if isinstance(x, Reduction):
        return MIN_GPU_WORK_REDUCE
    return MIN_GPU_WORK_SCAN_EACH if x.selection == _k.EACH else MIN_GPU_WORK_SCAN_LAST


def _runs(sizes: np.ndarray, slots: np.ndarray, tpb: int) -> Iterator[slice]:
    """Consecutive runs of the sequences whose windows hold ``sizes`` events in
    ``slots`` slots of ``tpb``: each run's windows hold at most :data:`_MAX_PAIRS`
    events together and its slots at most as many flags, or it is one sequence.

    >>> sizes = np.array([3, 0, _MAX_PAIRS, 2])
    >>> [(r.start, r.stop) for r in _runs(sizes, -(-sizes // 4), 4)]
    [(0, 2), (2, 3), (3, 4)]
    """
    ends, slot_ends = np.cumsum(sizes), np.cumsum(slots)
    first = 0
    while first < len(sizes):
        base, slot_base = (ends[first - 1], slot_ends[first - 1]) if first else (0, 0)
        last = max(first + 1, min(
            int(np.searchsorted(ends, base + _MAX_PAIRS, side="right")),
            int(np.searchsorted(slot_ends, slot_base + _MAX_PAIRS // tpb, side="right"))))
        yield slice(first, last)
        first = last


class _Program:
    """What a step's kernels read that stays the same from launch to launch, uploaded
    once per rule: its spec (:func:`~._cdp_gpu_kernels.step_spec`) and predicate
    program; and the selection kernels compiled for the program's stack depth."""

    def __init__(self, st: Step, spec: np.ndarray, stream) -> None:
        self.spec = cuda.to_device(spec, stream=stream)
        self.ops = cuda.to_device(st.ops if len(st.ops) else np.zeros((1, 2), np.int64),
                                  stream=stream)
        self.consts = cuda.to_device(st.consts, stream=stream)
        self.flag, self.single = _gk.selections(_gk.stack_depth(st.ops))


@dataclass(frozen=True)
class _Scan:
    """The sequences one step's launches read besides the column: their windows and
    parameters and, for a general step, their anchors and elements' position keys
    (``extra``) and context values (``ctx``)."""

    lo: np.ndarray
    hi: np.ndarray
    bound: np.ndarray
    extra: np.ndarray | None = None
    ctx: np.ndarray | None = None


def _advance(seqs: _Sequences, st: Step, store: Store, parent: np.ndarray,
             chosen: np.ndarray, bound: np.ndarray, carry: bool = True):
    """The sequences a general step made, as :func:`~._cdp_kernels.step_general` writes
    them: parameters bound, anchors, and, when ``carry`` (a later step reads them), what
    ``seqs`` carries (the floor, the context slots the chosen event fills, its position
    key). Rows are gathered with ``take``, which numpy runs about ten times faster than
    indexing a 2-D array with an array."""
    ts, enc, num = store.live_ts, store.live_enc, store.live_num
    new_bound = _bound(st, enc, parent, chosen, bound)
    if carry:
        seqs.floor = seqs.floor.take(parent)
        ctx = seqs.ctx.take(parent, axis=0)
        for slot, row in zip(st.fill_slot, st.fill_row, strict=True):
            ctx[:, slot] = ts.take(chosen) if row < 0 else num[row].take(chosen)
        seqs.ctx = ctx
        taken = np.empty((len(parent), seqs.taken.shape[1] + 1), np.int64)
        taken[:, :-1] = seqs.taken.take(parent, axis=0)
        taken[:, -1] = enc[st.pos_row].take(chosen) if st.pos_row >= 0 else 0
        seqs.taken = taken
    return parent, chosen, new_bound, ts.take(chosen)


def _bound(st: Step, enc: np.ndarray, parent: np.ndarray, chosen: np.ndarray,
           bound: np.ndarray) -> np.ndarray:
    """The parameters of the sequences a step made: their parents', with the ones the
    step binds read from the chosen events' keys."""
    new_bound = bound.take(parent, axis=0)
    for col, par in zip(st.bind_col, st.bind_par, strict=True):
        new_bound[:, par] = enc[col].take(chosen)
    return new_bound
