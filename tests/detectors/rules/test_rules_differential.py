"""Rule engines against the brute-force reference in ``rules_reference.py``.

The reference itself is checked first, on small streams whose composites are worked
out by hand (among them the examples of Fig. 3 and Fig. 5 of the paper). Then every
engine runs every rule of the catalogue over random streams fed in batches of random
sizes, so engines must carry their state across batches. The GPU engine runs in a
subprocess with ``NUMBA_ENABLE_CUDASIM=1``, which must be set before Numba is imported.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rules_reference import (
    CASES,
    R1,
    R2,
    R3,
    R4,
    abc_registry,
    check_case,
    engine_output,
    fire_registry,
    random_batches,
    random_events,
    reference,
)

from specula.detectors.rules import parse_rule
from specula.detectors.rules.expand import Union
from specula.events import TypeRegistry

MINUTE = 1 / 60  # ticks per second such that "5 min." is 5 ticks, as in the paper's figures


def stream(registry: TypeRegistry, *events: tuple) -> np.ndarray:
    """Events ``(type, ts, {fields})`` or ``(type, ts, {fields}, producer, seq)``, in order;
    ``seq`` defaults to the event's index and the field ``n``, where types have it, to
    ``ts``."""
    records = []
    for i, (type_name, ts, fields, *ids) in enumerate(events):
        producer, seq = ids if ids else (0, i)
        serial = {"n": ts} if "n" in registry[type_name].field_names else {}
        records.append({"type": type_name, "ts": ts, "producer": producer, "seq": seq,
                        **serial, **fields})
    return registry.from_records(records, dtype=registry.dtype())


# ---------------------------------------------------------------- the reference


def fig3(extra: tuple = ()) -> tuple[TypeRegistry, np.ndarray]:
    """Fig. 3: three readings in Area1, smoke in Area2, then twice in Area1."""
    registry = fire_registry()
    one, two = {"area": "Area1"}, {"area": "Area2"}
    events = [("Temp", 1, {**one, "value": 50}), ("Temp", 2, {**one, "value": 55}),
              ("Smoke", 5, two), ("Temp", 7, {**one, "value": 60}),
              ("Smoke", 8, one), ("Smoke", 9, one), *extra]
    events.sort(key=lambda e: e[1])
    return registry, stream(registry, *events)


def test_reference_fig3_each_and_last():
    registry, events = fig3()
    expected = [(8, 0, "Area1", 60.0), (9, 0, "Area1", 60.0)]  # T3 with S2 and with S3
    assert reference(parse_rule(R1), registry, events, MINUTE) == expected
    assert reference(parse_rule(R2), registry, events, MINUTE) == expected


def test_reference_window_includes_its_start_and_excludes_equal_time_stamps():
    registry, events = fig3(extra=(("Temp", 3, {"area": "Area1", "value": 46}),
                                   ("Temp", 8, {"area": "Area1", "value": 70})))
    # S2@8 sees [3, 8): Temp@3 and Temp@7, in stream order; Temp@8 is not earlier.
    # S3@9 sees [4, 9): Temp@7 and Temp@8.
    assert reference(parse_rule(R1), registry, events, MINUTE) == [
        (8, 0, "Area1", 46.0), (8, 0, "Area1", 60.0), (9, 0, "Area1", 60.0), (9, 0, "Area1", 70.0)]
    assert reference(parse_rule(R2), registry, events, MINUTE) == [
        (8, 0, "Area1", 60.0), (9, 0, "Area1", 70.0)]
    first = parse_rule(R2.replace("last", "first"))
    assert reference(first, registry, events, MINUTE) == [(8, 0, "Area1", 46.0),
                                                          (9, 0, "Area1", 60.0)]


def test_reference_r3_average_filter_and_undefined_average():
    registry, events = fig3(extra=(("Temp", 4, {"area": "Area1", "value": 40}),))
    # S1@5 in Area2 has no readings: Avg is undefined, no Fire. S2@8 and S3@9 average
    # Temp@4 (40) and Temp@7 (60).
    assert reference(parse_rule(R3), registry, events, MINUTE) == [
        (8, 0, "Area1", 50.0), (9, 0, "Area1", 50.0)]
    hotter = parse_rule(R3.replace("45 <", "55 <"))
    assert reference(hotter, registry, events, MINUTE) == []


def fig5() -> tuple[TypeRegistry, np.ndarray]:
    """Fig. 5: columns A and B of rule R4 and the terminator C(p=3)@15."""
    registry = abc_registry()
    a = [(14, 3), (12, 3), (9, 2), (7, 1), (4, 4), (1, 5)]
    b = [(13, 3), (11, 3), (8, 1), (6, 3), (3, 4), (2, 2)]
    columns = [("A", ts, {"p": p}) for ts, p in a] + [("B", ts, {"p": p, "v": 11})
                                                       for ts, p in b]
    events = [*sorted(columns, key=lambda e: e[1]), ("C", 15, {"p": 3})]
    return registry, stream(registry, *events)


def test_reference_fig5_r4():
    registry, events = fig5()
    assert reference(parse_rule(R4), registry, events, MINUTE) == [(15, 0)]
    # B(p=3)@13 with A(p=3)@12; B(p=3)@11 has no A(p=3) in [8, 11); B(p=3)@6 is older
    # than 15 - 8.
    where = R4.replace("ComplexEvent()", "ComplexEvent(a: int, b: int)") + \
        " where a=A.n and b=B.n"
    assert reference(parse_rule(where), registry, events, MINUTE) == [(15, 0, 12, 13)]


SELECT = "define S(a: int) from C() and {} A() within 10 from C where a=A.n"


def test_reference_selection_breaks_equal_time_stamps_by_producer_and_seq():
    registry = abc_registry()
    # A@5 of producer 0, seq 7 comes before A@5 of producer 1, seq 0.
    events = stream(registry, ("A", 3, {}, 2, 0), ("A", 5, {"n": 50}, 0, 7),
                    ("A", 5, {"n": 51}, 1, 0), ("A", 7, {}, 0, 8), ("C", 7, {}, 0, 9))
    each = reference(parse_rule(SELECT.format("each")), registry, events)
    assert each == [(7, 0, 3), (7, 0, 50), (7, 0, 51)]
    assert reference(parse_rule(SELECT.format("last")), registry, events) == [(7, 0, 51)]
    assert reference(parse_rule(SELECT.format("first")), registry, events) == [(7, 0, 3)]


def test_reference_selection_is_local():
    registry = abc_registry()
    events = stream(registry, ("A", 1, {}), ("B", 2, {}), ("B", 5, {}), ("C", 6, {}))
    text = "define L(b: int) from C() and {} B() within 10 from C " \
           "and last A() within 3 from B where b=B.n"
    # last B is B@5, which has no A in [2, 5): nothing, no fall back to B@2.
    assert reference(parse_rule(text.format("last")), registry, events) == []
    assert reference(parse_rule(text.format("each")), registry, events) == [(6, 0, 2)]


def test_reference_output_order_follows_element_positions():
    registry = abc_registry()
    events = stream(registry, ("A", 3, {}), ("A", 4, {}), ("B", 5, {}), ("B", 8, {}),
                    ("C", 10, {}, 0, 99))
    text = "define O(b: int, a: int) from C() and each B() within 10 from C " \
           "and each A() within 10 from B where b=B.n and a=A.n"
    assert reference(parse_rule(text), registry, events) == [
        (10, 0, 5, 3), (10, 0, 5, 4), (10, 0, 8, 3), (10, 0, 8, 4)]


def test_reference_parameters_bind_at_first_mention():
    registry = abc_registry()
    events = stream(registry, ("A", 1, {"p": 1}), ("A", 2, {"p": 2}), ("B", 3, {"p": 2}),
                    ("C", 4, {"p": 7}))
    text = "define P(x: int, a: int) from C() and last B(p=$x) within 5 from C " \
           "and each A(p=$x) within 5 from B where x=$x and a=A.n"
    assert reference(parse_rule(text), registry, events) == [(4, 0, 2, 2)]


def test_reference_aggregates_of_nothing():
    registry = abc_registry()
    events = stream(registry, ("A", 1, {"p": 1, "value": 2.5}), ("A", 2, {"p": 1, "value": 4}),
                    ("C", 3, {"p": 1}), ("C", 9, {"p": 1}))
    text = ("define G(s: double, n: double, m: double) from C(p=$x) "
            "where s=Sum(A(p=$x).value within 5 from C) and n=Count(A(p=$x) within 5 from C)"
            " and m=Min(A(p=$x).value within 5 from C)")
    # C@9 sees no A in [4, 9): Min is undefined, so only C@3 yields a composite.
    assert reference(parse_rule(text), registry, events) == [(3, 0, 6.5, 2.0, 2.5)]
    no_min = text.rsplit(" and m=", 1)[0]
    assert reference(parse_rule(no_min), registry, events) == [
        (3, 0, 6.5, 2.0, 0.0), (9, 0, 0.0, 0.0, 0.0)]


def test_reference_negations():
    registry = abc_registry()
    chain = "define Q(b: int) from C() and each B() within 10 from C "
    between = parse_rule(chain + "and not D() between B and C where b=B.n")
    within = parse_rule(chain + "and not D() within 3 from C where b=B.n")
    events = stream(registry, ("B", 1, {}), ("D", 4, {}), ("B", 4, {}), ("B", 5, {}),
                    ("C", 7, {}))
    # D@4 lies strictly between B@1 and C@7 only; at C.ts - 3 it is inside the window.
    assert reference(between, registry, events) == [(7, 0, 4), (7, 0, 5)]
    assert reference(within, registry, events) == []
    late = stream(registry, ("D", 3, {}), ("B", 4, {}), ("C", 7, {}), ("D", 7, {}))
    assert reference(within, registry, late) == [(7, 0, 4)]


def test_reference_where_casts_and_arithmetic():
    registry = abc_registry()
    events = stream(registry, ("C", 2, {"p": 7, "value": 2.5}))
    text = "define W(i: int, d: double, u: int) from C(p=$x) where i=$x / 2 and d=C.value * -2"
    assert reference(parse_rule(text), registry, events) == [(2, 0, 3, -5.0, 0)]


def test_random_events_are_valid_and_in_stream_order():
    registry = abc_registry()
    events = random_events(registry, ("A", "B", "N"), 300, seed=4, max_gap=1,
                           ranges={"v": (5, 7)})
    assert len(events) == 300
    order = [(int(r["ts"]), (int(r["producer"]) << 40) | int(r["seq"])) for r in events]
    assert order == sorted(order)
    assert len({(int(r["producer"]), int(r["seq"])) for r in events}) == 300
    assert (np.diff(events["ts"]) == 0).any()
    assert set(events["v"].tolist()) == {5, 6}
    assert set(events["type"].tolist()) == {registry.id(t) for t in ("A", "B", "N")}
    same = random_events(registry, ("A", "B", "N"), 300, seed=4, max_gap=1,
                         ranges={"v": (5, 7)})
    assert (same == events).all()
    batches = random_batches(events, seed=1)
    assert (np.concatenate(batches) == events).all()


def test_catalogue_rules_parse_and_produce_composites():
    for case in CASES.values():
        registry = case.registry()
        rule = case.rule()
        assert str(rule) == case.text.strip()
        found = sum(len(reference(rule, registry, case.events(registry, 150, seed),
                                  case.ticks_per_second)) for seed in range(2))
        assert found > 0, f"case {case.name} never produces a composite; tune its stream"


@pytest.mark.parametrize("case", sorted(c for c in CASES if c.startswith("consume_")))
def test_catalogue_consumption_changes_the_answer(case: str):
    """Consumption changes the answer of each consumption case on its streams (fewer
    composites; under ``last``, ``first`` and aggregates, other values too), so the
    cases test what they are for."""
    spec = CASES[case]
    registry, rule = spec.registry(), spec.rule()
    free = dataclasses.replace(rule, consuming=())
    events = spec.events(registry, 300, seed=0)
    consumed = reference(rule, registry, events, spec.ticks_per_second)
    everything = reference(free, registry, events, spec.ticks_per_second)
    assert 0 < len(consumed) < len(everything)


# ------------------------------------------------------------------- the engines


def engine_class(name: str) -> Any:
    if name == "aip":
        from specula.detectors.rules.aip import AIPEngine

        return AIPEngine
    from specula.detectors.rules.cdp import CDPEngine

    return CDPEngine


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("engine", ["aip", "cdp"])
def test_engine_matches_reference(engine: str, case: str):
    cls = engine_class(engine)
    problems = [check_case(cls, CASES[case], seed=seed, n=300) for seed in range(3)]
    problems = [p for p in problems if p]
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("case", ["R5", "each_each", "agg_inline", "neg_between", "stock",
                                  "nonstrict_same_type", "closure_last", "disjunction",
                                  "last_disjunction", "consume_each", "consume_terminator_type"])
@pytest.mark.parametrize("engine", ["aip", "cdp"])
def test_engine_snapshot_restore_continues_alike(engine: str, case: str):
    cls, spec = engine_class(engine), CASES[case]
    registry, rule = spec.registry(), spec.rule()
    events = spec.events(registry, 200, seed=7)
    untouched = events.copy()
    batches = random_batches(events, seed=8)
    cut = len(batches) // 2
    first = Union(rule, cls, registry, ticks_per_second=spec.ticks_per_second)
    head = engine_output(first, batches[:cut])
    state = first.snapshot()
    tail = engine_output(first, batches[cut:])
    assert head + tail == reference(rule, registry, events, spec.ticks_per_second)
    first.restore(state)
    assert engine_output(first, batches[cut:]) == tail
    second = Union(rule, cls, registry, ticks_per_second=spec.ticks_per_second)
    second.restore(state)
    assert engine_output(second, batches[cut:]) == tail
    assert (events == untouched).all(), "an engine changed its input"


SCRIPT = Path(__file__).with_name("rules_reference.py")


@pytest.fixture(scope="module")
def gpu_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Run the GPU engine on every case once, in a process with the CUDA simulator."""
    out = tmp_path_factory.mktemp("gpu") / "results.json"
    env = dict(os.environ)
    env.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--engine", "gpu", "--n", "40",
                           "--max-batch", "30", "--json", str(out)],
                          env=env, capture_output=True, text=True, timeout=1800)
    if not out.exists():
        pytest.fail(f"the GPU check did not finish (exit {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_gpu_engine_matches_reference(case: str, gpu_results: dict[str, str]):
    assert not gpu_results[case], gpu_results[case]
