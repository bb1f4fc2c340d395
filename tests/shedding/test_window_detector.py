"""eSPICE on a node: the window operator as a detector, told how much to drop by its
node's overload detector, on the in-process runtime's virtual-clock inboxes.

The stream is Q1-like (``tests/shedding/shedding_streams.py``): a striker's event opens a
count window of 40 events, ``any(2, DF1..DF6)`` first. Trained on 20,000 events, then
replayed at 20 % and 40 % above the operator's throughput with a 1 s bound.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from shedding_streams import q1_probs, stream

from specula import CostModel, Graph, InProcessRuntime
from specula.events import TypeRegistry
from specula.options import OptionError
from specula.shedding import (
    AnyOf,
    DropCommand,
    Shedding,
    WindowAssigner,
    WindowDetector,
    WindowOperator,
)

NAMES = ("STR", *(f"DF{i}" for i in range(1, 7)), "O1", "O2", "O3")
TPS = 1e6  # ticks per second of arrival
#: 0.1 ms per event, 0.7 ms per (event, window) pair: ~1,100 events/s at ~1.2 pairs each
COST = CostModel(per_event=1e-4, per_work=7e-4)


def registry() -> TypeRegistry:
    reg = TypeRegistry(ticks_per_second=TPS)
    for n in NAMES:
        reg.register(n)
    WindowDetector.register_output(reg, "q1")
    return reg


def events(n: int, seed: int, rate: float | None = None) -> np.ndarray:
    """Q1-like events; arriving ``rate`` per second (None: at their time stamps)."""
    reg = registry()
    s = stream(n, seed, q1_probs())
    out = np.zeros(n, reg.dtype(list(NAMES)))
    out["type"] = [reg.id(NAMES[t]) for t in s["type"]]
    out["ts"], out["seq"] = s["ts"], np.arange(n)
    out["ats"] = s["ts"] if rate is None else (np.arange(n) * TPS / rate).astype(np.int64)
    return out


def detector(**kw) -> WindowDetector:
    return WindowDetector(NAMES, AnyOf(2, NAMES[1:7], "first", with_opener=True), 40,
                          output="q1", openers=("STR",), **kw)


def graph(det: WindowDetector, shedding: Shedding | None) -> Graph:
    return Graph(registry(), sources=NAMES).add("q1", det, k0=0, shedding=shedding)


def found(report) -> set[tuple[int, int]]:
    net = report.net("q1")
    return set(zip(net["window"].tolist(), net["match"].tolist(), strict=True))


@pytest.fixture(scope="module")
def trained():
    """The model after 20,000 unshed events, and th measured on the virtual clock."""
    rep = InProcessRuntime(graph(detector(), None), cost_model=COST, queueing=True).run(
        events(20_000, 1, rate=800.0), step_ticks=40_000)
    th = rep.summary()["detectors"]["q1"]["inbox"]["processing_rate_eps"]
    return rep.units["q1"][0].detector.model, th


def test_without_a_command_the_detector_finds_what_the_plain_operator_finds():
    raw = events(6_000, 3)
    rep = InProcessRuntime(graph(detector(), None)).run(raw)
    op = WindowOperator(WindowAssigner(40, openers=[0]), AnyOf(2, tuple(range(1, 7)), "first",
                                                                with_opener=True))
    plain = np.zeros(len(raw), [("ts", "i8"), ("type", "i8")])
    plain["ts"], plain["type"] = raw["ts"], raw["type"] - registry().id("STR")
    closed = [op.push(plain[i:i + 500]) for i in range(0, len(plain), 500)] + [op.flush()]
    want = {w for c in closed for w in c.window[c.detected].tolist()}
    assert {w for w, _ in found(rep)} == want and len(want) > 100
    det = rep.units["q1"][0].detector
    assert det.model.seen.sum() > 0  # it learned from its own windows
    assert det.work_done() == op.work


@pytest.mark.parametrize("overload", [0.2, 0.4])
def test_espice_keeps_the_bound_and_loses_far_fewer_complex_events_than_bl(trained, overload):
    model, th = trained
    assert 900 < th < 1_300
    raw = events(16_000, 2, rate=(1 + overload) * th)
    truth = found(InProcessRuntime(graph(detector(), None)).run(raw))
    shedding = Shedding(latency_bound_s=1.0, strategy="detector")
    out = {}
    for policy in ("espice", "bl"):
        rep = InProcessRuntime(graph(detector(policy=policy, model=copy.deepcopy(model)),
                                     shedding), cost_model=COST).run(raw, step_ticks=40_000)
        inbox = rep.summary()["detectors"]["q1"]["inbox"]
        out[policy] = (len(truth - found(rep)) / len(truth), inbox)
    fn, inbox = out["espice"]
    assert inbox["latency_p99_s"] <= 1.0 and inbox["violations"] == 0
    assert inbox["shed"] == 0 and inbox["shed_pairs"] > 0.1 * len(raw)  # inside, not at the inbox
    assert set(inbox["shed_pairs_by_type"]) <= set(NAMES)
    assert fn < 0.02 and 3 * fn + 0.01 <= out["bl"][0]


def test_untrained_detector_sheds_pairs_at_random_and_counts_them():
    det = detector()
    reg = registry()
    names = ["?"] * (max(t.id for t in reg.types()) + 1)
    for t in reg.types():
        names[t.id] = t.name
    from specula.detectors import Emitter

    det.on_drop_command(DropCommand(0.5, q_size=100, q_max=1_000.0, f=0.8))
    det.on_batch(events(4_000, 4), names, Emitter())
    shed = sum(det.pairs_shed().values())
    offered = shed + det.work_done()
    assert det.model.table is not None or shed  # trained after its first chunk of windows
    assert 0.3 < shed / offered < 0.7


def test_a_detector_without_the_hook_is_refused_for_strategy_detector():
    from specula.detectors.examples import Threshold, example_registry

    graph = Graph(example_registry(), sources=("C",))
    with pytest.raises(OptionError, match="sheds inside itself"):
        graph.add("big_c", Threshold(),
                  shedding=Shedding(latency_bound_s=1.0, strategy="detector"))


@pytest.mark.parametrize("policy", ["espice", "bl"])
def test_a_shedder_told_sources_decides_alike_for_the_types_of_one_source(policy):
    """``shed_as``: the shedder learns and decides per class, so two types of one source
    at the same place of the same window get the same decision, whatever the operator
    makes of them; its drops are still counted by input type."""
    sources = {"DF1": "s1", "O1": "s1", "O2": "s2", "O3": "s2"}
    det = detector(policy=policy, shed_as=sources)
    assert det.classes == ("STR", "s1", *NAMES[2:7], "s2")
    assert det.model.n_types == len(det.classes)
    reg = registry()
    names = ["?"] * (max(t.id for t in reg.types()) + 1)
    for t in reg.types():
        names[t.id] = t.name
    from specula.detectors import Emitter

    det.on_batch(events(8_000, 5), names, Emitter())
    det.on_end(Emitter())
    det.model.build()
    det._retrained()
    det.on_drop_command(DropCommand(0.4, q_size=100, q_max=1_000.0, f=0.8))
    rng = np.random.default_rng(6)
    n = 5_000
    pos = rng.integers(0, 60, n)
    expected = np.full(n, 40)
    ev_ids, win = rng.integers(0, 10**6, n), rng.integers(0, 10**4, n)
    idx = {name: i for i, name in enumerate(NAMES)}
    drops = {}
    for a, b in (("DF1", "O1"), ("O2", "O3")):
        da = det.drop_pairs(np.full(n, idx[a]), pos, expected, ev_ids, win)
        db = det.drop_pairs(np.full(n, idx[b]), pos, expected, ev_ids, win)
        assert np.array_equal(da, db)
        drops[a] = int(da.sum())
    assert drops["O2"] > 0  # the source of no pattern type is shed
    assert set(det.pairs_shed()) == {"DF1", "O1", "O2", "O3"} - ({"DF1", "O1"} if not drops[
        "DF1"] else set())
    with pytest.raises(ValueError, match="not inputs"):
        detector(shed_as={"XX": "s1"})
