"""Checkpoints and crash recovery of detector actors, without Ray: workers run in
threads behind a stand-in for actor handles that, like Ray with ``max_task_retries``,
retries a call on the restarted worker when the one it reached was halted."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from naive import canonical, content

from specula import InProcessRuntime
from specula.actors.channels import Route
from specula.actors.inbox import Inbox
from specula.actors.output_log import persisted_net
from specula.actors.ray_runtime import Delivery, RayRuntime
from specula.actors.recovery import Checkpoints, Determinants, StepLog
from specula.actors.routing import Router
from specula.actors.signing import random_key
from specula.actors.sources import Pace
from specula.actors.worker import DetectorWorker
from specula.detectors.examples import example_registry
from specula.pipelines.synthetic import abc_stream, example_graph


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
    halts the worker (as a crash would) and makes a new one from the same arguments,
    which restores the last checkpoint, as Ray reruns a restarted actor's constructor.
    :attr:`progress` is the most batches one of its workers had taken: a restarted one
    takes those after its checkpoint again before it passes it."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self.pool = pool
        self.worker: DetectorWorker | None = None
        self.restarting = False
        self.progress = 0

    def make(self, *args, **kwargs) -> None:
        self.args, self.kwargs = args, kwargs
        self.worker = CountingWorker(self, *args, **kwargs)

    def restart(self) -> None:
        self.restarting = True
        self.worker.halt()
        self.worker = CountingWorker(self, *self.args, **self.kwargs)
        self.restarting = False

    def __getattr__(self, name: str):
        actor = self

        class Method:
            @staticmethod
            def remote(*args, **kwargs):
                return actor.pool.submit(actor._call, name, args, kwargs)

        return Method()

    def _call(self, name, args, kwargs):
        while True:
            worker = self.worker
            try:
                return getattr(worker, name)(*args, **kwargs)
            except RuntimeError:
                if worker is self.worker and not self.restarting:
                    raise
                time.sleep(0.01)  # it reached a halted worker: retry on the new one


def local_run(graph, raw, tmp_path, victim: str | None, seed: int, every: int = 5):
    """The Ray runtime's driver over local workers; the actor of ``victim`` (a label)
    is restarted at random points while the stream is fed: each time it got 1 to 6
    batches further than before its last restart (not at random times, which a fast
    machine could outrun). A step takes at most four of the driver's batches, so that
    every actor takes enough steps for several restarts."""
    rt = RayRuntime(graph)
    router = Router(graph)
    instances = graph.instances()
    of_node = {n: [i for i in instances if i.node.name == n] for n in graph.nodes}
    checkpoints = Checkpoints(str(tmp_path), f"run-{victim}-{seed}", every_batches=every,
                              key=random_key())
    pool = ThreadPoolExecutor(256)
    actors = {i.producer: LocalActor(pool) for i in instances}
    for i in instances:
        routes = [Route(n.name, n.partitions, [j.producer for j in of_node[n.name]],
                        [actors[j.producer] for j in of_node[n.name]])
                  for n in graph.nodes.values() if router.hears(n.name, i.node.name)]
        producers = [(j.producer, actors[j.producer]) for j in instances
                     if router.hears(i.node.name, j.node.name)]
        actors[i.producer].make(i, graph.registry, 4, 200_000, router=router, routes=routes,
                                producers=producers, checkpoints=checkpoints, step_events=600)
    done = threading.Event()

    def killer():
        rng = random.Random(seed)
        target = next(a for i, a in actors.items()
                      if next(j for j in instances if j.producer == i).label == victim)
        restart_at = rng.randint(1, 6)
        while not done.wait(0.002):
            if target.progress >= restart_at:
                target.restart()
                restart_at = target.progress + rng.randint(1, 6)

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


@pytest.fixture(scope="module")
def stream():
    graph = example_graph(0.0, "on-demand", k0=3_000)
    raw = abc_stream(example_registry(), 6_000, seed=11, max_delay=20)
    reference = InProcessRuntime(graph).run(raw, step_ticks=50)
    return graph, raw, reference


def count_steps(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the steps that took several batches, and those a restart took again."""
    counts = {"joined": 0, "replayed": 0}
    take, take_planned = Inbox.take, Determinants.take_planned

    def spy_take(self, *args, **kwargs):
        taken = take(self, *args, **kwargs)
        counts["joined"] += len(taken) > 1
        return taken

    def spy_take_planned(self, n):
        counts["replayed"] += n > 1
        return take_planned(self, n)

    monkeypatch.setattr(Inbox, "take", spy_take)
    monkeypatch.setattr(Determinants, "take_planned", spy_take_planned)
    return counts


@pytest.mark.parametrize("victim", ["a_not_bc", "d_then_e"])
def test_restarts_at_random_points_leave_the_net_output_of_a_crash_free_run(
        stream, tmp_path, victim, monkeypatch):
    """The driver feeds as fast as it can, so batches pile up in the inboxes and steps
    take several at once; a restart takes them again in the same steps."""
    graph, raw, reference = stream
    steps = count_steps(monkeypatch)
    report, checkpoints, _ = local_run(graph, raw, tmp_path, victim, seed=1)
    restarts = report.restarts()
    print(f"restarts {restarts[victim]}, steps of several batches: {steps['joined']}, "
          f"taken again: {steps['replayed']}")
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
    assert sum(d.recovery["divergent"] for d in report.detectors.values()) == 0


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
    assert again.planned_step() == [1, 2, 1] and again.take_planned(3) == 0.5
    assert again.planned_step() == [2] and again.take_planned(1) == 0.7
    assert again.planned_step() == [3] and again.take_planned(1) == 0.0
    assert again.planned_step() == [-1]
    later = Determinants(step=3)  # restored from a checkpoint after the first step
    later.follow([full])
    assert later.planned_step() == [2]
    dets.committed()
    assert (dets.base, dets.senders, dets.since(-1)) == (6, [], (6, [], [], 6))
