"""State shedding on the AIP engine: its partial matches as feature rows, and dropping
a chosen subset of them exactly (the hybrid shedding paper, sec. III-C, rho_S).

What a partial match is here
----------------------------
State ``k >= 1`` of a rule with ``n`` chain elements holds instances that have seen
elements ``n-1, ..., k`` (the earliest event in time first): the paper's partial
matches. Dead ends (rows that only block a ``last``/``first`` choice) are not partial
matches and are never shown or dropped. A listing describes the live ones of every
state as a :class:`PartialMatchBlock`: per row the time stamps of its first event
(which opens its window) and of its newest one, a 64-bit identity (a hash of its
events' ``(ts, producer, seq)``) and its *features*, the values of the attributes the
rule reads of each of its events, element ``n-1`` first. The features of a state are
therefore a prefix of those of the states below it: an instance of state ``k`` carries
its ancestor in state ``k + 1`` in its first columns, which is what the hybrid cost
model's lineage counts read.

Which states can shed
---------------------
State ``k`` is read by the scan of element ``k - 1`` with the selection of element
``k``'s step. Under ``each`` every instance advances on its own, so removing one only
removes the matches through it: the rule stays monotonic in its partial matches (the
paper's requirement). Under ``last``/``first`` an instance also *blocks* older
candidates; removing it would let the scan select an older one and produce a match the
unshed run does not, so such states refuse to shed (:class:`StateSheddingError`). The
same holds for steps whose choice is deferred to acceptance (those are never ``each``).

Drops, snapshots and speculation
--------------------------------
A drop happens between two batches, at the engine's *position* (the ``(ts, producer <<
40 | seq)`` of the last event it was given). It is not part of the state a snapshot
records: the engine keeps a *tombstone* per drop (position, state, the dropped rows'
events) beside its snapshots. After a restore, the tombstones at or before the restored position are
applied again at once, and those after it when a batch crosses their position (the
batch is split there). So the ordering unit's replay after a late event reproduces
the drops where they were made in stream order: a dropped partial match never comes
back, and what it produced before its drop is produced again, so a replay changes
only what the late event changes. A partial match the replay makes anew (through the
late event) is not dropped: it was never chosen. Tombstones are forgotten once the
newest time stamp seen is ``window + retention`` past them (``retention``: the
engine's ``shed_retention``, by default ten windows); a restore further back than that
would revive the dropped matches.

Drops at creation
-----------------
A shedder may also give a state a *test* (:meth:`ShedHook.drop_new`): the instances
the engine is about to add to that state are put as a block's feature rows to the
test, and those it marks are dropped before they are added (so no later event of the
same batch extends them): the hybrid paper's rho_S acting on partial matches of the
shedding set as they form, between two sets. Each such drop keeps a *birth tombstone*
(the dropped rows' event fields). A replay cannot put the instances to the test again
(the shedder's set may have changed since): an instance no newer than the newest time
stamp processed is dropped at creation exactly when a birth tombstone holds its
identity, and the test sees only instances newer than that. The test's caller counts
what it marks (no partial match goes uncounted); a replay's drops repeat the counted
ones and are not counted again.

Classes
-------
A shedder may give a state a *classifier* (:meth:`ShedHook.classify`): every instance
the engine adds to that state (and every live one when it is given) is put, as its
feature row, to the classifier once, and the class it returns is kept with it in the
state's table (the hybrid paper's classification of a partial match immediately after
its creation, which the paper's engine keeps as an index per class). The shedder then
counts the live partial matches per (class, time slice) and drops those of chosen
(class, slice) pairs without listing them (:meth:`ShedHook.class_counts`,
:meth:`ShedHook.drop_classes`); a drop by class keeps the same tombstone as a drop by
rows. A classified state's birth test is given the new instances' classes instead of
their feature rows. Instances without a class (made before a classifier was given and
restored from a snapshot since) are classified when a restore brings them back.

A drop names the rows of the state's last listing (positions, not identities): the
listing holds until the engine is given events, restored, or drops from that state,
and a drop by a stale listing is refused. Only a replay needs identities: a tombstone
keeps the dropped rows' event fields and hashes them when a replay first asks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from specula.detectors.rules.ast import Rule
from specula.detectors.rules.engine import order_key
from specula.events import TypeRegistry, distinct, fields_of
from specula.events.hashing import event_ids, fold64

__all__ = ["Dropped", "PartialMatchBlock", "ShedHook", "StateSheddingError", "Tombstones"]

_CORE = ("ts", "key", "producer", "seq")
#: The fields that name one event (:func:`~specula.events.hashing.event_ids`)
_IDENTITY = ("ts", "producer", "seq")


class StateSheddingError(ValueError):
    """State shedding asked of a state (or an engine) that cannot shed it exactly."""


@dataclass
class PartialMatchBlock:
    """The partial matches of one state, one row each (see the module).

    ``state`` is the id the detector gives the state (an engine's element ``k`` plus its
    offset among the detector's engines); ``names`` label the ``features`` columns
    (``element.attr``, element ``n-1`` first), ``own`` are the columns of the newest
    event (element ``k``); ``window`` is how long after ``first_ts`` a partial match can
    still complete (ticks). ``eids`` (the identities of the events, in the order of the
    features) and ``keys`` (the identity of each partial match, ``fold64(eids)``) are
    computed when first read. A block of *complete* matches (``element == 0``) carries
    every element.
    """

    state: int
    element: int
    names: tuple[str, ...]
    own: tuple[int, ...]
    features: np.ndarray
    first_ts: np.ndarray
    last_ts: np.ndarray
    window: int
    sheddable: bool
    #: per event of a row, element n-1 first: its identity fields (ts, producer, seq)
    #: and the attributes the rule reads
    rows: list = field(repr=False, default_factory=list)

    def __len__(self) -> int:
        return len(self.first_ts)

    @cached_property
    def eids(self) -> np.ndarray:
        """``(rows, events)`` identities of the events, in feature order."""
        return _eids(self.rows, len(self))

    @cached_property
    def keys(self) -> np.ndarray:
        """The identity of each partial match (its events' identities folded)."""
        return fold64(self.eids)


def _eids(rows: list, m: int) -> np.ndarray:
    """``(m, len(rows))`` identities of the events of ``rows`` (per element, its columns)."""
    if not rows:
        return np.zeros((m, 0), np.uint64)
    return np.stack([event_ids(r) for r in rows], axis=1)


def element_attrs(rule: Rule, registry: TypeRegistry,
                  dtype: np.dtype) -> tuple[tuple[str, ...], ...]:
    """Per chain element, the non-core attributes of the engine's rows its type has."""
    out = []
    for p in rule.chain:
        fields = registry[p.type].field_names
        out.append(tuple(a for a in fields_of(dtype) if a not in _CORE and a in fields))
    return tuple(out)


def position(events: np.ndarray) -> tuple[int, int]:
    """The stream position of the last event of a non-empty batch."""
    return int(events["ts"][-1]), int(order_key(events[-1:])[0])


class Dropped:
    """The partial matches of one drop: their events' identity fields (per element,
    element ``n-1`` first), hashed into identities (:attr:`keys`, sorted) only when a
    replay asks."""

    def __init__(self, fields: list[dict[str, np.ndarray]], count: int) -> None:
        self.fields = fields
        self.count = count

    @classmethod
    def of(cls, block: PartialMatchBlock, rows: np.ndarray) -> Dropped:
        """The rows ``rows`` of ``block``."""
        return cls([{f: r[f][rows] for f in _IDENTITY} for r in block.rows], len(rows))

    def __len__(self) -> int:
        return self.count

    @cached_property
    def keys(self) -> np.ndarray:
        return distinct(fold64(_eids(self.fields, self.count)))


class Tombstones:
    """The drops an engine made: ``(ts, order, state k, Dropped)`` each, and the drops
    at creation (``births``: ``(ts, state k, Dropped)``, ``ts`` the newest instance's)."""

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.entries: list[tuple[int, int, int, Dropped]] = []
        self.births: list[tuple[int, int, Dropped]] = []
        self._born: dict[int, np.ndarray] = {}  # state -> sorted identities of births
        self.newest = -(2**63)  # the newest time stamp ever processed (not restored)

    def add_birth(self, ts: int, k: int, dropped: Dropped) -> None:
        if len(dropped):
            self.births.append((ts, k, dropped))
            self._born.pop(k, None)

    def born(self, k: int) -> np.ndarray:
        """The identities (sorted) of the instances of state ``k`` dropped at creation."""
        if k not in self._born:
            keys = [d.keys for _, j, d in self.births if j == k]
            self._born[k] = distinct(np.concatenate(keys)) if keys else np.zeros(0, np.uint64)
        return self._born[k]

    def add(self, pos: tuple[int, int], k: int, dropped: Dropped) -> None:
        if len(dropped):
            self.entries.append((pos[0], pos[1], k, dropped))

    def after(self, pos: tuple[int, int] | None) -> list[tuple[int, int]]:
        """Positions of the drops after ``pos`` (all of them when None), ascending."""
        return sorted({(t, o) for t, o, _, _ in self.entries
                       if pos is None or (t, o) > pos})

    def due(self, lo: tuple[int, int] | None, hi: tuple[int, int]
            ) -> list[tuple[int, np.ndarray]]:
        """``(k, identities)`` of the drops in ``(lo, hi]``."""
        return [(k, d.keys) for t, o, k, d in self.entries
                if (t, o) <= hi and (lo is None or (t, o) > lo)]

    def forget(self, now: int, window: int) -> None:
        """Note ``now`` as processed; forget drops far enough behind the newest one."""
        self.newest = max(self.newest, now)
        horizon = self.newest - window - self.retention
        if self.entries and self.entries[0][0] < horizon:
            self.entries = [e for e in self.entries if e[0] >= horizon]
        if self.births and self.births[0][0] < horizon:
            self.births = [b for b in self.births if b[0] >= horizon]
            self._born.clear()


def _member(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """``np.isin(values, keys)`` (``keys`` sorted): a binary search of each value."""
    if not len(keys):
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(keys, values), len(keys) - 1)
    return keys[at] == values


def split_points(events: np.ndarray, pending: list[tuple[int, int]]) -> list[int]:
    """Row counts after which the drops at ``pending`` positions take effect."""
    ts, order = events["ts"], order_key(events)
    cuts = []
    for t, o in pending:
        cut = int(np.searchsorted(ts, t, "left"))
        same = slice(cut, int(np.searchsorted(ts, t, "right")))
        cut += int(np.count_nonzero(order[same] <= o))
        if 0 < cut < len(events):
            cuts.append(cut)
    return sorted(set(cuts))


class ShedHook:
    """What an :class:`~specula.detectors.rules.aip.AIPEngine` needs for state shedding:
    the attributes of its elements, its tombstones, its position, what it watches."""

    def __init__(self, rule: Rule, registry: TypeRegistry, dtype: np.dtype,
                 window: int) -> None:
        self.rule = rule
        self.attrs = element_attrs(rule, registry, dtype)
        self.labels = tuple(p.alias or p.type for p in rule.chain)
        self.window = window
        self.tombs = Tombstones(10 * window)
        self.pos: tuple[int, int] | None = None   # the last event given, not restored
        self.created: list[PartialMatchBlock] | None = None  # watched, when watching
        # per state, its last listing while it holds: the table rows (after the
        # table's start) of the block's rows, and the block (see listing)
        self._listed: dict[int, tuple[np.ndarray, PartialMatchBlock]] = {}
        # state k sheds only when element k's step takes each candidate (see the module)
        self.sheddable = (False, *(s.selection == "each" for s in rule.steps))
        # state k -> the test its new instances are put to (see the module)
        self.tests: dict[int, Callable[[np.ndarray], np.ndarray]] = {}
        # state k -> the classifier of its instances (see the module)
        self.classifiers: dict[int, Callable[[np.ndarray], np.ndarray]] = {}

    def classify(self, store, table, k: int,
                 classifier: Callable[[np.ndarray], np.ndarray] | None) -> None:
        """From now on keep ``classifier``'s class with every instance of state ``k``
        (``table``), the live ones included (None: stop; the classes kept stay)."""
        if classifier is None:
            self.classifiers.pop(k, None)
            return
        self.classifiers[k] = classifier
        self._classify_live(store, table, k, everyone=True)

    def _classify_live(self, store, table, k: int, everyone: bool) -> None:
        """Classify the live instances of state ``k`` (``everyone``) or those without a
        class."""
        ids, _, at = self.live(table)
        cls = table.cols["cls"][table.start:table.n]
        if not everyone:
            todo = cls[at] < 0
            ids, at = ids[:, todo], at[todo]
        if len(at):
            cls[at] = self.classifiers[k](self.features(store, k, ids))

    def features(self, store, k: int, ids: np.ndarray) -> np.ndarray:
        """The feature rows of state ``k``'s instances with store ids ``ids`` (a
        :class:`PartialMatchBlock`'s ``features``, without the block)."""
        refs, cols, n = ids - store.base, store.cols, len(self.rule.chain)
        names, _, where = self._layouts[k]
        out = np.empty((ids.shape[1], len(names)))
        for c, (r, a) in enumerate(where):  # row r: element n - 1 - r
            out[:, c] = cols[a][refs[n - 1 - r - k]]
        return out

    def _identities(self, store, k: int, ids: np.ndarray) -> Dropped:
        """The drop of state ``k``'s instances with store ids ``ids``."""
        refs, cols = ids - store.base, store.cols
        return Dropped([{f: cols[f][refs[e - k]] for f in _IDENTITY}
                        for e in range(len(self.rule.chain) - 1, k - 1, -1)], ids.shape[1])

    def _slices(self, store, ids: np.ndarray, slices: int, slice_len: float) -> np.ndarray:
        """The time slice of each instance (store ids ``ids``): the age of its first
        event at the engine's position, in ``slice_len`` ticks, at most ``slices - 1``."""
        if slices <= 1 or self.pos is None:
            return np.zeros(ids.shape[1], np.int64)
        age = self.pos[0] - store.cols["ts"][ids[-1] - store.base]  # element n - 1
        return np.clip(age // slice_len, 0, slices - 1).astype(np.int64)

    def class_counts(self, store, table, size: int, slices: int, slice_len: float
                     ) -> np.ndarray:
        """``(size, slices)``: the live instances of a classified state (``table``) per
        class and time slice (see :meth:`_slices`); those without a class are left out."""
        ids, _, at = self.live(table)
        cls = table.cols["cls"][table.start:table.n][at]
        known = cls >= 0
        cell = cls[known] * slices + self._slices(store, ids[:, known], slices, slice_len)
        return np.bincount(cell, minlength=size * slices).reshape(size, slices)

    def drop_classes(self, store, table, k: int, shed: np.ndarray, slice_len: float) -> int:
        """Delete the live instances of state ``k`` (``table``) whose (class, time slice)
        ``shed`` marks (``(classes, slices)``), with a tombstone at the engine's
        position, as :meth:`drop_rows` does; return how many."""
        ids, _, at = self.live(table)
        cls = table.cols["cls"][table.start:table.n][at]
        s = self._slices(store, ids, shed.shape[1], slice_len)
        marked = (cls >= 0) & shed[np.maximum(cls, 0), s]
        if not marked.any():
            return 0
        # the tombstone first: ``ids`` may be a view of the rows that keep() moves
        self.tombs.add(self.pos or (-(2**63), -1), k, self._identities(store, k, ids[:, marked]))
        self._listed.pop(k, None)  # the table's rows move
        hit = np.zeros(table.n - table.start, bool)
        hit[at[marked]] = True
        table.keep(~hit)
        return int(np.count_nonzero(marked))

    def drop_new(self, k: int, test: Callable[[np.ndarray], np.ndarray] | None) -> None:
        """From now on drop the new instances of state ``k`` whose feature rows
        ``test`` marks (None: drop none at creation); see the module."""
        if test is None:
            self.tests.pop(k, None)
        else:
            self.tests[k] = test

    def unborn(self, store, k: int, ids: np.ndarray, ts: np.ndarray
               ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Of the instances about to be added to state ``k`` (store ids ``ids``, newest
        time stamps ``ts``): which are dropped at creation (None: none), and the class
        of each (None: the state has no classifier; -1 for a dead end). New ones (newer
        than every event processed) are dropped by the state's test, replayed ones by
        the birth tombstones (see the module)."""
        test, classifier = self.tests.get(k), self.classifiers.get(k)
        if test is None and classifier is None and not self.tombs.births:
            return None, None
        # a batch newer than every event processed and without dead ends, the usual
        # case, takes the short way
        if not len(ts) or (ts.min() > self.tombs.newest and (len(ids) < 2 or ids[1].min() >= 0)):
            return self._unborn_new(store, k, ids, ts, test, classifier)
        live = ids[1] >= 0 if len(ids) > 1 else np.ones(len(ts), bool)  # no dead end
        classes = None
        if classifier is not None:
            classes = np.full(len(ts), -1, np.int64)
            at = np.flatnonzero(live)
            if len(at):
                classes[at] = classifier(self.features(store, k, ids[:, at]))
        old = ts <= self.tombs.newest
        drop = np.zeros(len(ts), bool)
        if self.tombs.births and old.any():
            drop[old] = _member(self.keys(store, k, ids[:, old]), self.tombs.born(k))
        new = ~old & live
        if test is not None and new.any():
            at = np.flatnonzero(new)
            marked = np.asarray(test(classes[at] if classes is not None
                                     else self.features(store, k, ids[:, at])), bool)
            if marked.any():
                self.tombs.add_birth(int(ts[at].max()), k,
                                     self._identities(store, k, ids[:, at[marked]]))
                drop[at[marked]] = True
        return (drop if drop.any() else None), classes

    def _unborn_new(self, store, k: int, ids: np.ndarray, ts: np.ndarray,
                    test: Callable[[np.ndarray], np.ndarray] | None,
                    classifier: Callable[[np.ndarray], np.ndarray] | None
                    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """:meth:`unborn` of new instances, none a dead end: every one is classified
        and put to the test, none is a replay's."""
        if not len(ts):
            return None, (None if classifier is None else np.zeros(0, np.int64))
        classes = None if classifier is None else \
            np.asarray(classifier(self.features(store, k, ids)), np.int64)
        if test is None:
            return None, classes
        marked = np.asarray(test(classes if classes is not None
                                 else self.features(store, k, ids)), bool)
        if not marked.any():
            return None, classes
        self.tombs.add_birth(int(ts.max()), k, self._identities(store, k, ids[:, marked]))
        return marked, classes

    def block(self, store, k: int, ids: np.ndarray, last_ts: np.ndarray,
              offset: int) -> PartialMatchBlock:
        """The block of state ``k``'s instances with store ids ``ids`` (``(n - k, m)``,
        column ``c`` of a row: element ``k + c``) and newest time stamps ``last_ts``."""
        refs, cols = ids - store.base, store.cols
        rows = [{f: cols[f][refs[e - k]] for f in (*_IDENTITY, *self.attrs[e])}
                for e in range(len(self.rule.chain) - 1, k - 1, -1)]
        return self._block(rows, k, last_ts, offset)

    def keys(self, store, k: int, ids: np.ndarray) -> np.ndarray:
        """The identities of state ``k``'s instances with store ids ``ids``: the
        :attr:`PartialMatchBlock.keys` of their block, without building the block."""
        refs, cols = ids - store.base, store.cols
        rows = [{f: cols[f][refs[e - k]] for f in _IDENTITY}
                for e in range(len(self.rule.chain) - 1, k - 1, -1)]
        return fold64(_eids(rows, ids.shape[1]))

    def complete(self, elements: tuple[np.ndarray, ...], offset: int) -> PartialMatchBlock:
        """The block of complete matches (element 0), from their chosen elements."""
        return self._block(list(elements[::-1]), 0, elements[0]["ts"], offset)

    @cached_property
    def _layouts(self) -> list[tuple[tuple[str, ...], tuple[int, ...], list]]:
        """Per state ``k``: the feature names, the columns of element ``k``'s own, and
        ``(row, attribute)`` of each feature (row 0: element ``n-1``)."""
        n, out = len(self.rule.chain), []
        for k in range(n):
            names: list[str] = []
            own: list[int] = []
            where: list[tuple[int, str]] = []
            for r, e in enumerate(range(n - 1, k - 1, -1)):
                for a in self.attrs[e]:
                    if e == k:
                        own.append(len(names))
                    names.append(f"{self.labels[e]}.{a}")
                    where.append((r, a))
            out.append((tuple(names), tuple(own), where))
        return out

    def _block(self, rows: list, k: int, last_ts: np.ndarray, offset: int
               ) -> PartialMatchBlock:
        names, own, where = self._layouts[k]
        features = np.empty((len(last_ts), len(names)))
        for c, (r, a) in enumerate(where):
            features[:, c] = rows[r][a]
        # copies: ``last_ts`` may be a view of the state's table, which later rows,
        # purges and drops overwrite while the block is still held (a watch record)
        return PartialMatchBlock(
            offset + k, k, names, own, features,
            np.array(rows[0]["ts"], np.int64), np.array(last_ts, np.int64),
            self.window, self.sheddable[k], rows)

    def check(self, k: int, n: int) -> None:
        """:class:`StateSheddingError` unless state ``k`` may shed (see the module)."""
        if not 1 <= k < n:
            raise StateSheddingError(f"rule {self.rule.name}: no state {k}; its partial "
                                     f"matches are in states 1..{n - 1}")
        if not self.sheddable[k]:
            step = self.rule.steps[k - 1]
            raise StateSheddingError(
                f"rule {self.rule.name}: state {k} is read by a '{step.selection}' step "
                f"({self.labels[k]}); dropping its partial matches would let that step "
                "select an older candidate and detect matches the unshed rule does not. "
                "Shed its input instead, or write the step with 'each'")

    def made(self, store, k: int, ids: np.ndarray, ts: np.ndarray) -> None:
        """Record the instances just appended to state ``k`` (dead ends left out)."""
        live = ids[1] >= 0 if len(ids) > 1 else slice(None)
        assert self.created is not None, "made() records what watch() asked for"
        if len(ts):
            self.created.append(self.block(store, k, ids[:, live], ts[live], 0))

    def watch(self, on: bool) -> list[PartialMatchBlock]:
        """Start or stop recording what the engine makes; return what was recorded."""
        made = self.created or []
        self.created = [] if on else None
        return made

    @staticmethod
    def live(table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Store ids (``(n - k, m)``), time stamps and table rows (after the table's
        start) of a state's live partial matches (dead ends left out)."""
        ids = table.cols["ids"][:, table.start:table.n]
        ts = table.cols["ts"][table.start:table.n]
        if len(ids) < 2:
            return ids, ts, np.arange(len(ts))
        at = np.flatnonzero(ids[1] >= 0)
        return ids[:, at], ts[at], at

    def drop_rows(self, table, k: int, rows: np.ndarray) -> int:
        """Delete rows ``rows`` (positions in the block of state ``k``'s last listing,
        ``table`` its state) and keep a tombstone at the engine's position; the
        listing ends. Returns the number of rows deleted. No hashing: the tombstone
        keeps the rows' event fields (:class:`Dropped`)."""
        listed = self._listed.get(k)
        if listed is None:
            raise StateSheddingError(
                f"rule {self.rule.name}: no current listing of state {k} to drop rows of; "
                "list the partial matches (partial_matches()) after the last events, "
                "restore or drop of that state, and drop by the rows of that listing")
        at, block = listed
        rows = distinct(np.asarray(rows, np.int64))
        if len(rows) and (rows[0] < 0 or rows[-1] >= len(block)):
            raise IndexError(f"rule {self.rule.name}: state {k} listed {len(block)} "
                             f"partial matches; rows {rows[0]}..{rows[-1]} asked")
        del self._listed[k]  # the table's rows move
        if len(rows):
            hit = np.zeros(table.n - table.start, bool)
            hit[at[rows]] = True
            table.keep(~hit)
            self.tombs.add(self.pos or (-(2**63), -1), k, Dropped.of(block, rows))
        return len(rows)

    def _drop_again(self, store, table, k: int, keys: np.ndarray) -> int:
        """A replay's drop: delete the live rows of state ``k`` whose identities are in
        ``keys`` (sorted; a tombstone's), hashing the live rows' events."""
        ids, _, at = self.live(table)
        hit = np.zeros(table.n - table.start, bool)
        hit[at] = _member(self.keys(store, k, ids), keys)
        if hit.any():
            table.keep(~hit)
        return int(np.count_nonzero(hit))

    def listing(self, store, table, k: int, offset: int) -> PartialMatchBlock:
        """The block of state ``k``'s live partial matches (``table``); a drop names
        rows of it while it holds (see the module)."""
        ids, ts, at = self.live(table)
        block = self.block(store, k, ids, ts, offset)
        self._listed[k] = (at, block)
        return block

    def after(self, store, states, pos: tuple[int, int] | None) -> None:
        """The engine is at ``pos``: make the drops between its last position and it."""
        self._listed.clear()
        if pos is not None:
            for k, keys in self.tombs.due(self.pos, pos):
                self._drop_again(store, states[k], k, keys)
            self.tombs.forget(pos[0], self.window)
        self.pos = pos

    def trailer(self) -> bytes:
        """The engine's position, as the last 24 bytes of its snapshot."""
        return np.array([self.pos is not None, *(self.pos or (0, 0))], np.int64).tobytes()

    def restored(self, store, states, trailer: bytes) -> None:
        """After a restore to the position in ``trailer``: the drops up to it again."""
        known, t, o = np.frombuffer(trailer, np.int64).tolist()
        self.pos = None
        self._listed.clear()
        self.after(store, states, (t, o) if known else None)
        for k in self.classifiers:  # instances the snapshot holds without a class
            self._classify_live(store, states[k], k, everyone=False)

    def process(self, engine, events: np.ndarray):
        """``engine.process``: a batch that crosses the positions of earlier drops (a
        replay) is split there, so that each drop is made where it was made before."""
        cuts = split_points(events, self.tombs.after(self.pos)) if self.tombs.entries else []
        if not cuts:
            return engine._process(events)
        parts, bounds = [], [0, *cuts, len(events)]
        for lo, hi in itertools.pairwise(bounds):
            part = engine._process(events[lo:hi])
            part.terminator = part.terminator + lo
            parts.append(part)
        first = parts[0]
        return type(first)(np.concatenate([p.terminator for p in parts]),
                           tuple(np.concatenate(e) for e in zip(*(p.elements for p in parts),
                                                                strict=True)),
                           np.concatenate([p.aggregates for p in parts]),
                           np.concatenate([p.negations for p in parts]))
