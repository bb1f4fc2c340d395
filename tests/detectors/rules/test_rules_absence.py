"""Absence at the end (``not X within W after A``): output fired by the passing of event
time, against a brute-force reading of its semantics on random streams, on the AIP and
CDP engines, batch by batch, and through a graph in order and out of order."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from pathlib import Path

import msgpack
import numpy as np
import pytest
from naive import canonical
from refusals import refused
from rules_reference import (
    abc_registry,
    difference,
    quotes_registry,
    random_batches,
    random_events,
    reference,
)

from specula import CostModel, Graph, InProcessRuntime
from specula.detectors import Detector
from specula.detectors.rules import RuleError, parse_rule
from specula.detectors.rules.absence import AbsenceUnion
from specula.detectors.rules.aip import AIPEngine
from specula.detectors.rules.ast import AttrRef, Param, ParamRef, Rule
from specula.detectors.rules.builder import P, rule
from specula.detectors.rules.cdp import CDPEngine
from specula.detectors.rules.detector import RuleDetector
from specula.events import TypeRegistry
from specula.events.strings import string_code
from specula.options import OptionError
from specula.ordering.checkpoint import restore_unit, unit_state
from specula.ordering.net import NetOutput
from specula.ordering.unit import OrderingUnit
from specula.testing import check_detector

ABC = tuple("ABCD")
CASES = {  # name: (rule text, registry, types)
    "timeout": ("define Lone(p: int) from A(p=$x) and not B(p=$x) within 4 after A "
                "where p=$x", abc_registry, ABC),
    "sequence then quiet": ("define Quiet(p: int, v: int) from C(p=$x) and last A(p=$x) "
                            "within 5 from C and not D(v < 2) within 3 after C "
                            "where p=$x and v=A.v", abc_registry, ABC),
    "two absences": ("define Two(p: int) from A(p=$x) and not B(p=$x) within 2 after A "
                     "and not C() within 5 after A where p=$x", abc_registry, ABC),
    "float parameter": ("define F(f: double) from A(value=$f) and not B(value=$f) within 3 "
                        "after A where f=$f", abc_registry, ABC),
    "each and a sum": ("define S(p: int, s: double) from B(p=$x) and each A(p=$x) within 4 "
                       "from B and $s=Sum(A(p=$x).value within 6 from B) and not C(p=$x) "
                       "within 4 after B where p=$x and s=$s", abc_registry, ABC),
    "partition": ("define Part(v: int) from A() and last C() within 4 from A and not B() "
                  "within 3 after A partition by p where v=A.v", abc_registry, ABC),
    "strings": ('define NoTrade(sym: string) from Q(sym=$s) and not T(sym=$s and '
                'ex != "Area1") within 3 after Q where sym=$s', quotes_registry, ("Q", "T", "N")),
}
ENGINES = {"aip": AIPEngine, "cdp": CDPEngine}
#: A rule that makes C an input of its detector (its clock) and fires nothing without D.
_CLOCKED = "define Q(p: int) from D(p=$x) and not C(p=$x) within 1 after D where p=$x"


# ------------------------------------------------------------------- brute force


def brute_force(rule: Rule, registry: TypeRegistry, events: np.ndarray) -> list[tuple]:
    """The composites of ``rule`` as :func:`rules_reference.reference` lists them, with
    the semantics of absence at the end read literally: the reference's matches of the
    rest of the rule (with the parameters as extra attributes), each dropped if an
    event matching an absence comes after the terminator and up to the end of its
    window, and fired, stamped with its deadline, at the first event of the rule's input
    types after the deadline (in stream order), or at the end."""
    params = sorted({c.value.name for n in rule.absences for c in n.pattern.constraints
                     if isinstance(c.value, Param)})
    ticks = [n.within.ticks() for n in rule.absences]
    carried = [(f"_{p}", _kind(rule, registry, p), ParamRef(p)) for p in params]
    if rule.partition:  # the terminator's partition value, which the absence must share
        carried.append(("_partition", "int", AttrRef(0, rule.partition)))
    rest = replace(rule.without_absences(),
                   attributes=(*rule.attributes, *((a, k) for a, k, _ in carried)),
                   assignments=(*rule.assignments, *((a, e) for a, _, e in carried)))
    rows = sorted((dict(zip(events.dtype.names, r.tolist(), strict=True)) for r in events),
                  key=lambda r: (r["ts"], (r["producer"] << 40) | r["seq"]))
    names = {registry.id(t): t for t in rule.input_types}
    out = []
    for found in reference(rest, registry, events):
        ts, key = found[0], found[1]
        values = found[2:2 + len(rule.attributes)]
        bound = dict(zip([a for a, _, _ in carried], found[2 + len(rule.attributes):],
                         strict=True))
        if any(_forbids(neg, w, r, ts, bound, registry)
               and (not rule.partition or r[rule.partition] == bound["_partition"])
               for neg, w in zip(rule.absences, ticks, strict=True) for r in rows):
            continue
        deadline = ts + max(ticks)
        fired = next((i for i, r in enumerate(rows)
                      if r["type"] in names and r["ts"] > deadline), len(rows))
        out.append((fired, deadline, (deadline, key, *values)))
    out.sort(key=lambda item: item[:2])  # stable: a terminator's order stays
    return [composite for _, _, composite in out]


def _forbids(negation, window: int, row: dict, ts: int, bound: dict,
             registry: TypeRegistry) -> bool:
    if row["type"] != registry.id(negation.pattern.type) or not ts < row["ts"] <= ts + window:
        return False
    for c in negation.pattern.constraints:
        value = row[c.attr]
        if isinstance(c.value, Param):
            want = bound[f"_{c.value.name}"]
            if value != (string_code(want) if isinstance(want, str) else want):
                return False
            continue
        want = string_code(c.value) if isinstance(c.value, str) else c.value
        if not {"=": value == want, "!=": value != want, "<": value < want,
                "<=": value <= want, ">": value > want, ">=": value >= want}[c.op]:
            return False
    return True


def _kind(rule: Rule, registry: TypeRegistry, param: str) -> str:
    """``string`` for a parameter bound to a string attribute, else ``double``."""
    element = rule.chain[rule.binder(param)]
    attr = next(c.attr for c in element.constraints if c.value == Param(param))
    return "string" if attr in registry[element.type].strings else "double"


def texts(registry: TypeRegistry, found: list[tuple], rule: Rule) -> list[tuple]:
    """Composites with their string attributes as texts."""
    kinds = [k for _, k in rule.attributes]
    return [(ts, key, *(registry.strings.text(v) if k == "string" else v
                        for v, k in zip(values, kinds, strict=True)))
            for ts, key, *values in found]


def union_output(union: AbsenceUnion, batches: list[np.ndarray]) -> list[tuple]:
    out = []
    for found in [*(union.process(b) for b in batches), union.flush()]:
        for j in range(len(found)):
            out.append((int(found.terminators["ts"][j]), int(found.terminators["key"][j]),
                        *(found.columns[a][j].item() for a, _ in union.rule.attributes)))
    return out


# ---------------------------------------------------------------- the engines


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_absence_rules_equal_the_brute_force_reading_in_random_batches(name, engine):
    text, make_registry, types = CASES[name]
    fired = 0
    for seed in (1, 2):
        registry = make_registry()
        parsed = parse_rule(text)
        events = random_events(registry, types, 90, seed=seed, n_values=3,
                               ranges={"value": (0, 2)})
        union = AbsenceUnion(parsed, ENGINES[engine], registry)
        expected = brute_force(parsed, registry, events)
        actual = texts(registry, union_output(union, random_batches(events, seed=seed + 7)),
                       parsed)
        assert not difference(expected, actual), f"{name}, seed {seed}:\n" + difference(
            expected, actual)
        fired += len(expected)
    assert fired >= 3  # the streams exercise the rule


def test_the_deadline_fires_at_the_first_event_after_it_and_an_x_at_the_deadline_counts():
    registry = abc_registry()
    union = AbsenceUnion(parse_rule(CASES["timeout"][0]), AIPEngine, registry)
    events = registry.from_records(
        [{"type": "A", "ts": 0, "p": 1, "seq": 0}, {"type": "A", "ts": 1, "p": 2, "seq": 1},
         {"type": "B", "ts": 4, "p": 2, "seq": 2},   # inside A(p=2)'s window, at its end
         {"type": "B", "ts": 4, "p": 1, "seq": 3},   # inside A(p=1)'s window too
         {"type": "A", "ts": 5, "p": 3, "seq": 4},
         {"type": "B", "ts": 9, "p": 3, "seq": 5},   # at A(p=3)'s deadline: it counts
         {"type": "N", "ts": 12, "seq": 6},           # not an input of the rule
         {"type": "A", "ts": 12, "p": 0, "seq": 7}], dtype=registry.dtype())
    assert len(union.process(events)) == 0 and union.time_hold() == 16
    found = union.process(registry.from_records(
        [{"type": "B", "ts": 16, "p": 1, "seq": 8}, {"type": "A", "ts": 17, "p": 1, "seq": 9}],
        dtype=registry.dtype()))
    assert found.terminators["ts"].tolist() == [16] and found.causes.tolist() == [1]
    assert found.columns["p"].tolist() == [0] and union.time_hold() == 21


def test_snapshots_hold_what_waits_and_equal_states_give_equal_snapshots():
    registry = abc_registry()
    text = CASES["sequence then quiet"][0]
    events = random_events(registry, ABC, 60, seed=3)
    whole = AbsenceUnion(parse_rule(text), CDPEngine, registry)
    cut = AbsenceUnion(parse_rule(text), CDPEngine, registry)
    whole.process(events[:30])
    for part in (events[:11], events[11:30]):
        cut.process(part)
    assert whole.snapshot() == cut.snapshot()
    again = AbsenceUnion(parse_rule(text), CDPEngine, registry)
    again.restore(cut.snapshot())
    assert union_output(again, [events[30:]]) == union_output(whole, [events[30:]])


# -------------------------------------------------------------- through a graph


def arrivals(raw: np.ndarray, seed: int, max_delay: int) -> np.ndarray:
    """``raw`` (in stream order) arriving with random delays, some of them long."""
    rng = np.random.default_rng(seed)
    delay = rng.integers(0, max_delay + 1, len(raw))
    delay[rng.random(len(raw)) < 0.05] += 4 * max_delay
    raw = raw.copy()
    raw["ats"] = raw["ts"] + delay
    return raw[np.argsort(raw["ats"], kind="stable")]


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("alpha, max_delay, retraction", [
    (1.0, 0, "on-demand"), (1.0, 6, "on-demand"), (0.0, 6, "full"), (0.0, 6, "on-demand"),
    (0.5, 6, "on-demand"), ("adaptive", 6, "on-demand")])
def test_absence_through_a_graph_equals_the_brute_force_reading(engine, alpha, max_delay,
                                                                 retraction):
    """In order (pure K-slack, no delay) and out of order (speculative): the net output
    is the brute-force reading of the events the unit did not declare late."""
    registry = abc_registry()
    rules = [CASES[n][0] for n in ("timeout", "sequence then quiet", "two absences")]
    det = RuleDetector("\n".join(rules), registry, engine=engine)
    raw = random_events(registry, ABC, 160, seed=11, producers=1)
    g = Graph(registry, sources=ABC)
    g.add("rules", det, alpha=alpha, k0=2, retraction=retraction)
    result = InProcessRuntime(g, cost_model=CostModel(per_event=0.02)).run(
        arrivals(raw, 5, max_delay), step_ticks=2)
    late = {(int(r["producer"]), int(r["seq"])) for r in result.late("rules")}
    kept = np.array([r for r in raw if (int(r["producer"]), int(r["seq"])) not in late],
                    raw.dtype)
    expected, attributes = [], {}
    for parsed in det.rules:
        attributes[registry.id(parsed.name)] = [a for a, _ in parsed.attributes]
        expected += [(registry.id(parsed.name), *c) for c in brute_force(parsed, registry, kept)]
    got = [(int(r["type"]), int(r["ts"]), int(r["key"]),
            *(r[a].item() for a in attributes[int(r["type"])]))
           for r in canonical(result.net("rules"))]
    assert sorted(got) == sorted(expected)
    assert len(expected) >= 10
    if isinstance(alpha, float) and alpha < 1:
        assert result.stats("rules").replayed > 0


def test_a_late_x_retracts_the_absence_it_was_fired_for():
    registry = abc_registry()
    g = Graph(registry, sources=ABC)
    g.add("lone", RuleDetector(CASES["timeout"][0], registry), alpha=0.0, k0=10)
    # the rule's own input (A, B) is its event time: A(p=0) at 5 passes A(p=1)'s deadline
    rows = [("A", 0, 1, 0), ("A", 5, 0, 1), ("A", 8, 0, 2)]
    without = InProcessRuntime(g).run(_raw(registry, rows))
    assert [(int(r["ts"]), int(r["p"])) for r in without.net("lone")] == [(4, 1), (9, 0),
                                                                         (12, 0)]
    late_b = _raw(registry, [*rows, ("B", 2, 1, 9)])  # inside the window, arrives last
    with_b = InProcessRuntime(g).run(late_b)
    assert [(int(r["ts"]), int(r["p"])) for r in with_b.net("lone")] == [(9, 0), (12, 0)]
    stats = with_b.stats("lone")
    assert stats.replayed >= 1 and stats.retractions_sent + stats.revocations_sent >= 1


class _TimeFiring(RuleDetector):
    """A rule detector that notes each passing of event time that fired output."""

    def __init__(self, text: str, registry: TypeRegistry, engine: str) -> None:
        super().__init__(text, registry, engine=engine)
        self.fired_at: list[int] = []

    def on_time(self, now, emit):
        before = len(emit)
        super().on_time(now, emit)
        if len(emit) > before:
            self.fired_at.append(now)


def _unit_net(det: RuleDetector, arriving: np.ndarray, seed: int, **options) -> tuple:
    """Net output of ``det`` in a unit fed ``arriving`` in small batches, content only;
    with the unit and the speculative firings of time (above ``clk - K`` then)."""
    unit = OrderingUnit(det, det.registry, producer=1, inputs=det.inputs,
                        outputs=det.outputs, clock=det.inputs, **options)
    net, early = NetOutput(unit.out_dtype), 0
    batches = random_batches(arriving, seed=seed, max_size=4)
    for now, batch in enumerate(batches):
        det.fired_at.clear()
        net.apply(unit.push(batch, now), now)
        early += sum(t > unit.clk - unit.k for t in det.fired_at)
    net.apply(unit.flush(len(batches)), len(batches))
    net = canonical(net.net())
    return sorted(map(tuple, net[["type", "ts", "key", "p"]].tolist())), unit, early


def _quiet_stream(registry: TypeRegistry, seed: int, n: int, max_delay: int) -> tuple:
    """A stream whose rule input (A, B) is sparse among C, the others' clock, and how it
    arrives: A and C up to half ``max_delay`` late, B up to ``max_delay``. Time, not the rule's
    input, fires most absences, and a B often comes after they fired."""
    rng = np.random.default_rng(seed)
    names = rng.choice(["A", "B", "C"], size=n, p=[0.15, 0.15, 0.7])
    raw = registry.from_records(
        [{"type": str(t), "ts": int(ts), "p": int(p), "seq": i}
         for i, (t, ts, p) in enumerate(zip(names, np.cumsum(rng.integers(0, 3, n)),
                                            rng.integers(0, 2, n), strict=True))],
        dtype=registry.dtype())
    delay = rng.integers(0, max_delay // 2 + 1, n)
    is_b = names == "B"
    delay[is_b] = rng.integers(0, max_delay + 1, int(is_b.sum()))
    arriving = raw.copy()
    arriving["ats"] = raw["ts"] + delay
    return raw, arriving[np.argsort(arriving["ats"], kind="stable")]


def test_speculative_time_fired_absences_retract_and_equal_the_final_ones():
    """Random streams, in order and out of order, random alpha and retraction: absences
    fired by the speculative clock (``clk - ceil(alpha*K)``) and retracted by the late
    events that disprove them leave the net output of pure K-slack, which fires only
    when time has passed for good, and of the brute-force reading. K exceeds every
    delay, so no event is late under either."""
    text = "\n".join(CASES[n][0] for n in ("timeout", "two absences"))
    registry = abc_registry()
    early = revised = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        max_delay = int(rng.integers(0, 9))
        raw, arriving = _quiet_stream(registry, seed, 60, max_delay)
        engine = ("aip", "cdp")[seed % 2]
        expected = []
        for parsed in RuleDetector(text, registry).rules:
            expected += [(registry.id(parsed.name), ts, key, p)
                         for ts, key, p in brute_force(parsed, registry, raw)]
        final, _, _ = _unit_net(_TimeFiring(text, registry, engine), arriving, seed,
                                k0=max_delay + 1)
        alpha = float(rng.choice([0.0, 0.3, 0.7]))
        retraction = ("full", "on-demand")[seed // 2 % 2]
        spec, unit, fired = _unit_net(_TimeFiring(text, registry, engine), arriving, seed,
                                      k0=max_delay + 1, alpha=alpha, retraction=retraction)
        assert len(unit.late_events()) == 0
        assert spec == final == sorted(expected), f"seed {seed}"
        early += fired
        stats = unit.stats
        revised += stats.retractions_sent + stats.revocations_sent
    assert early >= 10 and revised >= 5


@pytest.mark.parametrize("retraction, checkpoint", [("full", False), ("on-demand", False),
                                                    ("on-demand", True)])
def test_an_x_in_front_of_an_event_handed_after_the_firing_retracts_it(retraction,
                                                                       checkpoint):
    """Time fires A(p=1)'s absence at 4 (clock 9, alpha*K = 5); C(6) is handed after
    that, and B(3) lands right in front of it, within K: the replay starts from the
    state in front of the firing, not from C(6)'s, and revokes it. Pure K-slack fires
    nothing. (``checkpoint``: the unit goes through a checkpoint after each arrival.)"""
    registry = abc_registry()
    text = CASES["timeout"][0] + "\n" + _CLOCKED
    rows = [("A", 0, 1, 0), ("C", 9, 0, 9), ("C", 6, 0, 10), ("C", 12, 0, 12),
            ("B", 3, 1, 13)]

    def unit_of(alpha: float) -> OrderingUnit:
        det = RuleDetector(text, registry)
        return OrderingUnit(det, registry, producer=1, inputs=det.inputs,
                            outputs=det.outputs, clock=det.inputs, alpha=alpha, k0=10,
                            retraction=retraction)

    for alpha, generated in ((0.5, 1), (1.0, 0)):
        unit = unit_of(alpha)
        net = NetOutput(unit.out_dtype)
        for i, row in enumerate(rows):
            net.apply(unit.push(_raw(registry, [row]), i), i)
            if checkpoint:
                state = msgpack.unpackb(msgpack.packb(unit_state(unit)))
                unit = unit_of(alpha)
                restore_unit(unit, state)
        net.apply(unit.flush(len(rows)), len(rows))
        assert len(net.net()) == 0 and len(unit.late_events()) == 0
        stats = unit.stats
        assert stats.generated == generated
        assert stats.retractions_sent + stats.revocations_sent == generated


def _raw(registry: TypeRegistry, rows: list[tuple]) -> np.ndarray:
    """``(type, ts, p, arrival)`` rows in arrival order."""
    raw = registry.from_records([{"type": t, "ts": ts, "p": p, "seq": i, "ats": ats}
                                 for i, (t, ts, p, ats) in enumerate(rows)],
                                dtype=registry.dtype())
    return raw[np.argsort(raw["ats"], kind="stable")]


def test_the_unit_publishes_no_progress_past_a_waiting_deadline_and_its_clock_fires_it():
    det = RuleDetector(CASES["timeout"][0], abc_registry())
    unit = OrderingUnit(det, det.registry, producer=1, inputs=det.inputs,
                        outputs=det.outputs, clock=det.inputs, k0=3)
    unit.push(_raw(det.registry, [("A", 10, 1, 0), ("A", 13, 0, 1)]))  # hands A(10)
    assert det.time_hold() == 14 and unit.progress == 10
    out = unit.push(_raw(det.registry, [("A", 16, 0, 2)]))  # hands A(13): 13 < 14, held
    assert len(out) == 0 and det.time_hold() == 14 and unit.progress == 13
    # the clock less K reaches 27: A(16) fires 14; the time that passed fires 17 and 20
    out = unit.push(_raw(det.registry, [("A", 30, 1, 3)]))
    assert out["ts"].tolist() == [14, 17, 20] and out["p"].tolist() == [1, 0, 0]
    assert det.time_hold() is None and unit.progress == 27
    # once time has fired, an input at or before it is late: nothing revises the output
    out = unit.push(_raw(det.registry, [("B", 26, 0, 4)]))
    assert len(out) == 0 and unit.late_events()["ts"].tolist() == [26]


def _fires_by_time_unless_followed(g, registry, latency, b_row):
    """Run ``g`` ("lone": A(p=1) not followed by B) on an A at 0 and C at 1..40: the
    absence fires at 4 with ``latency`` (by time, not at the end, 40); with ``b_row``
    added, nothing is net and nothing late. Returns the second run's report."""
    rows = [("A", 0, 1, 0)] + [("C", t, 0, t) for t in range(1, 41)]
    quiet = InProcessRuntime(g).run(_raw(registry, rows), step_ticks=1)
    assert [(int(r["ts"]), int(r["p"])) for r in quiet.net("lone")] == [(4, 1)]
    assert quiet.latencies("lone").tolist() == [latency]
    followed = InProcessRuntime(g).run(_raw(registry, [*rows, b_row]), step_ticks=1)
    assert len(followed.net("lone")) == 0 and len(followed.late("lone")) == 0
    return followed


@pytest.mark.parametrize("alpha, latency", [(1.0, 9), (0.0, 7)])
def test_a_quiet_input_fires_when_the_clock_of_the_raw_stream_passes_the_deadline(alpha,
                                                                                  latency):
    """A(p=1) is the rule's last input; other types (C) move the node's clock through
    the raw stream's progress (idle_after): the absence fires when that clock less
    alpha*K passes its deadline, not at the end of the stream. A B inside the window
    that arrives at 8 comes before pure K-slack fires, and after speculation has fired:
    it retracts what speculation fired."""
    registry = abc_registry()
    g = Graph(registry, sources=ABC)
    g.add("lone", RuleDetector(CASES["timeout"][0], registry), alpha=alpha, k0=2,
          idle_after=3)
    followed = _fires_by_time_unless_followed(g, registry, latency, ("B", 2, 1, 8))
    stats = followed.stats("lone")
    assert stats.generated == (alpha < 1)
    assert stats.retractions_sent + stats.revocations_sent == (alpha < 1)


class _Forward(Detector):
    """Forwards the events of ``source`` as ``target``; clocked by ``C`` too, so it
    publishes progress while ``source`` is quiet."""

    def __init__(self, source: str, target: str) -> None:
        self.inputs, self.outputs = (source, "C"), (target,)
        self.source, self.target = source, target

    def on_event(self, event, emit):
        if event.type == self.source:
            emit(self.target, event.ts, event.key, p=event["p"])


@pytest.mark.parametrize("alpha, latency", [(1.0, 11), (0.0, 9)])
def test_a_quiet_channel_fires_when_the_other_channels_progress_passes_the_deadline(alpha,
                                                                                    latency):
    """A level-2 rule: A2 and B2 come from two producers whose rule input goes quiet
    while their clocks (and punctuations) move on; the rule's unit is clocked by their
    progress, and fires by it, unless a B2 comes in time (its producer's larger K holds
    the rule's clock back until it has)."""
    registry = abc_registry()
    registry.register("A2", p="i8")
    registry.register("B2", p="i8")
    g = Graph(registry, sources=ABC)
    g.add("fa", _Forward("A", "A2"), k0=1)
    g.add("fb", _Forward("B", "B2"), k0=5)
    g.add("lone", RuleDetector("define Lone2(p: int) from A2(p=$x) and not B2(p=$x) "
                               "within 4 after A2 where p=$x", registry), alpha=alpha, k0=2)
    _fires_by_time_unless_followed(g, registry, latency, ("B", 2, 1, 5))


# ------------------------------------------------------------ text and builder


def test_the_builder_writes_the_same_rule_as_the_text():
    built = (rule("Lone", p="int").when("A", p=P.x).absent("B", within=4, after="A", p=P.x)
             .where(p=P.x).build())
    assert built == parse_rule(CASES["timeout"][0])


@pytest.mark.parametrize("text, message", [
    ("define R() from C() and last A() within 5 from C and not B() within 3 after A",
     "line 1, column 58: rule R: 'not B within ... after' names A; an absence at the end "
     "follows the last event of the sequence, its terminator: write 'after C'"),
    ("define R() from C() and not B() within 3 after C ties nonstrict",
     "line 1, column 29: rule R: 'not B within ... after' needs 'ties strict': under "
     "nonstrict ties an event of the terminator's time stamp may come before it"),
    ("define R() from C() and not B() within 3 after C consuming C",
     "line 1, column 29: rule R: 'not B within ... after' does not combine with "
     "'consuming'"),
    ("define R() from C() and not B() within 3 before C",
     "line 1, column 42: expected 'from' (none in the window before an element) or "
     "'after' (none in the window after the terminator), found 'before'"),
])
def test_absence_errors_word_for_word(text, message):
    assert refused(text) == message


def test_the_builder_refuses_what_the_text_refuses():
    with pytest.raises(RuleError, match="names A; an absence at the end follows"):
        (rule("R").when("C").last("A", within=5).absent("B", within=3, after="A").build())


@pytest.mark.slow
@pytest.mark.cluster
def test_on_ray_an_absence_fires_when_time_passes_and_a_late_x_retracts_it():
    """No input of the rule comes after A(p=1): the clock (C) passing its deadline fires
    it, speculatively (alpha = 0), and a B inside the window that arrives once the actor
    has fired it retracts it."""
    ray = pytest.importorskip("ray")
    from specula.actors.ray_runtime import RayRuntime

    registry = abc_registry()
    g = Graph(registry, sources=ABC)
    g.add("lone", RuleDetector(CASES["timeout"][0] + "\n" + _CLOCKED, registry), alpha=0.0,
          k0=10)
    late_b = _raw(registry, [("A", 0, 1, 0), ("C", 2, 0, 2), ("C", 5, 0, 5), ("C", 8, 0, 8),
                             ("B", 3, 1, 9)])
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)

    def arriving():  # the late B comes once the actor has had time to fire the absence
        yield late_b[:4]
        time.sleep(2.0)
        yield late_b[4:]

    try:
        result = RayRuntime(g).run(arriving())
    finally:
        ray.shutdown()
    assert len(result.net("lone")) == 0 and len(result.late("lone")) == 0
    stats = result.stats("lone")
    assert stats.generated == 1 and stats.replayed >= 1
    assert stats.retractions_sent + stats.revocations_sent == 1


def test_the_readme_rows_equal_the_brute_force_reading():
    """Each row of the README's absence table is a tested example."""
    readme = (Path(__file__).parents[3] / "README.md").read_text()
    section = readme.split("### Absence at the end and timeouts")[1].split("\n\n## ")[0]
    texts = re.findall(r"`(define [^`]*)` \|", section)
    assert len(texts) == 3
    registry = TypeRegistry()
    for name in "ABCDX":
        registry.register(name, p="i8")
    for text in texts:
        parsed = parse_rule(text)
        events = random_events(registry, tuple("ABCDX"), 120, seed=4, max_gap=3)
        union = AbsenceUnion(parsed, AIPEngine, registry)
        expected = brute_force(parsed, registry, events)
        assert union_output(union, random_batches(events, seed=5)) == expected
        assert expected, text


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_an_absence_detector_keeps_the_detector_contract(engine):
    """Batching, snapshot and restore, pickling and speculation (specula.testing)."""
    registry = abc_registry()
    det = RuleDetector("\n".join(CASES[n][0] for n in ("timeout", "two absences")), registry,
                       engine=engine)
    check_detector(det, random_events(registry, ("A", "B", "C"), 80, seed=6), registry)


def test_late_process_is_refused_when_the_graph_is_built():
    registry = abc_registry()
    g = Graph(registry, sources=ABC)
    with pytest.raises(OptionError) as info:
        g.add("lone", RuleDetector(CASES["timeout"][0], registry), late="process")
    assert str(info.value) == (
        "lone: late='process' does not combine with absence at the end (Lone): an "
        "absence fires once event time passes its deadline, and a late event handed on out "
        "of order could no longer undo it. Use late='side', with speculation (alpha < 1) "
        "where late events should still count: they then retract what they disprove")


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_every_a_is_either_followed_within_w_or_times_out(engine):
    """Flink's timed-out partial matches of A -> B within W, as an absence rule: each A
    (named by its serial number) is chosen by the sequence rule or fires the absence,
    never both."""
    registry = abc_registry()
    followed = parse_rule("define Followed(n: int) from B(p=$x) and each A(p=$x) within 4 "
                          "from B where n=A.n")
    timed_out = parse_rule("define TimedOut(n: int) from A(p=$x) and not B(p=$x) within 4 "
                           "after A where n=A.n")
    for seed in (1, 2):
        events = random_events(registry, ("A", "B", "C"), 120, seed=seed, serial="n")
        batches = random_batches(events, seed=seed)
        out = union_output(AbsenceUnion(timed_out, ENGINES[engine], registry), batches)
        chosen = {n for *_, n in reference(followed, registry, events)}
        late = {n for *_, n in out}
        a = {int(n) for n in events["n"][events["type"] == registry.id("A")]}
        assert chosen.isdisjoint(late) and chosen | late == a and late
