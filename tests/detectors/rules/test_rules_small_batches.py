"""A live feed hands a rule a few rows per step, and the engines take short cuts on such
steps: the tie hold passes the usual steps without concatenating, CDP finds the rows of
a type among a few with Python ints and converts them once for all its columns, reads
a batch of a few rows as Python scalars and sets each row's fields, keys and values in
its columns one by one, its general steps write into buffers kept between batches, the
position keys of a few rows are Python ints, and its
matches come in the order composites are listed, so composing them sorts nothing, and
all its steps run in one kernel call. Random streams in batches of a few rows
(irrelevant rows among them, rows of a type apart or together, out of order for the tie
hold), and the stock rule through the in-process runtime one arrival at a time, must
give what the general paths give."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest
from rules_reference import CASES, engine_output, random_batches, random_events
from stock import STOCK_RULE, SYMBOLS, quotes, skip_till_any_match, stock_registry

from specula import InProcessRuntime
from specula.detectors.graph import Graph
from specula.detectors.rules import RuleDetector, cdp
from specula.detectors.rules._cdp_columns import encode, encode_one
from specula.detectors.rules._cdp_kernels import float_key
from specula.detectors.rules.cdp import CDPEngine
from specula.detectors.rules.engine import ORDER_SHIFT, TieHold, compose, order_key
from specula.detectors.rules.expand import Union
from specula.detectors.rules.parser import parse_rule
from specula.events import TypeRegistry
from specula.events.row_bytes import KINDS, float_at, int_at

_ROW = np.dtype([("ts", np.int64), ("seq", np.int64)])


def held_by_definition(held: np.ndarray, rows: np.ndarray, index: np.ndarray,
                       batch_ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What :meth:`TieHold.take` returns and holds, from its definition: of the held
    rows and the new ones, those below the batch's newest time stamp are complete (the
    held first); a held row is caused by the first row of the batch with a later time
    stamp."""
    if not len(batch_ts):
        return held[:0], np.zeros(0, np.int64), held
    cause = int(np.searchsorted(batch_ts, held["ts"][0], side="right")) if len(held) else 0
    rows = np.concatenate([held, rows])
    causes = np.concatenate([np.full(len(held), cause, np.int64), index])
    done = rows["ts"] < batch_ts[-1]
    return rows[done], causes[done], rows[~done]


@pytest.mark.parametrize("few", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_tie_hold_takes_what_its_definition_says(seed: int, few: bool):
    """``take``, and ``take_few`` (Python ints, batches of 1..8 rows) alike."""
    rng = np.random.default_rng(seed)
    hold, held = TieHold(_ROW), np.zeros(0, _ROW)
    now = seq = 0
    paths = set()
    for _ in range(80):
        size = int(rng.integers(1 if few else 0, 9 if few else 6))
        batch_ts = np.sort(now + rng.integers(0, 3, size))
        now = int(batch_ts[-1]) if size else now
        index = np.sort(rng.choice(size, int(rng.integers(0, size + 1)), replace=False))
        if rng.random() < 0.2:  # rows out of order, as AIP's late rows may come
            rng.shuffle(index)
        rows = np.zeros(len(index), _ROW)
        rows["ts"], rows["seq"] = batch_ts[index], seq + np.arange(len(index))
        seq += len(index)
        want_rows, want_causes, held = held_by_definition(held, rows, index, batch_ts)
        got_rows, got_causes = (
            hold.take_few(rows, rows["ts"].tolist(), index.tolist(), batch_ts.tolist()) if few
            else hold.take(rows, index.astype(np.int64), batch_ts))
        if rng.random() < 0.2:  # a copy between batches holds the same
            hold = pickle.loads(pickle.dumps(hold))
        assert got_rows.tolist() == want_rows.tolist()
        assert got_causes.tolist() == want_causes.tolist()
        assert hold.held.tolist() == held.tolist()
        paths.add((len(want_rows) > 0, len(held) > 0))
    assert paths == {(False, False), (False, True), (True, False), (True, True)}


def stock_with_others(minutes: int, seed: int) -> tuple[TypeRegistry, np.ndarray]:
    """Quotes of the stock example, a fifth of them relabelled as a type the rule does
    not read (so the rows of a type lie apart and some rows of a batch are irrelevant)."""
    registry = stock_registry()
    registry.register("OTHER", open="f8")
    events = quotes(registry, minutes, seed=seed).astype(registry.dtype())
    rng = np.random.default_rng(seed)
    events["type"][rng.random(len(events)) < 0.2] = registry.id("OTHER")
    return registry, events


@pytest.mark.parametrize("room", [1, 64])
@pytest.mark.parametrize("seed", [0, 1])
def test_cdp_in_batches_of_a_few_rows_equals_one_batch(monkeypatch, room: int, seed: int):
    """Batches of 0..8 rows against the whole stream at once: the same composites
    (skip-till-any-match's) and the same snapshot; ``room`` 1 makes every general step
    grow its buffers and step again."""
    monkeypatch.setattr(cdp, "_ROOM", room)
    registry, events = stock_with_others(120, seed)
    rule = parse_rule(STOCK_RULE.format(minutes=5))
    small = CDPEngine(rule, registry, ticks_per_second=1.0)
    whole = CDPEngine(rule, registry, ticks_per_second=1.0)
    got = engine_output(small, random_batches(events, seed=seed, max_size=8))
    expected = skip_till_any_match(registry, events, 5)
    assert len(expected) > 30
    assert sorted(c[2:] for c in got) == expected
    assert sorted(engine_output(whole, [events])) == sorted(got)
    assert small.snapshot() == whole.snapshot()


@pytest.mark.parametrize("step_ticks", [0, 1_800])
def test_stock_rule_live_and_out_of_order_through_the_runtime(step_ticks: int):
    """Quotes up to two minutes late, ordered by a K-slack unit: one step per arrival
    time (a live feed) and steps of half an hour give the skip-till-any-match set."""
    registry, events = stock_with_others(90, 5)
    expected = skip_till_any_match(registry, events, 5)
    rng = np.random.default_rng(5)
    events["ats"] = events["ts"] + rng.integers(0, 121, len(events))
    raw = events[np.argsort(events["ats"], kind="stable")]
    graph = Graph(registry, sources=(*SYMBOLS, "OTHER"))
    graph.add("rising", RuleDetector(STOCK_RULE.format(minutes=5), registry, engine="cdp"),
              k0=120)
    result = InProcessRuntime(graph).run(raw, step_ticks=step_ticks)
    assert len(result.late("rising")) == 0
    got = sorted((float(r["a_open"]), float(r["b_open"]), float(r["c_open"]), int(r["a_ts"]))
                 for r in result.net("rising"))
    assert len(expected) > 20
    assert got == expected


@pytest.mark.parametrize("case", ["R4", "R5", "first_temp", "four_elements", "window_mixed",
                                  "nonstrict_first_params", "stock", "pred_params",
                                  "neg_between", "agg_inline"])
def test_cdp_matches_come_in_compose_order(case: str):
    """Every batch's matches, in batches of 0..8 rows, compose alike whether or not
    ``compose`` sorts them: CDP's claim that they come in order holds, and the short
    cuts for matches in order (every match kept: columns copied without indexing, the
    union's terminators and causes taken whole) give what the general path gives."""
    spec = CASES[case]
    registry, rule = spec.registry(), spec.rule()
    union = Union(rule, CDPEngine, registry, spec.ticks_per_second)
    assert len(union.engines) == 1
    matched = 0
    for seed in range(2):
        engine = CDPEngine(rule, registry, ticks_per_second=spec.ticks_per_second)
        events = spec.events(registry, 200, seed)
        for batch in [*random_batches(events, seed=seed, max_size=8), None]:
            found = engine.process(batch) if batch is not None else engine.flush()
            assert found.ordered or not len(found)
            kept, columns = compose(rule, found)
            composites = union._union([found])[0]
            found.ordered = False  # the general path: sorted
            kept_sorted, columns_sorted = compose(rule, found)
            assert kept.tolist() == kept_sorted.tolist()
            assert {a: (c.dtype, c.tolist()) for a, c in columns.items()} == {
                a: (c.dtype, c.tolist()) for a, c in columns_sorted.items()}
            general = union._union([found])[0]
            assert composites.terminators.tolist() == general.terminators.tolist()
            assert composites.causes.tolist() == general.causes.tolist()
            assert {a: (c.dtype, c.tolist()) for a, c in composites.columns.items()} == {
                a: (c.dtype, c.tolist()) for a, c in general.columns.items()}
            matched += len(kept)
    assert matched > 0


@pytest.mark.parametrize("seed", range(3))
def test_one_value_encodes_as_a_column_does(seed: int):
    """The key a column gives one row's value (scalars) is the one it gives the value
    among others (arrays): floats with -0.0, NaN, infinities and extremes, and ints."""
    rng = np.random.default_rng(seed)
    special = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 5e-324, -1.7976931348623157e308]
    floats = np.concatenate([special, rng.normal(0, 1e6, 40), rng.integers(-9, 9, 20) / 2])
    ints = np.concatenate([[0, -1, 2**62, -(2**63)], rng.integers(-(2**40), 2**40, 40)])
    for values, is_float in ((floats, True), (ints.astype(np.int64), False),
                             (ints.astype(np.int32), False)):
        assert [encode_one(v, is_float) for v in values.tolist()] == \
            encode(values, is_float).tolist()


@pytest.mark.parametrize("seed", range(3))
def test_a_few_rows_order_keys_as_many_do(seed: int):
    """The position keys of a few rows (Python ints) are those NumPy's shift and or give
    a batch of any size: producers of the whole int32 range (shifted past int64, they
    wrap alike), counters of either sign."""
    rng = np.random.default_rng(seed)
    dtype = np.dtype([("ts", np.int64), ("producer", np.int32), ("seq", np.int64)])
    for n in [*range(13), 40]:
        rows = np.zeros(n, dtype)
        rows["producer"] = rng.integers(0, 2**22, n)
        rows["producer"][: n // 3] = rng.integers(-(2**31), 2**31, n // 3)
        rows["seq"] = rng.integers(-(2**39), 2**40, n)
        rows["seq"][: n // 4] = rng.integers(0, 8, n // 4)
        rows = rows[rng.permutation(n)] if n % 2 else rows[::-1]  # strided views too
        key = order_key(rows)
        assert key.dtype == np.int64 and key.shape == (n,)
        expected = (rows["producer"].astype(np.int64) << ORDER_SHIFT) | rows["seq"]
        assert key.tolist() == expected.tolist()


class StepByStep(CDPEngine):
    """The CPU engine running its steps one kernel call at a time, as the GPU engine
    does (where each step may go to the device): the reference for the call that runs
    them all."""

    def _run_steps(self, trows: np.ndarray, anchor: np.ndarray, bound: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
        return self._step_by_step(trows, anchor, bound)


def composites(found: Any) -> list[tuple]:
    """A union's composites of one batch, comparable across engines."""
    return [(*t, *(found.columns[a][j].item() for a in sorted(found.columns)))
            for j, t in enumerate(found.terminators.tolist())]


@pytest.mark.parametrize("room", [1, 64])
@pytest.mark.parametrize("case", ["stock", "stock_strict", "R4", "R5", "each_each",
                                  "first_first", "last_last", "two_params", "pred_params",
                                  "pred_after_plain_step", "nonstrict_first_params",
                                  "nonstrict_same_type", "window_mixed", "four_elements",
                                  "neg_between", "agg_inline", "closure_last",
                                  "conjunction_nonstrict", "no_params", "strings"])
def test_all_steps_in_one_call_equal_one_step_at_a_time(monkeypatch, case: str, room: int):
    """Batches of 0..8 rows, then of 0..40 (whose steps make many more sequences than
    they extend, and leave their room to the smaller batches after them), with the
    engine's state snapshotted and restored into a fresh one, or the engine pickled or
    deep-copied (the arrays it keeps for its kernel fetched anew), between some of
    them: the one kernel call for every step finds, batch by batch, the composites the
    steps one at a time find; ``room`` 1 makes the call grow the buffers of the
    complete sequences and call again."""
    monkeypatch.setattr(cdp, "_ROOM", room)
    spec = CASES[case]
    registry, rule = spec.registry(), spec.rule()
    found = 0
    for seed in range(2):
        rng = np.random.default_rng(seed)
        events = spec.events(registry, 120, seed)

        def union(cls: type) -> Union:
            return Union(rule, cls, registry, ticks_per_second=spec.ticks_per_second)

        one_call, by_step = union(CDPEngine), union(StepByStep)
        for batch in random_batches(events, seed=seed, max_size=8 if seed == 0 else 40):
            draw = rng.random()
            if draw < 0.2:
                state = one_call.snapshot()
                one_call = union(CDPEngine)
                one_call.restore(state)
            elif draw < 0.25:
                one_call = pickle.loads(pickle.dumps(one_call))
            elif draw < 0.3:
                one_call = copy.deepcopy(one_call)
            got, want = one_call.process(batch), by_step.process(batch)
            assert composites(got) == composites(want)
            found += len(got)
        assert composites(one_call.flush()) == composites(by_step.flush())
    assert found > 0


def test_fields_read_as_bytes_equal_numpy():
    """Every kind of field, at an odd byte offset of its row, read by the kernels'
    readers: the values of NumPy's ``astype`` (int64 of integers and bools, float64 of
    all), and a float's parameter key that of :func:`encode` (-0.0 as 0.0, every NaN
    one key)."""
    rng = np.random.default_rng(0)
    specials = [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-300, -2.5, 65504.0, 1e-7]
    for kind, name in enumerate(KINDS):
        dtype = np.dtype(name)
        if dtype.kind == "b":
            values = rng.integers(0, 2, 200).astype(dtype)
        elif dtype.kind == "f":
            values = np.concatenate([np.array(specials).astype(dtype),
                                     np.frombuffer(rng.bytes(200 * dtype.itemsize), dtype)])
        else:
            values = np.frombuffer(rng.bytes(200 * dtype.itemsize), dtype)
        rows = np.zeros(len(values), [("pad", "u1"), ("x", dtype)])
        rows["x"] = values
        data = np.frombuffer(rows, np.uint8)
        at = [r * rows.itemsize + 1 for r in range(len(rows))]
        with np.errstate(invalid="ignore", over="ignore"):
            floats = values.astype(np.float64)
        assert np.array_equal([float_at(data, a, kind) for a in at], floats, equal_nan=True)
        if dtype.kind in "biu":
            assert [int_at(data, a, kind) for a in at] == values.astype(np.int64).tolist()
        else:
            assert [float_key(f) for f in floats.tolist()] == encode(values, True).tolist()


def kinds_registry() -> TypeRegistry:
    """Types C and A whose fields have each kind a row read as bytes may hold."""
    registry = TypeRegistry()
    for name in "CA":
        registry.register(name, k1="i1", k2="u2", k3="u8", k4="?", h="f2", f="f4",
                          d="f8", n="i8")
    return registry


def kinds_events(registry: TypeRegistry, n: int, seed: int) -> np.ndarray:
    """Random C and A events whose fields hold each kind's edge values: negative
    int8, the top of uint16, uint64 past int64, bools, -0.0 beside 0.0 and NaN."""
    events = random_events(registry, ("C", "A"), n, seed=seed, max_gap=1, serial="n",
                           ranges={"k1": (-1, 1), "k2": (0, 2), "k3": (0, 2), "k4": (0, 2),
                                   "h": (-1, 2), "f": (0, 2), "d": (-1, 2)})
    rng = np.random.default_rng(seed)
    events["k2"][events["k2"] == 1] = 65535
    events["k3"][events["k3"] == 1] = 2**63 + 5
    f = events["f"]
    f[(f == 0) & (rng.random(n) < 0.5)] = -0.0
    f[rng.random(n) < 0.1] = np.nan
    return events


@pytest.mark.parametrize("ties", ["", "ties nonstrict"])
def test_terminator_fields_of_every_kind_in_one_call(ties: str):
    """A terminator that binds parameters from fields of every kind (int8, uint64 past
    int64, bool, float32 with -0.0 and NaN) and whose later steps read its float16,
    uint16 and float64 fields, in batches of 0..8 rows with the engine pickled or
    restored between some: the one kernel call, which reads the terminators as bytes,
    finds what the steps one at a time find from the fields NumPy converts."""
    registry = kinds_registry()
    rule = parse_rule(f"""define K(c: int, a: int)
        from C(k1=$p and k3=$q and k4=$r and f=$s) as c
          and each A(k1=$p and k3=$q and k4=$r and f=$s and h >= c.h and k2 <= c.k2
                     and d > c.d - 1) as a within 6 from c
        {ties}
        where c=c.n and a=a.n""")
    found = 0
    for seed in range(3):
        rng = np.random.default_rng(seed)
        events = kinds_events(registry, 150, seed)
        one_call, by_step = CDPEngine(rule, registry), StepByStep(rule, registry)
        for batch in random_batches(events, seed=seed, max_size=8):
            draw = rng.random()
            if draw < 0.15:
                state = one_call.snapshot()
                one_call = CDPEngine(rule, registry)
                one_call.restore(state)
            elif draw < 0.3:
                one_call = pickle.loads(pickle.dumps(one_call))
            got, want = one_call.process(batch), by_step.process(batch)
            assert outcome_of(got) == outcome_of(want)
            found += len(got)
        assert outcome_of(one_call.flush()) == outcome_of(by_step.flush())
    assert found > 20


def outcome_of(found: Any) -> tuple:
    """Matches whole, comparable across engines."""
    return (found.terminator.tolist(), [e.tobytes() for e in found.elements],
            found.aggregates.tobytes(), found.negations.tolist())


class General(CDPEngine):
    """The CPU engine without its path for batches of a few rows read as Python
    scalars: every batch goes through the arrays, the reference for that path."""

    def _few_layout(self, events: np.ndarray) -> None:
        return None


def reordered(batch: np.ndarray) -> np.ndarray:
    """``batch`` in a dtype with its fields in reverse order (same types, same values):
    another layout of the rows' fields."""
    names = list(batch.dtype.names or ())
    out = np.empty(len(batch), [(n, batch.dtype[n]) for n in reversed(names)])
    for n in names:
        out[n] = batch[n]
    return out


def outcome(engine: CDPEngine, batch: np.ndarray) -> tuple | None:
    """What ``engine`` makes of ``batch``: its matches whole, or None when it refuses
    the batch as going back in stream order."""
    try:
        found = engine.process(batch)
    except ValueError as error:
        assert "goes back" in str(error)
        return None
    return (found.terminator.tolist(), [e.tolist() for e in found.elements],
            found.aggregates.tobytes(), found.negations.tolist())


@pytest.mark.parametrize(("case", "scalars"), [
    *((case, True) for case in ("stock", "stock_strict", "R5", "two_params", "pred_params",
                                "nonstrict_same_type", "nonstrict_first_params",
                                "window_mixed", "four_elements", "seconds", "agg_filter")),
    # a column or the terminator takes some events of its type: only the arrays
    *((case, False) for case in ("R4", "neg_between"))])
def test_a_few_rows_as_scalars_equal_the_arrays(monkeypatch, case: str, scalars: bool):
    """Batches of 0..8 rows through the path that reads them as Python scalars and
    through the arrays: the same matches batch by batch, the same refusals of a batch
    that goes back (an earlier batch again, or one in reverse), the same state. Between
    batches the engine is pickled, deep-copied, or snapshotted and restored into a fresh
    one, and some batches come in a dtype with their fields in another order."""
    spec = CASES[case]
    registry, rule = spec.registry(), spec.rule()
    scalar_steps: list[int] = []
    counted = CDPEngine._process_few

    def counting(self: CDPEngine, events: np.ndarray, layout: Any) -> Any:
        scalar_steps.append(len(events))
        return counted(self, events, layout)

    monkeypatch.setattr(CDPEngine, "_process_few", counting)
    refused = 0
    for seed in range(2):
        rng = np.random.default_rng(seed)
        events = spec.events(registry, 120, seed)

        def fresh(cls: type[CDPEngine]) -> CDPEngine:
            return cls(rule, registry, ticks_per_second=spec.ticks_per_second)

        few, arrays = fresh(CDPEngine), fresh(General)
        done: list[np.ndarray] = []
        for batch in random_batches(events, seed=seed, max_size=8):
            draw = rng.random()
            if draw < 0.1:
                few = pickle.loads(pickle.dumps(few))
            elif draw < 0.2:
                few = copy.deepcopy(few)
            elif draw < 0.3:
                state = few.snapshot()
                few = fresh(CDPEngine)
                few.restore(state)
            if done and rng.random() < 0.15:  # goes back, or not when no row is relevant
                back = done[int(rng.integers(len(done)))] if rng.random() < 0.5 else batch[::-1]
                got, want = outcome(few, back), outcome(arrays, back)
                assert got == want
                refused += want is None
                if want is not None:
                    continue  # taken: the batch itself would go back now
            if rng.random() < 0.2:
                batch = reordered(batch)
            assert outcome(few, batch) == outcome(arrays, batch)
            done.append(batch)
        assert outcome_of_flush(few) == outcome_of_flush(arrays)
        assert few.snapshot() == arrays.snapshot()
    assert refused > 0
    assert (len(scalar_steps) > 0) == scalars


def outcome_of_flush(engine: CDPEngine) -> tuple:
    found = engine.flush()
    return (found.terminator.tolist(), [e.tolist() for e in found.elements],
            found.aggregates.tobytes(), found.negations.tolist())
