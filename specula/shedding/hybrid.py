"""Hybrid load shedding for CEP (Zhao, Hung, Weidlich, ICDE 2020): input-based,
state-based and hybrid shedding from one cost model.

When the overload detector asks for a share ``(μ - θ) / μ`` of the load to go (the
paper's latency trigger, :mod:`.overload`), :class:`HybridShedder` counts the detector's
partial matches (:class:`~.state.PartialMatchHolder`) per item, (state, time slice,
class) of the cost model (:mod:`._hybrid_model`): the detector keeps each partial
match's class from its creation on (the paper's classification at creation and index
per class), so a set costs a count per class, not a listing of the partial matches;
and it picks the shedding set D of items (:func:`~.knapsack.shedding_set`): least
relative contribution lost for at least that share of relative consumption saved
(eq. 8). Then, by ``mode`` (sec. IV-C):

* ``"state"`` (HyS): rho_S drops the partial matches of D (by class, in the detector);
  no event is dropped.
* ``"input"`` (HyI): rho_I drops, while the overload lasts, the events that would only
  make partial matches of D's classes (below); no partial match is dropped.
* ``"hybrid"``: both, from the same D; and while the filter holds, the partial
  matches of D's classes are dropped as they form (the detector's
  ``drop_new_partial_matches``: a new partial match is in time slice 0, so a class
  shed at slice 0), so that state shedding goes on between two sets as rho_I does,
  and a partial match that rho_I could not keep from forming (its event makes others
  too) does not live until the next set. Counted in :attr:`HybridShedder.dropped_new`.

Reading of rho_I (eq. 9 names the events of D's matches; those have been processed
already, so the filter must act on the events to come): an event of element ``k`` makes
partial matches of state ``k`` whose class depends on its own attributes and, but for
the first element, on earlier events. A partial match it makes is new: time slice 0.
It is dropped when *every* class it can reach (the classes of the leaves of the state's
tree whose boxes admit its own attribute values, the others free) is in D at slice 0;
for the first element, whose partial match is the event alone, when its class is. HyI
picks D among the items of slice 0 only, those rho_I acts on. (Classes are
clusters of the leaves of the state's tree: :mod:`._hybrid_model`.) Terminators are
never dropped (they are in no partial match), nor an event another element would keep.

The knapsack weighs per item the partial matches held and, at slice 0, those that
rho_I and the drops at birth kept from forming since the last set, scaled to one window
(they would be held unshed; weighed by what is held only, a class shed once would stay
empty and be shed again at every set, see ``_weighed``).

A new shedding set is computed at most once per ``cooldown`` events (the paper's delay
before state shedding is triggered again), and only when the controller's decision
changes: while the share asked stays within ``STEADY_SHARE`` of the last set's, the
last set holds (the paper reuses sets while the values are stable), and a set due then
only drops again the partial matches that aged into D's later time slices; a set
picked before for the same step of the share is taken again while the model's values
are within ``REUSE_RTOL`` of those it was picked with (no count, no knapsack). The input
filter of the last set holds while the detector asks for drops, also when a new set
finds no partial match to pick from (the paper applies rho_I until the bound is met),
and ends when it stops. The model adapts from the detector's record once it holds
``OBSERVE_VIEWS`` views, all its periods in one call (the values are those of adapting
at the end of each period; a set reads them as of the last call): the adaptation's
work falls on one batch in hundreds, not on the batch after each set, where under a
tight bound it put a second batch over it. Everything per event is
vectorised: the trees are NumPy tables, rho_I reads a table per cell of a grid on the
newest event's values, and the knapsack has one item per (state, slice, class).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np

from specula.shedding._hybrid_model import HybridModel, in_boxes
from specula.shedding.base import DropCommand
from specula.shedding.knapsack import shedding_set
from specula.shedding.state import PartialMatchHolder, StateShedder

__all__ = ["HybridShedder"]

Mode = Literal["input", "state", "hybrid"]

#: A share within this of the one the last shedding set was picked for is steady: the
#: set and its input filter hold on (the paper, sec. V-C: "shedding sets may be reused,
#: assuming stable contribution and consumption values per class and time slice")
STEADY_SHARE = 0.1

#: A set picked for a step of the share is taken again while every item's ratio of
#: contribution to consumption is within this of the one it was picked with
REUSE_RTOL = 0.1

#: The detector's watch record is handed to the model once it holds this many views
OBSERVE_VIEWS = 256


class HybridShedder(StateShedder):
    """The hybrid paper's shedder on one detector (see the module).

    Parameters
    ----------
    model
        The cost model, learned offline (:func:`~._hybrid_model.learn`).
    mode
        ``"hybrid"``, ``"state"`` (HyS) or ``"input"`` (HyI).
    cooldown
        Events between two shedding sets.
    adapt
        Adapt the model online (w = 0.5): the detector then records what it makes.
    adapt_every
        Record what the detector makes during one time slice of every ``adapt_every``
        (the streaming counts from a sample of the periods: a period's counts are
        ratios, derived matches per partial match made, which a sample estimates as
        well; recording and counting cost in proportion to what is recorded). 1: every
        period, as the paper.
    dp_limit
        The most items the knapsack solves exactly; greedy beyond.
    resolution
        Units of the knapsack's weights (the total consumption): the exact solution's
        cost grows with it, and 1/200 of the consumption is finer than the trigger's
        share moves between two sets.
    """

    def __init__(self, model: HybridModel, mode: Mode = "hybrid", *, cooldown: int = 1000,
                 adapt: bool = True, adapt_every: int = 8, dp_limit: int = 128,
                 resolution: int = 200) -> None:
        if mode not in ("input", "state", "hybrid"):
            raise ValueError(f"mode must be 'input', 'state' or 'hybrid'; got {mode!r}")
        super().__init__(cooldown)
        self.model = model
        self.mode = mode
        self.adapt = adapt
        if adapt_every < 1:
            raise ValueError(f"adapt_every must be at least 1; got {adapt_every}")
        self.adapt_every = adapt_every
        self._watching = False
        self.dp_limit = dp_limit
        self.resolution = resolution
        # the model's values per item, all states in a row (see _items), until adapted
        self._values: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        # rho_I's tests per (state, its classes shed at slice 0), as use_set makes them
        self._boxes: dict[tuple[int, bytes], np.ndarray | tuple | None] = {}
        self.shed: dict[int, np.ndarray] = {}  # state -> (classes, slices) in D
        self._alive: dict[int, np.ndarray | tuple | None] = {}  # rho_I's test per state
        # the event fields rho_I reads per state: its newest event's attributes
        self._fields = {state: tuple(sm.names[c].rsplit(".", 1)[1] for c in sm.own)
                        for state, sm in model.states.items()}
        self._drops_events = False  # whether rho_I can drop any event (see plan)
        self.filtering = False
        self.dropped_events = 0
        self.dropped_new = 0  # partial matches dropped as they formed
        self._births: set[int] = set()  # states whose new partial matches are tested
        # per state, the partial matches of each class kept from forming (dropped at
        # birth, or their first event dropped by rho_I) since the last set, and since when
        self._unmade: dict[int, np.ndarray] = {}
        self._since: int | None = None
        self._now = 0  # the time stamp of the first event of the batch being taken
        self.solves = {"dp": 0, "greedy": 0}  # shedding sets picked, by how
        self.skipped = 0  # shedding sets due but skipped, the share steady
        self.reused = 0  # shedding sets taken again (see _change_set)
        # per step of STEADY_SHARE: the set picked there and the values it was picked with
        self._picked: dict[int, tuple[dict[int, np.ndarray], np.ndarray]] = {}
        self._planned = -1.0  # the share of the last shedding set
        self._made: list = []  # the detector's watch record, not yet observed
        self._sheddable: set[int] = set()  # the states whose partial matches may go

    @property
    def partial_matches_dropped(self) -> int:
        """Partial matches dropped so far: by the sets and as they formed."""
        return self.dropped + self.dropped_new

    def _observe(self) -> None:
        """Adapt the model to what the detector made since the last call."""
        if self._made:
            self.model.observe(self._made)
            self._made = []
            self._values = None

    def keep(self, batch: np.ndarray, command: DropCommand) -> np.ndarray:
        """Shed state when due, and filter the batch's events while overloaded."""
        n = len(batch)
        if n:
            self._now = int(batch["ts"][0])
        if self.adapt and self.holder is not None and n:
            self._record(int(batch["ts"][0]))
        share = command.share
        if self.due(n, share):
            if self._steady(share):
                self._drop_aged()
            else:
                self._change_set(share)
        self.filtering = share > 0 and bool(self.shed)
        if self.mode == "hybrid":
            self._test_births(self.filtering)
        if not self.filtering or self.mode == "state" or n == 0 or not self._drops_events:
            return np.ones(n, bool)
        keep = self.input_filter(batch)
        self.dropped_events += int(n - keep.sum())
        return keep

    def _test_births(self, on: bool) -> None:
        """Have the detector drop the new partial matches of the classes in D at slice
        0 (``on``), or none (see the module)."""
        want = {state for state, d in self.shed.items() if d[:, 0].any()} if on else set()
        if want == self._births:
            return
        holder = self.attached()
        for state in self._births - want:
            holder.drop_new_partial_matches(state, None)
        for state in want - self._births:
            holder.drop_new_partial_matches(state, self._birth_test(state))
        self._births = want

    def _birth_test(self, state: int) -> Callable[[np.ndarray], np.ndarray]:
        """The test of ``state``'s new partial matches, given their classes (the state
        is classified, see :meth:`attach`): class in D at slice 0 (the shedding set of
        the moment); it counts what it marks."""

        def test(classes: np.ndarray) -> np.ndarray:
            marked = self.shed[state][classes, 0]
            self.dropped_new += int(np.count_nonzero(marked))
            self._kept_from_forming(state, classes[marked])
            return marked

        return test

    def _kept_from_forming(self, state: int, classes: np.ndarray) -> None:
        """Count partial matches of ``classes`` of ``state`` that shedding kept from
        forming (see :meth:`_weighed`)."""
        if len(classes):
            size = len(self.model.states[state].contribution)
            made = np.bincount(classes, minlength=size)
            self._unmade[state] = self._unmade.get(state, 0) + made

    def _weighed(self, state: int, held: np.ndarray) -> np.ndarray:
        """The knapsack's count of partial matches per item of ``state`` (classes x
        slices, raveled): those held, and at slice 0 those kept from forming since the
        last set, scaled to one window. The paper picks D among the partial matches
        there are; those that rho_I and the drops at birth kept from forming would be
        there unshed, and without them a class shed once would weigh nothing, stay idle
        and be shed again (:meth:`_items`) while the share asked falls, so that
        shedding could only stop, never lessen."""
        unmade = self._unmade.get(state)
        if unmade is None or self._since is None:
            return held
        scale = min(1.0, self.model.window / max(self._now - self._since, 1))
        out = held.astype(np.float64)
        out[::self.model.slices] += scale * unmade
        return out

    def _steady(self, share: float) -> bool:
        """Whether a shedding set due now is skipped: the share is within
        :data:`STEADY_SHARE` of the last set's (the decision has not changed)."""
        if self.shed and abs(share - self._planned) <= STEADY_SHARE:
            self.skipped += 1
            return True
        self._planned = share
        return False

    def _change_set(self, share: float) -> None:
        """A new shedding set for ``share``: the one picked before for the same step of
        :data:`STEADY_SHARE` while the model's values are within :data:`REUSE_RTOL` of
        those it was picked with (the paper, sec. V-C, reuses sets while the values are
        stable), else a new one (:meth:`plan`). A share that swings between two steps
        then costs the counts and the knapsack once per step, not at every swing."""
        key = round(share / STEADY_SHARE)
        cached = self._picked.get(key)
        if cached is not None and np.allclose(self._items()[2], cached[1], rtol=REUSE_RTOL,
                                              atol=0.0):
            self.reused += 1
            self._reuse(cached[0])
            return
        before = self.shed
        self.plan(share)
        if self.shed is not before:  # a set was picked (plan found partial matches)
            self._picked[key] = (self.shed, self._items()[2])

    def _reuse(self, shed: dict[int, np.ndarray]) -> None:
        """Take ``shed``, picked before, as the set again: rho_I's and the births'
        tests follow it, and the partial matches held of the classes it adds to the
        set of the moment are dropped (those of the classes both hold are gone)."""
        before = self.shed
        self.use_set(shed)
        if self.mode == "input":
            return
        holder = self.attached()
        for state, d in shed.items():
            old = before.get(state)
            if state in self._sheddable and (d & ~old if old is not None else d).any():
                self.dropped += holder.drop_classes(state, d, self.model.slice_len)

    def _drop_aged(self) -> None:
        """The last set's state drops again, for its items past time slice 0 only: the
        partial matches that aged into them since (those of slice 0 rho_I and the drops
        at birth keep from forming). Nothing to do with one time slice."""
        if self.mode == "input" or self.model.slices <= 1:
            return
        holder = self.attached()
        for state, d in self.shed.items():
            if state in self._sheddable and d[:, 1:].any():
                aged = d.copy()
                aged[:, 0] = False
                self.dropped += holder.drop_classes(state, aged, self.model.slice_len)

    def _record(self, ts: int) -> None:
        """Record what the detector makes while the period of ``ts`` is sampled; hand
        the record to the model in bulk."""
        on = int(ts // self.model.slice_len) % self.adapt_every == 0
        if on or self._watching:
            self._made += self.attached().watch(on)
            self._watching = on
        if len(self._made) >= OBSERVE_VIEWS:
            self._observe()

    def attach(self, holder: PartialMatchHolder) -> None:
        """Work on ``holder``'s partial matches, classified as they are made (the
        paper's classification of a partial match at its creation): a shedding set
        then reads the counts per class and drops by class, without listing."""
        super().attach(holder)
        for state, sm in self.model.states.items():
            holder.classify_partial_matches(state, sm.classify)
        self._sheddable = {v.state for v in holder.partial_matches() if v.sheddable}

    def plan(self, share: float) -> int:
        """Pick the shedding set for ``share`` of the consumption; drop its partial
        matches (``state``, ``hybrid``) and keep it for the input filter. Returns the
        partial matches dropped."""
        model, holder = self.model, self.attached()
        # one item per (state, class, slice) of every state the model knows; a state
        # holding nothing now has items all idle, which rho_I may still act on
        states = sorted(model.states)
        classes = [model.states[state] for state in states]
        held = [holder.class_counts(state, len(sm.contribution), model.slices,
                                    model.slice_len).ravel()
                if self.mode == "input" or state in self._sheddable
                else np.zeros(sm.contribution.size, np.int64)
                for state, sm in zip(states, classes, strict=True)]
        if not any(h.any() for h in held) and not self._unmade:
            return 0  # nothing to pick from: rho_I goes on
        counts = [self._weighed(state, h) for state, h in zip(states, held, strict=True)]
        self._unmade, self._since = {}, self._now
        contribution, consumption, ratio = self._items()
        count = np.concatenate(counts)
        value, weight, live = count * contribution, count * consumption, count > 0
        if self.mode == "input":  # rho_I acts on new partial matches only: slice 0
            live &= np.arange(len(live)) % model.slices == 0
        chosen = np.zeros(len(value), bool)
        v_tot, w_tot = value[live].sum(), weight[live].sum()
        self.solves["dp" if live.sum() <= self.dp_limit else "greedy"] += 1
        chosen[live] = shedding_set(value[live] / v_tot if v_tot > 0 else value[live],
                                    weight[live] / w_tot if w_tot > 0 else weight[live],
                                    share, dp_limit=self.dp_limit,
                                    resolution=self.resolution)
        if chosen.any():  # idle items (see _items)
            chosen |= ~live & (ratio <= ratio[chosen].max())
        shed, at = {}, 0
        for state, sm in zip(states, classes, strict=True):
            size = sm.contribution.size
            shed[state] = chosen[at:at + size].reshape(sm.contribution.shape)
            at += size
        self.use_set(shed)
        if self.mode == "input":
            return 0
        total = sum(holder.drop_classes(state, shed[state], model.slice_len)
                    for state, h in zip(states, held, strict=True)
                    if h[shed[state].ravel()].any())  # a partial match held in D
        self.dropped += total
        return total

    def use_set(self, shed: dict[int, np.ndarray]) -> None:
        """Take ``shed`` (state -> classes x slices, True: in D) as the shedding set:
        what rho_I drops from now on (:meth:`plan` calls it with the set it picks)."""
        self.shed = shed
        # rho_I's tests: a first element's class, else the leaves whose class is not
        # shed at slice 0 (a new partial match's)
        self._alive = {state: self._alive_test(state, d[:, :1]) for state, d in shed.items()}
        # whether rho_I can drop an event at all: a class in D at slice 0 (a tree's
        # leaves cover every value, so an event always reaches some leaf)
        self._drops_events = any(d[:, 0].any() for d in shed.values())

    def _alive_test(self, state: int, shed: np.ndarray) -> np.ndarray | tuple | None:
        """rho_I's test of ``state``'s events, its classes ``shed`` at slice 0: whether
        each cell of the state's grid is dropped (:meth:`~._hybrid_model.StateModel.
        cells`; for the first element, whose partial matches are its events, a cell's
        class says it), or where there is no grid the boxes of the leaves kept, or None
        for the first element's classes. Made once per set."""
        key = (state, shed.tobytes())
        if key not in self._boxes:
            sm = self.model.states[state]
            first = len(sm.own) == len(sm.names)
            test: np.ndarray | tuple | None
            if first:
                test = None if sm.cell_class is None else shed[sm.cell_class, 0]
            else:
                cells = sm.alive_cells(shed)
                test = ~cells if cells is not None else sm.alive_boxes(shed)
            self._boxes[key] = test
        return self._boxes[key]

    def _items(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per item (every state's classes x slices, raveled, states in order): the
        model's contribution and consumption per partial match, and their ratio, by
        which the idle items are ranked: those without partial matches now (out of the
        knapsack, which weighs what is held) that rank no higher than the highest
        chosen are in D too, as the knapsack would have taken them had they held any;
        they drop nothing now, and rho_I drops the events that would make them. Kept
        until the model adapts."""
        if self._values is None:
            sms = [self.model.states[state] for state in sorted(self.model.states)]
            plus = np.concatenate([sm.contribution.ravel() for sm in sms])
            minus = np.concatenate([sm.consumption.ravel() for sm in sms])
            self._values = plus, minus, plus / np.maximum(minus, 1e-12)
        return self._values

    def input_filter(self, batch: np.ndarray) -> np.ndarray:
        """rho_I: the keep mask of the events that make only partial matches of D."""
        n = len(batch)
        drop, protect = np.zeros(n, bool), np.zeros(n, bool)
        for state, rows in self.attached().input_rows(batch):
            if not len(rows):
                continue
            sm = self.model.states.get(state)
            shed = self.shed.get(state)
            if sm is None or shed is None or not shed[:, 0].any():
                protect[rows] = True  # terminators, states without a model or a drop
                continue
            # the newest event's values, a column each
            x = np.empty((len(rows), len(self._fields[state])))
            for c, field in enumerate(self._fields[state]):
                x[:, c] = batch[field][rows]
            test = self._alive[state]
            if isinstance(test, np.ndarray):  # per grid cell: dropped
                cells = sm.cells(x)
                out = test[cells]
                if sm.cell_class is not None:  # the first element
                    self._kept_from_forming(state, sm.cell_class[cells[out]])
            elif test is None:  # the first element without a grid: by class
                classes = sm.classify(x)
                out = shed[classes, 0]
                self._kept_from_forming(state, classes[out])
            else:
                out = ~in_boxes(x, *test)
            drop[rows[out]] = True
            protect[rows[~out]] = True
        keep = ~(drop & ~protect)
        if "flags" in (batch.dtype.names or ()):
            keep |= batch["flags"] != 0
        return keep

    def __repr__(self) -> str:
        return f"HybridShedder(mode={self.mode!r}, states={sorted(self.model.states)})"


