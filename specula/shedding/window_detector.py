"""eSPICE end to end: the window operator as a detector that sheds inside itself.

:class:`WindowDetector` runs a :class:`~specula.shedding.windows.WindowOperator` (windows
opened by types or every n events, a ``seq`` or ``any`` pattern per window) behind a node's
ordering unit, so it sees its input in time-stamp order, and emits one event per window in
which the pattern matched. It learns UT from its own closed windows and drops (event,
window) pairs when its node is overloaded.

The wiring, and why:

- **Command in, decisions inside.** eSPICE decides per (event, window) pair; only the
  operator knows an event's windows and its positions in them, and only behind the
  ordering unit are those positions exact. So the node is configured with
  ``Shedding(latency_bound_s=..., strategy="detector")``: its inbox keeps every event
  (:class:`~specula.shedding.base.DetectorShedding`) and hands each
  :class:`~specula.shedding.base.DropCommand` of the node's overload detector (eSPICE's
  queue trigger, sec. 3.4) to :meth:`WindowDetector.on_drop_command`, before the batch it
  was issued for goes to the ordering unit. The command holds until the next one, as
  eSPICE's LS keeps ``x`` until told otherwise. Neither object is shared: the runtime
  gives the gate of each instance the detector its unit drives (on Ray both live in the
  instance's actor), so copies, pickles and partitions need no care.
- **Amount.** The command's share δ / R of the input becomes ``x = share · p_size`` events
  per partition, ``p_size = N / rho``, ``rho = ceil(N / (q_max - f q_max))`` from the
  command's ``q_max`` and ``f`` (the CDT is rebuilt only when rho changes; a new ``x``
  costs a threshold search over 101 levels per partition).
- **Training.** The windows the operator closes (with the positions of their complex
  events' constituents) feed a :class:`~specula.shedding.UtilityModel`; every
  ``retrain_every`` windows it rebuilds UT, and the shedder swaps the table in (periodic
  retraining, sec. 3.6). Windows are handed to the model in chunks, so that a model of
  M types by N positions is not rebuilt per batch. A trained model can be given
  (``model=``): the paper trains at a rate below the throughput, then overloads.
- **Before UT exists** a command drops each pair with probability ``share`` (hashed
  uniform numbers of the pair, RI per pair), so the bound holds from the start.
- **Policy.** ``policy="espice"`` (Alg. 2's per-partition thresholds), ``"bl"`` (the
  paper's baseline: a utility per type from its repetitions in the pattern and its
  frequency in windows, uniform sampling per type, nothing learned from matches;
  :meth:`~specula.shedding.TypeUtilityShedder.from_pattern`) or ``"type-rate"`` (each
  type's learned match rate, lowest types first: eSPICE without positions;
  :meth:`~specula.shedding.TypeUtilityShedder.from_model`), all measured on the same path.
- **Snapshots** (speculation) cover the windows only: what is open, the assigner's
  counters. The model, the shedder, the current command and the counters (pairs
  processed, :meth:`work_done`, and dropped, :meth:`pairs_shed`) are the run's, not the
  stream's: a replay after a restore decides with the current command and table, and
  the windows it closes again are counted twice by the model (a statistic, harmless).
  Without a command the output is the pattern's, whatever the batch cuts; with one it
  depends on when commands come, as any shedding does.

The output event (type ``output``, registered with :meth:`WindowDetector.register_output`)
carries the window (its opener's index in the operator's stream), the opener's time stamp
and key, the window's size in events, the constituents' count and a hash of their stream
indices (``match``): a complex event is the pair (window, match), which is how the
benchmarks count false negatives. Its time stamp is that of the event that closed the
window (the last one of a count window, the first at or past the end of a time window).
"""

from __future__ import annotations

import dataclasses
import pickle
import time
from collections.abc import Mapping
from collections.abc import Sequence as Names
from typing import Any

import numpy as np

from specula.detectors import Detector, Emitter
from specula.events import TypeRegistry
from specula.events.hashing import mix64, uniform
from specula.shedding._espice_tables import UtilityModel, partition_count
from specula.shedding.base import DropCommand
from specula.shedding.baselines import TypeUtilityShedder
from specula.shedding.espice import ESpiceShedder
from specula.shedding.windows import (
    AnyOf,
    ClosedWindows,
    Sequence,
    WindowAssigner,
    WindowOperator,
)

__all__ = ["OUTPUT_FIELDS", "POLICIES", "WindowDetector"]

POLICIES = ("espice", "bl", "type-rate")

#: The payload of a window's complex event.
OUTPUT_FIELDS = {"window": "i8", "opener_ts": "i8", "opener_key": "i8", "size": "i4",
                 "constituents": "i4", "match": "i8"}

#: Tag of the per-pair uniform numbers used before UT exists.
_UNTRAINED_TAG = 0x5054
#: Closed windows handed to the model at once.
_TRAIN_CHUNK = 64
_OP_DTYPE = np.dtype([("ts", "i8"), ("type", "i8")])


class WindowDetector(Detector):
    """A window operator with a ``seq``/``any`` pattern that sheds (event, window) pairs.

    Parameters
    ----------
    inputs : sequence of str
        The event types the windows hold (every type that takes a position in them: the
        pattern's, the openers', and the others that are there).
    pattern : Sequence or AnyOf
        The pattern, its ``types`` given as names among ``inputs``.
    size : int
        ``ws``: events (``unit="count"``) or time-stamp ticks (``unit="time"``).
    output : str
        The type of the complex events (register it with :meth:`register_output`).
    openers : sequence of str, optional
        Types whose events open a window; or ``slide``: a window every ``slide`` events.
    unit : {"count", "time"}
    reference_size : int, optional
        N, the positions of UT: the window size in events (count windows: ``size``; time
        windows: the mean number of events a window holds; required for them).
    policy : {"espice", "bl", "type-rate"}
        eSPICE's thresholds per partition, the paper's baseline BL, or the learned
        per-type baseline (see the module).
    model : UtilityModel, optional
        A trained model to start from (with ``len(inputs)`` types and N positions); by
        default an empty one. Its ``retrain_every`` sets the retraining period.
    retrain_every : int
        Windows between rebuilds of UT when no ``model`` is given.
    bin_size : int
        UT's bin size when no ``model`` is given.
    seed : int
        Seed of BL's and the untrained fallback's hashed uniform numbers.
    seconds_per_pair : float
        Wall time to spend per processed pair (sleeping): a stand-in for an expensive
        pattern match, to overload a node on Ray in tests. 0 in real use.
    shed_as : mapping of str to str, optional
        The class the shedder sees for an input type (default: the type itself); UT (or
        BL's type utility) has one row per class. Where a type encodes a predicate the
        operator evaluates while matching (a "defend" reading of a player, against the
        same player's other readings), map the types of one source to one class: the
        shedder decides before processing and sees no more than the event's source.

    Examples
    --------
    Windows of 4 events opened by S, matching D1 then D2 (not told to shed):

    >>> from specula.events import TypeRegistry
    >>> from specula.shedding import Sequence
    >>> from specula.testing import feed
    >>> reg = TypeRegistry()
    >>> for t in ("S", "D1", "D2"):
    ...     _ = reg.register(t)
    >>> WindowDetector.register_output(reg)
    >>> det = WindowDetector(("S", "D1", "D2"), Sequence(("D1", "D2")), 4, openers=("S",))
    >>> seen = ["S", "D1", "D2", "D2", "S", "D2", "D2", "D2", "D1"]
    >>> out = feed(det, [{"type": t, "ts": i} for i, t in enumerate(seen)], registry=reg)
    >>> [(e["ts"], e["opener_ts"], e["size"], e["constituents"]) for e in out.net]
    [(3, 0, 4, 2)]
    """

    def __init__(self, inputs: Names[str], pattern: Sequence[str] | AnyOf[str], size: int, *,
                 output: str = "window_match", openers: Names[str] | None = None,
                 slide: int | None = None, unit: str = "count",
                 reference_size: int | None = None, policy: str = "espice",
                 model: UtilityModel | None = None, retrain_every: int = 500,
                 bin_size: int = 1, seed: int = 0, seconds_per_pair: float = 0.0,
                 shed_as: Mapping[str, str] | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
        self.inputs = tuple(inputs)
        self.outputs = (output,)
        index = {name: i for i, name in enumerate(self.inputs)}
        unknown = [t for t in (*pattern.types, *(openers or ())) if t not in index]
        if unknown:
            raise ValueError(f"pattern and openers must name types among inputs; "
                             f"{sorted(set(unknown))} are not")
        if unit == "time" and reference_size is None:
            raise ValueError("a time window needs reference_size (events per window)")
        self.reference_size = int(reference_size if reference_size is not None else size)
        self.pattern = pattern.relabel(index)
        assigner = WindowAssigner(size, openers=None if openers is None else
                                  [index[t] for t in openers], slide=slide, unit=unit,
                                  expected_size=self.reference_size)
        self._op = WindowOperator(assigner, self.pattern, shedder=self)
        self._opener: dict[int, tuple[int, int]] = {}  # window id -> opener's (ts, key)
        self._last = (0, 0)  # (ts, key) of the last event seen
        self.policy = policy
        self.seed = seed
        self.seconds_per_pair = seconds_per_pair
        self.classes, self._class_of = _classes(self.inputs, shed_as or {})
        self._repetitions = _repetitions(pattern, openers or (), self.inputs, self._class_of,
                                         len(self.classes))
        if model is None:
            model = UtilityModel(len(self.classes), self.reference_size, bin_size,
                                 retrain_every=retrain_every)
        if (model.n_types, model.reference_size) != (len(self.classes), self.reference_size):
            raise ValueError(f"the model has {model.n_types} types and {model.reference_size} "
                             f"positions; the detector {len(self.classes)} and "
                             f"{self.reference_size}")
        self.model = model
        self._pending: list[ClosedWindows] = []
        self._share = 0.0
        self._x = 0.0  # the amount per partition the shedder was last told
        self._rho = 1
        self._shedder: ESpiceShedder | TypeUtilityShedder | None = None
        if model.table is None and model.seen.any():
            model.build()
        self._retrained()
        self._work = 0
        self._dropped = np.zeros(len(self.inputs), np.int64)
        self._lut: tuple[int, np.ndarray] = (-1, np.zeros(0, np.int64))

    @staticmethod
    def register_output(registry: TypeRegistry, name: str = "window_match") -> None:
        """Register the output type ``name`` with the fields this detector emits."""
        registry.register(name, **OUTPUT_FIELDS)

    # ------------------------------------------------------------ the contract
    def on_batch(self, events: np.ndarray, type_names: Names[str], emit: Emitter) -> None:
        """Assign the batch to windows, drop pairs if told to, match closed windows."""
        n = len(events)
        if n == 0:
            return
        batch = np.empty(n, _OP_DTYPE)
        batch["ts"] = events["ts"]
        batch["type"] = self._types(type_names)[events["type"]]
        base = self._op.assigner.seen
        self._note_openers(batch, events, base)
        work = self._op.work
        closed = self._op.push(batch)
        done = self._op.work - work
        self._work += done
        if self.seconds_per_pair > 0 and done:
            time.sleep(done * self.seconds_per_pair)
        self._last = (int(events["ts"][-1]), int(events["key"][-1]))
        self._emit(closed, batch, base, emit)
        self._train(closed)

    def on_end(self, emit: Emitter) -> None:
        """Close every open window; what matches is caused by the last input event."""
        closed = self._op.flush()
        rows = np.flatnonzero(closed.detected)
        self._emit_rows(closed, rows, np.full(len(rows), self._last[0]), None, emit)
        self._train(closed, everything=True)

    def snapshot(self) -> Any:
        """The windows' state only (see the module: the model and the counters are the
        run's)."""
        op = self._op
        return pickle.dumps((op.assigner, op._content, self._opener, self._last),
                            protocol=pickle.HIGHEST_PROTOCOL)

    def restore(self, state: Any) -> None:
        """Return to the windows of a :meth:`snapshot`."""
        assigner, content, self._opener, self._last = pickle.loads(state)
        self._op.assigner, self._op._content = assigner, content

    def work_done(self) -> int:
        """(event, window) pairs processed (kept in their window) so far."""
        return self._work

    # ------------------------------------------------------------ shedding
    def on_drop_command(self, command: DropCommand) -> None:
        """Drop ``x = share · p_size`` events from every partition of every window from now
        on; rho follows the command's ``q_max`` and ``f``."""
        self._share = min(max(float(command.share), 0.0), 1.0)
        if self._share > 0 and np.isfinite(command.q_max) and command.q_max > 0:
            rho = partition_count(self.reference_size, command.q_max, command.f)
            if rho != self._rho:
                self._rho = rho
                self._retrained()
        self._set_amount()

    def pairs_shed(self) -> dict[str, int]:
        """Pairs dropped so far, by input type name."""
        return {self.inputs[i]: int(n) for i, n in enumerate(self._dropped) if n}

    def drop_pairs(self, types: np.ndarray, positions: np.ndarray, expected: np.ndarray,
                   events: np.ndarray, windows: np.ndarray) -> np.ndarray:
        """The operator's question (True: drop the pair), answered by the policy."""
        if self._share <= 0 or len(types) == 0:
            return np.zeros(len(types), bool)
        if self._shedder is None:
            drop = uniform(self.seed, _UNTRAINED_TAG, events, windows) < self._share
        else:
            drop = np.asarray(self._shedder.drop_pairs(self._class_of[types], positions,
                                                       expected, events, windows), bool)
        self._dropped += np.bincount(types[drop], minlength=len(self._dropped))
        return drop

    def _retrained(self) -> None:
        """(Re)build the policy's shedder for the current table and rho."""
        table = self.model.table
        if table is None:
            self._shedder = None
        elif self.policy == "bl":
            self._shedder = TypeUtilityShedder.from_pattern(
                self._repetitions, self.model.seen.sum(axis=1), self.reference_size,
                self._rho, seed=self.seed)
        elif self.policy == "type-rate":
            self._shedder = TypeUtilityShedder.from_model(self.model, self._rho, seed=self.seed)
        elif isinstance(self._shedder, ESpiceShedder) and self._shedder.partitions == self._rho:
            self._shedder.update_table(table)
        else:
            self._shedder = ESpiceShedder(table, self._rho, seed=self.seed)
        self._set_amount(rebuilt=True)

    def _set_amount(self, rebuilt: bool = False) -> None:
        """Tell the shedder ``x`` (its thresholds are searched again only if it changed)."""
        x = self._share * self.reference_size / self._rho
        if self._shedder is not None and (rebuilt or x != self._x):
            self._shedder.set_amount(x)
        self._x = x

    def _train(self, closed: ClosedWindows, everything: bool = False) -> None:
        """Queue closed windows for the model; hand them over in chunks (and whatever is
        queued at the end of the stream)."""
        if len(closed.window):
            self._pending.append(closed)
        waiting = sum(len(c.window) for c in self._pending)
        if waiting >= _TRAIN_CHUNK or (everything and waiting):
            windows = ClosedWindows.concat(self._pending)
            windows = dataclasses.replace(windows, type=self._class_of[windows.type])
            self._pending = []
            if windows.observe_into(self.model) is not None:
                self._retrained()

    # ------------------------------------------------------------ plumbing
    def _types(self, type_names: Names[str]) -> np.ndarray:
        """Registry id -> index among ``inputs`` (-1: not an input), cached per registry."""
        if self._lut[0] != len(type_names):
            index = {name: i for i, name in enumerate(self.inputs)}
            self._lut = (len(type_names), np.array([index.get(t, -1) for t in type_names],
                                                   np.int64))
        return self._lut[1]

    def _note_openers(self, batch: np.ndarray, events: np.ndarray, base: int) -> None:
        """Remember the time stamp and key of every window this batch opens."""
        opens = np.flatnonzero(self._op.assigner.openings(batch["type"],
                                                          base + np.arange(len(batch))))
        for i in opens.tolist():
            self._opener[base + i] = (int(events["ts"][i]), int(events["key"][i]))

    def _emit(self, closed: ClosedWindows, batch: np.ndarray, base: int,
              emit: Emitter) -> None:
        """Emit the windows of ``closed`` that matched, caused by the event closing each."""
        rows = np.flatnonzero(closed.detected)
        a = self._op.assigner
        if a.unit == "count":
            cause = closed.window[rows] + a.size - 1 - base
        else:
            ends = np.array([self._opener[int(w)][0] for w in closed.window[rows]],
                            np.int64) + a.size
            cause = np.searchsorted(np.maximum.accumulate(batch["ts"]), ends, side="left")
        cause = np.clip(cause, 0, len(batch) - 1)
        self._emit_rows(closed, rows, batch["ts"][cause], cause, emit)
        for w in closed.window.tolist():
            self._opener.pop(int(w), None)

    def _emit_rows(self, closed: ClosedWindows, rows: np.ndarray, ts: np.ndarray,
                   cause: np.ndarray | None, emit: Emitter) -> None:
        if not len(rows):
            return
        windows = closed.window[rows]
        matched = closed.row[closed.matched]
        counts = np.bincount(matched, minlength=len(closed.window))[rows]
        opener = np.array([self._opener.get(int(w), self._last) for w in windows], np.int64)
        emit.many(self.outputs[0], ts=ts, key=opener[:, 1],
                  cause=np.zeros(len(rows), np.int64) if cause is None else cause,
                  window=windows, opener_ts=opener[:, 0], opener_key=opener[:, 1],
                  size=closed.size[rows], constituents=counts,
                  match=_match_ids(closed, rows))


def _match_ids(closed: ClosedWindows, rows: np.ndarray) -> np.ndarray:
    """A hash of each window's constituents' stream indices, in order (int64)."""
    rank = np.full(len(closed.window), -1, np.int64)
    rank[rows] = np.arange(len(rows))
    keep = closed.matched & (rank[closed.row] >= 0)
    which, event = rank[closed.row[keep]], closed.event[keep].astype(np.uint64)
    # order within a window: the pairs come in position order; hash (event, slot)
    start = np.r_[0, np.flatnonzero(np.diff(which)) + 1]
    slot = np.arange(len(which)) - np.repeat(start, np.diff(np.r_[start, len(which)]))
    with np.errstate(over="ignore"):
        h = mix64(event * np.uint64(0x100000001B3) + slot.astype(np.uint64))
        out = np.zeros(len(rows), np.uint64)
        np.add.at(out, which, h)
    return out.view(np.int64)


def _repetitions(pattern: Sequence[str] | AnyOf[str], openers: Names[str],
                 inputs: tuple[str, ...], class_of: np.ndarray, n_classes: int) -> np.ndarray:
    """How often each shedder class occurs in the pattern (BL's ``rep``): the pattern's
    repetitions of its input types, and one for each opener type where the opener is the
    pattern's first element, summed over the types of a class."""
    count = dict(pattern.repetitions())
    if pattern.with_opener:
        for t in openers:
            count[t] = count.get(t, 0) + 1
    out = np.zeros(n_classes, np.float64)
    for i, name in enumerate(inputs):
        out[class_of[i]] += count.get(name, 0)
    return out


def _classes(inputs: tuple[str, ...], shed_as: Mapping[str, str]
             ) -> tuple[tuple[str, ...], np.ndarray]:
    """The shedder's classes, in order of first mention among ``inputs``, and the class
    index of each input."""
    unknown = sorted(set(shed_as) - set(inputs))
    if unknown:
        raise ValueError(f"shed_as names types that are not inputs: {unknown}")
    names = [shed_as.get(t, t) for t in inputs]
    classes = tuple(dict.fromkeys(names))
    index = {c: i for i, c in enumerate(classes)}
    return classes, np.array([index[c] for c in names], np.int64)
