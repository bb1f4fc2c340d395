"""The hybrid shedding paper's cost model (sec. IV-A, V-A, V-B): contribution and
consumption per state x time slice x class, learned offline, adapted online.

Offline (:func:`learn`), from what a detector made on historic data (its
``watch`` record: every partial match and every complete match, with the identities
of their events):

* **Lineage.** A partial match ``p`` of state ``k`` *derives* every later match whose
  first events are ``p``'s (identities compared by :func:`~specula.events.hashing.fold64`
  of their prefixes). A derived match made when ``p`` is in time slice ``s`` of its
  window (slices: the query window cut into ``slices`` equal parts, counted from ``p``'s
  first event) counts for ``p`` at every slice up to ``s``: what ``p`` is still worth
  and still costs once it is that old.
* **Contribution** Γ+(p, s): complete matches derived at slice ``s`` or later (eq. 3).
  **Consumption** Γ-(p, s): the sum of Ω over ``p`` itself and the matches derived at
  slice ``s`` or later (eq. 4), with Ω a match's length, the paper's memory footprint.
  Only partial matches whose whole window lies inside the historic data count.
* **Classes.** Per state, a regression tree of depth ``clusters`` (the paper's depth)
  predicts log(1 + [Γ+(p, ·), Γ-(p, ·)]) from the attribute values of ``p``'s events
  (the attributes the rule reads); k-means (``clusters`` clusters; the paper picks the
  number by the gap statistic, here it is given) then groups the tree's leaves by their
  mean values, each leaf weighted by its partial matches: a *class* is a cluster of
  leaves, i.e. a union of predicates over the attribute values (the paper's "class
  characterized by a predicate"). Our reading: the paper clusters the partial matches
  themselves and trains a classifier to predict the cluster; but outcomes are random
  where the attributes cannot tell them apart (on DS1 an A, B match with a.v + b.v <= 10
  may or may not meet its C), so a cluster of "completed" matches is not predictable.
  Clustering the tree's predictions keeps the always-useless matches (a.v + b.v > 10)
  apart from the useful ones, and keeps the classes few: ``clusters`` x ``slices``
  knapsack items per state, which dynamic programming solves (:mod:`.knapsack`). A
  class's values per slice are the means over its historic partial matches (the
  paper's 90th percentile over- or understates a class of mostly-zero contributions;
  the online adaptation blends in means too).
* **Tables.** The tree becomes NumPy arrays (:class:`TreeTable`) whose leaves hold
  their class; the hot path walks them in one compiled loop, never calling
  scikit-learn.

Online (:meth:`HybridModel.observe`): the same lineage counts from what the detector
makes, per class and slice of the originating partial matches (classified by the
tables), divided by the partial matches of that class made in the period, replace a
share ``w = 0.5`` of the values at the end of every time slice: Γ = (1 - w)·Γ + w·Γ_inc
(values of classes that made nothing in the period stay). The per-period means stand
beside the offline means: our reading of "streaming counts".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from specula.events.hashing import fold64
from specula.shedding.state import PartialMatchView

if TYPE_CHECKING:
    from sklearn.tree import BaseDecisionTree

__all__ = ["HybridModel", "StateModel", "TreeTable", "learn"]


@njit(cache=True, nogil=True)
def _walk(x, left, right, feature, threshold, where):  # pragma: no cover - jit
    """The leaf (index among the leaves, ``where[node]``) each row of ``x`` reaches."""
    out = np.empty(x.shape[0], np.int64)
    for i in range(x.shape[0]):
        node = 0
        while left[node] >= 0:
            node = left[node] if x[i, feature[node]] <= threshold[node] else right[node]
        out[i] = where[node]
    return out


class TreeTable:
    """A fitted scikit-learn decision tree as arrays, walked without scikit-learn.

    :meth:`leaf` walks each row down the tree in a Numba loop (O(depth) per row),
    comparing as scikit-learn does: the features as float32, ``x <= threshold`` goes
    left. ``lo``, ``hi`` are the leaves' boxes, ``(lo, hi]`` per feature.
    """

    def __init__(self, tree: BaseDecisionTree) -> None:
        t = tree.tree_
        self.left = t.children_left.astype(np.int64)
        self.right = t.children_right.astype(np.int64)
        self.feature = np.maximum(t.feature, 0).astype(np.int64)
        self.threshold = t.threshold.astype(np.float64)
        self.depth = int(t.max_depth)
        self.features = int(t.n_features)
        leaves = np.flatnonzero(self.left < 0)
        self.leaves = leaves
        self.where = np.full(len(self.left), -1, np.int64)
        self.where[leaves] = np.arange(len(leaves))
        self.lo = np.full((len(leaves), self.features), -np.inf)
        self.hi = np.full((len(leaves), self.features), np.inf)
        where = {int(v): i for i, v in enumerate(leaves)}
        stack = [(0, np.full(self.features, -np.inf), np.full(self.features, np.inf))]
        while stack:  # depth first, narrowing the box of each child
            node, lo, hi = stack.pop()
            if self.left[node] < 0:
                self.lo[where[node]], self.hi[where[node]] = lo, hi
                continue
            f, thr = self.feature[node], self.threshold[node]
            hi_left, lo_right = hi.copy(), lo.copy()
            hi_left[f] = min(hi[f], thr)
            lo_right[f] = max(lo[f], thr)
            stack += [(self.left[node], lo, hi_left), (self.right[node], lo_right, hi)]

    def leaf(self, x: np.ndarray) -> np.ndarray:
        """The leaf (0 .. leaves - 1, scikit-learn's ``apply`` renumbered) of every row
        of ``x`` (``(rows, features)``)."""
        x = np.ascontiguousarray(np.asarray(x, np.float32).astype(np.float64))
        return _walk(x, self.left, self.right, self.feature, self.threshold, self.where)

    def per_node(self, of_leaf: np.ndarray) -> np.ndarray:
        """A value per leaf as a table per node, for :meth:`mapped`."""
        by_node = np.full(len(self.left), -1, np.int64)
        by_node[self.leaves] = of_leaf
        return by_node

    def mapped(self, x: np.ndarray, by_node: np.ndarray) -> np.ndarray:
        """``of_leaf[self.leaf(x)]`` in one walk (``by_node``: :meth:`per_node`)."""
        x = np.ascontiguousarray(np.asarray(x, np.float32).astype(np.float64))
        return _walk(x, self.left, self.right, self.feature, self.threshold, by_node)

    def reachable(self, columns: Sequence[int], x: np.ndarray, among: np.ndarray
                  ) -> np.ndarray:
        """Per row: whether it can reach one of the leaves where ``among`` holds,
        knowing only the features ``columns`` (its values ``x``, one column each; the
        others free): :func:`in_boxes` of :meth:`boxes`."""
        return in_boxes(x, *self.boxes(columns, among))

    def boxes(self, columns: Sequence[int], among: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)``: the boxes of the leaves where ``among`` holds, on ``columns``."""
        cols = np.asarray(columns, np.int64)
        return (np.ascontiguousarray(self.lo[among][:, cols]),
                np.ascontiguousarray(self.hi[among][:, cols]))


def in_boxes(x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per row of ``x``: whether it lies in one of the boxes ``(lo, hi]`` of a tree's
    leaves (:meth:`TreeTable.boxes`). Compared as :meth:`TreeTable.leaf` does, in
    float32, with NaN going right at every split (``NaN <= threshold`` is false), i.e.
    as +inf."""
    x = np.asarray(x, np.float32).astype(np.float64)
    return _in_a_box(np.ascontiguousarray(np.where(np.isnan(x), np.inf, x)), lo, hi)


@njit(cache=True, nogil=True)
def _in_a_box(x, lo, hi):  # pragma: no cover - jit
    """Per row of ``x``: whether it lies in one of the boxes ``(lo, hi]``."""
    out = np.zeros(x.shape[0], np.bool_)
    for i in range(x.shape[0]):
        for b in range(lo.shape[0]):
            inside = True
            for f in range(x.shape[1]):
                if not (lo[b, f] < x[i, f] <= hi[b, f]):
                    inside = False
                    break
            if inside:
                out[i] = True
                break
    return out


@njit(cache=True, nogil=True)
def _grid_cells(x, edges, starts, dims):  # pragma: no cover - jit
    """The grid cell (raveled, C order) of each row of ``x``: per column ``c``, the
    count of the edges ``edges[starts[c]:starts[c + 1]]`` below its value compared in
    float32 (``searchsorted`` left), NaN past the last."""
    out = np.empty(x.shape[0], np.int64)
    for i in range(x.shape[0]):
        cell = 0
        for c in range(x.shape[1]):
            v = np.float64(np.float32(x[i, c]))
            lo, hi = starts[c], starts[c + 1]
            j = hi - lo if v != v else np.searchsorted(edges[lo:hi], v)
            cell = cell * dims[c] + j
        out[i] = cell
    return out


#: The most cells of a state's grid on its newest event's columns (see
#: :meth:`StateModel.cells`) times its boxes; beyond, rho_I tests the boxes event by
#: event
MAX_GRID_CELLS = 1 << 20


@dataclass
class StateModel:
    """One state's classes (clusters of the leaves of its tree, ``leaf_class``) and
    Γ+ / Γ- per class and slice (per partial match)."""

    names: tuple[str, ...]
    own: tuple[int, ...]
    tree: TreeTable
    leaf_class: np.ndarray    # (leaves,): the class of each leaf
    contribution: np.ndarray  # (classes, slices)
    consumption: np.ndarray   # (classes, slices)
    length: int               # events of its partial matches (Ω)
    selectivity: float        # share of its partial matches that completed (SS)
    inc_plus: np.ndarray = field(init=False)
    inc_minus: np.ndarray = field(init=False)
    made: np.ndarray = field(init=False)
    node_class: np.ndarray = field(init=False)
    own_boxes: tuple[np.ndarray, np.ndarray] = field(init=False)
    box_of_leaf: np.ndarray = field(init=False)
    grid_edges: list[np.ndarray] = field(init=False)
    grid_shape: tuple[int, ...] = field(init=False)
    grid_in_box: np.ndarray | None = field(init=False)
    cell_class: np.ndarray | None = field(init=False)
    _grid: tuple[np.ndarray, np.ndarray, np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        # the online counts of the period under way
        self.inc_plus = np.zeros_like(self.contribution)
        self.inc_minus = np.zeros_like(self.consumption)
        self.made = np.zeros(len(self.contribution))
        self.node_class = self.tree.per_node(self.leaf_class)
        # the leaves' boxes on the newest event's columns, without repeats: what rho_I
        # tests an event of this state against (see :meth:`alive_boxes`)
        lo, hi = self.tree.boxes(self.own, np.ones(len(self.leaf_class), bool))
        both, self.box_of_leaf = np.unique(np.hstack([lo, hi]), axis=0, return_inverse=True)
        self.box_of_leaf = self.box_of_leaf.ravel()
        m = len(self.own)
        self.own_boxes = (np.ascontiguousarray(both[:, :m]), np.ascontiguousarray(both[:, m:]))
        # the grid the boxes' bounds cut the newest event's columns into: every cell
        # (e_j-1, e_j] x ... lies in a box or out of it whole, so a table per cell
        # answers rho_I's test (the paper's lookup tables from the classifiers); the
        # right end of each cell (inf for the last) stands for it, see :meth:`cells`
        self.grid_edges = [np.unique(np.concatenate([both[:, c], both[:, m + c]]))
                           for c in range(m)]
        self.grid_edges = [e[np.isfinite(e)] for e in self.grid_edges]
        self.grid_shape = tuple(len(e) + 1 for e in self.grid_edges)
        self.grid_in_box = None  # (boxes, cells): whether the cell lies in the box
        if m and math.prod(self.grid_shape) * len(both) <= MAX_GRID_CELLS:
            mesh = np.meshgrid(*(np.append(e, np.inf) for e in self.grid_edges), indexing="ij")
            points = np.stack([g.ravel() for g in mesh], axis=1)
            lo, hi = (b[:, None, :] for b in self.own_boxes)
            inside = (lo < points[None]) & (points[None] <= hi)
            self.grid_in_box = np.all(inside, axis=2).astype(np.float64)
        self._grid = (np.concatenate([np.zeros(0), *self.grid_edges]),
                      np.cumsum([0, *map(len, self.grid_edges)]).astype(np.int64),
                      np.asarray(self.grid_shape, np.int64))
        # a state of the first element holds its events alone: each cell lies in one
        # leaf whole, so its class answers rho_I's test too
        self.cell_class = None
        if self.grid_in_box is not None and len(self.own) == len(self.names):
            feats = np.zeros((points.shape[0], len(self.names)))
            feats[:, list(self.own)] = points
            self.cell_class = self.classify(feats)

    def classify(self, features: np.ndarray) -> np.ndarray:
        """The class of every row of ``features`` (the state's columns first)."""
        return self.tree.mapped(features, self.node_class)

    def alive_cells(self, shed: np.ndarray) -> np.ndarray | None:
        """Per cell of the grid (:meth:`cells`): whether an event there lies in one of
        :meth:`alive_boxes`; None when the grid would be too large
        (:data:`MAX_GRID_CELLS`: test the boxes instead)."""
        if self.grid_in_box is None:
            return None
        return self._alive_box_mask(shed) @ self.grid_in_box > 0

    def cells(self, x: np.ndarray) -> np.ndarray:
        """The grid cell of each event whose values of the newest event's columns are
        the rows of ``x`` (``(events, columns)``), compared as :func:`in_boxes` compares
        (float32, NaN as +inf: the last cell); one compiled pass."""
        return _grid_cells(x, *self._grid)

    def alive_boxes(self, shed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The boxes, on the newest event's columns, of the leaves whose class is not
        shed at every slice (``shed``: classes x slices): an event of this state in none
        of them makes only partial matches of classes shed."""
        alive = self._alive_box_mask(shed).astype(bool)
        return self.own_boxes[0][alive], self.own_boxes[1][alive]

    def _alive_box_mask(self, shed: np.ndarray) -> np.ndarray:
        """Per box (:attr:`own_boxes`), 1.0 where a leaf of a class not shed at every
        slice has it."""
        alive = np.zeros(len(self.own_boxes[0]))
        alive[self.box_of_leaf[~np.all(shed, axis=1)[self.leaf_class]]] = 1.0
        return alive


@dataclass
class HybridModel:
    """The cost model of one detector: a :class:`StateModel` per state id, the states
    of each engine (``ancestors``: the state ids of an engine's elements 1..n-1, by
    element), its window and slices, and the online weight ``w``."""

    states: dict[int, StateModel]
    ancestors: dict[int, tuple[int, ...]]  # engine offset -> state id of element k - 1
    window: int
    slices: int
    w: float = 0.5
    next_update: int | None = None

    @property
    def slice_len(self) -> float:
        return max(self.window / self.slices, 1.0)

    def slice_of(self, age: np.ndarray) -> np.ndarray:
        """The time slice of partial matches whose window opened ``age`` ticks ago."""
        return np.clip(np.asarray(age, np.float64) // self.slice_len, 0, self.slices - 1
                       ).astype(np.int64)

    def classify(self, view: PartialMatchView) -> np.ndarray:
        """The class of every row of a view of a state the model knows."""
        return self.states[view.state].classify(view.features)

    def observe(self, made: list[PartialMatchView]) -> None:
        """Count what the detector made (its ``watch`` record, in the order made) for
        the originating partial matches' classes; at the end of every time slice in
        it, adapt the values. The counts of all its periods are made in one pass and
        the adaptations applied in order, so a caller may hand over many batches'
        records at once: the values are exactly those of handing each over as made."""
        periods: list[list[PartialMatchView]] = [[]]
        for view in made:
            if not len(view):
                continue
            periods[-1].append(view)
            now = int(view.last_ts.max())
            if self.next_update is None:
                self.next_update = now + int(self.slice_len)
            elif now >= self.next_update:  # the period ends with this view
                periods.append([])
                self.next_update = now + int(self.slice_len)
        if not any(periods):
            return
        for state, (plus, minus, made_) in self._count(periods).items():
            sm = self.states[state]
            plus[0] += sm.inc_plus  # the counts of the period still open before
            minus[0] += sm.inc_minus
            made_[0] += sm.made
            _blend(sm.contribution, sm.consumption, plus[:-1], minus[:-1], made_[:-1],
                   self.w, float(sm.length))
            sm.inc_plus, sm.inc_minus, sm.made = plus[-1], minus[-1], made_[-1]

    def _count(self, periods: list[list[PartialMatchView]]
               ) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per state, the lineage counts of each period: ``(periods, classes, slices)``
        arrays of Γ+ and Γ- increments and ``(periods, classes)`` partial matches made."""
        out = {state: (np.zeros((len(periods), *sm.contribution.shape)),
                       np.zeros((len(periods), *sm.consumption.shape)),
                       np.zeros((len(periods), len(sm.made))))
               for state, sm in self.states.items()}
        groups: dict[tuple[int, int], list[tuple[int, PartialMatchView]]] = {}
        for p, views in enumerate(periods):
            for view in views:
                groups.setdefault((view.state, view.element), []).append((p, view))
        for (state, element), members in groups.items():
            features = np.concatenate([v.features for _, v in members])
            period = np.repeat([p for p, _ in members], [len(v) for _, v in members])
            chain = self.ancestors.get(state - element, ())
            if element >= 1 and state in self.states:
                made = out[state][2]
                cls = period * made.shape[1] + self.states[state].classify(features)
                made += np.bincount(cls, minlength=made.size).reshape(made.shape)
            s = self.slice_of(np.concatenate([v.last_ts - v.first_ts for _, v in members]))
            omega = len(chain) + 1 - element  # events in the made match
            for k in range(element + 1, len(chain) + 1):
                plus, minus, _ = out[chain[k - 1]]
                sm = self.states[chain[k - 1]]
                cell = ((period * plus.shape[1] + sm.classify(features[:, :len(sm.names)]))
                        * plus.shape[2] + s)
                counts = np.bincount(cell, minlength=plus.size).reshape(plus.shape)
                minus += omega * counts
                if element == 0:
                    plus += counts
        return out


@njit(cache=True, nogil=True)
def _blend(contribution, consumption, plus, minus, made, w, length):  # pragma: no cover
    """Adapt the values at the end of each period in turn: for each class that made
    partial matches in it, Γ = (1 - w)·Γ + w·Γ_inc, with Γ_inc the period's counts from
    each slice on, per partial match made (plus Ω for Γ-)."""
    for p in range(plus.shape[0]):
        for c in range(plus.shape[1]):
            n = made[p, c]
            if n <= 0:
                continue
            acc_plus, acc_minus = 0.0, 0.0
            for s in range(plus.shape[2] - 1, -1, -1):
                acc_plus += plus[p, c, s]
                acc_minus += minus[p, c, s]
                contribution[c, s] = (1 - w) * contribution[c, s] + w * (acc_plus / n)
                consumption[c, s] = ((1 - w) * consumption[c, s]
                                     + w * (acc_minus / n + length))


def _from_slice_on(x: np.ndarray) -> np.ndarray:
    """Per slice ``s``: the sum over slices ``>= s`` (last axis)."""
    return np.cumsum(x[..., ::-1], axis=-1)[..., ::-1]


def learn(made: list[PartialMatchView], *, slices: int = 4, clusters: int = 10,
          seed: int = 0, end_ts: int | None = None, max_rows: int = 20_000,
          min_leaf: int = 50) -> HybridModel:
    """The cost model from a detector's ``watch`` record over historic data (see the
    module). ``end_ts``: the end of that data (default: the newest match's time);
    ``max_rows`` partial matches per state at most go to the tree (a seeded sample);
    ``min_leaf`` partial matches at least per leaf of the tree: a leaf's mean is a
    class's value, and on few matches it follows the noise (on DS1, leaves of 5 split
    on the ids, which say nothing, and rho_I then drops A events of every value)."""
    by_engine: dict[int, dict[int, list[PartialMatchView]]] = {}
    for v in made:
        if len(v):
            by_engine.setdefault(v.state - v.element, {}).setdefault(v.element, []).append(v)
    if not by_engine:
        raise ValueError("nothing to learn from: the record holds no partial matches")
    window = max(v.window for v in made)
    end = end_ts if end_ts is not None else max(int(v.last_ts.max()) for v in made if len(v))
    rng = np.random.default_rng(seed)
    model = HybridModel({}, {}, window, slices)
    for offset, elements in sorted(by_engine.items()):
        n = max(k + v.eids.shape[1] for k, vs in elements.items() for v in vs)
        model.ancestors[offset] = tuple(offset + k for k in range(1, n))
        cat = {k: _concat(vs) for k, vs in elements.items()}
        for k in range(1, n):
            if k not in cat:
                continue
            p = cat[k]
            plus, minus = _lineage(p, cat, k, n, model)
            seen = p["first"] + window <= end
            values, feats = np.hstack([plus, minus])[seen], p["features"][seen]
            if len(values) > max_rows:
                pick = rng.choice(len(values), max_rows, replace=False)
                values, feats = values[pick], feats[pick]
            if not len(values):  # no window seen whole: one class of nothing
                values, feats = np.zeros((1, 2 * slices)), np.zeros((1, feats.shape[1]))
            table, leaf_class, means = _classes(feats, values, clusters, seed, min_leaf)
            model.states[offset + k] = StateModel(
                p["names"], p["own"], table, leaf_class, means[:, :slices].copy(),
                means[:, slices:].copy(), n - k,
                float(np.mean(plus[seen, 0] > 0)) if seen.any() else 0.0)
    return model


def _classes(feats: np.ndarray, values: np.ndarray, clusters: int, seed: int,
             min_leaf: int) -> tuple[TreeTable, np.ndarray, np.ndarray]:
    """A state's classes: the tree over ``feats`` predicting log1p(``values``) (Γ+ and
    Γ- per slice, one row per partial match), its leaves clustered by k-means on their
    mean predictions; the tree, the class of each leaf and each class's mean values."""
    from sklearn.cluster import KMeans
    from sklearn.tree import DecisionTreeRegressor

    tree = DecisionTreeRegressor(max_depth=max(clusters, 1), min_samples_leaf=min_leaf,
                                 random_state=seed).fit(feats, np.log1p(values))
    table = TreeTable(tree)
    leaf = table.leaf(feats)
    count = np.bincount(leaf, minlength=len(table.leaves)).astype(np.float64)
    mean = np.zeros((len(table.leaves), values.shape[1]))
    np.add.at(mean, leaf, values)
    mean /= np.maximum(count, 1)[:, None]
    distinct = len(np.unique(mean[count > 0], axis=0))
    c = max(1, min(clusters, distinct))
    leaf_class = (KMeans(c, n_init=3, random_state=seed).fit_predict(
        np.log1p(mean), sample_weight=np.maximum(count, 1e-9)) if c > 1
        else np.zeros(len(mean), np.int64)).astype(np.int64)
    cls = leaf_class[leaf]
    members = np.bincount(cls, minlength=c).astype(np.float64)
    means = np.zeros((c, values.shape[1]))
    np.add.at(means, cls, values)
    return table, leaf_class, means / np.maximum(members, 1)[:, None]


def _concat(views: list[PartialMatchView]) -> dict:
    return {"names": views[0].names, "own": views[0].own,
            "features": np.concatenate([v.features for v in views]),
            "first": np.concatenate([v.first_ts for v in views]),
            "last": np.concatenate([v.last_ts for v in views]),
            "eids": np.concatenate([v.eids for v in views])}


def _lineage(p: dict, cat: dict, k: int, n: int, model: HybridModel
             ) -> tuple[np.ndarray, np.ndarray]:
    """Γ+(p, s) and Γ-(p, s) of every partial match ``p`` of state ``k``."""
    keys = fold64(p["eids"])
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    plus = np.zeros((len(keys), model.slices))
    minus = np.zeros((len(keys), model.slices))
    for j in range(k):
        if j not in cat:
            continue
        d = cat[j]
        anc = fold64(d["eids"][:, :n - k])
        at = np.minimum(np.searchsorted(sorted_keys, anc), len(keys) - 1)
        hit = sorted_keys[at] == anc
        idx = order[at[hit]]
        s = model.slice_of(d["last"][hit] - p["first"][idx])
        np.add.at(minus, (idx, s), n - j)
        if j == 0:
            np.add.at(plus, (idx, s), 1)
    return _from_slice_on(plus), _from_slice_on(minus) + (n - k)
