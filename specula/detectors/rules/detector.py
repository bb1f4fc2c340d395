"""A detector that runs rules: one engine per rule, composite events out.

:class:`RuleDetector` is an ordinary :class:`~specula.detectors.base.Detector`, so a
graph runs it behind a speculative ordering unit like any other detector. Its engine is
chosen by name (``"aip"``, ``"cdp"``, ``"gpu"``) and imported only when the detector
first processes a batch, so a graph holding a GPU detector can be declared on a machine
without a GPU and shipped to an actor that has one.
"""

from __future__ import annotations

import dataclasses
import importlib
import pickle
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from specula.detectors import Detector, Emitter
from specula.detectors.rules._aip_shed import PartialMatchBlock, StateSheddingError
from specula.detectors.rules._lexer import RuleSyntaxError, located
from specula.detectors.rules.absence import AbsenceUnion
from specula.detectors.rules.assignments import check_assignments
from specula.detectors.rules.ast import (
    AttrRef,
    BinOp,
    Expr,
    Rule,
    RuleError,
    Window,
)
from specula.detectors.rules.disjunctions import engine_registry
from specula.detectors.rules.engine import Engine, register_composite
from specula.detectors.rules.expand import Composites, Union, as_events, expand
from specula.detectors.rules.strings import check_strings
from specula.events import TypeRegistry
from specula.options import OptionError

__all__ = ["ENGINES", "RuleDetector", "check_rule", "element_dtype", "engine_class"]

EngineName = Literal["aip", "cdp", "gpu"]

ENGINES: dict[str, tuple[str, str]] = {
    "aip": ("specula.detectors.rules.aip", "AIPEngine"),
    "cdp": ("specula.detectors.rules.cdp", "CDPEngine"),
    "gpu": ("specula.detectors.rules.cdp_gpu", "GPUCDPEngine"),
}
_CORE = (("ts", np.int64), ("key", np.int64), ("producer", np.int32), ("seq", np.int64))


def engine_class(name: str) -> type:
    """The engine class called ``name`` (``"aip"``, ``"cdp"`` or ``"gpu"``), imported now.

    >>> engine_class("aip").__name__
    'AIPEngine'
    """
    if name not in ENGINES:
        raise ValueError(f"unknown rule engine {name!r}; use one of {', '.join(ENGINES)}")
    module, cls = ENGINES[name]
    try:
        return getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"rule engine {name!r} needs {module}.{cls}, which cannot be "
                          f"imported ({exc}); use engine='aip'") from exc


def check_rule(rule: Rule, registry: TypeRegistry,
               ticks_per_second: float | None = None) -> None:
    """Raise :class:`RuleError` unless every type and attribute ``rule`` names is registered
    and every window can be converted to ticks.

    >>> reg = TypeRegistry(); _ = reg.register("A", x="i8")
    >>> from specula.detectors.rules.ast import Constraint, Pattern
    >>> try:
    ...     check_rule(Rule("R", (), Pattern("A", (Constraint("y", "=", 1),))), reg)
    ... except RuleError as exc:
    ...     print(exc)
    rule R: event type 'A' has no attribute 'y'; its attributes are x
    """
    patterns = [*rule.chain, *(a.pattern for a in rule.aggregates),
                *(n.pattern for n in rule.negations), *rule.until_patterns]
    for pattern in patterns:
        fields = _fields(rule, pattern.type, registry)
        for c in pattern.constraints:
            _require(rule, pattern.type, c.attr, fields)
    for agg in rule.aggregates:
        if agg.attr is not None:
            _require(rule, agg.pattern.type, agg.attr, _fields(rule, agg.pattern.type, registry))
    for ref in attr_refs(rule):
        t = rule.chain[ref.element].type
        if ref.attr != "ts":
            _require(rule, t, ref.attr, _fields(rule, t, registry))
    windows: list[Window] = [s.within for s in rule.steps]
    windows += [rule.within] if rule.within is not None else []
    windows += [a.within for a in rule.aggregates]
    windows += [n.within for n in rule.negations if n.within is not None]
    for w in windows:
        try:
            w.ticks(ticks_per_second)
        except OverflowError:  # round() of an infinite number of ticks
            raise RuleError(f"rule {rule.name}: window '{w.value} {w.unit}' is more ticks than "
                            f"any number holds at {ticks_per_second:g} ticks per second") from None
        except RuleError as exc:
            hint = "; pass ticks_per_second" if ticks_per_second is None and w.unit else ""
            raise RuleError(f"rule {rule.name}: {exc}{hint}", near=exc.near) from None


def element_dtype(rule: Rule, registry: TypeRegistry) -> np.dtype:
    """Dtype of the chain elements of a match: the core fields an engine must keep and
    every attribute of a chain element the rule reads (constraints, ``Type.attr``).

    >>> from specula.detectors.rules.ast import Constraint, Param, Pattern
    >>> reg = TypeRegistry(); _ = reg.register("A", x="i8", y="f8")
    >>> element_dtype(Rule("R", (), Pattern("A", (Constraint("x", "=", Param("p")),))), reg).names
    ('ts', 'key', 'producer', 'seq', 'x')
    """
    attrs = [c.attr for p in rule.chain for c in p.constraints]
    attrs += [r.attr for r in attr_refs(rule) if r.attr != "ts"]
    fields: dict[str, np.dtype] = {}
    for p in rule.chain:
        fields.update(registry[p.type].fields)
    return np.dtype([*_CORE, *((a, fields[a]) for a in dict.fromkeys(attrs))])


class RuleDetector(Detector):
    """A detector for one or many rules, each run by its own engine.

    Parameters
    ----------
    rules : str, Rule or iterable of Rule
        The rules; a string is parsed with
        :func:`~specula.detectors.rules.parser.parse_rules`.
    registry : TypeRegistry
        The graph's registry: the rules' event types must be registered with every
        attribute the rules name; the composite types are registered here.
    engine : {"aip", "cdp", "gpu"}
        AIP automata, CDP columns on the CPU (Numba) or CDP columns on a GPU. The engine
        module is imported when the detector first processes a batch.

    Attributes
    ----------
    inputs, outputs : tuple of str
        Every type the rules read; the composite types they define.
    num_gpus : float
        GPUs it declares it needs: 1 for ``engine="gpu"``, else 0; its node's ``gpus``
        option defaults to it (``add_rules`` sets the share ``plan`` gives, when heavy
        rules outnumber the GPUs).

    Examples
    --------
    >>> from specula.detectors.rules.ast import Constraint, Param, Pattern, Step
    >>> from specula.detectors.rules.ast import ParamRef, Window
    >>> reg = TypeRegistry(); _ = reg.register("A", x="i8"); _ = reg.register("B", x="i8")
    >>> rule = Rule("AB", (("x", "int"),), Pattern("B", (Constraint("x", "=", Param("p")),)),
    ...             (Step("last", Pattern("A", (Constraint("x", "=", Param("p")),)), Window(10)),),
    ...             assignments=(("x", ParamRef("p")),))
    >>> det = RuleDetector([rule], reg)
    >>> det.inputs, det.outputs
    (('B', 'A'), ('AB',))
    >>> batch = reg.from_records([{"type": "A", "ts": 1, "x": 7}, {"type": "B", "ts": 4, "x": 7},
    ...                           {"type": "B", "ts": 20, "x": 7}], dtype=reg.dtype(["A", "B"]))
    >>> emit = Emitter()
    >>> det.on_batch(batch, [t.name for t in reg.types()], emit)
    >>> name, columns, cause = emit.column_batches[0]
    >>> name, columns["ts"].tolist(), columns["x"].tolist(), cause.tolist()
    ('AB', [4], [7], [1])

    A rule in text, fed a few events (``specula.testing.feed``): smoke, then a
    temperature above 45 in the same area within 5 ticks is a fire.

    >>> from specula.testing import feed
    >>> reg = TypeRegistry()
    >>> _ = reg.register("Smoke", area="i8"), reg.register("Temp", area="i8", value="i8")
    >>> fire = RuleDetector("define Fire(area: int, measuredTemp: int) "
    ...                     "from Temp(area=$a and value>45) "
    ...                     "and last Smoke(area=$a) within 5 from Temp "
    ...                     "where area=Temp.area and measuredTemp=Temp.value", reg)
    >>> events = [{"type": "Smoke", "ts": 1, "area": 7},
    ...           {"type": "Temp", "ts": 3, "area": 7, "value": 50},
    ...           {"type": "Temp", "ts": 4, "area": 8, "value": 60},  # no smoke in area 8
    ...           {"type": "Temp", "ts": 9, "area": 7, "value": 60}]  # the smoke is too old
    >>> feed(fire, events, registry=reg).net
    [{'type': 'Fire', 'ts': 3, 'key': 0, 'area': 7, 'measuredTemp': 50}]
    """

    def __init__(self, rules: str | Rule | Iterable[Rule], registry: TypeRegistry, *,
                 engine: EngineName = "aip") -> None:
        if engine not in ENGINES:
            raise ValueError(f"unknown rule engine {engine!r}; use one of {', '.join(ENGINES)}")
        self.rules = as_rules(rules)
        self.engine = engine
        # windows written with a unit (``5 min.``) are converted in the registry's unit
        self.ticks_per_second = ticks_per_second = registry.ticks_per_second
        _check_no_self_input(self.rules)
        for rule, (text, start) in zip(self.rules, _texts(rules, self.rules), strict=True):
            try:
                check_strings(rule, registry)
                engines = engine_registry(rule, registry)  # with derived types, if any
                for plain in expand(rule, ticks_per_second):
                    check_rule(plain, engines, ticks_per_second)
                check_assignments(rule, registry)
            except RuleSyntaxError:
                raise
            except RuleError as exc:  # the line and column where the rule has a text
                if not text:
                    raise
                raise located(exc, text, start, start + len(rule.source)) from None
        for rule in self.rules:
            register_composite(rule, registry)
        self.registry = registry
        # each rule's composites as events of its type (see Emitter.records)
        self._dtypes = [registry.dtype([rule.name]) for rule in self.rules]
        self.inputs = tuple(dict.fromkeys(t for r in self.rules for t in r.input_types))
        self.outputs = tuple(dict.fromkeys(r.name for r in self.rules))
        self.num_gpus = 1.0 if engine == "gpu" else 0.0
        self._unions: list[Union | AbsenceUnion] | None = None
        self._absent: list[AbsenceUnion] = []  # the unions with absence at the end
        self._holding: list[tuple[int, Any]] | None = None  # see _holders

    def check_node_options(self, options: Mapping[str, Any], where: str) -> None:
        """Refuse ``late="process"`` with absence at the end (a late event could not
        undo an absence fired) and with a CDP engine: CDP keeps its columns in stream
        order and its kernels read a window as a run of them ending at the terminator,
        so an event behind what it has read has no place to go (AIP appends it to its
        tables, where the terminators after it find it). Refused here, when the graph is
        built, rather than at the first late event."""
        absent = [r.name for r in self.rules if r.absences]
        if options.get("late") == "process" and absent:
            raise OptionError(
                f"{where}: late='process' does not combine with absence at the end "
                f"({', '.join(absent)}): an absence fires once event time passes its "
                "deadline, and a late event handed on out of order could no longer undo "
                "it. Use late='side', with speculation (alpha < 1) where late events "
                "should still count: they then retract what they disprove")
        if options.get("late") == "process" and self.engine != "aip":
            raise OptionError(
                f"{where}: late='process' needs engine='aip'; the {self.engine!r} engine "
                "takes events in stream order only and cannot process one that comes "
                "behind what it has read. Use late='side' (late events are counted and "
                "go to the late side output), or RuleDetector(..., engine='aip')")

    def unions(self) -> list[Union | AbsenceUnion]:
        """Per rule, the engines of its expansions, created (and their module imported)
        on first use."""
        if self._unions is None:
            cls = engine_class(self.engine)
            self._unions = [(AbsenceUnion if rule.absences else Union)(
                rule, cls, self.registry, self.ticks_per_second) for rule in self.rules]
            self._absent = [u for u in self._unions if isinstance(u, AbsenceUnion)]
        return self._unions

    def time_hold(self) -> int | None:
        """The earliest deadline of a composite that waits for event time to pass it
        (absence at the end, :mod:`~specula.detectors.rules.absence`); None: none."""
        if not self._absent:  # the unit asks at every step: most rules have none
            return None
        holds = [h for u in self._absent if (h := u.time_hold()) is not None]
        return min(holds) if holds else None

    def engines(self) -> list[Engine]:
        """Every engine of every rule, in rule order."""
        return [e for union in self.unions() for e in union.engines]

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        """Run every rule's engines on the batch and emit its composite events, each caused
        by its terminator."""
        for union, dtype in zip(self.unions(), self._dtypes, strict=True):
            rows, causes = union.events(events, dtype)
            if len(causes):
                emit.records(union.rule.name, rows, causes)

    def on_end(self, emit: Emitter) -> None:
        """End of stream: the matches of terminators an engine still holds (rules with
        ``ties nonstrict`` wait for the time stamp after theirs)."""
        for union, dtype in zip(self.unions(), self._dtypes, strict=True):
            _emit(union.rule, union.flush(), emit, dtype)

    def on_time(self, now: int, emit: Emitter) -> None:
        """Event time has reached ``now``: the absences whose deadline it reached fire,
        also when the rule's own input is quiet."""
        for union, dtype in zip(self.unions(), self._dtypes, strict=True):
            if isinstance(union, AbsenceUnion):
                _emit(union.rule, union.pass_time(now), emit, dtype)

    def snapshot(self) -> tuple[bytes, ...]:
        """One snapshot per engine, and the history of each consuming rule (pickled
        where a snapshot is not bytes)."""
        return tuple(s if isinstance(s, bytes) else _Pickled(pickle.dumps(s))
                     for union in self.unions() for s in union.snapshot())

    def restore(self, state: tuple[bytes, ...]) -> None:
        """Return every engine to its state in ``state``."""
        parts = [pickle.loads(s) if isinstance(s, _Pickled) else s for s in state]
        for union in self.unions():
            union.restore(parts[:union.parts])
            parts = parts[union.parts:]

    # State shedding (specula.shedding.state.PartialMatchHolder): the AIP engines'
    # hooks, with every engine's states numbered after the previous engine's.

    def partial_matches(self) -> list[PartialMatchBlock]:
        """The live partial matches of every engine, one block per state (see
        :mod:`~specula.detectors.rules._aip_shed`)."""
        return [b for offset, e in self._holders() for b in e.partial_matches(offset)]

    def drop_partial_matches(self, state: int, rows: np.ndarray) -> int:
        """Drop the partial matches of ``state`` at ``rows`` of its block in the last
        :meth:`partial_matches` (which must be current)."""
        engine, k = self._engine_of(state)
        return engine.drop_partial_matches(k, rows)

    def drop_new_partial_matches(self, state: int,
                                 test: Callable[[np.ndarray], np.ndarray] | None) -> None:
        """From now on drop the partial matches of ``state`` whose feature rows ``test``
        marks as they are made (None: stop); see :mod:`~specula.detectors.rules._aip_shed`."""
        engine, k = self._engine_of(state)
        engine.drop_new_partial_matches(k, test)

    def classify_partial_matches(self, state: int,
                                 classifier: Callable[[np.ndarray], np.ndarray] | None
                                 ) -> None:
        """Keep ``classifier``'s class with every partial match of ``state`` (None:
        stop); see :mod:`~specula.detectors.rules._aip_shed`."""
        engine, k = self._engine_of(state)
        engine.classify_partial_matches(k, classifier)

    def class_counts(self, state: int, size: int, slices: int, slice_len: float
                     ) -> np.ndarray:
        """``(size, slices)``: the live partial matches of the classified ``state`` per
        class and time slice."""
        engine, k = self._engine_of(state)
        return engine.class_counts(k, size, slices, slice_len)

    def drop_classes(self, state: int, shed: np.ndarray, slice_len: float) -> int:
        """Drop the partial matches of the classified ``state`` whose (class, time
        slice) ``shed`` marks; return how many."""
        engine, k = self._engine_of(state)
        return engine.drop_classes(k, shed, slice_len)

    def _engine_of(self, state: int) -> tuple[Any, int]:
        """The engine that holds ``state``, and the state's number in it."""
        for offset, e in self._holders():
            if offset < state < offset + len(e.rule.chain):
                return e, state - offset
        raise StateSheddingError(f"{self!r} has no state {state}")

    def input_rows(self, events: np.ndarray) -> list[tuple[int, np.ndarray]]:
        """Per state, the rows of ``events`` that would make its partial matches."""
        return [(offset + k, rows) for offset, e in self._holders()
                for k, rows in e.input_rows(events)]

    def watch(self, on: bool) -> list[PartialMatchBlock]:
        """Start or stop recording the matches every engine makes; return the record."""
        return [b for offset, e in self._holders() for b in _offset(e.watch(on), offset)]

    @property
    def work(self) -> int:
        """Candidates scanned and instances made by every engine so far."""
        return sum(e.work for _, e in self._holders())

    def _holders(self) -> list[tuple[int, Any]]:
        """(first state id, engine) of every engine; only AIP keeps partial matches.
        The engines never change once made, so the list is made once."""
        if self._holding is None:
            self._holding = self._make_holders()
        return self._holding

    def _make_holders(self) -> list[tuple[int, Any]]:
        if self.engine != "aip":
            raise StateSheddingError(
                f"{self!r}: state shedding needs engine='aip'. CDP keeps no partial "
                "matches between terminators, only columns of events that every "
                "terminator reads anew: dropping one is dropping an input event after it "
                "was stored, which input shedding at the inbox does before it costs "
                "anything")
        consuming = [r.name for r in self.rules if r.consuming]
        if consuming:
            raise StateSheddingError(
                f"{self!r}: state shedding does not combine with consumption "
                f"({', '.join(consuming)}): a consuming rule rebuilds its engines' partial "
                "matches from the events it keeps, which would bring shed ones back")
        out, offset = [], 0
        for e in self.engines():
            out.append((offset, e))
            offset += len(e.rule.chain)
        return out

    def __repr__(self) -> str:
        return f"RuleDetector({', '.join(r.name for r in self.rules)}, engine={self.engine!r})"


def _offset(blocks: list[PartialMatchBlock], offset: int) -> list[PartialMatchBlock]:
    """``blocks`` with ``offset`` added to their state ids."""
    return [dataclasses.replace(b, state=b.state + offset) for b in blocks]


def _emit(rule: Rule, composites: Composites, emit: Emitter, dtype: np.dtype) -> None:
    """Emit ``composites`` as events of ``dtype``, each caused by its terminator."""
    if len(composites):
        emit.records(rule.name, as_events(composites, dtype), composites.causes)


class _Pickled(bytes):
    """A pickled engine snapshot (bytes compare by value, as snapshots must)."""


def as_rules(rules: str | Rule | Iterable[Rule]) -> tuple[Rule, ...]:
    """Rules from rule text (parsed), one rule, or several."""
    if isinstance(rules, str):
        from specula.detectors.rules.parser import parse_rules

        rules = parse_rules(rules)
    elif isinstance(rules, Rule):
        rules = [rules]
    rules = tuple(rules)
    if not rules:
        raise ValueError("RuleDetector needs at least one rule")
    for r in rules:
        if not isinstance(r, Rule):
            raise TypeError(f"expected Rule objects or rule text, got {type(r).__name__}")
    return rules


def _texts(given: str | Rule | Iterable[Rule], rules: tuple[Rule, ...]
           ) -> list[tuple[str, int]]:
    """Per rule, the text it was written in and where in it the rule starts: the text
    given, else the rule's own source ("" for a rule built in Python)."""
    if not isinstance(given, str):
        return [(rule.source, 0) for rule in rules]
    out, cursor = [], 0
    for rule in rules:
        start = given.find(rule.source, cursor)
        out.append((given, start) if start >= 0 else (rule.source, 0))
        cursor = max(cursor, start)
    return out


def _check_no_self_input(rules: tuple[Rule, ...]) -> None:
    defined = {r.name: r for r in rules}
    for rule in rules:
        for t in rule.input_types:
            if t in defined:
                raise RuleError(f"rule {rule.name} reads {t}, which rule {defined[t].name} of "
                                "the same detector defines; a detector cannot consume its own "
                                "output: put the two rules in separate detectors")


def _fields(rule: Rule, type_name: str, registry: TypeRegistry) -> tuple[str, ...]:
    if type_name not in registry:
        raise RuleError(f"rule {rule.name}: event type {type_name!r} is not registered; "
                        f"register it first (registry.register({type_name!r}, attr=dtype, ...))",
                        near=(type_name,))
    return registry[type_name].field_names


def _require(rule: Rule, type_name: str, attr: str, fields: tuple[str, ...]) -> None:
    if attr not in fields:
        have = ", ".join(fields) or "none"
        raise RuleError(f"rule {rule.name}: event type {type_name!r} has no attribute "
                        f"{attr!r}; its attributes are {have}", near=(attr,))


def attr_refs(rule: Rule) -> list[AttrRef]:
    """Every ``name.attr`` the rule reads: in where, filters and predicates."""
    exprs: list[Expr] = [e for _, e in rule.assignments]
    comparisons = [*rule.filters, *(c for p in rule.chain for c in p.predicates)]
    exprs += [x for f in comparisons for x in (f.left, f.right)]
    out: list[AttrRef] = []
    while exprs:
        e = exprs.pop()
        if isinstance(e, BinOp):
            exprs += [e.left, e.right]
        elif isinstance(e, AttrRef):
            out.append(e)
    return out
