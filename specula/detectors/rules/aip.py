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
  the event added (lines 6-11); the original stays.
* **Role passes.** A batch is processed one element at a time, the deepest first: the
  events of element ``j`` (in stream order) scan state ``j + 1``, which already holds
  every instance the batch's deeper events made, and fill state ``j``, which only the
  next pass reads. A scan sees only instances older than its event (or as old, under
  ``ties nonstrict``), so this is exactly Alg. 1 event by event in stream order, and the
  events of one pass are independent of each other: one Numba kernel call scans state
  ``j + 1`` for all of them (:mod:`~specula.detectors.rules._aip_kernels`), and what it
  returns is appended to state ``j`` at once.
* Single selection (``last``): the scan stops at the first event that qualifies (Alg. 1,
  line 12); ``first`` takes the oldest one in the window. Parameters are checked on the
  instances (line 5); they are equality constraints, checked by dereferencing the
  event ids into the store's rows of parameter keys (int64 values, or the bits of
  float64 values for a parameter bound to a float attribute; NaN equals nothing).
* Aggregates and negations are computed when a sequence is accepted, from one column
  per aggregate (and per negation) holding the events that match its pattern, pruned
  by its window (sec. 4.3), with the reduction kernel of the CDP engine (sums in
  stream order).
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
  stamp arrives, or :meth:`AIPEngine.flush`. The role passes put events of equal time
  stamp in the states their anchors scan whatever their order; scans then include the
  anchor's time stamp, and an instance never holds one event twice (the anchor is no
  candidate for itself). A held
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

State shedding (partial matches as feature rows, exact drops that replays after a
restore repeat) is in :mod:`~specula.detectors.rules._aip_shed`.

The engine's storage (:mod:`~specula.detectors.rules._aip_tables`), what it plans once
per rule (:mod:`~specula.detectors.rules._aip_plan`), what it computes at acceptance
(:mod:`~specula.detectors.rules._aip_accept`) and the held time stamps
(:mod:`~specula.detectors.rules._aip_ties`) and the kernel that scans a state
(:mod:`~specula.detectors.rules._aip_kernels`) are in modules of their own; this module
drives them, batch by batch.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from specula.detectors.rules import _aip_kernels
from specula.detectors.rules._aip_accept import chosen, column_values
from specula.detectors.rules._aip_plan import (
    Filter,
    Scan,
    ScanCode,
    StoreRows,
    column_spec,
    mentions_of,
    plan_bound,
    plan_columns,
    plan_horizons,
    plan_predicates,
    plan_scans,
    scan_code,
)
from specula.detectors.rules._aip_shed import (
    PartialMatchBlock,
    ShedHook,
    StateSheddingError,
    position,
)
from specula.detectors.rules._aip_tables import Table, restore_tables, snapshot_tables
from specula.detectors.rules._aip_ties import Held
from specula.detectors.rules._cdp_columns import encode
from specula.detectors.rules.ast import Rule
from specula.detectors.rules.detector import check_rule, element_dtype
from specula.detectors.rules.engine import Matches, float_params, predicates_hold
from specula.events import TypeRegistry, fields_of

__all__ = ["AIPEngine", "PartialMatchBlock", "StateSheddingError"]

_PURGE_EVERY = 256  # events between two purges


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
        floats = float_params(rule, registry)
        mentions = tuple(mentions_of(p) for p in chain)
        self._scans = plan_scans(rule, mentions, self._windows, predicates, floats)
        self._deferred = tuple(self._scan_of(k) for k in range(1, n)
                               if self._scan_of(k).deferred)
        self._late = any(predicates.late)
        self._horizons, self._store_horizon = plan_horizons(
            rule, self._windows, ticks_per_second, bool(self._deferred))
        self._bound = plan_bound(rule, mentions)
        self._dtype = element_dtype(rule, registry)
        rows = self._rows = StoreRows()
        # an anchor of element k - 1 that advances nothing leaves a dead end in state k - 1
        self._codes = (None, *(scan_code(self._scan_of(k), rows,
                                         k > 1 and self._scan_of(k - 1).dead_ends)
                               for k in range(1, n)))
        self._fields = fields_of(self._dtype)
        store_spec = (*((name, self._dtype[name], 0) for name in self._fields),
                      *((("_roles", np.dtype(np.int64), 0),) if self._deferred else ()),
                      ("_key", np.dtype(np.int64), max(1, len(rows.keys))))
        self._store = Table(store_spec)
        # key and value tables have at least one row (of zeros) so that they are 2-D
        self._states: list[Table | None] = [None, *(
            Table((("ts", np.dtype(np.int64), 0), ("ids", np.dtype(np.int64), n - k),
                   ("keys", np.dtype(np.int64), max(1, len(self._code(k).state_keys))),
                   ("values", np.dtype(np.float64), max(1, len(self._code(k).state_values))),
                   ("cls", np.dtype(np.int64), 0)))  # the class a shedder gave (-1: none)
            for k in range(1, n))]
        self._held = None if rule.ties == "strict" else Held(np.dtype(
            [("type", registry.dtype(rule.input_types)["type"]),
             *((name, self._dtype[name]) for name in self._fields)]))
        self._columns = plan_columns(rule, mentions, self._offsets, ticks_per_second, floats)
        self._column_tables = [Table(column_spec(c)) for c in self._columns]
        self._column_filters = tuple(Filter.of(c.pattern, registry) for c in self._columns)
        needed = {a for p in (*chain, *(c.pattern for c in self._columns))
                  for a in (c.attr for c in p.constraints)}
        self._needed = needed | {c.value for c in self._columns if c.value} | set(self._fields)
        self._checked: set[np.dtype] = set()
        self._now: int | None = None
        self._unpurged = 0  # events since the last purge
        self.work = 0  # candidates scanned and instances made: the work shedding measures
        window = rule.within.ticks(ticks_per_second) if rule.within else self._offsets[-1]
        self._shed = ShedHook(rule, registry, self._dtype, window)  # state shedding
        self._no_match = (np.zeros(0, np.int64), tuple(np.zeros(0, self._dtype) for _ in chain),
                          np.zeros((0, len(rule.aggregates))),
                          np.zeros((0, len(rule.negations)), np.int64))

    # States are numbered 1..n-1; entry 0 of these (the initial state) holds nothing.

    def _scan_of(self, k: int) -> Scan:
        scan = self._scans[k]
        assert scan is not None, k
        return scan

    def _code(self, k: int) -> ScanCode:
        code = self._codes[k]
        assert code is not None, k
        return code

    def _state(self, k: int) -> Table:
        table = self._states[k]
        assert table is not None, k
        return table

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
            return self._empty()
        return self._shed.process(self, events)

    def _process(self, events: np.ndarray) -> Matches:
        """:meth:`process` of a batch no earlier drop lies inside."""
        if events.dtype not in self._checked:
            self._check_fields(events)
        of_type: dict[int, np.ndarray] = {}
        self._fill_columns(events, of_type)
        roles = [f.mask(events, of_type) for f in self._filters]
        if self._held is None:
            matches = self._evaluate(events, roles)
        else:  # ties nonstrict: evaluate the complete time stamps, hold the newest
            rows, causes = self._held.take(events, _any(roles).nonzero()[0])
            matches = self._evaluate(rows, self._roles(rows), causes)
        self._now = int(events["ts"][-1])
        self._shed.after(self._store, self._states, position(events))
        self._unpurged += len(events)
        if self._unpurged >= _PURGE_EVERY:
            self._purge()
        return matches

    def _evaluate(self, rows: np.ndarray, roles: list[np.ndarray],
                  causes: np.ndarray | None = None) -> Matches:
        """Alg. 1 for the ``rows`` (``roles[j]``: those that match element ``j``), in role
        passes, the deepest element first; the matches of terminator ``rows[r]`` get the
        index ``causes[r]`` (``r`` by default)."""
        n = self._n
        ids = self._fill_store(rows, roles)
        local = deeper = None
        for j in range(n - 1, -1, -1):
            anchors = roles[j].nonzero()[0]
            if not len(anchors):
                continue
            if j == n - 1 and j > 0:  # the deepest element: an instance per event
                self._append(j, rows, anchors, np.arange(len(anchors)), ids[anchors][None, :])
            elif n == 1:
                local, deeper = anchors, np.empty((0, len(anchors)), np.int64)
            else:
                owner, made = self._scan(j + 1, rows, anchors, ids)
                if j:
                    self._append(j, rows, anchors, owner, made)
                else:
                    local, deeper = anchors[owner], made[1:]
        if local is None or deeper is None or not len(local):  # set together
            return self._empty()
        return self._matches(rows, local, deeper, ids, causes)

    def _check_fields(self, events: np.ndarray) -> None:
        missing = self._needed - set(events.dtype.names or ())
        if missing:
            raise ValueError(f"rule {self.rule.name}: the batch lacks fields {sorted(missing)}; "
                             f"build batches with registry.dtype({list(self.rule.input_types)})")
        self._checked.add(events.dtype)

    def _roles(self, rows: np.ndarray) -> list[np.ndarray]:
        """Per chain element, which ``rows`` match it."""
        of_type: dict[int, np.ndarray] = {}
        return [f.mask(rows, of_type) for f in self._filters]

    def _fill_columns(self, events: np.ndarray, of_type: dict[int, np.ndarray]) -> None:
        for column, table, test in zip(self._columns, self._column_tables,
                                       self._column_filters, strict=True):
            rows = test.mask(events, of_type).nonzero()[0]
            if not len(rows):
                continue
            table.reserve(len(rows))
            live = slice(table.n, table.n + len(rows))
            table.cols["ts"][live] = events["ts"][rows]
            table.cols["_num"][0, live] = events[column.value][rows] if column.value else 0
            keys = table.cols["_key"]
            keys[:, live] = 0  # the row of a column without parameters
            for c, (attr, _, _, is_float) in enumerate(column.params):
                keys[c, live] = encode(events[attr][rows], is_float)
            table.n = live.stop

    def _fill_store(self, events: np.ndarray, roles: list[np.ndarray]) -> np.ndarray:
        """Append the events of non-terminator elements; return each row's id (or -1)."""
        ids = np.full(len(events), -1, np.int64)
        if self._n == 1:
            return ids
        stored = _any(roles[1:]).nonzero()[0]
        if not len(stored):
            return ids
        store = self._store
        store.reserve(len(stored))
        live = slice(store.n, store.n + len(stored))
        cols = store.cols
        for name in self._fields:
            cols[name][live] = events[name][stored]
        if self._deferred:  # which elements each event matches, to check choices again
            cols["_roles"][live] = sum(
                roles[j][stored].astype(np.int64) << j for j in range(1, self._n))
        _fill_keys(cols["_key"], live, self._rows.keys, events, stored)
        ids[stored] = np.arange(store.base + live.start, store.base + live.stop)
        store.n = live.stop
        return ids

    def _scan(self, k: int, rows: np.ndarray, anchors: np.ndarray, ids: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
        """State ``k`` scanned for the ``anchors`` (rows of element ``k - 1``): the anchor
        of each new instance of state ``k - 1`` and the instance's ids."""
        code, table, store = self._code(k), self._state(k), self._store
        keys = np.empty((len(anchors), len(code.anchor_keys)), np.int64)
        for c, (attr, is_float) in enumerate(code.anchor_keys):
            keys[:, c] = encode(rows[attr][anchors], is_float)
        values = np.empty((len(anchors), len(code.anchor_values)), np.float64)
        for c, attr in enumerate(code.anchor_values):
            values[:, c] = rows[attr][anchors]
        cols = table.cols
        owner, made, table.start, visits = _aip_kernels.scan(
            cols["ts"], cols["ids"], cols["keys"], cols["values"], table.start, table.n,
            rows["ts"][anchors], ids[anchors], keys, values, store.cols["_key"], store.base,
            code.cfg, code.checks, code.nan, code.deeper, code.own, code.ops, code.consts)
        self.work += visits + len(owner)
        return owner, made

    def _append(self, k: int, rows: np.ndarray, anchors: np.ndarray, owner: np.ndarray,
                ids: np.ndarray) -> None:
        """Append instances to state ``k``: instance ``i`` has the ids ``ids[:, i]`` and
        its event of element ``k`` is ``rows[anchors[owner[i]]]``."""
        table, code = self._state(k), self._code(k)
        drop, classes = self._shed.unborn(self._store, k, ids, rows["ts"][anchors[owner]])
        if drop is not None:  # dropped at creation (see _aip_shed)
            owner, ids = owner[~drop], ids[:, ~drop]
            classes = None if classes is None else classes[~drop]
        events = anchors[owner]
        table.reserve(len(events))
        live = slice(table.n, table.n + len(events))
        cols = table.cols
        cols["ts"][live] = rows["ts"][events]
        cols["ids"][:, live] = ids
        _fill_keys(cols["keys"], live, code.state_keys, rows, events)
        cols["values"][:, live] = 0
        for r, attr in enumerate(code.state_values):
            cols["values"][r, live] = rows[attr][events]
        cols["cls"][live] = -1 if classes is None else classes
        table.n = live.stop
        if self._shed.created is not None:
            self._shed.made(self._store, k, ids, cols["ts"][live])

    def _empty(self) -> Matches:
        return Matches(*self._no_match)

    # ------------------------------------------------------------------ detection

    def _matches(self, events: np.ndarray, local: np.ndarray, deeper: np.ndarray,
                 ids: np.ndarray, causes: np.ndarray | None = None) -> Matches:
        """Matches of the accepted sequences: inside the pattern window, with the late
        predicates and deferred choices checked, and their aggregates and negations
        (sec. 4.3). ``local`` holds the terminator rows, ``deeper[k - 1]`` the store ids
        of element ``k``; a terminator's matches get ``causes[row]`` as index (``row``
        itself by default)."""
        rule = self.rule
        store = self._store
        early = self._late and not self._deferred  # most candidates fail them: first
        if early:
            hold = self._late_hold(events, local, deeper)
            if not hold.all():
                local, deeper = local[hold], deeper[:, hold]
                if not len(local):
                    return self._empty()
        elements = [_as_elements(events[local], self._dtype)]
        for k in range(1, self._n):
            refs = deeper[k - 1] - store.base
            rows = np.zeros(len(refs), self._dtype)
            for name in self._fields:
                rows[name] = store.cols[name][refs]
            elements.append(rows)
        n_agg, count = len(rule.aggregates), len(local)
        # the row number stands in for the terminator until the filters have run
        matches = Matches(np.arange(count), tuple(elements), np.zeros((count, n_agg)),
                          np.zeros((count, len(rule.negations)), np.int64))
        if not early:
            matches = matches.within(rule, self.ticks_per_second)
        if self._deferred:  # and the late predicates with them (see _accepted)
            pick = matches.terminator
            matches = matches.select(self._accepted(
                matches, np.vstack([ids[local[pick]], deeper[:, pick]]).T))
        if self._shed.created is not None and len(matches):
            self._shed.created.append(self._shed.complete(matches.elements, 0))
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

    def _late_hold(self, events: np.ndarray, local: np.ndarray, deeper: np.ndarray
                   ) -> np.ndarray:
        """Which sequences (terminator rows ``local``, store ids ``deeper``) lie inside
        the pattern window (:meth:`Matches.within`) and hold the predicates that read
        elements before their anchor, read from the batch and the store as the
        matches' rows would hold them, before those rows are made (checks per row, so
        their order does not matter)."""
        base = self._store.base

        def value(element: int, attr: str) -> np.ndarray:
            if element == 0:
                return events[attr][local].astype(self._dtype[attr], copy=False)
            return self._store.cols[attr][deeper[element - 1] - base]

        keep = np.ones(len(local), bool)
        if self.rule.within is not None:
            oldest = value(self._n - 1, "ts")
            keep &= oldest >= value(0, "ts") - self.rule.within.ticks(self.ticks_per_second)
        for late in self._predicates.late:
            if late:
                keep &= predicates_hold(late, value)
        return keep

    def _accepted(self, matches: Matches, ids: np.ndarray) -> np.ndarray:
        """Which sequences hold the predicates that read elements before their anchor
        (exact for ``each``) and chose what deferred steps choose (``ids``: the store
        ids of the elements, -1 for a terminator that is not stored)."""
        elements = list(matches.elements)
        keep = np.ones(len(matches), bool)
        for k, late in enumerate(self._predicates.late):
            if late and not self._scan_of(k).deferred:  # late[0] is empty
                keep &= predicates_hold(late, lambda element, attr: elements[element][attr])
        for scan in self._deferred:
            predicates = self._predicates.near[scan.k] + self._predicates.late[scan.k]
            keep &= chosen(scan, self._store, self._bound[scan.k], predicates, elements, ids)
        return keep

    # ------------------------------------------------------------------ state

    def automata(self) -> list[int]:
        """Automata per state: entry ``k >= 1`` counts the instances that saw element
        ``k`` last (dead ends included); entry 0 is the initial automaton."""
        self._purge()
        return [1, *(len(self._state(k)) for k in range(1, self._n))]

    def stored(self) -> dict[str, int | list[int]]:
        """Events kept: in the rule's event store, and per aggregate/negation column."""
        self._purge()
        return {"events": len(self._store), "columns": [len(t) for t in self._column_tables]}

    def _purge(self) -> None:
        """Delete what no future event can use: instances whose next step's window has
        passed, and stored events older than the rule's longest horizon.

        It runs every few hundred events and before the state is counted: until then
        the rows stay where every search bounds them by time stamp, so when it runs
        changes no result (snapshots leave them out by their horizon anyway)."""
        self._unpurged = 0
        now = self._now
        if now is None:
            return
        for k in range(1, self._n):
            table = self._state(k)
            table.start = table.cut(now - self._horizons[k])
        self._store.start = self._store.cut(now - self._store_horizon)
        for column, table in zip(self._columns, self._column_tables, strict=True):
            table.start = table.cut(now - column.horizon)

    def _tables(self) -> list[tuple[Table, int]]:
        """Every table with its horizon (ticks before the newest event)."""
        tables = [(self._store, self._store_horizon)]
        tables += [(self._state(k), self._horizons[k]) for k in range(1, self._n)]
        tables += [(t, c.horizon) for c, t in zip(self._columns, self._column_tables,
                                                  strict=True)]
        if self._held is not None:
            tables.append((self._held.table, 0))  # the newest time stamp's events
        return tables

    def flush(self) -> Matches:
        """End of stream: the matches of the terminators held back under ``ties
        nonstrict`` (the newest time stamp's), each with terminator index 0."""
        if self._held is None or not len(self._held):
            return self._empty()
        rows = self._held.flush()
        return self._evaluate(rows, self._roles(rows), np.zeros(len(rows), np.int64))

    def snapshot(self) -> bytes:
        """The live state as bytes: equal bytes for equal states, however the stream
        was cut into batches (expired rows that lazy deletion keeps are left out); the
        position of the last event given closes it."""
        return snapshot_tables(self._tables(), self._now) + self._shed.trailer()

    def restore(self, state: bytes) -> None:
        """Return to a state produced by :meth:`snapshot`; the partial matches dropped
        at or before its position are dropped again (see :mod:`._aip_shed`)."""
        self._now = restore_tables(state[:-24], self._tables())
        self._shed.restored(self._store, self._states, state[-24:])

    def partial_matches(self, offset: int = 0) -> list[PartialMatchBlock]:
        """The live partial matches of states ``1..n-1`` (ids ``offset + k``) as blocks."""
        self._purge()
        return [self._shed.listing(self._store, self._states[k], k, offset)
                for k in range(1, self._n)]

    def drop_partial_matches(self, k: int, rows: np.ndarray) -> int:
        """Drop the partial matches of state ``k`` at ``rows`` of its block in the last
        :meth:`partial_matches`, now and in every replay; return how many. The listing
        must be current (no events, restore or drop of state ``k`` since):
        :class:`~._aip_shed.StateSheddingError` otherwise, and for a state read by
        ``last``/``first``."""
        self._shed.check(k, self._n)
        return self._shed.drop_rows(self._states[k], k, rows)

    def drop_new_partial_matches(self, k: int, test: Callable[[np.ndarray], np.ndarray] | None
                                 ) -> None:
        """From now on drop the partial matches of state ``k`` whose feature rows (a
        :class:`PartialMatchBlock`'s ``features``) ``test`` marks as they are made, now
        and in every replay (None: stop); the caller counts what ``test`` marks.
        :class:`~._aip_shed.StateSheddingError` for a state read by ``last``/``first``."""
        self._shed.check(k, self._n)
        self._shed.drop_new(k, test)

    def classify_partial_matches(self, k: int,
                                 classifier: Callable[[np.ndarray], np.ndarray] | None
                                 ) -> None:
        """From now on keep with every partial match of state ``k`` its class,
        ``classifier`` of its feature row, given once as it is made (the live ones at
        once); None: stop. A classified state's birth test (see
        :meth:`drop_new_partial_matches`) is given the classes."""
        if not 1 <= k < self._n:
            self._shed.check(k, self._n)
        self._purge()
        self._shed.classify(self._store, self._state(k), k, classifier)

    def class_counts(self, k: int, size: int, slices: int, slice_len: float) -> np.ndarray:
        """``(size, slices)``: the live partial matches of the classified state ``k`` per
        class and time slice (their first event's age at the last event given, in
        ``slice_len`` ticks)."""
        if self._unpurged:
            self._purge()
        return self._shed.class_counts(self._store, self._state(k), size, slices, slice_len)

    def drop_classes(self, k: int, shed: np.ndarray, slice_len: float) -> int:
        """Drop the live partial matches of the classified state ``k`` whose (class,
        time slice) ``shed`` marks (``(classes, slices)``), now and in every replay;
        return how many. :class:`~._aip_shed.StateSheddingError` for a state read by
        ``last``/``first``."""
        self._shed.check(k, self._n)
        if self._unpurged:
            self._purge()
        return self._shed.drop_classes(self._store, self._state(k), k, shed, slice_len)

    def input_rows(self, events: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Per element ``k`` (state ``k``; 0: terminators), the rows of ``events`` it takes."""
        of_type: dict[int, np.ndarray] = {}
        return [(k, self._filters[k].mask(events, of_type).nonzero()[0]) for k in range(self._n)]

    def watch(self, on: bool) -> list[PartialMatchBlock]:
        """Start or stop recording the partial and complete matches made (blocks);
        return and forget what was recorded so far."""
        return self._shed.watch(on)


def _as_elements(rows: np.ndarray, dtype: np.dtype) -> np.ndarray:
    out = np.zeros(len(rows), dtype)
    for name in fields_of(dtype):
        out[name] = rows[name]
    return out


def _any(masks: list[np.ndarray]) -> np.ndarray:
    """Rows where any of ``masks`` holds."""
    out = masks[0]
    for mask in masks[1:]:
        out = out | mask
    return out


def _fill_keys(keys: np.ndarray, live: slice, attrs: tuple[tuple[str, bool], ...] | list,
               events: np.ndarray, rows: np.ndarray) -> None:
    """Fill columns ``live`` of the key rows ``keys`` with the keys of ``attrs``
    (attribute, float) of ``events[rows]``; rows beyond them are zeros."""
    keys[:, live] = 0
    for r, (attr, is_float) in enumerate(attrs):
        keys[r, live] = encode(events[attr][rows], is_float)
