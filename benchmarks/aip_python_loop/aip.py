"""AIP: automata-based incremental processing (Cugola & Margara, sec. 4.1 and 5.1).

A rule's chain ``C <- B <- A`` (terminator first) is an automaton that reads events in
time order: state 0 waits for ``A``, state 1 holds instances that have seen ``A``, state
2 instances that have seen ``B`` after ``A``, and the terminator accepts. This module
names a state by the chain element its instances saw last, so state ``k`` holds
partial sequences ``(element k, element k+1, ..., element n-1)``.

Implementation (sec. 5.1 and Alg. 1)
------------------------------------
* Instances of one state live in one table, in the order of the time stamp of the
  event that triggered their last transition; a row holds that time stamp and the ids
  of the events the instance has seen: references into one event store per rule, never
  copies of events.
* An event that matches element ``j`` (type, literal constraints and the predicates that
  read only the event itself, one vectorised test per batch) advances the instances of
  state ``j + 1``: the table is scanned from the most recent instance; instances too old
  for the step's window are the tail of the table, deleted when the scan meets the first
  of them (Alg. 1, line 4). Each advanced instance is duplicated into state ``j`` with
  the event added (lines 6-11); the original stays. Scans run over NumPy slices of the
  table, newest chunk first.
* Single selection (``last``): the scan stops at the first event that qualifies (Alg. 1,
  line 12); ``first`` takes the oldest one in the window. Parameters are checked on the
  instances (line 5); they are equality constraints, checked by dereferencing the
  event ids.
* Aggregates and negations are computed when a sequence is accepted, from one column
  per aggregate (and per negation) holding the events that match its pattern, pruned
  by its window (sec. 4.3).
* Everything older than the longest time horizon the rule can still need is purged at
  the end of every batch.

Predicates, the pattern window and equal time stamps
----------------------------------------------------
* **Predicates** are sorted once per rule by what they read. Those of the event alone
  join its pattern's test (the terminator's too). Those that read the event and its
  anchor are evaluated by the scan, vectorised over the candidate rows (the event's
  attributes from the store, the anchor's as scalars; dead ends included, since a dead
  end keeps its own event id), so ``last``/``first`` choose among the events that
  satisfy them. Those of an ``each`` step that read elements before its anchor are
  checked when the terminator accepts the sequence, which is exact for ``each``.
* **Deferred choices.** A ``last``/``first`` step whose candidates depend on elements
  its anchor has not seen (a predicate on a parameter bound before the anchor, or under
  ``ties nonstrict`` an earlier element of the same type that may share the anchor's
  time stamp and so be excluded from the candidates) keeps every candidate at the scan
  and no dead ends; at acceptance the choice is recomputed from the event store, which
  then records which elements each event matched, and the match is kept only if its
  event is the one chosen (:mod:`~specula.detectors.rules._aip_accept`).
* **Pattern window** ``within W``: matches are filtered with ``Matches.within`` after
  selection. Instances of ``each``/``last`` steps older than the newest time stamp minus
  ``W`` are purged: every match through them would fall outside ``W``, and a ``last``
  that would choose one of them has only such candidates. ``first`` steps keep their
  window's candidates (choosing one outside ``W`` drops the match), and the store keeps
  what live instances refer to.
* **ties nonstrict.** An event may precede another of equal time stamp whatever their
  arrival order, so the events of the newest time stamp are held
  (:mod:`~specula.detectors.rules._aip_ties`, part of the snapshot) until a later time
  stamp arrives, or :meth:`AIPEngine.flush`. A complete group is processed in role
  passes: the events of the deepest element first, then the next, down to the
  terminators, each pass in stream order, so that events of equal time stamp are in the
  states their anchors scan. Scans then include the anchor's time stamp, and an instance
  never holds one event twice (the anchor is no candidate for itself). A held
  terminator's matches get the index of the first row of the batch with a later time
  stamp (0 at ``flush``). Strict rules hold nothing.

Local selection
---------------
``last`` and ``first`` choose among *all* events that match the step's pattern, whether
or not a sequence can be completed behind them (see :mod:`~specula.detectors.rules.ast`).
An event of such a step that advances no instance is therefore kept in its state as a
*dead end*: a row whose deeper event ids are ``-1``. A later scan that selects it
advances nothing and does not fall back to an earlier instance, so the event blocks
older candidates exactly as the semantics requires.

Two refinements keep Alg. 1 exact for every rule the model allows:

* The instances that share the selected event (several, when a deeper step is ``each``)
  are a contiguous group of the table, and they are all advanced.
* A parameter that constrains a ``last``/``first`` step but is bound by an element the
  anchor event has not seen yet (``D(p=$x) and last C() ... and last B(p=$x) ... from
  C``: ``C`` does not know ``$x``) cannot be decided when the anchor arrives. The scan
  then selects the latest (earliest) event per value of such parameters, and the
  element that binds them later keeps the instances whose values agree. Without such
  parameters (R1-R5 of the paper) this is the plain break-after-the-first shortcut.

The engine's storage (:mod:`~specula.detectors.rules._aip_tables`), what it plans once
per rule (:mod:`~specula.detectors.rules._aip_plan`), what it computes at acceptance
(:mod:`~specula.detectors.rules._aip_accept`) and the held time stamps
(:mod:`~specula.detectors.rules._aip_ties`) are in modules of their own; this module
drives them, event by event.
"""

from __future__ import annotations

import numpy as np

from specula.detectors.rules.ast import Rule
from specula.detectors.rules.detector import check_rule, element_dtype
from specula.detectors.rules.engine import Matches, predicates_hold
from specula.events import TypeRegistry

from ._aip_accept import chosen, column_values
from ._aip_plan import (
    Filter,
    Scan,
    column_spec,
    mentions_of,
    plan_columns,
    plan_horizons,
    plan_predicates,
    plan_reads,
    plan_scans,
)
from ._aip_tables import Table, restore_tables, snapshot_tables
from ._aip_ties import Held, pass_order

__all__ = ["AIPEngine"]

_FIRST_CHUNK = 1024  # instances tested in the first slice of a single-selection scan


class AIPEngine:
    """Automata-based incremental processing of one rule (the paper's CPU baseline).

    Parameters
    ----------
    rule : Rule
        The rule to detect.
    registry : TypeRegistry
        Where the rule's event types are registered; every type and attribute the rule
        names must exist there.
    ticks_per_second : float, optional
        Converts windows written with a time unit (``within 5 min.``) to ticks.

    Examples
    --------
    Rule R1 of the paper (``Smoke(area=$a) and each Temp(area=$a and value>45) within
    5 from Smoke``) on the events of its Fig. 3:

    >>> from specula.detectors.rules.ast import Constraint, Param, Pattern, Rule, Step, Window
    >>> from specula.events import TypeRegistry
    >>> reg = TypeRegistry()
    >>> _ = reg.register("Temp", area="i8", value="f8"); _ = reg.register("Smoke", area="i8")
    >>> r1 = Rule("Fire", (), Pattern("Smoke", (Constraint("area", "=", Param("a")),)),
    ...           (Step("each", Pattern("Temp", (Constraint("area", "=", Param("a")),
    ...                                          Constraint("value", ">", 45))),
    ...                 Window(5)),))
    >>> events = reg.from_records([
    ...     {"type": "Temp", "ts": 1, "area": 1, "value": 50},
    ...     {"type": "Temp", "ts": 2, "area": 1, "value": 55},
    ...     {"type": "Smoke", "ts": 5, "area": 2},
    ...     {"type": "Temp", "ts": 7, "area": 1, "value": 60},
    ...     {"type": "Smoke", "ts": 8, "area": 1},
    ...     {"type": "Smoke", "ts": 9, "area": 1}], dtype=reg.dtype())
    >>> m = AIPEngine(r1, reg).process(events)
    >>> m.terminator.tolist(), m.elements[1]["value"].tolist()
    ([4, 5], [60.0, 60.0])
    """

    def __init__(self, rule: Rule, registry: TypeRegistry,
                 ticks_per_second: float | None = None) -> None:
        check_rule(rule, registry, ticks_per_second)
        self.rule = rule
        self.ticks_per_second = ticks_per_second
        chain = rule.chain
        self._n = n = len(chain)
        self._predicates = predicates = plan_predicates(rule)
        self._filters = tuple(Filter.of(p, registry, predicates.own[i])
                              for i, p in enumerate(chain))
        self._windows = (0, *(s.within.ticks(ticks_per_second) for s in rule.steps))
        self._offsets = tuple(int(x) for x in np.cumsum(self._windows))
        self._mentions = mentions = tuple(mentions_of(p) for p in chain)
        self._scans = plan_scans(rule, mentions, self._windows, predicates)
        self._deferred = tuple(s for s in self._scans[1:] if s.deferred)
        self._late = any(predicates.late)
        self._horizons, self._store_horizon = plan_horizons(
            rule, self._windows, ticks_per_second, bool(self._deferred))
        self._anchor_attrs, self._bound = plan_reads(rule, mentions, predicates)
        self._dtype = element_dtype(rule, registry)
        attrs = [name for name in self._dtype.names if name not in _CORE]
        store_spec = (("ts", np.dtype(np.int64), 0), ("key", np.dtype(np.int64), 0),
                      ("producer", np.dtype(np.int32), 0), ("seq", np.dtype(np.int64), 0),
                      *((a, self._dtype[a], 0) for a in attrs),
                      *((("_roles", np.dtype(np.int64), 0),) if self._deferred else ()))
        self._store = Table(store_spec)
        self._states: list[Table | None] = [None] + [
            Table((("ts", np.dtype(np.int64), 0), ("ids", np.dtype(np.int64), n - k)))
            for k in range(1, n)]
        self._held = None if rule.ties == "strict" else Held(np.dtype(
            [("type", registry.dtype(rule.input_types)["type"]),
             *((name, self._dtype[name]) for name in self._dtype.names)]))
        self._columns = plan_columns(rule, self._mentions, self._offsets, ticks_per_second)
        self._column_tables = [Table(column_spec(c, registry)) for c in self._columns]
        self._column_filters = tuple(Filter.of(c.pattern, registry) for c in self._columns)
        self._needed = {a for p in (*chain, *(c.pattern for c in self._columns))
                        for a in (c.attr for c in p.constraints)}
        self._needed |= {c.value for c in self._columns if c.value}
        self._now: int | None = None

    # ------------------------------------------------------------------ processing

    def process(self, events: np.ndarray) -> Matches:
        """Consume a batch in stream order (other types are ignored); return its matches.

        Parameters
        ----------
        events : numpy.ndarray
            A structured batch in stream order, carrying every attribute the rule reads.

        Returns
        -------
        Matches
            One row per match, ``terminator`` indexing ``events``.
        """
        if not len(events):
            return Matches.empty(self.rule, self._dtype)
        self._check_fields(events)
        self._fill_columns(events)
        roles = [f.mask(events) for f in self._filters]
        relevant = np.flatnonzero(np.logical_or.reduce(roles))
        if self._held is None:
            ids = self._fill_store(events, roles)
            found: list[tuple[int, np.ndarray]] = []
            if len(relevant):
                self._run(events, roles, ids, relevant, found)
            matches = self._matches(events, found, ids)
        else:  # ties nonstrict: evaluate the complete time stamps, hold the newest
            matches = self._evaluate(*self._held.take(events, relevant))
        self._now = int(events["ts"][-1])
        self._purge()
        return matches

    def _evaluate(self, rows: np.ndarray, causes: np.ndarray) -> Matches:
        """Process complete groups of equal time stamps; ``causes[r]`` is the index that
        the matches of terminator ``rows[r]`` get."""
        roles = [f.mask(rows) for f in self._filters]
        ids = self._fill_store(rows, roles)
        found: list[tuple[int, np.ndarray]] = []
        if len(rows):
            self._run(rows, roles, ids, np.arange(len(rows)), found)
        return self._matches(rows, found, ids, causes)

    def _check_fields(self, events: np.ndarray) -> None:
        missing = (self._needed | set(self._dtype.names)) - set(events.dtype.names)
        if missing:
            raise ValueError(f"rule {self.rule.name}: the batch lacks fields {sorted(missing)}; "
                             f"build batches with registry.dtype({list(self.rule.input_types)})")

    def _fill_columns(self, events: np.ndarray) -> None:
        for column, table, test in zip(self._columns, self._column_tables,
                                       self._column_filters, strict=True):
            rows = events[test.mask(events)]
            if not len(rows):
                continue
            table.reserve(len(rows))
            end = table.n + len(rows)
            table.cols["ts"][table.n:end] = rows["ts"]
            if column.value:
                table.cols["_value"][table.n:end] = rows[column.value]
            for attr, _, _ in column.params:
                table.cols[attr][table.n:end] = rows[attr]
            table.n = end

    def _fill_store(self, events: np.ndarray, roles: list[np.ndarray]) -> np.ndarray:
        """Append the events of non-terminator elements; return each row's id (or -1)."""
        ids = np.full(len(events), -1, np.int64)
        if self._n == 1:
            return ids
        stored = np.flatnonzero(np.logical_or.reduce(roles[1:]))
        store = self._store
        store.reserve(len(stored))
        end = store.n + len(stored)
        for name in store.cols:
            if name != "_roles":
                store.cols[name][store.n:end] = events[name][stored]
        if self._deferred:  # which elements each event matches, to check choices again
            store.cols["_roles"][store.n:end] = sum(
                roles[j][stored].astype(np.int64) << j for j in range(1, self._n))
        ids[stored] = np.arange(store.base + store.n, store.base + end)
        store.n = end
        return ids

    def _run(self, events: np.ndarray, roles: list[np.ndarray], ids: np.ndarray,
             relevant: np.ndarray, found: list[tuple[int, np.ndarray]]) -> None:
        """Alg. 1 for every relevant event, in stream order (in role passes per time
        stamp under ``ties nonstrict``, see :func:`pass_order`)."""
        n = self._n
        flags = np.stack([mask[relevant] for mask in roles], axis=1)
        times = events["ts"][relevant]
        order = pass_order(times, flags, self._held is not None)
        values = [{a: events[a][relevant].tolist() for a in self._anchor_attrs[j]}
                  for j in range(n)]
        rel, ts_list, id_list = relevant.tolist(), times.tolist(), ids[relevant].tolist()
        for r, j in zip(*(o.tolist() for o in order), strict=True):
            i, ts, eid = rel[r], ts_list[r], id_list[r]
            if j == n - 1 and j > 0:
                self._append(j, ts, np.array([eid], np.int64))
                continue
            if n == 1:
                found.append((i, np.empty((1, 0), np.int64)))
                continue
            anchor = {a: column[r] for a, column in values[j].items()}
            rows = self._advance(self._scans[j + 1], ts, anchor, eid)
            table = self._states[j + 1]
            if j == 0:
                if len(rows):
                    found.append((i, table.cols["ids"][rows]))
            elif len(rows):
                deeper = table.cols["ids"][rows]
                self._append(j, ts, np.column_stack(
                    [np.full(len(rows), eid, np.int64), deeper]))
            elif self._scans[j].dead_ends:
                dead = np.full((1, n - j), -1, np.int64)
                dead[0, 0] = eid
                self._append(j, ts, dead)

    def _append(self, k: int, ts: int, ids: np.ndarray) -> None:
        table = self._states[k]
        if ids.ndim == 1:
            ids = ids[None, :]
        table.reserve(len(ids))
        end = table.n + len(ids)
        table.cols["ts"][table.n:end] = ts
        table.cols["ids"][table.n:end] = ids
        table.n = end

    def _advance(self, scan: Scan, ts: int, anchor: dict, eid: int) -> np.ndarray:
        """Rows of state ``scan.k`` that an anchor at ``ts`` (store id ``eid``) selects and
        may advance."""
        table = self._states[scan.k]
        times = table.cols["ts"]
        lo = table.start + int(np.searchsorted(times[table.start:table.n], ts - scan.window))
        table.start = lo  # the expired tail (Alg. 1, line 4)
        # strictly earlier, or no later under ties nonstrict
        hi = lo + int(np.searchsorted(times[lo:table.n], ts,
                                      side="right" if scan.inclusive else "left"))
        if hi <= lo:
            return np.empty(0, np.int64)
        if scan.selection == "each" or scan.unknown or scan.deferred:
            cand = lo + np.flatnonzero(self._qualify(scan, lo, hi, anchor, eid))
            rows = (cand if scan.selection == "each" or scan.deferred
                    else self._per_value(scan, cand))
        else:
            idx = self._single(scan, lo, hi, anchor, eid)
            if idx < 0:
                return np.empty(0, np.int64)
            first = table.cols["ids"][lo:hi, 0]
            event = first[idx - lo]
            rows = lo + np.arange(np.searchsorted(first, event),
                                  np.searchsorted(first, event, side="right"))
        return self._consistent(scan, rows, anchor, eid)

    def _qualify(self, scan: Scan, lo: int, hi: int, anchor: dict, eid: int) -> np.ndarray:
        """Whether the events of element k in rows ``lo:hi`` are candidates for the anchor:
        its parameters, the predicates that read it, and not the anchor itself."""
        ok = self._known(scan, lo, hi, anchor)
        first = self._states[scan.k].cols["ids"][lo:hi, 0]
        if scan.near:
            store = self._store
            refs = first - store.base
            ok &= predicates_hold(scan.near, lambda element, attr: store.cols[attr][refs]
                                  if element == scan.k else anchor[attr])
        if 0 in scan.own:
            ok &= first != eid
        return ok

    def _known(self, scan: Scan, lo: int, hi: int, anchor: dict) -> np.ndarray:
        """Whether the events of element k in rows ``lo:hi`` match the anchor's parameters."""
        if not scan.known:
            return np.ones(hi - lo, bool)
        store = self._store
        refs = self._states[scan.k].cols["ids"][lo:hi, 0] - store.base
        ok = store.cols[scan.known[0][0]][refs] == anchor[scan.known[0][1]]
        for mine, theirs in scan.known[1:]:
            ok &= store.cols[mine][refs] == anchor[theirs]
        return ok

    def _single(self, scan: Scan, lo: int, hi: int, anchor: dict, eid: int) -> int:
        """The newest (``last``) or oldest (``first``) qualifying row, or -1: the scan
        tests growing slices from that end and stops at the first hit."""
        if not scan.tested:
            return hi - 1 if scan.selection == "last" else lo
        size = _FIRST_CHUNK
        if scan.selection == "last":
            end = hi
            while end > lo:
                begin = max(lo, end - size)
                hits = np.flatnonzero(self._qualify(scan, begin, end, anchor, eid))
                if len(hits):
                    return begin + int(hits[-1])
                end, size = begin, size * 8
        else:
            begin = lo
            while begin < hi:
                end = min(hi, begin + size)
                hits = np.flatnonzero(self._qualify(scan, begin, end, anchor, eid))
                if len(hits):
                    return begin + int(hits[0])
                begin, size = end, size * 8
        return -1

    def _per_value(self, scan: Scan, cand: np.ndarray) -> np.ndarray:
        """Rows of the newest/oldest candidate event per value of the unknown parameters."""
        if not len(cand):
            return cand
        store = self._store
        events = self._states[scan.k].cols["ids"][cand, 0]
        refs = events - store.base
        values = np.stack([store.cols[a][refs] for a in scan.unknown], axis=1)
        order = slice(None, None, -1) if scan.selection == "last" else slice(None)
        _, first = np.unique(values[order], axis=0, return_index=True)
        chosen = events[order][first]
        return cand[np.isin(events, chosen)]

    def _consistent(self, scan: Scan, rows: np.ndarray, anchor: dict, eid: int
                    ) -> np.ndarray:
        """Drop dead ends and instances whose deeper events disagree with the anchor or
        repeat it."""
        if not len(rows):
            return rows
        ids = self._states[scan.k].cols["ids"]
        if scan.dead_ends:
            rows = rows[ids[rows, 1] >= 0]
        for column in scan.own:
            if column and eid >= 0:
                rows = rows[ids[rows, column] != eid]
        store = self._store
        for column, attr, theirs in scan.deeper:
            if not len(rows):
                break
            rows = rows[store.cols[attr][ids[rows, column] - store.base] == anchor[theirs]]
        return rows

    # ------------------------------------------------------------------ detection

    def _matches(self, events: np.ndarray, found: list[tuple[int, np.ndarray]],
                 ids: np.ndarray, causes: np.ndarray | None = None) -> Matches:
        """Matches of the accepted sequences: inside the pattern window, with the late
        predicates and deferred choices checked, and their aggregates and negations
        (sec. 4.3). ``found`` holds (terminator row, deeper store ids); a terminator's
        matches get ``causes[row]`` as index (``row`` itself by default)."""
        rule = self.rule
        if not found:
            return Matches.empty(rule, self._dtype)
        local = np.concatenate([np.full(len(r), i, np.int64) for i, r in found])
        deeper = np.concatenate([r for _, r in found])
        elements = [_as_elements(events[local], self._dtype)]
        store = self._store
        for k in range(1, self._n):
            refs = deeper[:, k - 1] - store.base
            rows = np.zeros(len(refs), self._dtype)
            for name in self._dtype.names:
                rows[name] = store.cols[name][refs]
            elements.append(rows)
        n_agg, count = len(rule.aggregates), len(local)
        # the row number stands in for the terminator until the filters have run
        matches = Matches(np.arange(count), tuple(elements), np.zeros((count, n_agg)),
                          np.zeros((count, len(rule.negations)), np.int64))
        matches = matches.within(rule, self.ticks_per_second)
        if self._late or self._deferred:
            pick = matches.terminator
            matches = matches.select(self._accepted(
                matches, np.column_stack([ids[local[pick]], deeper[pick]])))
        terminator = local[matches.terminator]
        matches.terminator = terminator if causes is None else causes[terminator]
        elements = list(matches.elements)
        for c, (column, table) in enumerate(zip(self._columns, self._column_tables,
                                                strict=True)):
            values = column_values(column, table, elements)
            if c < n_agg:
                matches.aggregates[:, c] = values
            else:
                matches.negations[:, c - n_agg] = values
        return matches

    def _accepted(self, matches: Matches, ids: np.ndarray) -> np.ndarray:
        """Which sequences hold the predicates that read elements before their anchor
        (exact for ``each``) and chose what deferred steps choose (``ids``: the store
        ids of the elements, -1 for a terminator that is not stored)."""
        elements = list(matches.elements)
        keep = np.ones(len(matches), bool)
        for k, late in enumerate(self._predicates.late):
            if late and not self._scans[k].deferred:
                keep &= predicates_hold(late, lambda element, attr: elements[element][attr])
        for scan in self._deferred:
            predicates = self._predicates.near[scan.k] + self._predicates.late[scan.k]
            keep &= chosen(scan, self._store, self._bound[scan.k], predicates, elements, ids)
        return keep

    # ------------------------------------------------------------------ state

    def automata(self) -> list[int]:
        """Automata per state: entry ``k >= 1`` counts the instances that saw element
        ``k`` last (dead ends included); entry 0 is the initial automaton."""
        return [1, *(len(t) for t in self._states[1:])]

    def stored(self) -> dict[str, int | list[int]]:
        """Events kept: in the rule's event store, and per aggregate/negation column."""
        return {"events": len(self._store), "columns": [len(t) for t in self._column_tables]}

    def _purge(self) -> None:
        """Delete what no future event can use: instances whose next step's window has
        passed, and stored events older than the rule's longest horizon."""
        now = self._now
        for k in range(1, self._n):
            table = self._states[k]
            table.start = table.cut(now - self._horizons[k])
        self._store.start = self._store.cut(now - self._store_horizon)
        for column, table in zip(self._columns, self._column_tables, strict=True):
            table.start = table.cut(now - column.horizon)

    def _tables(self) -> list[tuple[Table, int]]:
        """Every table with its horizon (ticks before the newest event)."""
        tables = [(self._store, self._store_horizon)]
        tables += [(self._states[k], self._horizons[k]) for k in range(1, self._n)]
        tables += [(t, c.horizon) for c, t in zip(self._columns, self._column_tables,
                                                  strict=True)]
        if self._held is not None:
            tables.append((self._held.table, 0))  # the newest time stamp's events
        return tables

    def flush(self) -> Matches:
        """End of stream: the matches of the terminators held back under ``ties
        nonstrict`` (the newest time stamp's), each with terminator index 0."""
        if self._held is None or not len(self._held):
            return Matches.empty(self.rule, self._dtype)
        rows = self._held.flush()
        return self._evaluate(rows, np.zeros(len(rows), np.int64))

    def snapshot(self) -> bytes:
        """The live state as bytes: equal bytes for equal states, however the stream
        was cut into batches (expired rows that lazy deletion keeps are left out)."""
        return snapshot_tables(self._tables(), self._now)

    def restore(self, state: bytes) -> None:
        """Return to a state produced by :meth:`snapshot`."""
        self._now = restore_tables(state, self._tables())


_CORE = ("ts", "key", "producer", "seq")


def _as_elements(rows: np.ndarray, dtype: np.dtype) -> np.ndarray:
    out = np.zeros(len(rows), dtype)
    for name in dtype.names:
        out[name] = rows[name]
    return out

