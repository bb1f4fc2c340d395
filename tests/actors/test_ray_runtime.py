"""The Ray runtime on a real local Ray cluster gives the in-process runtime's answers."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
from naive import assert_net_equals, canonical, content

from specula import Graph, InProcessRuntime, TypeRegistry
from specula.actors import sources
from specula.actors.ray_runtime import RayRuntime
from specula.actors.settled import Settled
from specula.detectors.examples import CountPerKey, Threshold, example_registry
from specula.options import MemoryLimit
from specula.ordering.net import NetOutput
from specula.pipelines.synthetic import abc_stream, example_graph

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # starts embedded Ray

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
             log_to_driver=False)
    yield
    ray.shutdown()


#: The step (ticks of arrival) of the in-process reference runs. With nothing late
#: (asserted) a graph's net outputs are its in-order outputs whatever the step; the
#: Ray runtime gets batches of hundreds of events anyway. 50 ticks (~33 events) instead
#: of the example registry's default (0 ticks: one step per arrival) is 5-8x sooner.
REFERENCE_STEP = 50


def without_identity(rows):
    """Content without producer and counter (which differ between partitionings)."""
    names = [n for n in rows.dtype.names
             if n not in ("flags", "ats", "kplus", "origin", "producer", "seq")]
    return sorted(tuple(r[n].item() for n in names) for r in rows)


# Replays run far faster than real time, so at a fan-in (level 2 hears two level-1
# actors and the raw A clock) K must cover the event-time span of a batch: 500 events
# span ~750 ticks; K starts at 3,000. A step takes one batch, so that the units see
# many small pushes and replay often.
# With chaining="auto" (two chains on the test's 2 CPUs) the same answers.
@pytest.mark.parametrize(("retraction", "chaining"), [("full", "none"), ("on-demand", "none"),
                                                      ("on-demand", "auto")])
def test_speculative_hierarchy_on_ray_equals_in_process(local_ray, retraction, chaining):
    raw = abc_stream(example_registry(), 6_000, seed=11, max_delay=20)
    graph = example_graph(0.0, retraction, k0=3_000)
    on_ray = RayRuntime(graph, step_events=1, chaining=chaining).run(raw, batch_rows=500)
    assert len(set(c for d in on_ray.detectors.values() for c in d.chains or [])) == (
        len(graph.instances()) if chaining == "none" else 2)
    reference = InProcessRuntime(graph).run(raw, step_ticks=REFERENCE_STEP)
    st = on_ray.stats("a_not_bc")  # out-of-order input, speculation on: replays happen
    assert st.relocations > 5 and st.replayed > 1_000
    for name in graph.nodes:
        assert len(on_ray.late(name)) == len(reference.late(name)) == 0
        assert content(canonical(on_ray.net(name))) == content(
            canonical(reference.net(name))), name
        assert len(on_ray.net(name)) > 100
    summary = on_ray.summary()
    assert summary["raw_events"] == 6_000
    assert summary["detectors"]["count"]["latency_mean_s"] > 0


# One runtime API: the same run() arguments (registry, steps of arrival time, rows per
# batch), from the driver and from source actors, give the same net output on both.
@pytest.mark.parametrize("fed_by", ["driver", "sources"])
def test_both_runtimes_run_with_the_same_arguments_to_the_same_net_output(local_ray, fed_by):
    graph = example_graph(0.0, "on-demand", k0=3_000)
    raw = abc_stream(graph.registry, 4_000, seed=13, max_delay=20, keys=6)
    stream = raw if fed_by == "driver" else sources.Sources(
        [sources.ArrayPart(raw[raw["key"] % 2 == j]) for j in range(2)])
    arguments = {"registry": graph.registry, "step_ticks": 40, "batch_rows": 150}
    on_ray = RayRuntime(graph).run(stream, **arguments)
    here = InProcessRuntime(graph).run(stream, **arguments)
    assert on_ray.raw_events == here.raw_events == len(raw)
    for name in graph.nodes:
        assert len(assert_net_equals(on_ray, here, name)) > 50


# the raw batches reach the instances inline (small) or through the object store (put
# once for all of them: every batch once the threshold is 0)
@pytest.mark.parametrize("share_bytes", [sources.SHARE_BYTES, 0])
def test_key_partitioned_detector_on_ray_equals_one_instance(local_ray, monkeypatch,
                                                             share_bytes):
    monkeypatch.setattr(sources, "SHARE_BYTES", share_bytes)
    raw = abc_stream(example_registry(), 8_000, seed=5, max_delay=20, keys=10)

    def graph(partitions: int) -> Graph:
        g = Graph(example_registry(), sources=("A", "B", "C"))
        g.add("big_c", Threshold(limit=10), alpha="adaptive", k0=200)
        g.add("per_key", CountPerKey(), alpha=0.5, k0=200, partitions=partitions)
        return g

    one = InProcessRuntime(graph(1)).run(raw, step_ticks=REFERENCE_STEP)
    four = RayRuntime(graph(4)).run(raw, batch_rows=1_000)
    four_here = InProcessRuntime(graph(4)).run(raw, step_ticks=REFERENCE_STEP)
    for reference in (one, four_here):
        assert not any(len(reference.late(name)) for name in reference.detectors)
    assert len(one.net("per_key")) > 1_000
    assert without_identity(four.net("per_key")) == without_identity(one.net("per_key"))
    assert without_identity(four_here.net("per_key")) == without_identity(one.net("per_key"))
    assert len({int(p) for p in four.net("per_key")["producer"]}) == 4


def test_raw_batches_of_another_registry_order_on_ray_give_the_canonical_answer(local_ray):
    """The replay path: an iterable of batches made with one registry, a graph over the
    same types in another order; the ids are translated by name at the source."""
    from specula.detectors.examples import ANotBC, Threshold

    made_with = example_registry()
    raw = abc_stream(made_with, 4_000, seed=7, max_delay=20)
    reordered = TypeRegistry()
    for t in reversed(made_with.types()):
        reordered.register(t.name, **dict(t.fields))
    assert reordered.id("A") != made_with.id("A")

    def graph(registry):
        g = Graph(registry, sources=("A", "B", "C"))
        return g.add("a_not_bc", ANotBC(), alpha=0.0, k0=3_000).add(
            "big_c", Threshold(), alpha=0.5, k0=3_000)

    batches = [raw[i:i + 500] for i in range(0, len(raw), 500)]
    on_ray = RayRuntime(graph(reordered)).run(iter(batches), registry=made_with)
    reference = InProcessRuntime(graph(made_with)).run(raw, step_ticks=REFERENCE_STEP)
    for name in ("a_not_bc", "big_c"):
        assert len(reference.late(name)) == 0
        got = [(reordered.name(r[1]), *r[2:]) for r in content(canonical(on_ray.net(name)))]
        want = [(made_with.name(r[1]), *r[2:])
                for r in content(canonical(reference.net(name)))]
        assert sorted(got) == sorted(want) and len(want) > 50, name


def test_a_memory_limit_holds_on_ray_and_the_report_says_so(local_ray):
    """Disorder that would need ~10x the limit: the actor's unit stays within it, backs
    speculation off, caps K, and the run report and per-batch samples say so."""
    reg = example_registry()
    raw = abc_stream(reg, 6_000, seed=3, max_delay=2_000, burst=0.1)
    graph = Graph(reg, sources=("A", "B", "C")).add(
        "t", Threshold(), alpha=0.3, k0=0, memory=MemoryLimit(buffered_events=300))
    report = RayRuntime(graph).run(raw, batch_rows=100)
    d = report.summary()["detectors"]["t"]
    assert d["memory"]["limit_events"] == 300
    assert d["memory"]["peak_buffered"] <= 300
    assert d["memory_backoffs"] >= 1 and d["memory_caps"] >= 1 and d["memory_released"] > 0
    assert d["late"] > 0
    series = report.time_series()["t"]
    assert 0 < max(series["batch.buffered"]) <= 300
    assert "batch.snapshot_kb" in series


@pytest.mark.parametrize(("k0", "alpha"), [(0, 1.0), (1_000, 1.0), (1_000, "adaptive")])
def test_overloaded_actor_keeps_its_latency_bound_by_shedding(local_ray, k0, alpha):
    """An actor that takes 0.4 ms per event (2,500 events/s) gets 4,000 events/s for
    3 s: unshed its queue would grow to ~4,500 events, 1.8 s of waiting. With RI and a
    1 s bound its p99 latency stays under the bound, and the report counts the drops;
    also when its unit holds events for K (1,000 events, 0.25 s) before the detector
    sees them, and sheds from those too; also when it adapts alpha (it speculates no
    more while it sheds)."""
    from specula.actors.report import format_detectors
    from specula.detectors.examples import SlowThreshold
    from specula.shedding import Shedding

    reg = example_registry()
    n = 12_000
    raw = np.zeros(n, reg.dtype(["C"]))
    raw["type"] = reg.id("C")
    raw["ts"] = raw["ats"] = raw["seq"] = np.arange(n)
    raw["v"] = np.random.default_rng(1).integers(0, 100, n)
    graph = Graph(reg, sources=("C",)).add(
        "big_c", SlowThreshold(seconds_per_event=4e-4), k0=k0, alpha=alpha,
        shedding=Shedding(latency_bound_s=1.0))
    report = RayRuntime(graph).run(raw, batch_rows=100, speed=4_000.0)  # 1 tick/s
    s = report.summary()["detectors"]["big_c"]
    inbox = s["inbox"]
    assert 0.2 * n < inbox["shed"] < 0.6 * n  # δ / R = 0.375 once the queue is long
    assert report.shed("big_c") == {"C": inbox["shed"]} == inbox["shed_by_type"]
    assert inbox["latency_p99_s"] <= 1.0, inbox
    # a detection's latency adds the unit's hold (K) to its input's wait in the inbox
    assert s["latency_p99_s"] <= 1.0 + k0 / 4_000, s
    assert inbox["violations"] < 0.01 * n
    assert (inbox["shed_held"] > 0) == (k0 > 0)  # the unit's held events shed too
    assert 1_500 < inbox["processing_rate_eps"] < 2_600
    # what it detected is Threshold's answer on what it kept: a subset of the full one
    full = raw[raw["v"] > 50]
    got = report.net("big_c")
    assert set(got["ts"].tolist()) < set(full["ts"].tolist())
    assert len(got) > 0.3 * len(full)
    series = report.time_series()["big_c"]
    assert series["batch.shed"][-1] == inbox["shed"] and max(series["batch.inbox_events"]) > 0
    assert any(line.startswith("big_c: shed ") for line in format_detectors(
        report.summary()["detectors"]))


def test_overloaded_espice_window_detector_keeps_its_bound_on_ray(local_ray):
    """eSPICE end to end on Ray: a window operator (a striker's event opens a window of 40
    events, ``any(2, DF1..DF6)``) that takes 0.4 ms per (event, window) pair, ~1.2 pairs
    per event, gets 4,000 events/s for 3 s, ~1.7x its throughput. Its node sheds inside
    the detector (``strategy="detector"``) with UT learned beforehand: p99 latency under
    the 1 s bound, the dropped pairs in the report, no event dropped at the inbox."""
    from specula.actors.report import format_detectors
    from specula.shedding import AnyOf, Shedding, WindowDetector

    names = ("STR", *(f"DF{i}" for i in range(1, 7)), "O1", "O2", "O3")
    reg = TypeRegistry()
    for t in names:
        reg.register(t)
    WindowDetector.register_output(reg, "q1")
    probs = np.r_[0.03, np.full(6, 0.92 / 6), np.full(3, 0.05 / 3)]

    def stream(n: int, seed: int) -> np.ndarray:
        out = np.zeros(n, reg.dtype(list(names)))
        kinds = np.random.default_rng(seed).choice(len(names), n, p=probs)
        out["type"] = np.array([reg.id(t) for t in names])[kinds]
        out["ts"] = out["ats"] = out["seq"] = np.arange(n)
        return out

    def graph(shedding, **kw) -> Graph:
        det = WindowDetector(names, AnyOf(2, names[1:7], "first", with_opener=True), 40,
                             output="q1", openers=("STR",), **kw)
        return Graph(reg, sources=names).add("q1", det, k0=0, shedding=shedding)

    trained = InProcessRuntime(graph(None)).run(stream(20_000, 1), step_ticks=500)
    model = trained.units["q1"][0].detector.model
    model.build()
    raw = stream(12_000, 2)
    report = RayRuntime(graph(Shedding(latency_bound_s=1.0, strategy="detector"),
                              model=model, seconds_per_pair=4e-4)).run(raw, batch_rows=100,
                                                                       speed=4_000.0)
    inbox = report.summary()["detectors"]["q1"]["inbox"]
    assert inbox["latency_p99_s"] <= 1.0 and inbox["violations"] < 0.01 * len(raw)
    assert inbox["shed"] == 0 and inbox["shed_pairs"] > 0.1 * len(raw)
    assert set(inbox["shed_pairs_by_type"]) <= set(names)
    assert any("(event, window) pairs in the detector" in line
               for line in format_detectors(report.summary()["detectors"]))
    assert len(report.net("q1")) > 0.5 * len(trained.net("q1")) * len(raw) / 20_000


@contextlib.contextmanager
def killing(runtime: RayRuntime, label: str, seed: int) -> Iterator[list]:
    """Within the block, a thread kills the actor of ``label`` at random points
    (:func:`kill_at_random`); yields the seconds each restart took."""
    done, kills = threading.Event(), []
    killer = threading.Thread(target=kill_at_random, args=(runtime, label, seed, done, kills))
    killer.start()
    try:
        yield kills
    finally:
        done.set()
        killer.join()


def kill_at_random(runtime: RayRuntime, label: str, seed: int, done, kills: list) -> None:
    """Kill the actor of ``label`` (Ray restarts it) twice at random points of the run,
    each kill 0.3-1.2 s after the actor is up again (a kill while Ray restarts it counts
    as one more restart, so a quick series would exhaust ``max_restarts``); ``kills``
    gets the seconds each restart took, from the kill to the new process answering."""
    import random

    rng = random.Random(seed)
    while not runtime.actors and not done.wait(0.05):
        pass
    actor = runtime.actors.get(label)
    for _ in range(2):
        if actor is None or done.wait(rng.uniform(0.3, 1.2)):
            return
        try:
            before = ray.get(actor.status.remote())["incarnation"]
            t0 = time.perf_counter()
            ray.kill(actor, no_restart=False)
            while ray.get(actor.status.remote())["incarnation"] == before:
                time.sleep(0.05)
        except ray.exceptions.RayActorError:  # the run ended and killed it for good
            kills.append(None)
            return
        kills.append(time.perf_counter() - t0)


@pytest.fixture(scope="module")
def crash_stream():
    graph = example_graph(0.0, "on-demand", k0=3_000)
    raw = abc_stream(example_registry(), 12_000, seed=11, max_delay=20)
    return graph, raw, InProcessRuntime(graph).run(raw, step_ticks=REFERENCE_STEP)


# a level-1 actor (fed by the driver) and a mid-level one (fed by two actors and the
# driver, feeding the level above): killed at random points of a ~6 s replay; the
# level-1 one with every raw batch a slice of the stream put once (sources.RawSlice,
# resent as it was sent), the other with the batches inline
@pytest.mark.parametrize(("victim", "share_bytes"), [("a_not_bc", 0),
                                                     ("d_then_e", sources.SHARE_BYTES)])
def test_killed_actors_restart_and_the_net_output_is_the_crash_free_one(
        local_ray, crash_stream, tmp_path, monkeypatch, victim, share_bytes):

    from specula.actors.output_log import persisted_net

    monkeypatch.setattr(sources, "SHARE_BYTES", share_bytes)
    graph, raw, reference = crash_stream
    # one actor per instance: the victim restarts alone (a chain restarts as a unit)
    runtime = RayRuntime(graph, checkpoint_uri=str(tmp_path), checkpoint_every_batches=10,
                         checkpoint_every_s=0.5, chaining="none")
    with killing(runtime, victim, 7) as kills:
        report = runtime.run(raw, batch_rows=200, speed=3_000.0)
    restarts = report.restarts()
    print(f"restarts {restarts}, seconds from kill to up {kills}")
    assert sum(restarts.values()) == restarts[victim] >= 1
    # every restart that answered before the end is counted (one may race the end)
    assert len([k for k in kills if k is not None]) <= restarts[victim] <= len(kills)
    summary = report.summary()["detectors"]
    assert summary[victim]["recovery"]["restarts"] == restarts[victim]
    assert sum(d["recovery"]["divergent"] for d in summary.values()) == 0
    for name in graph.nodes:
        got = assert_net_equals(report, reference, name)
        (label,) = [i.label for i in graph.instances() if i.node.name == name]
        persisted = persisted_net(runtime.checkpoints, label, got.dtype).net()
        assert persisted.tobytes() == got.tobytes(), name


def test_a_run_suspended_twice_and_resumed_gives_the_uninterrupted_answer(
        local_ray, crash_stream, tmp_path):
    """Three runs over three parts of the stream, cut at random arrivals: each of the
    first two suspends (no flush), the next resumes from its checkpoints. The last
    run's net output is the uninterrupted run's, and what the runs hand on as it
    becomes final (from the previous suspension's settled counters to their own, the
    rest with the flush) adds up to it exactly, none twice; so do their emissions."""
    graph, raw, reference = crash_stream
    cuts = sorted(np.random.default_rng(7).choice(np.arange(500, len(raw) - 500), 2,
                                                  replace=False))
    got: list[Settled] = []
    resume, handed_per_run = None, []
    for lo, hi in zip([0, *cuts], [*cuts, len(raw)], strict=True):
        runtime = RayRuntime(graph, checkpoint_uri=str(tmp_path))
        last = hi == len(raw)
        start = len(got)
        report = runtime.run(raw[lo:hi], batch_rows=300, suspend=not last, resume=resume,
                             on_settled=got.append)
        resume = runtime.suspension
        assert (resume is None) == last
        handed_per_run.append(sum(len(rows) for found in got[start:]
                                  for rows in found.complex.values()))
    st = report.stats("a_not_bc")
    # counters carry over the runs (how many relocations depends on how pushes fall
    # into steps on Ray, which the machine's load changes)
    assert st.relocations > 0 and st.replayed > 1_000
    assert all(n > 0 for n in handed_per_run)
    for name in graph.nodes:
        assert len(reference.late(name)) == 0, name
        assert_handed_on_once(got, name, reference.net(name))


def assert_handed_on_once(got: list[Settled], name: str, want: np.ndarray) -> None:
    """The net events handed on are ``want``, each once, and so is the net output of
    the emissions handed on, applied in order."""
    parts = [found.complex[name] for found in got if name in found.complex]
    handed = np.concatenate(parts) if parts else want[:0]
    assert content(canonical(handed)) == content(canonical(want)), name
    assert len(np.unique(handed["seq"])) == len(handed), name
    emitted = NetOutput(want.dtype)
    for found in got:
        if name in found.emissions:
            emitted.apply(found.emissions[name], 0)
    assert content(canonical(emitted.net())) == content(canonical(want)), name


# A chain holding the mid-level d_then_e (fed by level-1 instances and the driver),
# killed at random points: the chain restarts as a unit, each member from its own
# checkpoint. The plans: "auto"'s (its producer big_c in the other chain), d_then_e with
# its consumer count (both its producers outside), and a random
# closed one (:mod:`specula.actors.chaining`): here, all in one chain. In the first, the
# raw batches come as slices of the stream put once (sources.RawSlice).
@pytest.mark.parametrize("plan", [[["a_not_bc", "d_then_e", "count"], ["big_c"]],
                                  [["a_not_bc"], ["big_c"], ["d_then_e", "count"]], 2])
def test_a_killed_chain_restarts_as_a_unit_and_the_net_output_is_the_crash_free_one(
        local_ray, crash_stream, tmp_path, monkeypatch, plan):
    import random

    from test_chain import random_plan

    from specula.actors.chaining import plan_chains
    from specula.actors.output_log import persisted_net

    if plan == [["a_not_bc", "d_then_e", "count"], ["big_c"]]:
        monkeypatch.setattr(sources, "SHARE_BYTES", 0)
    graph, raw, reference = crash_stream
    if isinstance(plan, int):
        plan = random_plan(graph, random.Random(plan))
    runtime = RayRuntime(graph, checkpoint_uri=str(tmp_path), checkpoint_every_batches=10,
                         checkpoint_every_s=0.5, chaining=plan)
    with killing(runtime, "d_then_e", 5) as kills:
        report = runtime.run(raw, batch_rows=200, speed=3_000.0)
    restarts = report.restarts()
    print(f"plan {plan}: restarts {restarts}, seconds from kill to up {kills}")
    chains = plan_chains(graph, plan, 2)
    (mine,) = [[i.node.name for i in c] for c in chains if "d_then_e" in
               [i.node.name for i in c]]
    assert all(restarts[n] == restarts["d_then_e"] >= 1 for n in mine)
    assert all(restarts[n] == 0 for n in graph.nodes if n not in mine)
    assert len([k for k in kills if k is not None]) <= restarts["d_then_e"] <= len(kills)
    named = {i.node.name: c[0].label if len(c) == 1 else f"chain-{k}"
             for k, c in enumerate(chains) for i in c}
    assert {n: report.detectors[n].chains for n in graph.nodes} == {
        n: [named[n]] for n in graph.nodes}
    summary = report.summary()["detectors"]
    assert sum(d["recovery"]["divergent"] for d in summary.values()) == 0
    for name in graph.nodes:
        got = assert_net_equals(report, reference, name)
        (label,) = [i.label for i in graph.instances() if i.node.name == name]
        persisted = persisted_net(runtime.checkpoints, label, got.dtype).net()
        assert persisted.tobytes() == got.tobytes(), name


@pytest.mark.parametrize("chaining", ["none", "auto"])
def test_detections_are_handed_on_as_they_become_final_and_the_actors_forget_them(
        local_ray, crash_stream, tmp_path, chaining):
    """A paced run (~3 s) hands on what its checkpoints made final as it goes: before
    the end some, and with the end everything, each detection once; the actors drop
    what was handed on (their output segments on storage too), and the report still
    counts it; with chained instances alike."""
    graph, raw, reference = crash_stream
    got: list[Settled] = []
    # one batch per step: the stream is small enough for a level-2 actor whose inbox
    # filled up (on a busy machine) to take all its input in one step, and checkpoint
    # only at the end
    runtime = RayRuntime(graph, step_events=1, checkpoint_uri=str(tmp_path),
                         checkpoint_every_batches=10, checkpoint_every_s=0.2,
                         chaining=chaining)
    report = runtime.run(raw, batch_rows=200, speed=6_000.0, on_settled=got.append)
    assert sum(len(rows) for found in got[:-1] for rows in found.complex.values()) > 0
    summary = report.summary()["detectors"]
    for name in graph.nodes:
        assert len(report.late(name)) == 0, name
        assert_handed_on_once(got, name, reference.net(name))
        d = report.detectors[name]
        assert d.handed_on is not None and d.handed_on.events > 0, name
        assert len(d.net) < len(reference.net(name)), name  # it forgot some
        assert summary[name]["net_events"] == len(reference.net(name)), name
        want = np.unique(reference.net(name)["type"], return_counts=True)
        assert d.detected() == dict(zip(*(w.tolist() for w in want), strict=True)), name
        assert summary[name]["latency_mean_s"] > 0, name
    actors = {path.parent for path in tmp_path.rglob("net-*")}
    assert actors and all(not (a / "net-000000").exists() for a in actors)


def test_late_events_are_handed_on_once_and_forgotten(local_ray, tmp_path):
    """A level-1 actor whose K stays below the disorder sets events aside as late; a
    run that hands its output on hands each late event on once (the same as a run
    that does not), and its actor keeps none of those it handed on."""
    reg = example_registry()
    raw = abc_stream(reg, 8_000, seed=5, max_delay=2_000, burst=0.2)
    graph = Graph(reg, sources=("A", "B", "C")).add(
        "t", Threshold(), alpha=1.0, k0=0, memory=MemoryLimit(buffered_events=200))
    # one batch per step: with the memory limit biting, which events are late depends on
    # the pushes, and the two runs must cut them alike
    plain = RayRuntime(graph, step_events=1).run(raw, batch_rows=100)
    got: list[Settled] = []
    handed = RayRuntime(graph, step_events=1, checkpoint_uri=str(tmp_path),
                        checkpoint_every_batches=5, checkpoint_every_s=0.1).run(
        raw, batch_rows=100, speed=4_000.0, on_settled=got.append)
    late = np.concatenate([found.late["t"] for found in got if "t" in found.late])
    assert len(plain.late("t")) > 100
    assert content(late) == content(plain.late("t"))
    assert len(handed.late("t")) < len(late)


def _first_run_hosts(graph, raw):
    """``raw``, its in-process answers, and the chain hosts of a first Ray run of it."""
    reference = InProcessRuntime(graph).run(raw, step_ticks=REFERENCE_STEP)
    first = RayRuntime(graph)
    hosts: set = set()
    first.run(raw, batch_rows=200, on_fed=lambda _: hosts.update(first.actors.values()))
    return raw, reference, hosts


def test_chain_processes_serve_the_next_run_unless_they_restarted(local_ray, crash_stream,
                                                                  tmp_path):
    """A run's chain hosts wait for the next run (:mod:`specula.actors.pool`), which
    takes them and gives the same answers; one killed mid-run (Ray restarts it with the
    run's chain, its members recover) serves no later run."""
    from specula.actors.pool import POOL

    graph, raw, _ = crash_stream
    raw, reference, hosts = _first_run_hosts(graph, raw[:4_000])
    assert hosts <= set(POOL.idle_hosts())
    runtime = RayRuntime(graph, checkpoint_uri=str(tmp_path), checkpoint_every_batches=3)
    used, killed = set(), []

    def kill_once(_fed: int) -> None:
        used.update(runtime.actors.values())
        if not killed:
            killed.append(runtime.actors["d_then_e"])
            ray.kill(killed[0], no_restart=False)

    report = runtime.run(raw, batch_rows=200, on_fed=kill_once)
    assert used == hosts and killed  # the first run's processes ran the second
    assert report.restarts()["d_then_e"] >= 1
    for name in graph.nodes:
        assert_net_equals(report, reference, name)
    idle = set(POOL.idle_hosts())
    assert killed[0] not in idle and hosts - set(killed) <= idle


def test_idle_chain_processes_that_died_or_restarted_are_replaced(local_ray, crash_stream):
    """An idle host that died, or that Ray made again, while it waited for a run is not
    handed the next run: the run gets a new process and the same answers."""
    from specula.actors.pool import POOL

    graph, raw, _ = crash_stream
    raw, reference, hosts = _first_run_hosts(graph, raw[:2_000])
    dead, restarted = list(hosts)[:2]
    ray.kill(dead, no_restart=True)
    ray.kill(restarted, no_restart=False)
    _wait_until_killed(dead, restarted)
    runtime = RayRuntime(graph)
    used: set = set()
    report = runtime.run(raw, batch_rows=200,
                         on_fed=lambda _: used.update(runtime.actors.values()))
    assert dead not in used and restarted not in used
    for name in graph.nodes:
        assert_net_equals(report, reference, name)
    assert not {dead, restarted} & set(POOL.idle_hosts())


def _wait_until_killed(dead, restarted, timeout_s: float = 60.0) -> None:
    """Until ``dead`` answers no call and ``restarted`` answers from the process Ray
    made again: ``ray.kill`` returns before the process ends, and the old one may still
    answer that it serves."""
    deadline = time.monotonic() + timeout_s
    with pytest.raises(ray.exceptions.RayActorError):
        while time.monotonic() < deadline:
            ray.get(dead.serves.remote(), timeout=timeout_s)
            time.sleep(0.05)
    while ray.get(restarted.serves.remote(), timeout=timeout_s):
        assert time.monotonic() < deadline, "the killed host was not made again"
        time.sleep(0.05)


def test_prestarted_hosts_are_taken_by_a_run_with_their_options_only(local_ray):
    """Hosts started before any run (``prestart``, as the main job starts them while
    Spark ingests) wait idle in the pool until a run that asks for hosts with their Ray
    options takes them; a run with other options starts hosts of its own. Both give the
    in-process answers."""
    from specula.actors.pool import POOL

    graph = example_graph(0.0, "on-demand", k0=3_000)
    raw = abc_stream(example_registry(), 3_000, seed=7, max_delay=20)
    reference = InProcessRuntime(graph).run(raw, step_ticks=REFERENCE_STEP)
    runtime = RayRuntime(graph, max_restarts=7)  # options no other test's runs use
    names = runtime.prestart()
    assert len(names) == 2 and runtime.prestart() == []  # two chains, started once
    prestarted = {ray.get_actor(n) for n in names}
    assert prestarted <= set(POOL.idle_hosts())
    for run, takes in ((RayRuntime(graph, max_restarts=8), False), (runtime, True)):
        used: set = set()
        report = run.run(raw, batch_rows=300,
                         on_fed=lambda _, run=run, used=used: used.update(run.actors.values()))
        assert used == prestarted if takes else not used & prestarted
        for name in graph.nodes:
            assert_net_equals(report, reference, name)
    assert prestarted <= set(POOL.idle_hosts())  # back in the pool for the next run


def test_suspending_needs_checkpoints_that_outlive_the_run():
    with pytest.raises(ValueError, match="checkpoint_uri that outlives it"):
        RayRuntime(example_graph(0.0, "on-demand")).run(np.zeros(0), suspend=True)


def test_a_graph_asking_for_more_than_the_cluster_is_refused_before_it_starts(local_ray):
    from specula.actors.placement import PlacementError

    graph = example_graph(0.0, k0=3_000).with_options(cpus=1.0)  # 4 actors, 2 CPUs
    with pytest.raises(PlacementError, match="ask for 4 CPU, the cluster has 2"):
        RayRuntime(graph).run(abc_stream(example_registry(), 100, seed=1))
    assert not [a for a in ray.util.list_named_actors() if a.startswith("specula-")]


def test_the_report_says_where_each_actor_ran_and_where_its_cpu_went(local_ray):
    graph = Graph(example_registry(), sources=("C",))
    graph.add("per_key", CountPerKey(), partitions=2, cpus=0.5, k0=3_000)
    t0 = time.perf_counter()
    report = RayRuntime(graph).run(
        abc_stream(example_registry(), 2_000, seed=3), batch_rows=500)
    took = time.perf_counter() - t0
    # start-up (to the first event a unit took) and stream split the run's time
    assert report.startup_s is not None and report.stream_wall_s is not None
    assert report.startup_s > 0 and 0 < report.stream_wall_s <= report.wall_seconds
    assert report.startup_s + report.stream_wall_s <= took
    assert report.summary()["startup_s"] == report.startup_s
    node = ray.get_runtime_context().get_node_id()[:8]
    hosts = report.detectors["per_key"].hosts
    assert len(hosts) == 2 and all(h.endswith(node) for h in hosts)
    assert report.summary()["detectors"]["per_key"]["hosts"] == hosts
    # one host: each actor's clock offset is zero within the bound of its estimate
    clocks = report.detectors["per_key"].clocks_ms
    assert len(clocks) == 2 and all(abs(offset) <= error + 0.01 for offset, error in clocks)
    # both processes' CPU during the run, the processing threads' phases part of it
    cpu = report.detectors["per_key"].cpu_s
    phases = cpu["unit"] + cpu["publish"] + cpu["checkpoint"]
    assert cpu["unit"] > 0 and cpu["publish"] >= 0 and cpu["checkpoint"] > 0
    assert cpu["process"] >= phases and cpu["other"] == pytest.approx(cpu["process"] - phases)
    assert report.summary()["detectors"]["per_key"]["cpu_s"] == cpu
