"""Raw events from several source actors: the parts of a stream merged in arrival
order, the cuts a source makes, and graphs fed by source actors on Ray giving the
in-process answer, with a source's process or a level-1 actor killed mid-stream."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from fuzzing import SOAK
from hypothesis import given, settings
from hypothesis import strategies as st
from naive import assert_net_equals, content

from specula import InProcessRuntime
from specula.actors import sources
from specula.actors.inprocess import prepare_raw
from specula.actors.sources import ArrayPart, Sources, step_cuts
from specula.detectors.examples import example_registry
from specula.pipelines.synthetic import abc_stream, example_graph

#: Ticks of arrival the sources may run apart: about the stream's own delays.
STEP = 40


def _parts(raw: np.ndarray, n: int) -> list[ArrayPart]:
    """``raw`` (in arrival order) cut by key into ``n`` parts."""
    return [ArrayPart(raw[raw["key"] % n == j]) for j in range(n)]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(n=st.integers(0, 300), parts=st.integers(1, 5), batch=st.integers(1, 40),
       spread=st.integers(1, 30), seed=st.integers(0, 2**16))
def test_merged_parts_are_the_stream_in_arrival_order(n, parts, batch, spread, seed):
    """Any parts (ties in ``ats`` within and across parts, empty parts, any batch size):
    the merge is every event once, in (ats, seq) order."""
    rng = np.random.default_rng(seed)
    raw = np.zeros(n, example_registry().dtype(["A", "B", "C"]))
    raw["ats"] = rng.integers(0, spread, n)
    raw["seq"] = rng.permutation(n)
    raw["key"] = rng.integers(0, 7, n)
    raw = raw[np.lexsort((raw["seq"], raw["ats"]))]
    merged = list(Sources(_parts(raw, parts)).merged(batch))
    got = np.concatenate(merged) if merged else raw[:0]
    assert got.tobytes() == raw.tobytes()
    assert all(len(b) for b in merged)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(ats=st.lists(st.integers(0, 200), max_size=200), step=st.integers(1, 50),
       size=st.integers(1, 20))
def test_a_source_cuts_at_every_step_and_every_batch(ats, step, size):
    ats = np.sort(np.array(ats, np.int64))
    cuts = step_cuts(ats, step, size)
    assert [i for a, b in cuts for i in range(a, b)] == list(range(len(ats)))
    for a, b in cuts:
        assert 0 < b - a <= size
        assert ats[a] // step == ats[b - 1] // step  # no push spans a step boundary


def test_sources_are_checked():
    with pytest.raises(ValueError, match="at least one part"):
        Sources([])
    with pytest.raises(TypeError, match="batches"):
        Sources([np.zeros(3)])


def test_in_process_reads_sources_merged():
    raw = prepare_raw(abc_stream(example_registry(), 3_000, seed=3, keys=6))
    graph = example_graph(0.5, "on-demand", k0=3_000)
    whole = InProcessRuntime(graph).run(raw, step_ticks=50)
    parted = InProcessRuntime(graph).run(Sources(_parts(raw, 4)), step_ticks=50)
    assert parted.raw_events == whole.raw_events == 3_000
    assert parted.played_seconds == whole.played_seconds
    for name in graph.nodes:
        assert content(parted.net(name)) == content(whole.net(name)), name


# ------------------------------------------------------------------------- on Ray

@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
             log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def keyed_stream():
    graph = example_graph(0.0, "on-demand", k0=3_000)
    raw = prepare_raw(abc_stream(example_registry(), 4_000, seed=11, max_delay=20, keys=9))
    return graph, raw, InProcessRuntime(graph).run(raw, step_ticks=50)


def _assert_in_process_answer(report, graph, reference):
    for name in graph.nodes:
        assert_net_equals(report, reference, name)


# the restart protocol of a level-1 actor is tested fed by the driver in
# test_ray_runtime.py; from sources it differs only in who resends
@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.skipif(not SOAK, reason="set SPECULA_SOAK=1 for a level-1 actor killed amid sources")
def test_a_killed_level_1_actor_amid_sources_leaves_the_crash_free_answer(
        local_ray, keyed_stream, tmp_path):
    """Three source actors feed the graph (a part of the stream each, cut by key) and
    a level-1 actor is killed twice: it restarts and has its sources resend. Every
    event is fed once and the answer is the in-process one."""
    from test_ray_runtime import killing

    from specula.actors.ray_runtime import RayRuntime

    graph, raw, reference = keyed_stream
    runtime = RayRuntime(graph, checkpoint_uri=str(tmp_path), checkpoint_every_batches=10,
                         checkpoint_every_s=0.5, chaining="none")  # the victim alone
    victim, fed = "a_not_bc", []
    with killing(runtime, victim, 3) as kills:
        report = runtime.run(Sources(_parts(raw, 3)), step_ticks=STEP, batch_rows=200,
                             speed=1_000.0, on_fed=fed.append)
    restarts = {f"source-{s['index']}": s["restarts"] for s in report.sources}
    restarts |= report.restarts()
    print(f"restarts {restarts}, seconds from kill to up {kills}")
    assert restarts[victim] >= 1 and sum(restarts.values()) == restarts[victim]
    _assert_in_process_answer(report, graph, reference)
    assert report.raw_events == sum(fed) == len(raw)
    assert report.played_seconds == reference.played_seconds
    by_index = sorted(report.sources, key=lambda s: s["index"])
    assert [s["events"] for s in by_index] == [int((raw["key"] % 3 == j).sum())
                                              for j in range(3)]
    summary = report.summary()["detectors"]
    assert sum(d["recovery"]["divergent"] for d in summary.values()) == 0


def sigkill_when_fed(runtime, label: str, points: list[float], total: int, fed: list[int],
                     done: threading.Event, killed: list[float]) -> None:
    """SIGKILL the process of the actor ``label`` each time the run has fed the next of
    ``points`` (fractions of ``total`` events, ascending; ``fed``: the counts the run
    reports), the next only once Ray has restarted it; ``killed`` gets the fraction fed
    at each kill."""
    import os
    import signal

    import ray

    while label not in runtime.actors and not done.wait(0.01):
        pass
    actor = runtime.actors.get(label)
    for point in points:
        if actor is None:
            return
        try:  # waits until a restarted process answers
            pid = ray.get(actor.__ray_call__.remote(lambda self: os.getpid()))
        except ray.exceptions.RayActorError:  # the run ended and killed it for good
            return
        while sum(fed) < point * total:
            if done.wait(0.002):
                return
        os.kill(pid, signal.SIGKILL)
        killed.append(sum(fed) / total)


def _parquet_parts(parts: list[ArrayPart], where) -> list:
    """``parts`` written as Parquet files, as the arrival table's parts are read back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from specula.pipelines.arrival import arrival_parts

    for j, part in enumerate(parts):
        names = part.events.dtype.names
        pq.write_table(pa.table({n: part.events[n] for n in names}),
                       where / f"part-{j:05d}.parquet", row_group_size=500)
    return arrival_parts(where, parts[0].events.dtype)


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.parametrize("kind,seed", [("memory", 1), ("parquet", 2)] + (
    [(k, s) for s in range(3, 9) for k in ("memory", "parquet")] if SOAK else []))
def test_a_source_killed_mid_stream_reads_its_part_again(
        local_ray, keyed_stream, tmp_path, kind, seed):
    """A source actor's process is SIGKILLed twice, at random points of 20-60 % of the
    stream fed: each restart reads its part again (in memory: the driver's copy in the
    object store, held for the run; Parquet: the file) and the answer is the in-process
    one, every event fed once."""
    from specula.actors.ray_runtime import RayRuntime
    from specula.actors.sources import SHARE_BYTES, StoredPart, restartable

    graph, raw, reference = keyed_stream
    parts = _parts(raw, 2)
    # Ray would put each in-memory part into its object store, and free it once the
    # source has started; the Parquet parts are paths
    assert min(p.events.nbytes for p in parts) > SHARE_BYTES
    if kind == "parquet":
        (tmp_path / "arrival").mkdir()
        parts = _parquet_parts(parts, tmp_path / "arrival")
    assert isinstance(restartable(parts[1]), StoredPart) == (kind == "memory")
    runtime = RayRuntime(graph, checkpoint_uri=str(tmp_path / "checkpoints"),
                         checkpoint_every_batches=10, checkpoint_every_s=0.5)
    points = sorted(np.random.default_rng(seed).uniform(0.2, 0.6, 2))
    done, killed, fed = threading.Event(), [], []
    killer = threading.Thread(target=sigkill_when_fed,
                              args=(runtime, "source-1", points, len(raw), fed, done, killed))
    killer.start()
    try:
        report = runtime.run(Sources(parts), step_ticks=STEP, batch_rows=200, speed=1_000.0,
                             on_fed=fed.append)
    finally:
        done.set()
        killer.join()
    print(f"killed at {killed} of the stream fed (aimed at {points})")
    assert len(killed) == 2 and all(0.2 <= k <= 0.65 for k in killed)
    restarts = {f"source-{s['index']}": s["restarts"] for s in report.sources}
    assert restarts == {"source-0": 0, "source-1": 2}
    assert sum(report.restarts().values()) == 0
    _assert_in_process_answer(report, graph, reference)
    assert report.raw_events == sum(fed) == len(raw)
    assert report.played_seconds == reference.played_seconds
    assert [s["events"] for s in sorted(report.sources, key=lambda s: s["index"])] == [
        int((raw["key"] % 2 == j).sum()) for j in range(2)]
    summary = report.summary()["detectors"]
    assert sum(d["recovery"]["divergent"] for d in summary.values()) == 0


def test_a_run_fed_by_sources_cannot_be_suspended(tmp_path):
    from specula.actors.ray_runtime import RayRuntime

    graph = example_graph(0.0, "on-demand", k0=3_000)
    runtime = RayRuntime(graph, checkpoint_uri=str(tmp_path))
    with pytest.raises(ValueError, match="cannot be suspended or resumed"):
        runtime.run(Sources([ArrayPart(np.zeros(0, graph.registry.dtype()))]), suspend=True)


@settings(max_examples=30, deadline=None)
@given(batches=st.lists(st.lists(st.integers(-3_000, 3_000), max_size=40), max_size=12),
       pending=st.integers(1, 50), tps=st.sampled_from([1, 7, 1_000]))
def test_a_feeder_counts_the_seconds_of_every_batch_fed(batches, pending, tps):
    """The played seconds are the distinct seconds of every event fed, whenever the
    feeder makes the seconds it holds distinct (a small SECONDS_PENDING: often)."""
    reg = example_registry()
    feeder = sources.Feeder(None, [], None, None, tps)  # no routes: nothing is sent
    fed = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sources, "SECONDS_PENDING", pending)
        for ts in batches:
            batch = np.zeros(len(ts), reg.dtype(("A", "B", "C")))
            batch["ts"], batch["type"] = ts, reg.id("A")
            feeder.feed(batch)
            fed += ts
    expected = sorted({t // tps for t in fed})
    assert feeder.played_seconds.tolist() == expected
    assert feeder.played_seconds.tolist() == expected  # asked again: the same
