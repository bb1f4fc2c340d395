"""Checkpoints and crash recovery of detector actors, without Ray: workers run in
threads behind a stand-in for actor handles that, like Ray with ``max_task_retries``,
retries a call on the restarted worker when the one it reached was halted."""

from __future__ import annotations

import functools
import hashlib
import itertools
import os
import random
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from fuzzing import SOAK
from naive import canonical, content

from specula import InProcessRuntime
from specula.actors.actor_recovery import ActorRecovery
from specula.actors.channels import Publisher, Route
from specula.actors.inbox import Gate, Inbox
from specula.actors.output_log import persisted_net
from specula.actors.ray_runtime import Delivery, RayRuntime
from specula.actors.recovery import (
    CHECKPOINT_VERSION,
    CheckpointLayoutError,
    Checkpoints,
    Determinants,
    StepLog,
    Suspension,
    digest,
    graph_shape,
    pack_checkpoint,
    unpack_checkpoint,
)
from specula.actors.routing import Router
from specula.actors.signing import random_key, run_key
from specula.actors.sources import DRIVER, SOURCE_SENDERS, Pace
from specula.actors.tally import COUNTS
from specula.actors.worker import DetectorWorker
from specula.detectors.examples import RunningCount, SlowThreshold, Threshold, example_registry
from specula.detectors.graph import Graph, GraphError
from specula.pipelines.resume import save_suspension, state_dir, suspended_watch
from specula.pipelines.synthetic import abc_stream, example_graph
from specula.shedding import DropCommand, Shedding


class CountingWorker(DetectorWorker):
    """A worker that tells its stand-in ``actor`` how far it got
    (:attr:`LocalActor.progress`)."""

    def __init__(self, actor: LocalActor, *args, **kwargs) -> None:
        self.stand_in = actor  # before the constructor: a restarted worker starts in it
        super().__init__(*args, **kwargs)

    def _take(self, *args) -> None:
        super()._take(*args)
        self.stand_in.progress = max(self.stand_in.progress, self.recovery.batches_taken)


class LocalActor:
    """A worker behind ``.method.remote(...)`` calls that return futures. ``restart``
    halts the worker (as a crash would) and makes a new one from ``build`` (its
    arguments, made again: its handles on other actors belong to the new process),
    which restores the last checkpoint, as Ray reruns a restarted actor's constructor.
    A call the crashed worker made that has not run yet is lost with it.
    :attr:`progress` is the most batches one of its workers had taken: a restarted one
    takes those after its checkpoint again before it passes it."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool
        self.worker: DetectorWorker | None = None
        self.restarting = False
        self.progress = 0
        self.generation = 0  # crashes so far

    def make(self, build) -> None:
        self.build = build
        args, kwargs = build()
        self.worker = CountingWorker(self, *args, **kwargs)

    def restart(self) -> None:
        restart_together([self])

    def crash(self) -> None:
        """The process is gone: calls to it wait until :meth:`revive`, its own calls
        fail; :meth:`halt` then waits for its worker to stop."""
        self.restarting = True
        self.generation += 1

    def halt(self) -> None:
        self.worker.halt()
        self.worker = _Crashed()

    def up(self, caller: LocalActor, generation: int) -> DetectorWorker:
        """The worker, once it is not crashed or being made again, for the process
        ``generation`` of ``caller`` (which fails if that process crashed)."""
        while self.restarting:
            if caller.generation != generation:
                raise RuntimeError("its caller crashed")
            time.sleep(0.005)
        return self.worker

    def revive(self) -> None:
        """A new worker from the same arguments (it restores the last checkpoint)."""
        args, kwargs = self.build()
        self.worker = CountingWorker(self, *args, **kwargs)
        self.restarting = False

    def handle(self, caller: LocalActor | None = None) -> _Handle:
        """This actor as the current worker of ``caller`` (None: the driver) calls it."""
        return _Handle(self, caller)

    def __getattr__(self, name: str):
        return getattr(self.handle(), name)

    def _call(self, name, args, kwargs, caller=None, generation=0):
        while True:
            if caller is not None and caller.generation != generation:
                raise RuntimeError("its caller crashed")
            worker = self.worker
            try:
                return getattr(worker, name)(*args, **kwargs)
            except RuntimeError:
                if worker is self.worker and not self.restarting:
                    raise
                time.sleep(0.01)  # it reached a halted worker: retry on the new one


class _Handle:
    """An actor as one process of its caller sees it: calls go through
    :meth:`LocalActor._call`, and those the caller's process made are dropped once it
    crashed."""

    def __init__(self, actor: LocalActor, caller: LocalActor | None) -> None:
        self.actor, self.caller = actor, caller
        self.generation = caller.generation if caller is not None else 0

    def __getattr__(self, name: str):
        handle = self

        class Method:
            @staticmethod
            def remote(*args, **kwargs):
                a = handle.actor
                return a.pool.submit(a._call, name, args, kwargs, handle.caller,
                                     handle.generation)

        return Method()


class _Crashed:
    """What a crashed actor's calls reach until its new process is made."""

    def __getattr__(self, name: str):
        def call(*args, **kwargs):
            raise RuntimeError("crashed")
        return call


def restart_together(actors: list[LocalActor]) -> None:
    """Crash ``actors`` at once and make them again in order, as Ray restarts a chain
    (its constructor makes the members in topological order; a member recovers, and
    calls its neighbours, while the others are made)."""
    for a in actors:
        a.crash()
    for a in actors:
        a.halt()
    for a in actors:
        a.revive()


def local_run(graph, raw, tmp_path, victim: str | list[str] | None, seed: int,
              every: int = 5, paced_by: str | None = None, apart: bool = False):
    """The Ray runtime's driver over local workers; the actor of ``victim`` (a label)
    is restarted at random points while the stream is fed: each time it got 1 to 6
    batches further than before its last restart (not at random times, which a fast
    machine could outrun). A list of labels restarts together, as a chain does, when
    the first (or the one labelled ``paced_by``) got that far; or, ``apart``, one of
    them at a time, picked at random, once the one restarted before has recovered
    (took a batch: one failure at a time). A step takes at most four of the driver's
    batches, so that every actor takes enough steps for several restarts."""
    rt = RayRuntime(graph)
    router = Router(graph)
    instances = graph.instances()
    of_node = {n: [i for i in instances if i.node.name == n] for n in graph.nodes}
    checkpoints = Checkpoints(str(tmp_path), f"run-{victim}-{seed}", every_batches=every,
                              key=random_key())
    pool = ThreadPoolExecutor(256)
    actors = {i.producer: LocalActor(pool) for i in instances}
    victims = [victim] if isinstance(victim, str) else victim or []
    group = [i.producer for i in instances if i.label in victims]
    chain = group if not apart else []

    def mates(me: int, generation: int) -> list:
        return [actors[p].up(actors[me], generation).recovery
                for p in reversed(chain) if p != me]

    def build(i):
        me = actors[i.producer]
        routes = [Route(n.name, n.partitions, [j.producer for j in of_node[n.name]],
                        [actors[j.producer].handle(me) for j in of_node[n.name]])
                  for n in graph.nodes.values() if router.hears(n.name, i.node.name)]
        producers = [(j.producer, actors[j.producer].handle(me)) for j in instances
                     if router.hears(i.node.name, j.node.name)]
        return (i, graph.registry, 4, 200_000), dict(
            router=router, routes=routes, producers=producers, checkpoints=checkpoints,
            step_events=600, mates=functools.partial(mates, i.producer, me.generation)
            if len(chain) > 1 and i.producer in chain else None)

    for i in instances:
        actors[i.producer].make(functools.partial(build, i))
    done = threading.Event()

    def killer():
        rng = random.Random(seed)
        together = [actors[p] for p in group]
        pace = together[0] if paced_by is None else actors[
            next(i.producer for i in instances if i.label == paced_by)]
        restart_at = rng.randint(1, 6)
        while not done.wait(0.002):
            if pace.progress >= restart_at:
                if apart:
                    pace.restart()
                    recovered(pace, done)
                    pace = rng.choice(together)
                else:
                    restart_together(together)
                restart_at = pace.progress + rng.randint(1, 6)

    thread = threading.Thread(target=killer)
    if victim is not None:
        thread.start()
    try:
        fed, wall, _, reports = rt._drive(raw, None, router, of_node, actors, {},
                                          Delivery(None, 150, Pace(None, 1.0)))
    finally:
        done.set()
        if victim is not None:
            thread.join()
        for a in actors.values():
            a.worker.halt()
        pool.shutdown(wait=False, cancel_futures=True)
    return rt._report(reports, fed, wall), checkpoints, actors


def recovered(actor: LocalActor, done: threading.Event) -> None:
    """Wait until the restarted ``actor`` took a batch past its checkpoint (it recovered
    before), or the run is done."""
    worker = actor.worker
    taken = worker.recovery.batches_taken
    while worker.recovery.batches_taken == taken and not done.wait(0.002):
        pass


@pytest.fixture(scope="module")
def stream():
    graph = example_graph(0.0, "on-demand", k0=3_000)
    raw = abc_stream(example_registry(), 6_000, seed=11, max_delay=20)
    reference = InProcessRuntime(graph).run(raw, step_ticks=50)
    return graph, raw, reference


def count_recovery(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts, over every process of every actor as it happens, the pushes dropped as
    duplicates (and of them unlike the push held), fenced off or stale, and those
    resent (:data:`~specula.actors.tally.COUNTS`): what a report must say."""
    counts = dict.fromkeys(COUNTS, 0)
    turn, resend = ActorRecovery.turn, Publisher._resend

    def spy_turn(self, *args):
        before = {n: self.tally.count(n) for n in COUNTS}
        got = turn(self, *args)
        for n in COUNTS:
            counts[n] += self.tally.count(n) - before[n]
        return got

    def spy_resend(self, *args):
        again = resend(self, *args)
        if self.tally.store is not None:  # an actor's, not the driver's
            counts["resent"] += again
        return again

    monkeypatch.setattr(ActorRecovery, "turn", spy_turn)
    monkeypatch.setattr(Publisher, "_resend", spy_resend)
    return counts


def assert_counted_as_seen(report, seen: dict[str, int]) -> None:
    """The report's counts, summed over the nodes, are the spy's over all processes."""
    told = {n: sum(d.recovery[n] for d in report.detectors.values()) for n in COUNTS}
    assert told == seen


def staggered(monkeypatch: pytest.MonkeyPatch, every: dict[str, int]) -> None:
    """Each actor checkpoints after its own number of batches (``every``, by label)."""

    def batch_done(self) -> bool:
        self._since += 1
        return self._since >= every[self.label]

    monkeypatch.setattr(ActorRecovery, "batch_done", batch_done)


def count_steps(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the steps that took several batches, and those a restart took again."""
    counts = {"joined": 0, "replayed": 0}
    take, pop = Inbox.take, DetectorWorker._pop

    def spy_take(self, *args, **kwargs):
        taken = take(self, *args, **kwargs)
        counts["joined"] += len(taken) > 1
        return taken

    def spy_pop(self, senders, alpha):
        counts["replayed"] += senders is not None and len(senders) > 1
        return pop(self, senders, alpha)

    monkeypatch.setattr(Inbox, "take", spy_take)
    monkeypatch.setattr(DetectorWorker, "_pop", spy_pop)
    return counts


@pytest.mark.parametrize("victim", ["a_not_bc", "d_then_e"])
def test_restarts_at_random_points_leave_the_net_output_of_a_crash_free_run(
        stream, tmp_path, victim, monkeypatch):
    """The driver feeds as fast as it can, so batches pile up in the inboxes and steps
    take several at once; a restart takes them again in the same steps."""
    graph, raw, reference = stream
    steps = count_steps(monkeypatch)
    seen = count_recovery(monkeypatch)
    report, checkpoints, _ = local_run(graph, raw, tmp_path, victim, seed=1)
    restarts = report.restarts()
    print(f"restarts {restarts[victim]}, steps of several batches: {steps['joined']}, "
          f"taken again: {steps['replayed']}, {seen}")
    assert steps["joined"] > 0
    assert restarts[victim] >= 2 and sum(restarts.values()) == restarts[victim]
    for name in graph.nodes:
        assert len(report.late(name)) == len(reference.late(name)) == 0, name
        got = report.net(name)
        assert content(canonical(got)) == content(canonical(reference.net(name))), name
        # no duplicates: every (producer, seq) once
        ids = got["producer"].astype(np.int64) << 40 | got["seq"]
        assert len(np.unique(ids)) == len(ids)
        (inst,) = [i for i in graph.instances() if i.node.name == name]
        persisted = persisted_net(checkpoints, inst.label, got.dtype).net()
        assert persisted.tobytes() == got.tobytes(), name
    assert report.detectors[victim].recovery["checkpoints"] > 0
    assert seen["divergent"] == 0, seen
    assert_counted_as_seen(report, seen)


@pytest.mark.parametrize("seed", range(12) if SOAK else [3])
def test_producer_and_consumer_restarted_apart_count_every_drop_and_resend_once(
        stream, tmp_path, seed, monkeypatch):
    """a_not_bc and its consumer d_then_e restart one at a time, picked at random, at
    random points (with SPECULA_SOAK=1, twelve seeds): the net output is the crash-free
    one, and the report's counts of dropped and resent pushes are those every process
    made, restarted ones included, although most came after the last checkpoint of the
    process that made them."""
    graph, raw, reference = stream
    seen = count_recovery(monkeypatch)
    report, _, _ = local_run(graph, raw, tmp_path, ["a_not_bc", "d_then_e"], seed=seed,
                             apart=True)
    restarts = report.restarts()
    print(restarts, seen)
    assert restarts["a_not_bc"] + restarts["d_then_e"] >= 3
    assert restarts["big_c"] == restarts["count"] == 0
    for name in graph.nodes:
        got = report.net(name)
        assert content(canonical(got)) == content(canonical(reference.net(name))), name
    assert seen["divergent"] == 0 and seen["duplicates"] + seen["stale"] > 0, seen
    assert_counted_as_seen(report, seen)


@pytest.mark.parametrize("seed", range(8) if SOAK else [5])
def test_a_restarted_shedding_node_counts_what_its_timeline_shed(
        stream, tmp_path, seed, monkeypatch):
    """A node told to drop a fifth of its input at every step, restarted at random
    points (with SPECULA_SOAK=1, eight seeds): every C it took in the timeline its net
    output comes from reached its unit or is counted as shed, once. The shed counts go
    back with the checkpoint, as the unit's, and the steps taken again count again: a
    restart neither forgets what the steps before its checkpoint shed nor counts the
    later ones twice."""
    _, raw, _ = stream
    graph = Graph(example_registry(), sources=("A", "B", "C"))
    graph.add("big_c", Threshold(), alpha=0.0, k0=3_000,
              shedding=Shedding(latency_bound_s=1.0))
    graph.add("count_e", CountE(), alpha=0.0, k0=3_000)
    command = Gate.command
    monkeypatch.setattr(Gate, "command", lambda self, q: DropCommand(0.2, q)
                        if self.shedder is not None else command(self, q))
    report, _, _ = local_run(graph, raw, tmp_path, "big_c", seed=seed)
    restarts, shed = report.restarts()["big_c"], report.shed("big_c")
    inbox = report.summary()["detectors"]["big_c"]["inbox"]
    print(f"restarts {restarts}, shed {shed}, overloaded {inbox['overloaded_batches']}")
    assert restarts >= 2 and shed["C"] > 0
    cs = int((raw["type"] == example_registry().id("C")).sum())
    assert report.stats("big_c").events_in + shed["C"] == cs


def test_a_restart_takes_the_batches_again_in_the_steps_that_took_them():
    """The determinants log a batch per entry, the alpha on the first of its step; the
    plan, from the longest log a consumer holds, gives the steps back whole."""
    dets = Determinants()
    for sender, alpha in [(1, 0.5), (2, None), (1, None), (2, 0.7), (3, 0.0), (-1, 1.0)]:
        dets.log(sender, alpha)
    assert dets.since(1) == (2, [1, 2, 3, -1], [None, 0.7, 0.0, 1.0], 0)  # after batch 1
    full = StepLog(*dets.since(-1)[:3])
    short = StepLog(*dets.since(-1)[:1], [1, 2], [0.5, None])
    again = Determinants(step=0)
    again.follow([short, full])

    def take(dets: Determinants, senders: list[int], alpha: float) -> None:
        assert dets.planned_step() == senders and dets.planned_alpha() == alpha
        for i, sender in enumerate(senders):
            dets.log(sender, alpha if i == 0 else None)

    take(again, [1, 2, 1], 0.5)
    # what its chain mates' checkpoints read: the steps taken, then the rest of the plan
    assert again.logged().as_list() == full.as_list()
    take(again, [2], 0.7)
    take(again, [3], 0.0)
    assert again.planned_step() == [] and again.logged().as_list() == [
        0, [1, 2, 1, 2, 3], [0.5, None, None, 0.7, 0.0]]  # the flush comes when asked
    later = Determinants(step=3)  # restored from a checkpoint after the first step
    later.follow([full])
    assert later.planned_step() == [2]
    dets.committed()
    assert (dets.base, dets.senders, dets.since(-1)) == (6, [], (6, [], [], 6))


# A chain restarts as a unit (:mod:`specula.actors.chain`): every member from its own
# last checkpoint, taken at its own pace. Three levels in one chain: a member's replay
# needs the determinants of its producers in the chain for batches past their
# checkpoints, not only its own. "staggered": the deeper a member, the more often it
# checkpoints (every 9, 9, 4 and 1 batches), so consumers' checkpoints run ahead.
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("every", [2, 3, "staggered"])
def test_a_chain_restarted_as_a_unit_leaves_the_net_output_of_a_crash_free_run(
        stream, tmp_path, seed, every, monkeypatch):
    graph, raw, reference = stream
    chain = list(graph.nodes)
    if every == "staggered":
        staggered(monkeypatch, dict(zip(chain, [9, 9, 4, 1], strict=True)))
    seen = count_recovery(monkeypatch)
    report, _, _ = local_run(graph, raw, tmp_path, chain, seed=seed,
                             every=1 if every == "staggered" else every)
    restarts = report.restarts()
    assert restarts[chain[0]] >= 2 and all(restarts[n] == restarts[chain[0]] for n in chain)
    # every member restarts with its consumers: each duplicate is checked against a
    # digest that a consumer's checkpoint kept, or that it took after its restart (a
    # regenerated push unlike it is counted: the test with a salted detector below)
    print(seen)
    assert seen["divergent"] == 0, seen
    for name in graph.nodes:
        assert len(report.late(name)) == len(reference.late(name)) == 0, name
        got = report.net(name)
        assert content(canonical(got)) == content(canonical(reference.net(name))), name
    assert_counted_as_seen(report, seen)


_copies = itertools.count(1)


class SaltedThreshold(SlowThreshold):
    """A :class:`SlowThreshold` that is deliberately not deterministic: each copy (each
    process's, a restarted one's too) adds its own salt to its input's ``where`` field
    (``key``: the keys it emits; ``v``: only the payload of what it emits, the events
    themselves are the same), and its snapshot leaves the salt out, so a restarted actor
    regenerates other pushes than the ones its consumers hold. Slow, so that its
    consumer keeps up with it."""

    def __init__(self, limit: int = 50, seconds_per_event: float = 1e-4,
                 where: str = "key") -> None:
        super().__init__(limit, seconds_per_event)
        self.where = where
        self.salt = 1_000 * next(_copies)

    def __deepcopy__(self, memo: dict) -> SaltedThreshold:
        return SaltedThreshold(self.limit, self.seconds_per_event, self.where)

    def on_batch(self, events, type_names, emit) -> None:
        salted = events.copy()
        if self.where == "key":
            salted["key"] += self.salt
        else:  # above the limit either way: the same events pass, with other payloads
            salted["v"] = np.where(salted["v"] > self.limit, salted["v"] + self.salt,
                                   salted["v"])
        super().on_batch(salted, type_names, emit)

    def snapshot(self) -> int:
        return self.limit

    def restore(self, state: int) -> None:
        self.limit = state


class CountE(RunningCount):
    """A :class:`RunningCount` of E events: big_c's only consumer here."""

    inputs = ("E",)


@pytest.mark.parametrize("where", ["key", "v"])
def test_a_regenerated_push_unlike_the_one_held_is_divergent_across_the_consumers_restart(
        stream, tmp_path, monkeypatch, where):
    """big_c's detector regenerates other pushes after each restart (other keys, or
    only other payloads), and big_c restarts together with its consumer, which
    checkpoints after every batch while big_c never does (it regenerates all its
    pushes): the consumer compares those it holds with the digests its checkpoint kept,
    which a restart must not lose. The report counts over all processes, as the spy."""
    _, raw, _ = stream
    graph = Graph(example_registry(), sources=("A", "B", "C"))
    graph.add("big_c", SaltedThreshold(where=where), alpha=0.0, k0=3_000)
    graph.add("count_e", CountE(), alpha=0.0, k0=3_000)
    staggered(monkeypatch, {"big_c": 10**9, "count_e": 1})
    seen = count_recovery(monkeypatch)
    report, _, _ = local_run(graph, raw, tmp_path, ["big_c", "count_e"], seed=2, every=1,
                             paced_by="count_e")
    print(report.restarts(), seen)
    assert report.restarts()["count_e"] >= 2
    assert seen["duplicates"] > 0 and seen["divergent"] > 0
    assert_counted_as_seen(report, seen)


@pytest.mark.parametrize("seed", range(4))
def test_a_source_push_regenerated_unlike_the_one_held_is_divergent_a_driver_one_a_duplicate(
        tmp_path, seed):
    """A source actor restarts and regenerates its pushes: one again under a number
    held is divergent if any field but the arrival stamps differs (random batches,
    rows and fields), a duplicate only if not. The driver resends the very batch it
    kept: its duplicates are dropped and counted, never checked against a digest."""
    rng = random.Random(seed)
    graph = Graph(example_registry(), sources=("A", "B", "C"))
    graph.add("big_c", Threshold(), alpha=0.0, k0=3_000)
    checkpoints = Checkpoints(str(tmp_path), "run", key=random_key())
    worker = DetectorWorker(graph.instances()[0], graph.registry, checkpoints=checkpoints)
    tally = worker.recovery.tally
    batches = [abc_stream(example_registry(), rng.randint(1, 40), seed=rng.randint(0, 99))
               for _ in range(6)]
    for n, batch in enumerate(batches):
        worker.push(batch.copy(), SOURCE_SENDERS, n)
        worker.push(batch, DRIVER, n)
    for n, batch in enumerate(batches):
        again = batch.copy()
        again["ats"] += rng.randint(1, 9)  # stamped again on regeneration
        worker.push(again.copy(), SOURCE_SENDERS, n)
        worker.push(batch, DRIVER, n)
        assert (tally.count("duplicates"), tally.count("divergent")) == (4 * n + 2, n)
        changed = rng.choice(("key", "kplus", "flags", "v", "ts"))
        again[changed][rng.randrange(len(again))] += 1
        worker.push(again, SOURCE_SENDERS, n)
        worker.push(batch, DRIVER, n)
        assert (tally.count("duplicates"), tally.count("divergent")) == (4 * n + 4, n + 1)
    worker.halt()


def test_a_digest_is_the_same_in_every_process():
    """Consumer and producer restart in other processes, each with its own
    PYTHONHASHSEED: the digest of one batch must not depend on it."""
    code = ("from specula.actors.recovery import digest\n"
            "from specula.detectors.examples import example_registry\n"
            "from specula.pipelines.synthetic import abc_stream\n"
            "print(digest(abc_stream(example_registry(), 300, seed=5)))\n")
    here = digest(abc_stream(example_registry(), 300, seed=5))
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout
        assert int(out) == here, seed
    for field in ("key", "kplus", "flags", "v"):  # core fields, K+ and payloads count
        other = abc_stream(example_registry(), 300, seed=5)
        other[field][17] += 1
        assert digest(other) != here, field
    stamped = abc_stream(example_registry(), 300, seed=5)
    stamped["ats"] += 7  # arrival stamps do not: a regeneration stamps them again
    stamped["origin"] -= 3
    assert digest(stamped) == here


def naive_digest(batch: np.ndarray) -> int:
    """The digest, slowly: the names and types of the fields but the arrival stamps,
    then each run of adjacent such fields, row after row."""
    kept = [n for n in batch.dtype.names if n not in ("ats", "origin")]
    h = hashlib.sha256(",".join(f"{n}:{batch.dtype[n].str}" for n in kept).encode())
    runs: list[list[str]] = []
    for name in kept:
        after = runs and batch.dtype.fields[runs[-1][-1]][1] + batch.dtype[runs[-1][-1]].itemsize
        if after == batch.dtype.fields[name][1]:
            runs[-1].append(name)
        else:
            runs.append([name])
    for run in runs:
        for row in batch:
            h.update(b"".join(row[name].tobytes() for name in run))
    return int.from_bytes(h.digest()[:8], "little")


def test_a_digest_covers_the_same_bytes_for_few_rows_and_many():
    """A few rows are hashed slice by slice, more run by run: the same bytes in the same
    order either way, for a strided batch too."""
    raw = abc_stream(example_registry(), 40, seed=8)
    for rows in [0, 1, 2, 4, 5, 9, 40]:
        assert digest(raw[:rows]) == naive_digest(raw[:rows]), rows
    assert digest(raw[::3]) == naive_digest(raw[::3])


def test_a_checkpoint_of_another_layout_is_refused_before_a_watch_resumes(tmp_path):
    """A watch suspended by a version whose actor checkpoints have another layout (here
    the one before the digests) is refused before anything starts, naming the folder,
    the actor and what to do; the actor itself refuses it too, not reading it with
    fields missing."""
    registry = example_registry()
    graph = Graph(registry, sources=("C",)).add("big", SlowThreshold(), alpha=0.5, k0=5)
    out, run = tmp_path / "out", "0123456789ab"
    checkpoints = Checkpoints(str(state_dir(out)), run, key=run_key(run))
    worker = DetectorWorker(graph.instances()[0], registry, router=Router(graph),
                            checkpoints=checkpoints)
    worker.start()
    raw = abc_stream(registry, 200, seed=4)
    raw = raw[raw["type"] == registry.id("C")]
    worker.push(raw, 0, 0)
    worker.suspend({0: 1})
    worker.halt()
    save_suspension(out, Suspension(run, {0: 1}, {}, graph_shape(graph)))
    assert suspended_watch(out, graph) is not None  # this version's layout resumes
    store = checkpoints.store(graph.instances()[0].label)
    old = unpack_checkpoint(store.read("checkpoint"), "big")
    old["v"] = CHECKPOINT_VERSION - 1
    old["duplicates"] = old["divergent"] = 0  # the counts it held then
    store.write("checkpoint", pack_checkpoint(old))
    layout = f"checkpoint layout {CHECKPOINT_VERSION - 1} is not {CHECKPOINT_VERSION}"
    with pytest.raises(GraphError, match=f"{re.escape(str(state_dir(out)))}: big: {layout}"
                                         ".*or remove that folder to start afresh"):
        suspended_watch(out, graph)
    with pytest.raises(CheckpointLayoutError, match=f"big: {layout}"):
        DetectorWorker(graph.instances()[0], registry, router=Router(graph),
                       checkpoints=checkpoints)
