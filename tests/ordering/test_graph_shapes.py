"""Speculation never changes the answer, in any graph shape.

Hypothesis draws cases from ``tests/graph_shapes.py``: graphs of 2-4 levels mixing
multi-output detectors, type-subset subscribers, partitioned subscribers, fan-ins of
several producers and stateful detectors, with random alpha (adaptive too), retraction
mode, K and partitions per node, over raw streams with random delays, bursts and equal
time stamps, run on the in-process runtime in steps of random size. For every detector
instance, none skipped:

1. **Net output.** Its net output equals the in-order output of what it must have
   processed: the raw events and its producers' net outputs of its input types and
   partition, minus the events it declared late, each version of an event once
   (counters by rank: an on-demand unit's are labels, ``naive.canonical``). A
   late update or revocation leaves the version it revises processed; a late retraction
   leaves processed the events it revokes that the instance had already purged: those
   with a key below its horizon then (one equal to it may be another version), a
   horizon that only grows. The late and accepted events around a retraction bound it;
   the choices left are tried (``naive.consumed``, ``naive.kept_choices``).
2. **Late records.** Each one is a copy of a message its producer sent, and a late
   update revises an event the instance could hold (its type and partition).
3. **Whole graph.** With nothing late anywhere, every instance's net output equals its
   output in the in-order graph (``naive.reference_instances``).
4. **Counters.** After the flush the buffer is empty, ``late`` is the size of the late
   side output, ``control_in == retractions_received + revocations_received`` and every
   arrival is accounted for: an event or update that arrives is late, discarded as
   equal to the held version, replaces the held version, or enters the buffer, which it
   leaves by purge, by a retraction or revocation, or shed while held::

       events_in == (late - late counter messages) + updates_discarded
                    + updates_applied + purged + events_removed + events_shed

   A producer counts every message it sends (``generated + retractions_sent +
   revocations_sent``); with full retraction its net output holds
   ``generated - events_retracted`` events, with on-demand between that minus
   ``revocations_sent + updates_sent`` and that minus ``revocations_sent``.

``SPECULA_SOAK=1`` runs the ``soak`` tests: many more, longer cases, for minutes
(``SPECULA_SOAK_EXAMPLES`` sets how many per test, default 2000).
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pytest
from graph_shapes import (
    Case,
    Count,
    Echo,
    Spec,
    Split,
    Sum,
    cases,
    idle_cases,
    seeded_case,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from naive import (
    canonical,
    consumed,
    content,
    in_view,
    instances,
    kept_choices,
    key,
    reference_instances,
    run_detector,
    show,
)

from specula import CostModel, InProcessRuntime
from specula import events as ev
from specula.detectors.graph import Node
from specula.ordering.unit import OrderingUnit

SOAK = os.environ.get("SPECULA_SOAK") == "1"
#: At most this many choices of what late retractions left processed are tried.
MAX_CHOICES = 32


# ------------------------------------------------------------------ running a case


class Run:
    """A case run on the in-process runtime (deterministic adaptation; with inboxes on
    the virtual clock if ``queueing``), with the net outputs and messages of every
    instance at hand."""

    def __init__(self, case: Case, queueing: bool = False) -> None:
        self.case = case
        self.graph = case.graph()
        self.registry = self.graph.registry
        self.raw = case.raw(self.registry)
        runtime = InProcessRuntime(self.graph, cost_model=CostModel(per_event=0.02),
                                   ticks_per_second=1.0, queueing=queueing)
        n = case.batch_rows
        self.result = runtime.run(self.raw, step_ticks=case.step_ticks) if not n else \
            runtime.run(iter([self.raw[i:i + n] for i in range(0, len(self.raw), n)]))
        self.instances = instances(self.graph)
        self._nets = {name: self.result.net(name) for name in self.graph.nodes}
        self._sent: dict[int, list[np.void]] = {p: [] for _, _, p in self.instances}
        for name in self.graph.nodes:
            for r in self.result.detectors[name].net.emissions():
                self._sent[int(r["producer"])].append(r)

    def net(self, node: Node, producer: int) -> np.ndarray:
        """The net output of one instance."""
        net = self._nets[node.name]
        return net[net["producer"] == producer]

    def sent(self, producer: int) -> list[np.void]:
        """Every message an instance sent, in order."""
        return self._sent[producer]

    def unit(self, node: Node, index: int) -> OrderingUnit:
        return self.result.units[node.name][index]


def check(case: Case, only: str | None = None, queueing: bool = False) -> None:
    """Every property of the module docstring, on every instance of ``case`` (``only``:
    on the instance with that label, e.g. ``"n2a[1]"``, and not on the whole graph)."""
    run = Run(case, queueing)
    for node, index, producer in run.instances:
        if only is None or only == instance_label(node, index):
            check_counters(run, node, index, producer)
            check_net_output(run, node, index, producer)
    if only is None:
        check_whole_graph(run)


def instance_label(node: Node, index: int) -> str:
    return f"{node.name}[{index}]" if node.partitions > 1 else node.name


def label(node: Node, index: int, producer: int) -> str:
    """An instance with its producer id and options, for failure messages."""
    return (f"{instance_label(node, index)} (producer {producer}: {node.detector!r}, "
            f"alpha={node.alpha}, {node.retraction}, k0={node.k0}, "
            f"partitions={node.partitions})")


def difference(expect: np.ndarray, got: np.ndarray) -> tuple[list[np.void], list[np.void]]:
    """Rows of ``expect`` missing from ``got``, and rows of ``got`` not expected (as
    multisets, by content)."""

    def one(r: np.void) -> tuple:
        return content(np.array([r]))[0]

    def minus(a: np.ndarray, b: np.ndarray) -> list[np.void]:
        left = Counter(one(r) for r in b)
        out = []
        for r in a:
            if left[one(r)]:
                left[one(r)] -= 1
            else:
                out.append(r)
        return out

    return minus(expect, got), minus(got, expect)


def rows_text(rows, registry, limit: int = 40) -> str:
    """Rows one a line, at most ``limit`` of them."""
    lines = [show(r, registry) for r in list(rows)[:limit]]
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more")
    return "\n    ".join(lines) or "(none)"


# ------------------------------------------------------------------ property 1 and 2


def check_net_output(run: Run, node: Node, index: int, producer: int) -> None:
    """Properties 1 and 2 for one instance."""
    reg = run.registry
    late = run.unit(node, index).late_events()
    inputs = consumed_input(run, node, index, late)
    where = label(node, index, producer)
    if inputs.problems:
        raise AssertionError(f"{where}: unexplained late records:\n  "
                             + "\n  ".join(inputs.problems))
    got = canonical(run.net(node, producer))
    actual = content(got)
    best = None
    for kept in kept_sets(inputs.undecided):
        expect = run_detector(node.detector, distinct(kept + inputs.rows), reg, producer,
                              reg.dtype(node.outputs))
        if content(expect) == actual:
            return
        missing, extra = difference(expect, got)
        if best is None or len(missing) + len(extra) < len(best[1]) + len(best[2]):
            best = (kept, missing, extra)
    kept, missing, extra = best
    ordered = sorted(distinct(kept + inputs.rows), key=key)
    n_late = sum(len(u) for u in inputs.undecided)
    raise AssertionError(
        f"{where}: net output is not the in-order output of its net input minus its late "
        f"events\n  input, in order:\n    {rows_text(ordered, reg)}"
        f"\n  late records:\n    {rows_text(late, reg)}"
        f"\n  expected but not in the net output:\n    {rows_text(missing, reg)}"
        f"\n  in the net output but not expected:\n    {rows_text(extra, reg)}"
        + (f"\n  (late retractions left some of {n_late} events processed: the closest of "
           f"at most {MAX_CHOICES} choices is shown)" if n_late else ""))


def kept_sets(undecided: list[list[list[np.void]]]) -> Iterator[list[np.void]]:
    """At most :data:`MAX_CHOICES` sets of events the late retractions may have left
    processed, producer by producer (``undecided`` per producer, see
    :func:`naive.kept_choices`)."""
    per_producer = [list(itertools.islice(kept_choices(u), MAX_CHOICES)) for u in undecided]
    for parts in itertools.islice(itertools.product(*per_producer), MAX_CHOICES):
        yield [r for part in parts for r in part]


def distinct(rows: list[np.void]) -> list[np.void]:
    """Each version of an event once: a copy a late retraction left processed and the
    same version sent again are one event (processing it twice counts it twice)."""
    seen, out = set(), []
    for r in rows:
        c = content(np.array([r]))[0]
        if c not in seen:
            seen.add(c)
            out.append(r)
    return out


@dataclass
class Input:
    """What an instance must have processed: ``rows`` for sure, and per producer the
    events its late retractions may have left processed (see :func:`naive.consumed`)."""

    rows: list[np.void] = field(default_factory=list)
    undecided: list[list[list[np.void]]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def consumed_input(run: Run, node: Node, index: int, late: np.ndarray) -> Input:
    """What the instance must have processed, from the raw stream and every message of
    the producers it hears, with its late records."""
    reg = run.registry

    def wanted(row: np.void) -> bool:
        return in_view(row, node, index, reg)

    streams = {0: list(run.raw)}
    for src, _, p in run.instances:
        if set(src.outputs) & set(node.inputs):
            streams[p] = run.sent(p)
    total = Input()
    for p, stream in streams.items():
        part = consumed(stream, [r for r in late if int(r["producer"]) == p], wanted, reg)
        total.rows += part.rows
        if any(part.undecided):
            total.undecided.append(part.undecided)
        total.problems += part.problems
    total.problems += [f"late record {show(r, reg)} from a producer it does not hear"
                       for r in late if int(r["producer"]) not in streams]
    return total


# ------------------------------------------------------------------ property 3


def check_whole_graph(run: Run) -> None:
    """Property 3: with nothing late anywhere, the graph equals the in-order graph."""
    if any(run.result.stats(name).late for name in run.graph.nodes):
        return
    reference = reference_instances(run.graph, run.raw)
    for node, index, producer in run.instances:
        expect = content(reference[node.name, index])
        got = canonical(run.net(node, producer))
        if content(got) != expect:
            reg = run.registry
            raise AssertionError(
                f"{label(node, index, producer)}: nothing was late, but its net output "
                f"differs from the in-order graph's\n  in-order:\n    "
                f"{rows_text(reference[node.name, index], reg)}\n  net output:\n    "
                f"{rows_text(got, reg)}")


# ------------------------------------------------------------------ property 4


def check_counters(run: Run, node: Node, index: int, producer: int) -> None:
    """Property 4 for one instance, as a consumer and as a producer."""
    unit = run.unit(node, index)
    s = unit.stats
    late = unit.late_events()
    late_control = int(np.count_nonzero(late["flags"] & ev.CONTROL))
    where = label(node, index, producer)
    assert len(unit) == 0, f"{where}: {len(unit)} events still buffered after the flush"
    assert s.late == len(late), f"{where}: late={s.late}, late side output {len(late)}"
    assert s.control_in == s.retractions_received + s.revocations_received, f"{where}: {s}"
    # every event that came in was late, a discarded or applied update, purged after
    # emission, removed by a retraction or revocation, or shed while held
    accounted = (s.late - late_control + s.updates_discarded + s.updates_applied
                 + s.purged + s.events_removed + s.events_shed)
    assert s.events_in == accounted, (
        f"{where}: events_in={s.events_in} but late events + discarded + applied updates "
        f"+ purged + removed = {accounted}\n  {s}")
    messages = run.sent(producer)
    n_retractions = sum(1 for m in messages if m["flags"] & ev.RETRACTION)
    n_revocations = sum(1 for m in messages if m["flags"] & ev.REVOKE)
    assert (s.generated, s.retractions_sent, s.revocations_sent) == (
        len(messages) - n_retractions - n_revocations, n_retractions, n_revocations), (
        f"{where}: {s}")
    live = len(run.net(node, producer))
    most = s.generated - s.events_retracted - s.revocations_sent
    least = most - (s.updates_sent if node.retraction == "on-demand" else 0)
    assert least <= live <= most, f"{where}: {live} net events, counters say {least}..{most}"


# ------------------------------------------------------------------ the properties

# The default budget shrinks one failure per test (shrinking is most of a red run's time).
BUDGET = settings(max_examples=200, deadline=None, print_blob=True, report_multiple_bugs=False,
                  suppress_health_check=list(HealthCheck))
SOAK_BUDGET = settings(BUDGET, report_multiple_bugs=True,
                       max_examples=int(os.environ.get("SPECULA_SOAK_EXAMPLES", 2000)))
soak = pytest.mark.skipif(not SOAK, reason="set SPECULA_SOAK=1 for the long runs")


@BUDGET
@given(cases(modes=("full",)))
def test_full_retraction_in_any_graph(case):
    check(case)


@BUDGET
@given(cases())
def test_any_retraction_in_any_graph(case):
    check(case)


@BUDGET
@given(idle_cases(), st.booleans())
def test_idle_inputs_in_any_graph(case, queueing):
    # Partitions that no key reaches, or that every key reaches; raw types silent for a
    # while or for good; idle_after on the nodes: on the plain runtime and with inboxes
    check(case, queueing=queueing)


@pytest.mark.soak
@soak
@SOAK_BUDGET
@given(cases(modes=("full",), max_events=80))
def test_soak_full_retraction(case):
    check(case)


@pytest.mark.soak
@soak
@SOAK_BUDGET
@given(cases(max_events=80))
def test_soak_any_retraction(case):
    check(case)


# ------------------------------------------------------------------ the generator


def test_the_generator_makes_every_shape():
    """Over a few hundred seeds every detector kind, multi-output producers, shared
    output types, partitions, 2 to 4 levels, adaptive alpha and bursts all occur."""
    seen = set()
    for seed in range(300):
        case = seeded_case(seed)
        for s in case.nodes:
            seen.add(type(s.detector).__name__)
            seen.add(f"partitions={s.partitions}")
            seen.add(f"alpha={'adaptive' if s.alpha == 'adaptive' else 'fixed'}")
            seen.add(f"outputs={len(s.detector.outputs)}")
        seen.add(f"levels={len({s.name[1] for s in case.nodes})}")
        graph = case.graph()
        graph.validate()
        if any(len(graph.producers_of(t)) > 1 for s in case.nodes for t in s.detector.outputs):
            seen.add("shared type")
        if len({e[4] for e in case.events}) < len(case.events):
            seen.add("equal arrivals")
    kinds = {"Echo", "Split", "Count", "Repeat", "Sum", "Within", "NotBetween", "Recent"}
    assert kinds | {"partitions=3", "alpha=adaptive", "outputs=3", "levels=2", "levels=4",
                    "shared type", "equal arrivals"} <= seen


def test_instances_are_numbered_as_the_runtime_numbers_them():
    graph = seeded_case(7).graph()
    assert [(n.name, i, p) for n, i, p in instances(graph)] == [
        (i.node.name, i.index, i.producer) for i in graph.instances()]


# ------------------------------------------------------------------ named cases
# The smallest failing cases found, one per kind of failure. Nothing is late in the first
# two: they break the promise in its simplest form.


def test_update_that_changes_type_reaches_the_old_subscriber():
    """On-demand. A@2 (even: T0) arrives first and gets counter 0; A@1 (odd: T1) comes in
    front of it, and the replay regenerates T1@1 as the update of counter 0 and T0@2 as
    counter 1. The update of counter 0 is a T1 and goes to T1's subscribers only, so
    the counter of T0 keeps T0@2 as counter 0 and takes it again as counter 1."""
    check(Case(nodes=(
        Spec("n1a", Split(("A",), ("T0", "T1")), alpha=0.0, retraction="on-demand"),
        Spec("n2a", Count(("T0",), ("T2",)), alpha=0.0, retraction="on-demand"),
    ), events=(("A", 1, 0, 1, 1), ("A", 2, 0, 0, 0)), step_ticks=0))


def test_update_that_changes_key_reaches_the_old_partition():
    """On-demand. The same renumbering across partitions: T0@2 (key 0) is counter 0 at
    partition 0; the replay makes T0@1 (key 1) counter 0, an update that goes to
    partition 1, and T0@2 counter 1, which partition 0 takes a second time."""
    check(Case(nodes=(
        Spec("n1a", Echo(("A",), ("T0",)), alpha=0.0, retraction="on-demand"),
        Spec("n2a", Count(("T0",), ("T1",)), alpha=0.0, retraction="on-demand", partitions=2),
    ), events=(("A", 1, 1, 0, 1), ("A", 2, 0, 0, 0)), step_ticks=0), only="n2a[0]")


def test_update_of_an_event_held_in_another_partition_is_not_late():
    """On-demand. Partition 1 holds T0@3 as counter 1 when the replay sends T0@1 (key 1)
    as the update of counter 0, whose old version (T0@2, key 0) went to partition 0:
    partition 1 never held counter 0 but, having seen counter 1, calls the update late,
    although nothing was purged anywhere."""
    check(Case(nodes=(
        Spec("n1a", Echo(("A",), ("T0",)), alpha=0.0, retraction="on-demand"),
        Spec("n2a", Echo(("T0",), ("T1",)), partitions=2),
    ), events=(("A", 1, 1, 0, 2), ("A", 2, 0, 0, 0), ("A", 3, 1, 0, 1)), step_ticks=0),
        only="n2a[1]")


def test_update_of_an_event_of_another_type_is_not_late():
    """On-demand. The same through types: the counter of T1 holds T1@3 as counter 1 when
    T1@1 arrives as the update of counter 0, whose old version was T0@2."""
    check(Case(nodes=(
        Spec("n1a", Split(("A",), ("T0", "T1")), alpha=0.0, retraction="on-demand"),
        Spec("n2a", Echo(("T1",), ("T2",))),
    ), events=(("A", 1, 0, 1, 2), ("A", 2, 0, 0, 0), ("A", 3, 0, 1, 1)), step_ticks=0))


def test_event_sent_again_after_a_late_retraction_is_processed_once():
    """Full retraction, one event, no delay. n1b passes T0@1 on at once, n1a only at the
    flush, and its T0@1 sorts first; n2a replays, retracts counter 0 (T1@1) and sends
    counter 0 again (made from n1a's T0, identical) and counter 1 (from n1b's). n3a had
    already purged counter 0: the retraction is late, so it stays processed. The
    identical copy that follows has a key equal to the horizon; a generated key names one
    event, so it is a copy of the purged one and late, not a second T1@1 (which would
    make three T2@1 where the in-order graph has two)."""
    check(Case(nodes=(
        Spec("n1a", Echo(("A",), ("T0",)), k0=1000),
        Spec("n1b", Echo(("A",), ("T0",)), k0=0),
        Spec("n2a", Echo(("T0",), ("T1",)), alpha=0.0, k0=0),
        Spec("n3a", Echo(("T1",), ("T2",)), k0=0),
    ), events=(("A", 1, 0, 0, 1),), step_ticks=0))


def test_copy_of_a_purged_event_behind_a_late_retraction_is_late():
    """The same with partitions and four events (found by the property suite): n2a[1]
    purges T0@1 at once (k0=0); n1a's late full retraction resends T0@1 as counter 0,
    identical, with T0@3 and T0@4 behind it. The copy is late; T0@3 and T0@4 are
    processed once each."""
    check(Case(nodes=(
        Spec("n1a", Echo(("A",), ("T0",)), alpha=0.0, k0=1000, partitions=2),
        Spec("n1b", Echo(("A",), ("T1",)), k0=1000),
        Spec("n2a", Echo(("T0",), ("T2",)), k0=0, partitions=2),
        Spec("n2b", Echo(("T0",), ("T3",)), k0=1000),
    ), events=(("A", 1, 1, 1, 1), ("A", 2, 0, 0, 6), ("A", 3, 1, 1, 6), ("A", 4, 1, 4, 4)),
        step_ticks=4))


def test_late_retractions_leave_purged_events_processed():
    """Passes: a full-retraction hierarchy whose last node gets three late retractions,
    some of whose events it had purged (they stay processed) and some not (removed),
    with versions of one event sharing a key. The check must accept it."""
    check(Case(nodes=(
        Spec("n1a", Echo(("B",), ("T0",)), k0=2, partitions=2),
        Spec("n2b", Echo(("T0", "B"), ("T1",)), alpha=0.0, k0=2),
        Spec("n3a", Sum(("B", "C", "T1"), ("T2",)), alpha=0.0, k0=20),
        Spec("n4a", Echo(("T2",), ("T3",)), k0=20),
    ), events=(("B", 56, 1, 4, 56), ("B", 58, 0, 0, 73), ("C", 77, 0, 0, 77),
               ("B", 85, 1, 0, 85)), step_ticks=4))


def test_revocation_after_a_late_update_removes_the_held_version():
    """Passes (found by the property suite): n3a (k0=0) holds counter 0 of n2b as T1@4
    when n2b's replay updates it to T1@3, behind n3a's horizon: the update is late and
    n3a keeps T1@4. n2b's next replays revoke the version at T1@3 and resend the
    counter; n3a finds its T1@4 by producer and counter and removes it where it still
    holds it, so what n3a processed of that counter depends on whether it had purged
    it. The check must accept both."""
    check(Case(nodes=(
        Spec("n1a", Echo(("B",), ("T0",)), k0=2),
        Spec("n1b", Echo(("A",), ("T0",)), alpha=0.0, retraction="on-demand"),
        Spec("n2a", Echo(("T0",), ("T1",)), k0=0),
        Spec("n2b", Echo(("T0", "C"), ("T1",)), alpha=0.0, retraction="on-demand"),
        Spec("n3a", Echo(("T1",), ("T2",)), alpha=0.0, k0=0),
    ), events=(("A", 1, 0, 0, 7), ("A", 2, 0, 0, 7), ("B", 3, 1, 6, 7), ("A", 4, 0, 0, 4),
               ("C", 4, 1, 6, 4), ("B", 6, 2, 0, 6)), step_ticks=0), only="n3a")
