"""The plan of the CDP engine: a rule compiled against a registry, before any event.

:class:`~specula.detectors.rules.cdp.CDPEngine` and its GPU variant
(:mod:`~specula.detectors.rules.cdp_gpu`) run from one :class:`Plan`: which columns to
keep (one per distinct pattern of the steps, aggregates and negations, :class:`StoreSpec`)
and which rows and derived arrays each holds, what a terminator binds
(:class:`Terminator`), and, as the flat arrays the kernels of
:mod:`~specula.detectors.rules._cdp_kernels` take, how each step scans its column
(:class:`Step`) and how each aggregate or negation reduces its own (:class:`Reduction`).
Compiling also checks that the registry has every type and attribute the rule reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from specula.detectors.rules import _cdp_kernels as _k
from specula.detectors.rules.ast import (
    AttrRef,
    BinOp,
    Comparison,
    Const,
    Constraint,
    Expr,
    Param,
    Pattern,
    Rule,
    RuleError,
    Window,
)
from specula.detectors.rules.detector import attr_refs, element_dtype
from specula.detectors.rules.engine import float_params, resolved_predicates
from specula.events import TypeRegistry, fields_of

__all__ = ["Plan", "Reduction", "Step", "StoreKey", "StoreSpec", "Terminator", "program"]

_SELECTION = {"each": _k.EACH, "last": _k.LAST, "first": _k.FIRST}
_OP = {"sum": _k.SUM, "avg": _k.SUM, "count": _k.SUM, "min": _k.MIN, "max": _k.MAX}


def _checks(pairs: list[tuple[int, int, bool]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(row, param, is_float)`` triples as the three check arrays of the kernels."""
    return (np.array([p[0] for p in pairs], np.int64),
            np.array([p[1] for p in pairs], np.int64),
            np.array([p[2] for p in pairs], np.bool_))


@dataclass(frozen=True)
class StoreKey:
    """What decides membership of a column: type, literal constraints, equalities
    between attributes of one event (``A(x=$p and y=$p)`` where ``A`` binds ``$p``), and
    predicates that read only the event itself (``A(v * 2 > ts)``)."""

    type: str
    literals: tuple[Constraint, ...]
    same: tuple[tuple[str, str, bool], ...]
    predicates: tuple[Comparison, ...] = ()


@dataclass
class StoreSpec:
    key: StoreKey
    type_id: int
    enc: list[tuple[str, bool]]
    num: list[str]
    indexed: list[int] = field(default_factory=list)
    """The ``enc`` rows that steps and reductions look keys up in (their first check):
    the column keeps an equality index of each."""

    def enc_row(self, attr: str, is_float: bool) -> int:
        if (attr, is_float) not in self.enc:
            self.enc.append((attr, is_float))
        return self.enc.index((attr, is_float))

    def num_row(self, attr: str) -> int:
        if attr not in self.num:
            self.num.append(attr)
        return self.num.index(attr)


@dataclass(frozen=True)
class Terminator:
    key: StoreKey
    type_id: int
    binds: tuple[tuple[str, bool, int], ...]  # (attr, is_float, param)
    fills: tuple[tuple[int, str], ...] = ()  # (context slot, attr or "ts")


@dataclass(frozen=True)
class Step:
    """How one step scans its column. ``general`` steps (predicates over earlier
    elements, an event later predicates read, a pattern-window floor, or ``ties
    nonstrict``) run
    :func:`~specula.detectors.rules._cdp_kernels.step_general` with the program
    ``ops``/``consts`` and the context slots the chosen event fills; the others run the
    plain :func:`~specula.detectors.rules._cdp_kernels.step`. The CPU engine runs every
    step of a detection in one call of
    :func:`~specula.detectors.rules._cdp_kernels.sequences`, which runs a plain step as a
    general one that chooses the same events."""

    store: int
    window: int
    selection: int
    chk_col: np.ndarray
    chk_par: np.ndarray
    chk_nan: np.ndarray
    bind_col: np.ndarray
    bind_par: np.ndarray
    general: bool = False
    floor: bool = False
    ops: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    consts: np.ndarray = field(default_factory=lambda: np.zeros(1, np.float64))
    fill_slot: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    fill_row: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pos_row: int = -1


@dataclass(frozen=True)
class Reduction:
    """An aggregate (``function`` set) or a negation (``function`` None, a count)."""

    store: int
    function: str | None
    op: int
    vrow: int
    anchor: int
    window: int | None
    after: int | None
    chk_col: np.ndarray
    chk_par: np.ndarray
    chk_nan: np.ndarray


class Plan:
    """A rule compiled against a registry: columns, steps, reductions, row dtype."""

    def __init__(self, rule: Rule, registry: TypeRegistry, ticks_per_second: float | None):
        self.rule = rule
        self.length = len(rule.chain)
        fields = {}
        for name in rule.input_types:
            if name not in registry:
                raise RuleError(f"rule {rule.name}: event type {name!r} is not registered; "
                                "register it (with its attributes) before building an engine")
            fields[name] = dict(registry[name].fields)
        self.fields = fields
        read: dict[str, set[str]] = {name: set() for name in fields}
        patterns = list(rule.chain) + [a.pattern for a in rule.aggregates] + [
            n.pattern for n in rule.negations]
        for pattern in patterns:
            read[pattern.type] |= {c.attr for c in pattern.constraints}
        for agg in rule.aggregates:
            if agg.attr is not None:
                read[agg.pattern.type].add(agg.attr)
        for ref in attr_refs(rule):
            if ref.attr != "ts":
                read[rule.chain[ref.element].type].add(ref.attr)
        for name, attrs in read.items():
            for attr in sorted(attrs - set(fields[name])):
                have = ", ".join(fields[name]) or "none"
                raise RuleError(f"rule {rule.name}: event type {name!r} has no attribute "
                                f"{attr!r} (its attributes: {have})")
        self.read = {name: tuple(sorted(attrs)) for name, attrs in read.items()}
        self.dtype = element_dtype(rule, registry)
        row: list[tuple[str, np.dtype]] = [(n, self.dtype[n]) for n in fields_of(self.dtype)]
        for name in fields:
            for attr in self.read[name]:
                if attr not in dict(row):
                    row.append((attr, fields[name][attr]))
        self.row_dtype = np.dtype(row)
        self.type_ids = {name: registry.id(name) for name in fields}

        params: list[str] = []
        for pattern in rule.chain:
            for p in pattern.params():
                if p.name not in params:
                    params.append(p.name)
        self.params = params
        floats = float_params(rule, registry)
        self.is_float = [name in floats for name in params]
        binder = {name: rule.binder(name) for name in params}

        self.stores: list[StoreSpec] = []
        store_of: dict[StoreKey, int] = {}

        def bind_key(pattern: Pattern, element: int | None):
            """Store key, plus binds and checks of ``pattern`` as chain ``element``."""
            binds: list[tuple[str, int]] = []
            checks: list[tuple[str, int]] = []
            same: list[tuple[str, str, bool]] = []
            first: dict[str, str] = {}
            for c in pattern.constraints:
                if not isinstance(c.value, Param):
                    continue
                p = params.index(c.value.name)
                if binder[c.value.name] != element:
                    checks.append((c.attr, p))
                elif c.value.name in first:
                    same.append((first[c.value.name], c.attr, self.is_float[p]))
                else:
                    first[c.value.name] = c.attr
                    binds.append((c.attr, p))
            own: tuple[Comparison, ...] = ()
            if element is not None:
                own = tuple(c for c, reads in zip(resolved_predicates(rule, element),
                                                  _reads(rule, element), strict=True)
                            if reads <= {element})
            key = StoreKey(pattern.type, pattern.literals(), tuple(same), own)
            return key, binds, checks

        def store(key: StoreKey) -> int:
            if key not in store_of:
                store_of[key] = len(self.stores)
                self.stores.append(StoreSpec(key, self.type_ids[key.type], [], []))
            return store_of[key]

        def check_arrays(spec: StoreSpec, checks):
            return _checks([(spec.enc_row(a, self.is_float[p]), p, self.is_float[p])
                            for a, p in checks])

        self.slots = _slots(rule)
        key, binds, _ = bind_key(rule.terminator, 0)
        self.terminator = Terminator(key, self.type_ids[key.type],
                                     tuple((a, self.is_float[p], p) for a, p in binds),
                                     tuple((q, a) for q, (e, a) in enumerate(self.slots)
                                           if e == 0))
        self.strict = rule.ties == "strict"
        self.window = None if rule.within is None else _ticks(rule, rule.within,
                                                                ticks_per_second)
        self.steps: list[Step] = []
        for i, st in enumerate(rule.steps, start=1):
            key, binds, checks = bind_key(st.pattern, i)
            si = store(key)
            spec = self.stores[si]
            col, par, nan = check_arrays(spec, checks)
            bcol = np.array([spec.enc_row(a, self.is_float[p]) for a, p in binds], np.int64)
            bpar = np.array([p for _, p in binds], np.int64)
            linked = [c for c, reads in zip(resolved_predicates(rule, i), _reads(rule, i),
                                            strict=True) if reads - {i}]
            ops, consts = program(linked, i, self.slots, spec.num_row)
            fills = [(q, a) for q, (e, a) in enumerate(self.slots) if e == i]
            floor = self.window is not None and st.selection != "first"
            self.steps.append(Step(
                si, _ticks(rule, st.within, ticks_per_second), _SELECTION[st.selection], col,
                par, nan, bcol, bpar,
                general=bool(linked) or bool(fills) or floor or not self.strict,
                floor=floor, ops=ops, consts=consts,
                fill_slot=np.array([q for q, _ in fills], np.int64),
                fill_row=np.array([-1 if a == "ts" else spec.num_row(a) for _, a in fills],
                                  np.int64),
                pos_row=-1 if self.strict else spec.enc_row(POSITION, False)))
        self.reductions: list[Reduction] = []
        for agg in rule.aggregates:
            key, _, checks = bind_key(agg.pattern, None)
            si = store(key)
            col, par, nan = check_arrays(self.stores[si], checks)
            vrow = -1 if agg.attr is None else self.stores[si].num_row(agg.attr)
            self.reductions.append(Reduction(
                si, agg.function, _OP[agg.function], vrow, agg.anchor,
                _ticks(rule, agg.within, ticks_per_second), None, col, par, nan))
        for neg in rule.negations:
            key, _, checks = bind_key(neg.pattern, None)
            si = store(key)
            col, par, nan = check_arrays(self.stores[si], checks)
            window = None if neg.within is None else _ticks(rule, neg.within, ticks_per_second)
            self.reductions.append(Reduction(si, None, _k.SUM, -1, neg.anchor, window,
                                             neg.after, col, par, nan))
        scans: tuple[Step | Reduction, ...] = (*self.steps, *self.reductions)
        for scan in scans:
            if len(scan.chk_col):
                rows = self.stores[scan.store].indexed
                if int(scan.chk_col[0]) not in rows:
                    rows.append(int(scan.chk_col[0]))




def _ticks(rule: Rule, window: Window, ticks_per_second: float | None) -> int:
    """``window`` in ticks; a window too long for the engines names its rule."""
    try:
        return window.ticks(ticks_per_second)
    except RuleError as exc:
        raise RuleError(f"rule {rule.name}: {exc}") from None


POSITION = "#position"
"""The pseudo-attribute whose encoded row holds each event's position key
(``producer << 40 | seq``), kept where ``ties nonstrict`` must tell events apart."""

_OPS = {"+": _k.OP_ADD, "-": _k.OP_SUB, "*": _k.OP_MUL, "/": _k.OP_DIV,
        "=": _k.OP_EQ, "!=": _k.OP_NE, "<": _k.OP_LT, "<=": _k.OP_LE, ">": _k.OP_GT,
        ">=": _k.OP_GE}


def _reads(rule: Rule, element: int) -> list[set[int]]:
    """Per resolved predicate of ``element``, the elements it reads."""
    return [{r.element for r in _refs(c.left) + _refs(c.right)}
            for c in resolved_predicates(rule, element)]


def _slots(rule: Rule) -> list[tuple[int, str]]:
    """Context slots: ``(element, attr)`` that predicates of later elements read."""
    slots: list[tuple[int, str]] = []
    for i in range(1, len(rule.chain)):
        for c in resolved_predicates(rule, i):
            for ref in _refs(c.left) + _refs(c.right):
                if ref.element < i and (ref.element, ref.attr) not in slots:
                    slots.append((ref.element, ref.attr))
    return slots


def program(predicates: list[Comparison], element: int, slots: list[tuple[int, str]],
            num_row: Callable[[str], int]) -> tuple[np.ndarray, np.ndarray]:
    """The predicate program (see :mod:`._cdp_kernels`) of ``predicates``, run per candidate
    of chain ``element``: its attributes are read from the value row ``num_row(attr)``
    (its time stamp directly), those of other elements from the context slot ``slots``
    lists them at. Both engines compile their predicates with it."""
    ops: list[tuple[int, int]] = []
    consts: list[float] = []

    def emit(expr: Expr) -> None:
        if isinstance(expr, Const):
            ops.append((_k.OP_CONST, len(consts)))
            consts.append(float(expr.value))
        elif isinstance(expr, AttrRef) and expr.element == element:
            ops.append((_k.OP_TS, 0) if expr.attr == "ts"
                       else (_k.OP_NUM, num_row(expr.attr)))
        elif isinstance(expr, AttrRef):
            ops.append((_k.OP_CTX, slots.index((expr.element, expr.attr))))
        elif isinstance(expr, BinOp):
            emit(expr.left)
            emit(expr.right)
            ops.append((_OPS[expr.op], 0))
        else:
            raise TypeError(f"not an expression of a predicate: {expr!r}")

    for c in predicates:
        emit(c.left)
        emit(c.right)
        ops.append((_OPS[c.op], 0))
        ops.append((_k.OP_REQUIRE, 0))
    return (np.array(ops, np.int64).reshape(-1, 2),
            np.array(consts or [0.0], np.float64))


def _refs(expr: Expr) -> list[AttrRef]:
    if isinstance(expr, AttrRef):
        return [expr]
    if isinstance(expr, BinOp):
        return _refs(expr.left) + _refs(expr.right)
    return []
