"""The CDP engine on CPU: columns of events, processing delayed to terminators.

Cugola & Margara, "Low latency complex event processing on parallel hardware" (JPDC
2012), sec. 4.2 (Alg. 2), 4.3 and 5.2. The engine keeps, for every step, aggregate and
negation of a rule, a *column* of the events that match the pattern's type and literal
constraints (steps, aggregates and negations with the same pattern share one column),
and does nothing else until a terminator arrives. A terminator starts the detection:
column by column, from the terminator backwards, every partial sequence looks up its
window by binary search and scans it for events whose parameters agree (Alg. 2,
``computeSequences``; a single selection stops at the first fit); then aggregates and
negations of the complete sequences are computed over their columns (sec. 4.3).

Readings of the paper chosen here (the semantics itself is in
:mod:`~specula.detectors.rules.ast`):

* **Batches.** A batch is appended to the columns first and its terminators are
  processed afterwards, all at once. This is exact: an event after a terminator in
  stream order has ``ts >= terminator.ts``, and every window ends strictly before the
  time stamp of an element that is no later than the terminator.
* **deleteOldEvents** runs every few hundred events and before the state is read,
  relative to the newest time stamp seen (no future terminator is older): the first
  step's column keeps ``ts >= newest - w1``; the next keeps ``ts >= first - w2`` where
  ``first`` is the oldest event left in the previous column (or ``newest`` when it is
  empty), and so on, as in Alg. 2; aggregate and negation columns keep what their
  anchor's bound allows. A column therefore holds little more than the events of the
  rule's longest horizon, and what it holds after pruning depends only on the stream
  prefix, not on how it was cut into batches, so equal prefixes give equal snapshots.
* **Pointers vs copies.** The paper stores pointers to one copy of each event (5.2);
  here each column holds the rows it needs (the fields the rule reads, see
  :attr:`CDPEngine.dtype`) and, beside them, the time stamps, parameter keys and
  aggregated values as separate arrays that the kernels scan.
* **Parameter lookups** go through an equality index when a scan checks a parameter
  (:mod:`~specula.detectors.rules._cdp_index`): each event is linked to the previous
  one with the same key, so a sequence visits only the events of its window that hold
  its key, newest first, instead of scanning the window.
* **Parameters** are compared exactly: a parameter whose attributes are all integer or
  bool compares int64 values, one with a float attribute compares float64 values (as
  int64 keys of their bits, ``-0.0`` folded into ``0.0``; NaN equals nothing).
* **Sums** add values in stream order. A NaN value makes Min and Max NaN (so the
  match yields no composite), as it makes Sum and Avg NaN.

This module holds the engine: batches, detection at terminators, pruning. The rule
compiled into columns, steps and reductions is in :mod:`~specula.detectors.rules._cdp_plan`,
the columns themselves in :mod:`~specula.detectors.rules._cdp_columns`, and the kernels
that scan them in :mod:`~specula.detectors.rules._cdp_kernels`.

Examples
--------
Rule R4 and the columns of Fig. 5 (windows in ticks instead of minutes):

>>> import numpy as np
>>> from specula.events import TypeRegistry
>>> from specula.detectors.rules.parser import parse_rule
>>> reg = TypeRegistry()
>>> for name in "ABC":
...     _ = reg.register(name, p="i8", v="i8")
>>> rule = parse_rule("define CE() from C(p=$x) and each B(p=$x and v>10) within 8 "
...                   "from C and last A(p=$x) within 3 from B")
>>> engine = CDPEngine(rule, reg)
>>> stream = [("A", 5, 1), ("B", 2, 2), ("B", 4, 3), ("A", 4, 4), ("B", 3, 6),
...           ("A", 1, 7), ("B", 1, 8), ("A", 2, 9), ("B", 3, 11), ("A", 3, 12),
...           ("B", 3, 13), ("A", 3, 14), ("C", 3, 15)]
>>> events = np.concatenate([reg.batch(t, ts=ts, p=p, v=20, seq=ts, dtype=reg.dtype())
...                          for t, p, ts in stream])
>>> found = engine.process(events)
>>> [[int(e["ts"][i]) for e in found.elements] for i in range(len(found))]
[[15, 13, 12]]
>>> [col["ts"].tolist() for col in engine.columns()]  # B from 15 - 8, A from 8 - 3
[[8, 11, 13], [7, 9, 12, 14]]
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

import numpy as np

from specula.detectors.rules import _cdp_kernels as _k
from specula.detectors.rules._cdp_columns import (
    NO_INDEX,
    Store,
    convert,
    encode,
    encode_one,
    same_fields,
    take,
)
from specula.detectors.rules._cdp_plan import (
    POSITION,
    Plan,
    Reduction,
    Step,
    StoreKey,
    StoreSpec,
)
from specula.detectors.rules.ast import Param, Rule
from specula.detectors.rules.engine import (
    ORDER_SHIFT,
    Matches,
    TieHold,
    aggregate_value,
    order_key,
    predicates_hold,
)
from specula.events import TypeRegistry, fields_of
from specula.events.batches import FEW_ROWS
from specula.events.row_bytes import KIND_I4 as _KIND_I4
from specula.events.row_bytes import KIND_I8 as _KIND_I8
from specula.events.row_bytes import kind_of

__all__ = ["CDPEngine"]

_COMPARE = {"=": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
            ">": np.greater, ">=": np.greater_equal}
_CORE_ROW = (("ts", np.int64), ("key", np.int64), ("producer", np.int32), ("seq", np.int64))
_PRUNE_EVERY = 256  # relevant events between two runs of deleteOldEvents
_NO_TS = -(2**63)
_ROOM = 64  # the partial sequences a general step's buffers hold at first
_BACKWARDS = ("{}.process: events must come in stream order, ascending (ts, producer << 40 | "
              "seq), within and across batches; this batch goes back")


class CDPEngine:
    """Column-based detection (CDP) of one rule on the CPU.

    Parameters
    ----------
    rule : Rule
        The rule to detect.
    registry : TypeRegistry
        Registry in which every type the rule reads is registered, with the attributes
        the rule mentions.
    ticks_per_second : float, optional
        Converts windows written with a unit (``within 5 min``); not needed when all
        windows are written in ticks.

    Attributes
    ----------
    dtype : numpy.dtype
        Dtype of the rows in :attr:`Matches.elements`, the same for every engine (see
        :func:`~specula.detectors.rules.detector.element_dtype`): ``ts, key, producer,
        seq`` and the attributes of chain elements that the rule reads.

    Notes
    -----
    :meth:`process` takes batches in stream order (ascending ``(ts, producer << 40 |
    seq)`` among the types the rule reads; other types are ignored) and raises
    ``ValueError`` on a batch that goes back in that order.
    """


    def __init__(self, rule: Rule, registry: TypeRegistry,
                 ticks_per_second: float | None = None) -> None:
        self.rule = rule
        self.registry = registry
        self.ticks_per_second = ticks_per_second
        self._plan = Plan(rule, registry, ticks_per_second)
        self.dtype = self._plan.dtype
        ids = list(self._plan.type_ids.values())
        self._relevant = np.zeros(max(ids) + 2, np.bool_)  # the last entry catches new ids
        self._relevant[ids] = True
        self._stores = [self._new_store(spec) for spec in self._plan.stores]
        self._hold = None if self._plan.strict else TieHold(self._plan.row_dtype)
        self._no_rows = np.zeros(0, self._plan.row_dtype)
        self.partials = 0
        self._last = (_NO_TS, -1)
        self._unpruned = 0
        self._lacking: dict[np.dtype, set[str]] = {}
        n = len(rule.chain)
        self._no_match = (np.zeros(0, np.int64), tuple(np.zeros(0, self.dtype) for _ in range(n)),
                          np.zeros((0, len(rule.aggregates))),
                          np.zeros((0, len(rule.negations)), np.int64))
        self._general = any(st.general for st in self._plan.steps)
        self._spaces = [_Space() for _ in self._plan.steps]  # see _Sequences
        self._scans = [_scan_args(st) for st in self._plan.steps]  # see _Sequences.step
        # what _run_steps passes its kernel: the steps, their columns' arrays (kept
        # until a column replaces one, see Store.version), the buffers it writes
        self._chain = _chain_table(self._plan)
        self._window = -1 if self._plan.window is None else self._plan.window
        self._versions: list[int] = []
        self._columns_of: list[Store] | None = None
        self._columns: tuple[tuple[np.ndarray, ...], ...] = ()
        self._found = _found_buffers(self._plan, _ROOM)
        # each step's live part and the room its sequences take (see _k.sequences)
        self._live = np.zeros((len(self._plan.steps), 4), np.int64)
        self._rows_are_elements = self._plan.row_dtype == self.dtype
        assert _leads(self._plan.row_dtype, self.dtype), "a row begins with its element"
        self._step_stores = [st.store for st in self._plan.steps]
        self._step_index = [_index_at(self._plan.stores[st.store], st) for st in
                            self._plan.steps]
        # every step floors its candidates at the terminator's time stamp less the
        # pattern window: no match can fall outside it, so none needs checking
        self._floored = all(st.floor for st in self._plan.steps)
        # where, in a row of the columns' dtype, each column's keys and values are read
        # (see _derive_one): a position key from producer and seq (is_float None)
        at = list(fields_of(self._plan.row_dtype)).index
        self._ts_at = at("ts")
        self._scalar_enc = [[(at("producer"), at("seq"), None) if attr == POSITION
                             else (at(attr), 0, is_float) for attr, is_float in spec.enc]
                            for spec in self._plan.stores]
        self._scalar_num = [[at(attr) for attr in spec.num] for spec in self._plan.stores]
        self._few_types = _few_types(self._plan)
        self._layouts: dict[np.dtype, _Layout | None] = {}

    # ------------------------------------------------------------------------ public

    def process(self, events: np.ndarray) -> Matches:
        """Consume a batch in stream order; return the matches of its terminators.

        Parameters
        ----------
        events : numpy.ndarray
            A structured batch (see :mod:`specula.events`); rows of types the rule does
            not read are ignored.

        Returns
        -------
        Matches
            One row per match; ``terminator`` indexes ``events``.
        """
        self._check_dtype(events)
        layout = self._few_layout(events) if len(events) <= FEW_ROWS else None
        if layout is not None:  # a live feed's usual step: its rows as Python scalars
            return self._process_few(events, layout)
        plan = self._plan
        types = events["type"]
        ridx = self._relevant.take(types, mode="clip").nonzero()[0]
        if len(ridx) == 0:
            return self._release(events["ts"])
        self._check_order(events, ridx)
        # the relevant rows in the columns' dtype, converted once for every column
        relevant = _Relevant(events, ridx, self._plan.row_dtype)
        for si, spec in enumerate(plan.stores):
            at = self._members(relevant, spec.key, spec.type_id)
            if at is None:
                continue
            rows = relevant.rows(at)
            self._stores[si].append(rows, *self._derive(spec, rows))
            self._appended(si, len(rows))
        term = plan.terminator
        at = self._members(relevant, term.key, term.type_id)
        if at is None:
            return self._terminate(None, _NO_ROWS, events, len(ridx))
        return self._terminate(relevant.rows(at), ridx[at], events, len(ridx))

    def _process_few(self, events: np.ndarray, layout: _Layout) -> Matches:
        """:meth:`process` of a batch of a few rows read as Python scalars (one
        ``tolist``): a row's fields, time stamp and keys set in its columns one by one
        cost a fraction of NumPy's calls on arrays of a row or two."""
        pick, type_at, ts_at, producer_at, seq_at = layout
        listed = events.tolist()
        relevant = [(i, values) for i, values in enumerate(listed)
                    if values[type_at] in self._few_types]
        if not relevant:
            return self._release(events["ts"])
        last = self._last
        for _, values in relevant:  # the order first: a batch that goes back changes nothing
            here = (values[ts_at], (values[producer_at] << ORDER_SHIFT) | values[seq_at])
            if here < last:
                raise ValueError(_BACKWARDS.format(type(self).__name__))
            last = here
        self._last = last
        terminators, causes = [], []
        for i, values in relevant:
            row = pick(values)
            stores, ends = self._few_types[values[type_at]]
            for si in stores:
                self._stores[si].append_one(row, *self._derive_one(si, row))
                self._appended(si, 1)
            if ends:
                terminators.append(row)
                causes.append(i)
        if self._hold is None:
            return self._terminate(np.array(terminators, self._plan.row_dtype) if terminators
                                   else None, np.array(causes, np.int64), events,
                                   len(relevant))
        trows = (np.array(terminators, self._plan.row_dtype) if terminators
                 else self._hold.held[:0])
        trows, tidx = self._hold.take_few(trows, [row[self._ts_at] for row in terminators],
                                          causes, [values[ts_at] for values in listed])
        return self._matches_of(tidx, trows, len(relevant))

    def _terminate(self, trows: np.ndarray | None, tidx: np.ndarray, events: np.ndarray,
                   relevant: int) -> Matches:
        """The matches of the batch's terminators ``trows`` (None: none) at ``tidx`` of
        ``events``, held under ``ties nonstrict`` until their time stamp completes; then
        deleteOldEvents when enough ``relevant`` rows came since it last ran."""
        if self._hold is None:
            return self._matches_of(tidx, self._no_rows if trows is None else trows, relevant)
        if trows is None:
            trows = self._hold.held[:0]
        trows, tidx = self._hold.take(trows, tidx, events["ts"])
        return self._matches_of(tidx, trows, relevant)

    def _matches_of(self, tidx: np.ndarray, trows: np.ndarray, relevant: int) -> Matches:
        """The matches of the complete terminators ``trows`` (at ``tidx`` of the batch);
        then deleteOldEvents when enough ``relevant`` rows came since it last ran."""
        found = self._detect(tidx, trows) if len(trows) else self._empty()
        self._unpruned += relevant
        if self._unpruned >= _PRUNE_EVERY:
            self._settle()
        return found

    def _few_layout(self, events: np.ndarray) -> _Layout | None:
        """Where :meth:`_process_few` finds the fields of ``events``' rows, or None when
        it cannot take them: a column or the terminator filters its type's events, a
        type lacks an attribute (the general path raises), or a field the columns keep
        has another type in the batch (the general path converts it)."""
        dtype = events.dtype
        if dtype not in self._layouts:
            names = list(fields_of(dtype))
            row_dtype = self._plan.row_dtype
            self._layouts[dtype] = (
                None if not self._few_types or self._lacking[dtype]
                or not same_fields(dtype, row_dtype)
                else (_picker_of([names.index(n) for n in fields_of(row_dtype)]),
                      names.index("type"), names.index("ts"), names.index("producer"),
                      names.index("seq")))
        return self._layouts[dtype]

    def _release(self, batch_ts: np.ndarray) -> Matches:
        """A batch without relevant rows still completes the time stamps before its own
        (the union of an optional element's expansions, which read different types,
        needs every expansion to release a terminator with the same batch)."""
        if self._hold is None or not len(self._hold.held) or not len(batch_ts):
            return self._empty()
        trows, tidx = self._hold.take(self._hold.held[:0], np.zeros(0, np.int64), batch_ts)
        return self._detect(tidx, trows) if len(trows) else self._empty()

    def flush(self) -> Matches:
        """End of stream: the matches of the terminators held for their time stamp to
        complete (``ties nonstrict``); ``terminator`` is 0 for each."""
        if self._hold is None or not len(self._hold.held):
            return self._empty()
        rows = self._hold.flush()
        return self._detect(np.zeros(len(rows), np.int64), rows)

    def snapshot(self) -> bytes:
        """The engine's state: the rows of every column, the terminators held for their
        time stamp to complete, and the last position seen.

        Equal states give equal bytes; restoring rebuilds the kernels' arrays from the
        rows.
        """
        self._settle()
        held = (self._hold.held if self._hold is not None
                else np.zeros(0, self._plan.row_dtype))
        header = np.array([self._last[0], self._last[1], len(held),
                           *(len(s) for s in self._stores)], np.int64)
        return b"".join([header.tobytes(), held.tobytes(),
                         *(s.live_rows.tobytes() for s in self._stores)])

    def restore(self, state: bytes) -> None:
        """Return to a state produced by :meth:`snapshot` of an engine of the same rule."""
        n = len(self._stores)
        if not isinstance(state, bytes) or len(state) < 8 * (3 + n):
            raise ValueError("not a snapshot of this engine: expected the bytes that "
                             "CDPEngine.snapshot returned for the same rule")
        header = np.frombuffer(state, np.int64, 3 + n)
        sizes = header[3:]
        offset = 8 * (3 + n)
        itemsize = self._plan.row_dtype.itemsize
        n_held = int(header[2])
        if (sizes < 0).any() or n_held < 0 or (n_held and self._hold is None) or len(
                state) != offset + (int(sizes.sum()) + n_held) * itemsize:
            raise ValueError("not a snapshot of this engine: its sizes do not match the "
                             "rule's columns")
        if self._hold is not None:
            self._hold.held = np.frombuffer(state, self._plan.row_dtype, n_held, offset).copy()
        offset += n_held * itemsize
        stores = []
        for spec, size in zip(self._plan.stores, sizes, strict=True):
            rows = np.frombuffer(state, self._plan.row_dtype, int(size), offset)
            offset += int(size) * itemsize
            store = self._new_store(spec, max(256, 2 * int(size)))
            enc, num = self._derive(spec, rows)
            store.append(rows, enc, num)
            stores.append(store)
        self._stores = stores
        self._last = (int(header[0]), int(header[1]))
        self._unpruned = 0
        self._reloaded()

    def columns(self) -> list[np.ndarray]:
        """Copies of the rows held per column: one column per distinct pattern of the
        steps, aggregates and negations, in order of first mention."""
        self._settle()
        return [s.live_rows.copy() for s in self._stores]

    # ---------------------------------------------------------------------- batches

    def _check_dtype(self, events: np.ndarray) -> None:
        """Raise unless ``events`` is a structured batch with the core fields; remember,
        per dtype, the types whose attributes it lacks (an error once such an event
        comes)."""
        dtype = getattr(events, "dtype", None)
        if dtype in self._lacking:
            return
        names = events.dtype.names if isinstance(events, np.ndarray) and events.ndim == 1 \
            else None
        if names is None or any(f not in names for f, _ in _CORE_ROW):
            raise TypeError("process() takes a one-dimensional structured batch with the "
                            "core fields of specula.events (build it with TypeRegistry.batch)")
        self._lacking[events.dtype] = {name for name, attrs in self._plan.read.items()
                                       if any(a not in names for a in attrs)}

    def _check_order(self, events: np.ndarray, ridx: np.ndarray) -> None:
        """Raise unless the rows ``ridx`` continue the stream order; remember the last."""
        if len(ridx) <= FEW_ROWS:  # a few rows: their keys as Python ints, compared in turn
            self._last = _check_few(events, ridx.tolist(), self._last, type(self).__name__)
            return
        ts = events["ts"][ridx]
        last = int(ridx[-1])
        last_key = (int(events["producer"][last]) << ORDER_SHIFT) | int(events["seq"][last])
        prev = np.concatenate(([self._last[0]], ts[:-1]))
        ordered = not (ts < prev).any()
        ties = np.flatnonzero(ts == prev)
        if ordered and len(ties):  # equal time stamps: compare positions
            producer, seq = events["producer"], events["seq"]
            here, before = ridx[ties], ridx[np.maximum(ties - 1, 0)]
            key = (producer[here].astype(np.int64) << ORDER_SHIFT) | seq[here]
            prev_key = (producer[before].astype(np.int64) << ORDER_SHIFT) | seq[before]
            prev_key[ties == 0] = self._last[1]
            ordered = not (key < prev_key).any()
        if not ordered:
            raise ValueError(_BACKWARDS.format(type(self).__name__))
        self._last = (int(ts[-1]), last_key)

    def _members(self, relevant: _Relevant, key: StoreKey, type_id: int) -> Rows | None:
        """Positions, among the batch's relevant rows, of the rows that belong to a
        column (None when there are none)."""
        at = relevant.of_type(type_id)
        if at is None:
            return None
        events = relevant.events
        if key.type in self._lacking[events.dtype]:
            attr = next(a for a in self._plan.read[key.type] if a not in fields_of(events.dtype))
            raise ValueError(f"the batch holds events of type {key.type!r} but has no "
                             f"column {attr!r}; build it with the registry's dtype")
        if key.literals or key.same or key.predicates:
            idx = relevant.index[at]
            mask = np.ones(len(idx), np.bool_)
            for c in key.literals:
                assert not isinstance(c.value, Param)  # a literal compares with a constant
                mask &= _COMPARE[c.op](events[c.attr][idx], c.value)
            for a, b, is_float in key.same:
                ka, kb = encode(events[a][idx], is_float), encode(events[b][idx], is_float)
                mask &= (ka == kb) & ((ka != _k.NAN_KEY) if is_float else True)
            if key.predicates:
                mask &= predicates_hold(key.predicates, lambda _, attr: events[attr][idx])
            if not mask.any():
                return None
            return np.arange(len(relevant.index))[at][mask]
        return at

    def _derive_one(self, si: int, values: tuple) -> tuple[int, list[int], list[float]]:
        """:meth:`_derive` of one row for column ``si``, its fields ``values`` (in the
        columns' dtype) as Python scalars: its time stamp, keys and values."""
        enc = [(values[a] << ORDER_SHIFT) | values[b] if is_float is None
               else encode_one(values[a], is_float) for a, b, is_float in self._scalar_enc[si]]
        return values[self._ts_at], enc, [values[a] for a in self._scalar_num[si]]

    def _derive(self, spec: StoreSpec, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        enc = np.empty((len(spec.enc), len(rows)), np.int64)
        for r, (attr, is_float) in enumerate(spec.enc):
            enc[r] = order_key(rows) if attr == POSITION else encode(rows[attr], is_float)
        num = np.empty((len(spec.num), len(rows)), np.float64)
        for r, attr in enumerate(spec.num):
            num[r] = rows[attr]
        return enc, num

    # -------------------------------------------------------------------- detection

    def _detect(self, tidx: np.ndarray, trows: np.ndarray) -> Matches:
        """The matches of the complete terminators ``trows`` (rows in the columns'
        dtype), found at ``tidx`` of the batch."""
        plan = self._plan
        if plan.steps and not self._steps_apart(len(tidx)):
            terminator, elements, bound = self._in_one_call(tidx, trows)
        else:
            terminator, elements, bound = self._by_steps(tidx, trows)
        m = len(terminator)
        if not m:
            return self._empty()
        n_agg = len(plan.rule.aggregates)
        aggregates = np.empty((m, n_agg), np.float64)
        negations = np.empty((m, len(plan.rule.negations)), np.int64)
        times = [e["ts"] for e in elements] if plan.reductions else []  # what reductions read
        for k, red in enumerate(plan.reductions):
            stop = times[red.anchor]
            if red.window is not None:
                start = stop - red.window
            else:
                assert red.after is not None  # Rule checks: a window or an element after
                start = times[red.after] + 1
            value, count = self._reduce(red, start.astype(np.int64), stop.astype(np.int64),
                                        bound)
            if red.function is None:
                negations[:, k - n_agg] = count
            else:
                aggregates[:, k] = aggregate_value(red.function, value, count)
        # steps extend the sequences in order, each by its candidates in position order
        # (their output is ordered by parent, then chosen event), from terminators in
        # stream order: the matches come in the order compose lists them
        found = Matches(terminator, elements, aggregates, negations, ordered=True)
        return found if self._floored else found.within(plan.rule, self.ticks_per_second)

    def _in_one_call(self, tidx: np.ndarray, trows: np.ndarray
                     ) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
        """The complete sequences from the terminators ``trows`` at ``tidx``, every step
        and their elements in one compiled call (:func:`~._cdp_kernels.sequences`):
        their terminators' indexes, their elements (new arrays) and their parameters (a
        view of a buffer kept for the next detection)."""
        stores = [self._stores[si] for si in self._step_stores]
        live = self._live
        versions = []
        for d, s in enumerate(stores):  # item by item: cheaper than an array from a list
            live[d, 0], live[d, 1], live[d, 2] = s.start, s.end, s.base
            versions.append(s.version)
        if versions != self._versions or self._columns_of is not self._stores:
            self._columns = _scanned(stores, self._step_index)
            self._versions, self._columns_of = versions, self._stores
        args: tuple[object, ...] = (*self._columns, live, *self._chain, _bytes_of(trows), tidx)
        found, partials = _k.sequences(*(args + self._found))
        if found < 0:  # more complete sequences than the buffers hold: double them
            self._found = _found_buffers(self._plan, max(-found, 2 * len(self._found[0])))
            found, partials = _k.sequences(*(args + self._found))
        self.partials += partials
        terminator, elements, bound = self._found
        if not found:
            return _NO_ROWS, (), bound[:0]
        # the elements' bytes copied, read as rows (a view would cost NumPy's checks of a
        # structured view, a copy of structured rows more than their bytes' copy)
        rows = np.ndarray((len(elements), found), self.dtype,
                          elements[:, :found * self.dtype.itemsize].copy())
        return terminator[:found].copy(), tuple(rows), bound[:found]

    def _by_steps(self, tidx: np.ndarray, trows: np.ndarray
                  ) -> tuple[np.ndarray, tuple[np.ndarray, ...], np.ndarray]:
        """:meth:`_in_one_call` through the hook :meth:`_run_steps` (a chain of one
        element, or an engine that runs its steps its own way), the elements taken
        from the rows it picks."""
        plan = self._plan
        bound = np.zeros((len(tidx), len(plan.params)), np.int64)
        for attr, is_float, p in plan.terminator.binds:
            bound[:, p] = encode(trows[attr], is_float)
        picks, bound = self._run_steps(trows, trows["ts"].astype(np.int64), bound)
        which = picks[0]
        elements = [self._elements(trows, which)]
        for st, pick in zip(plan.steps, picks[1:], strict=True):
            elements.append(self._elements(self._stores[st.store].live_rows, pick))
        return tidx[which], tuple(elements), bound

    def _elements(self, rows: np.ndarray, at: np.ndarray) -> np.ndarray:
        """The rows ``at`` of ``rows`` (in the columns' dtype) as elements of matches."""
        return rows.take(at) if self._rows_are_elements else take(rows, at, self.dtype)

    def __getstate__(self) -> dict[str, object]:
        """The engine without the column arrays :meth:`_run_steps` keeps for its kernel:
        some are views (an index's row of links), which a copy (pickled, deep-copied)
        turns into arrays apart from its columns, so it fetches them again."""
        state = dict(self.__dict__)
        state.update(_versions=[], _columns_of=None, _columns=())
        return state

    def _run_steps(self, trows: np.ndarray, anchor: np.ndarray, bound: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        """The complete sequences from the terminators ``trows`` (time stamps ``anchor``,
        parameters ``bound``): ``picks`` (row 0 the terminator of each, row ``d + 1``
        the live index of the event step ``d`` chose) and their parameters.

        The engine itself runs a chain's steps in one call with its elements
        (:meth:`_in_one_call`) and comes here only for a chain of one element; an engine
        whose :meth:`_steps_apart` holds (the GPU engine, which places each step in its
        hooks :meth:`_step` and :meth:`_general_step`) gets every detection here."""
        return self._step_by_step(trows, anchor, bound)

    def _steps_apart(self, terminators: int) -> bool:
        """Whether a detection from ``terminators`` terminators runs its steps one at a
        time through :meth:`_run_steps` (the GPU engine, when a step may go to the
        device) rather than in one compiled call."""
        return False

    def _step_by_step(self, trows: np.ndarray, anchor: np.ndarray, bound: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_run_steps` one step at a time, through the hooks :meth:`_step` and
        :meth:`_general_step`: the GPU engine's way, where each step may run on the
        device."""
        plan = self._plan
        seqs = _Sequences(plan, trows, anchor, self._spaces) if self._general else None
        links = []
        for depth, st in enumerate(plan.steps):
            if st.general:
                assert seqs is not None  # made when any step is general
                parent, chosen, bound, anchor = self._general_step(seqs, depth, st, anchor,
                                                                   bound)
            else:
                parent, chosen, bound, anchor = self._step(st, anchor, bound)
                if seqs is not None:
                    seqs.follow(parent)
            self.partials += len(parent)
            if len(parent) == 0:
                return np.zeros((len(plan.steps) + 1, 0), np.int64), bound
            links.append((parent, chosen))
        which: np.ndarray | None = None  # None: every sequence of the last step, in order
        picks: list[np.ndarray] = []  # the chosen events, last element first
        for parent, chosen in reversed(links):
            picks.append(chosen if which is None else chosen[which])
            which = parent if which is None else parent[which]
        if which is None:
            which = np.arange(len(anchor))
        return np.array([which, *reversed(picks)], np.int64).reshape(-1, len(which)), bound

    def _step(self, st: Step, anchor: np.ndarray, bound: np.ndarray):
        store = self._stores[st.store]
        return _k.step(store.live_ts, store.live_enc, anchor, bound, st.chk_col, st.chk_par,
                       st.chk_nan, st.bind_col, st.bind_par, st.window, st.selection,
                       *_index(store, st.chk_col))

    def _general_step(self, seqs: _Sequences, depth: int, st: Step, anchor: np.ndarray,
                      bound: np.ndarray):
        """The general step ``st``, the ``depth``-th of the chain, which also advances
        what ``seqs`` carries per sequence."""
        return seqs.step(depth, self._stores[st.store], st, self._scans[depth], anchor, bound)

    def _reduce(self, red: Reduction, start: np.ndarray, stop: np.ndarray,
                bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        store = self._stores[red.store]
        return _k.reduce(store.live_ts, store.live_enc, store.live_num, red.vrow, start, stop,
                         bound, red.chk_col, red.chk_par, red.chk_nan, red.op,
                         *_index(store, red.chk_col))

    # ---------------------------------------------------------------------- pruning

    def _empty(self) -> Matches:
        return Matches(*self._no_match)

    def _settle(self) -> None:
        """deleteOldEvents of Alg. 2, relative to the newest time stamp seen.

        It runs every few hundred events and before the state is read, and depends only
        on the stream prefix, so when it runs does not change the state it leaves.
        """
        if not self._unpruned:
            return
        self._unpruned = 0
        plan = self._plan
        newest = self._last[0]
        lower = [newest] * plan.length  # no future element i is older
        keep = [newest] * len(plan.stores)
        for i, st in enumerate(plan.steps, start=1):
            bound = lower[i - 1] - st.window
            keep[st.store] = min(keep[st.store], bound)
            ts = self._stores[st.store].live_ts
            j = int(np.searchsorted(ts, bound, side="left"))
            lower[i] = int(ts[j]) if j < len(ts) else newest
        for red in plan.reductions:
            if red.window is not None:
                bound = lower[red.anchor] - red.window
            else:
                assert red.after is not None  # Rule checks: a window or an element after
                bound = lower[red.after] + 1
            keep[red.store] = min(keep[red.store], bound)
        for si, store in enumerate(self._stores):
            k = store.drop_before(keep[si])
            if k:
                self._dropped(si, k)

    # ------------------------------------------------------- hooks of the GPU engine

    def _new_store(self, spec: StoreSpec, capacity: int = 256) -> Store:
        return Store(self._plan.row_dtype, len(spec.enc), len(spec.num), capacity,
                     tuple(spec.indexed))

    def _appended(self, store: int, count: int) -> None:
        """Called after ``count`` rows were appended to column ``store``."""

    def _dropped(self, store: int, count: int) -> None:
        """Called after the ``count`` oldest rows of column ``store`` were dropped."""

    def _reloaded(self) -> None:
        """Called after :meth:`restore` replaced every column."""


_Layout = tuple[Callable[[tuple], tuple], int, int, int, int]
"""Where the fields of a batch's rows are, as :meth:`CDPEngine._few_layout` gives them:
what picks the columns' fields of a row (a tuple of its fields), then the positions of
``type``, ``ts``, ``producer``, ``seq``."""


def _picker_of(positions: list[int]) -> Callable[[tuple], tuple]:
    """What picks the fields at ``positions`` of a row, as a tuple, at C speed (and
    pickles with the engine). The columns keep at least the core fields, so there are
    several positions and ``itemgetter`` gives a tuple."""
    assert len(positions) > 1, "the columns' dtype has the core fields"
    return itemgetter(*positions)

_NO_ROWS = np.zeros(0, np.int64)


def _few_types(plan: Plan) -> dict[int, tuple[tuple[int, ...], bool]]:
    """For each type the rule reads, the columns its events go to and whether they are
    terminators; empty when a column or the terminator takes only some events of its
    type (literal constraints, equalities, predicates): those go the general way."""
    keys = [spec.key for spec in plan.stores] + [plan.terminator.key]
    if any(key.literals or key.same or key.predicates for key in keys):
        return {}
    return {type_id: (tuple(si for si, spec in enumerate(plan.stores)
                            if spec.type_id == type_id), type_id == plan.terminator.type_id)
            for type_id in plan.type_ids.values()}


def _check_few(events: np.ndarray, rows: list[int], last: tuple[int, int], engine: str
               ) -> tuple[int, int]:
    """:meth:`CDPEngine._check_order` for a few ``rows`` of ``events``: raise unless
    their positions ``(ts, producer << 40 | seq)`` continue from ``last`` without going
    back; return the position of the last one."""
    ts, producer, seq = events["ts"], events["producer"], events["seq"]
    for r in rows:
        here = (int(ts[r]), (int(producer[r]) << ORDER_SHIFT) | int(seq[r]))
        if here < last:
            raise ValueError(_BACKWARDS.format(engine))
        last = here
    return last


def _scan_args(st: Step) -> tuple:
    """The arguments of :func:`~._cdp_kernels.step_general` that are the same at every
    detection: how the general step ``st`` scans its column, gathered once."""
    return (st.chk_col, st.chk_par, st.chk_nan, st.bind_col, st.bind_par, st.window,
            st.selection, st.pos_row < 0, st.pos_row, st.ops, st.consts, st.fill_slot,
            st.fill_row)


def _chain_table(plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The chain as :func:`~._cdp_kernels.sequences` takes it, in three arrays (each
    array passed costs the call its dispatch): int64, the step table (its head of
    :data:`~._cdp_kernels.T_WIDTH` entries, then a row of :data:`~._cdp_kernels.S_WIDTH`
    entries a step) followed by the terminator's binds and fills and the steps' checks,
    binds, programs and context fills, which the head and rows point into; the checks'
    NaN flags; the programs' constants."""
    steps = plan.steps
    table = np.zeros(_k.T_WIDTH + len(steps) * _k.S_WIDTH, np.int64)
    row_dtype = plan.row_dtype
    fields = row_dtype.fields
    assert fields is not None  # a structured dtype
    assert [kind_of(fields[f][0]) for f in ("ts", "producer", "seq")] == [
        _KIND_I8, _KIND_I4, _KIND_I8], "the kernel reads the core fields as int64, int32, int64"
    term = plan.terminator
    binds = [(fields[a][1], kind_of(fields[a][0]), is_float, p) for a, is_float, p in term.binds]
    fills = [(fields[a][1], kind_of(fields[a][0]), q) for q, a in term.fills]
    table[:_k.T_BINDS] = (row_dtype.itemsize, plan.dtype.itemsize, fields["ts"][1],
                          fields["producer"][1], fields["seq"][1], ORDER_SHIFT,
                          -1 if plan.window is None else plan.window, plan.strict,
                          len(plan.slots))
    parts: tuple[list[np.ndarray], ...] = ([table], [], [])  # int64, NaN flags, constants
    sizes = [len(table), 0, 0]
    for at, entries in ((_k.T_BINDS, binds), (_k.T_FILLS, fills)):
        flat = np.array(entries, np.int64).ravel()
        table[at], table[at + 1] = sizes[0], sizes[0] + len(flat)
        sizes[0] += len(flat)
        parts[0].append(flat)
    for d, st in enumerate(steps):
        row = table[_k.T_WIDTH + d * _k.S_WIDTH:_k.T_WIDTH + (d + 1) * _k.S_WIDTH]
        row[:_k.S_CHK_COL] = (st.window, st.selection, st.pos_row, st.floor)
        for at, array, into in ((_k.S_CHK_COL, st.chk_col, 0), (_k.S_CHK_PAR, st.chk_par, 0),
                                (_k.S_CHK_NAN, st.chk_nan, 1), (_k.S_BIND_COL, st.bind_col, 0),
                                (_k.S_BIND_PAR, st.bind_par, 0), (_k.S_OPS, st.ops.ravel(), 0),
                                (_k.S_CONSTS, st.consts, 2), (_k.S_FILL_SLOT, st.fill_slot, 0),
                                (_k.S_FILL_ROW, st.fill_row, 0)):
            row[at], row[at + 1] = sizes[into], sizes[into] + len(array)
            sizes[into] += len(array)
            parts[into].append(array)
    ints, nan, consts = parts
    return (np.concatenate(ints).astype(np.int64),  # the NaN flags as uint8: Numba's
            # dispatcher types a bool array in Python, ~0.2 us a call
            np.concatenate([np.zeros(0, np.uint8), *nan]).astype(np.uint8),
            np.concatenate([np.zeros(0, np.float64), *consts]).astype(np.float64))


def _scanned(stores: list[Store], index: list[int]) -> tuple[tuple[np.ndarray, ...], ...]:
    """The arrays :func:`~._cdp_kernels.sequences` scans, one per step (the column
    ``stores[d]``): time stamps, keys, values, the links and table of the equality
    index ``index[d]`` of the step's first check (-1: empty arrays, it scans), and the
    rows as bytes."""
    tables = [(s.link[i], *s.tables[i][:2]) if i >= 0 else _NO_LINK
              for s, i in zip(stores, index, strict=True)]
    return (tuple(s.ts for s in stores), tuple(s.enc for s in stores),
            tuple(s.num for s in stores), tuple(x[0] for x in tables),
            tuple(x[1] for x in tables), tuple(x[2] for x in tables),
            tuple(s.rows.view(np.uint8) for s in stores))


def _found_buffers(plan: Plan, room: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The buffers :func:`~._cdp_kernels.sequences` writes ``room`` complete sequences
    into: their terminators' indexes, their elements' rows as bytes (a row of the
    buffer per element) and their parameters."""
    return (np.empty(room, np.int64),
            np.empty((len(plan.steps) + 1, room * plan.dtype.itemsize), np.uint8),
            np.empty((room, len(plan.params)), np.int64))


def _bytes_of(rows: np.ndarray) -> np.ndarray:
    """The bytes of ``rows`` as a uint8 array: a view when they are contiguous."""
    return np.frombuffer(rows if rows.flags.c_contiguous else np.ascontiguousarray(rows),
                         np.uint8)


def _leads(row_dtype: np.dtype, dtype: np.dtype) -> bool:
    """Whether a row of ``row_dtype`` begins with the bytes of a row of ``dtype``: the
    kernel takes an element as its row's first ``dtype.itemsize`` bytes."""
    rows, elements = row_dtype.fields, dtype.fields
    assert rows is not None and elements is not None  # structured dtypes
    return all(rows.get(name) == field for name, field in elements.items())


def _index_at(spec: StoreSpec, st: Step) -> int:
    """Which of its column's equality indexes the step ``st`` looks keys up in (-1:
    none, it scans)."""
    row = int(st.chk_col[0]) if len(st.chk_col) else -1
    return spec.indexed.index(row) if row in spec.indexed else -1


_NO_LINK = (np.zeros(0, np.int64),) * 3


def _index(store: Store, chk_col: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The equality index of the row a scan checks first (empty arrays: none)."""
    return store.index_of(int(chk_col[0])) if len(chk_col) else NO_INDEX


class _Relevant:
    """The rows of a batch that the rule reads: their positions ``index`` in the batch,
    their types, and their rows in the columns' dtype, converted once (one ``take`` of
    whole rows) for every column that takes some of them.

    The rows of one type are addressed by their positions among the relevant rows: a
    slice when they follow each other (always, for a type with one row), else an index
    array. A batch of a few rows finds them with Python ints, which cost less than a
    NumPy call on a few rows.
    """

    __slots__ = ("_at", "_converted", "_dtype", "_present", "_types", "events", "index")

    def __init__(self, events: np.ndarray, index: np.ndarray, dtype: np.dtype) -> None:
        self.events = events
        self.index = index
        self._dtype = dtype
        self._converted: np.ndarray | None = None
        self._types = events["type"][index]
        self._at: dict[int, Rows] = {}
        if len(index) <= FEW_ROWS:  # every type's rows at once, in one pass of Python ints
            groups: dict[int, list[int]] = {}
            for i, t in enumerate(self._types.tolist()):
                groups.setdefault(t, []).append(i)
            self._at = {t: _positions(at) for t, at in groups.items()}
            self._present = set(self._at)
        else:
            self._present = set(np.bincount(self._types).nonzero()[0].tolist())

    def of_type(self, type_id: int) -> Rows | None:
        """Where, among the relevant rows, those of type ``type_id`` are (None when
        there are none)."""
        if type_id not in self._present:
            return None
        at = self._at.get(type_id)
        if at is None:
            found = np.flatnonzero(self._types == type_id)
            first, last = int(found[0]), int(found[-1])
            at = self._at[type_id] = (slice(first, last + 1) if last - first + 1 == len(found)
                                      else found)
        return at

    def rows(self, at: Rows) -> np.ndarray:
        """The relevant rows at ``at``, in the columns' dtype: a new array or a part of
        the one converted for the batch, never a view of the batch itself."""
        if self._converted is None:  # every row relevant: no row to leave out
            events = self.events
            self._converted = (convert(events, self._dtype) if len(self.index) == len(events)
                               and events.dtype != self._dtype
                               else take(events, self.index, self._dtype))
        return self._converted[at] if isinstance(at, slice) else self._converted.take(at)


Rows = slice | np.ndarray
"""Positions among a batch's relevant rows (see :class:`_Relevant`)."""


def _positions(at: list[int]) -> Rows:
    """Ascending positions ``at`` as a slice when they follow each other, else an array."""
    first, last = at[0], at[-1]
    return slice(first, last + 1) if last - first + 1 == len(at) else np.array(at, np.int64)


class _Sequences:
    """What general steps carry per partial sequence besides its anchor and parameters:
    the pattern-window floor, the context values predicates read, and the position
    keys of its elements (``ties nonstrict``).

    Each general step writes its sequences into the buffers ``spaces[i]`` of the
    engine's ``i``-th step (see :class:`_Space`), kept from batch to batch; what a
    step returns are views of them, valid until the next detection."""

    def __init__(self, plan: Plan, trows: np.ndarray, anchor: np.ndarray,
                 spaces: list[_Space]) -> None:
        m = len(trows)
        self.spaces = spaces
        self.floor = (anchor - plan.window if plan.window is not None
                      else np.full(m, _k.NO_FLOOR, np.int64))
        self.ctx = np.zeros((m, len(plan.slots)), np.float64)
        for q, attr in plan.terminator.fills:
            self.ctx[:, q] = trows[attr]
        self.taken = order_key(trows)[:, None] if not plan.strict else np.zeros((m, 1),
                                                                                 np.int64)

    def step(self, depth: int, store: Store, st: Step, scan: tuple, anchor: np.ndarray,
             bound: np.ndarray):
        """The general step ``st``, the ``depth``-th of the chain (from 0); ``scan`` is
        what :func:`_scan_args` made of it."""
        carried = self.floor
        floor = carried if st.floor else np.full(len(anchor), _k.NO_FLOOR, np.int64)
        space = self.spaces[depth]
        out = space.buffers(bound.shape[1], self.ctx.shape[1], self.taken.shape[1] + 1)
        s, e = store.start, store.end
        args = (store.ts[s:e], store.enc[:, s:e], store.num[:, s:e], anchor, floor, bound,
                self.ctx, self.taken, *scan, *_index(store, st.chk_col))
        k = _k.step_general(*args, *out)
        if k < 0:  # more sequences than the buffers hold: grow them, step again
            space.grow(-k)
            out = space.buffers(bound.shape[1], self.ctx.shape[1], self.taken.shape[1] + 1)
            k = _k.step_general(*args, *out)
        parent, chosen, bound, anchor, floor, ctx, taken = out
        self.floor = floor[:k] if st.floor else carried[parent[:k]]
        self.ctx, self.taken = ctx[:k], taken[:k]
        return parent[:k], chosen[:k], bound[:k], anchor[:k]

    def follow(self, parent: np.ndarray) -> None:
        """Carry the per-sequence values to the sequences a plain step made from
        ``parent``."""
        self.floor = self.floor.take(parent)
        self.ctx = self.ctx.take(parent, axis=0)
        taken = np.zeros((len(parent), self.taken.shape[1] + 1), np.int64)
        taken[:, :-1] = self.taken.take(parent, axis=0)
        self.taken = taken


class _Space:
    """The buffers one general step writes its sequences into (see
    :func:`~specula.detectors.rules._cdp_kernels.step_general`), ``cap`` rows each,
    kept from batch to batch and grown when a step makes more sequences."""

    __slots__ = ("_arrays", "cap")

    def __init__(self) -> None:
        self.cap = _ROOM
        self._arrays: tuple[np.ndarray, ...] = ()

    def grow(self, rows: int) -> None:
        self.cap = max(rows, 2 * self.cap)
        self._arrays = ()

    def buffers(self, n_params: int, n_slots: int, width: int) -> tuple[np.ndarray, ...]:
        """``parent, chosen, bound, anchor, floor, ctx, taken``; the widths are those of
        the first call (a step's are the same at every call), the rest are ignored."""
        if not self._arrays:
            cap = self.cap
            self._arrays = (np.empty(cap, np.int64), np.empty(cap, np.int64),
                            np.empty((cap, n_params), np.int64), np.empty(cap, np.int64),
                            np.empty(cap, np.int64), np.empty((cap, n_slots), np.float64),
                            np.empty((cap, width), np.int64))
        return self._arrays
