"""The detector actor's inbox and processing thread, without Ray: a worker with no
subscribers publishes nothing, so its push, flush and report run in plain threads."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from specula import Graph
from specula.actors.report import CpuTimes
from specula.actors.routing import Router
from specula.actors.worker import STEP_EVENTS, DetectorWorker
from specula.detectors import Detector, Emitter, EventView
from specula.detectors.examples import Threshold, example_registry
from specula.ordering.unit import DetectorError
from specula.shedding import Shedding


def c_batch(first: int, n: int, v: int = 60) -> np.ndarray:
    reg = example_registry()
    out = np.zeros(n, reg.dtype(["C"]))
    out["type"] = reg.id("C")
    out["ts"] = out["seq"] = np.arange(first, first + n)
    out["v"] = v
    return out


def worker(detector: Detector, inbox_events: int = 1_000, step_events: int = STEP_EVENTS,
           **options) -> DetectorWorker:
    g = Graph(example_registry(), sources=("C",)).add("node", detector, k0=0, **options)
    w = DetectorWorker(g.instances()[0], g.registry, inbox_events=inbox_events,
                       router=Router(g), step_events=step_events)
    w.start()
    return w


def test_pushes_from_one_sender_enter_in_the_order_sent_whatever_order_they_come():
    w = worker(Threshold())
    late = threading.Thread(target=w.push, args=(c_batch(100, 100), 7, 1))
    late.start()  # the sender's second push overtakes its first: it must wait
    time.sleep(0.05)
    assert w.inbox.pushed == 0 and late.is_alive()
    w.push(c_batch(0, 100), 7, 0)
    late.join(timeout=5)
    assert not late.is_alive()
    w.flush()
    net = w.output.net.net()
    assert np.array_equal(net["ts"], np.arange(200))  # in time order: nothing late
    assert len(w.unit.late_events()) == 0


def _until(condition, timeout_s: float = 30.0) -> None:
    """Wait until ``condition()`` holds (a busy CI machine may take long to schedule the
    processing thread); fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the processing thread did not get there"
        time.sleep(0.01)


#: Opened by the test; until then a Blocking detector holds the processing thread.
GATE = threading.Event()


class Blocking(Threshold):
    """A Threshold that waits for :data:`GATE` before every batch."""

    def on_batch(self, events, type_names, emit) -> None:
        GATE.wait(5)
        super().on_batch(events, type_names, emit)


def test_a_full_inbox_makes_the_producer_wait_until_the_thread_takes_a_batch():
    GATE.set()  # open while the worker warms its unit up
    w = worker(Blocking(), inbox_events=250, step_events=100)  # a batch per step
    GATE.clear()
    for i in range(3):  # the thread takes the first and blocks on it; two wait
        w.push(c_batch(i * 100, 100), 0, i)
    third = threading.Thread(target=w.push, args=(c_batch(300, 100), 0, 3))
    third.start()
    _until(lambda: w.inbox.events == 200)  # the thread holds the first batch
    time.sleep(0.1)
    assert third.is_alive() and w.inbox.events == 200  # 200 + 100 > 250: it waits
    GATE.set()
    third.join(timeout=5)
    assert not third.is_alive()
    w.flush()
    assert len(w.output.net.net()) == 400 and w.inbox.max_events <= 250
    stats = w.report()["inbox"]
    assert stats.processed == stats.waits.count == w.inbox.pushed == 400
    assert stats.waits.max > 0.05  # the batches behind the held one waited


@pytest.mark.parametrize("step_events", [STEP_EVENTS, 250, 100])
def test_batches_waiting_behind_a_step_are_taken_together(step_events: int) -> None:
    """While the thread is busy with a batch, those that arrive wait; the next step takes
    as many of them as ``step_events`` rows allow (at least one), and the output is the
    same as a batch at a time."""
    GATE.set()
    w = worker(Blocking(), inbox_events=10_000, step_events=step_events)
    GATE.clear()
    w.push(c_batch(0, 100), 0, 0)
    _until(lambda: w.inbox.events == 0)  # the thread holds the first batch
    for i in range(1, 6):
        w.push(c_batch(i * 100, 100), 0, i)
    GATE.set()
    w.flush()
    steps = len(w.report()["series"])
    assert steps == 1 + -(-5 // max(1, step_events // 100))  # the first, then the rest
    assert np.array_equal(w.output.net.net()["ts"], np.arange(600))
    stats = w.report()["inbox"]
    assert stats.processed == stats.waits.count == 600


class Failing(Detector):
    """Raises on the event with time stamp 150."""

    inputs, outputs = ("C",), ("E",)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event.ts == 150:
            raise ValueError("bad event")


def test_a_failure_in_the_thread_surfaces_in_the_next_push_or_flush():
    """The caller gets the processing thread's own error, which names the detector and
    the event, as an in-process run would raise it."""
    w = worker(Failing())
    w.push(c_batch(0, 200), 0, 0)
    with pytest.raises(DetectorError, match=r"detector 'node' failed on event .*ts=150.*bad"):
        for i in range(1, 50):
            time.sleep(0.02)
            w.push(c_batch(200 * i, 10), 0, i)
    with pytest.raises(DetectorError, match="bad event"):
        w.flush()


def test_the_worker_sheds_and_reports_what_it_dropped():
    w = worker(Threshold(), inbox_events=10**6,
               shedding=Shedding(latency_bound_s=0.01, f=0.5))
    w.gate.detector.processed(1_000, 1.0)  # as if it took 1 ms per event: q_max = 10
    for i in range(20):
        w.push(c_batch(i * 500, 500), 0, i)
    w.flush()
    stats = w.report()["inbox"]
    assert stats.shed["C"] > 0 and stats.overloaded_batches > 0
    assert stats.processed + stats.shed["C"] == 10_000
    assert len(w.output.net.net()) == stats.processed  # every kept C is above the limit


class Spinning(Detector):
    """Burns 20 ms of its thread's CPU per batch."""

    inputs, outputs = ("C",), ("E",)

    def on_batch(self, events: np.ndarray, type_names, emit: Emitter) -> None:
        start = time.thread_time()
        while time.thread_time() - start < 0.02:
            pass


def test_the_report_says_where_the_processor_time_went():
    """The processing thread's CPU per phase, within the process's since the start."""
    w = worker(Spinning())
    for i in range(3):
        w.push(c_batch(i * 10, 10), 0, i)
    w.flush()
    cpu = w.report()["cpu"]
    assert cpu["unit"] >= 0.02 and cpu["publish"] >= 0 and "checkpoint" not in cpu
    assert cpu["process"] >= cpu["unit"] + cpu["publish"]
    assert cpu["other"] == pytest.approx(cpu["process"] - cpu["unit"] - cpu["publish"])
    both = CpuTimes.total([cpu, cpu])
    assert both == {k: 2 * v for k, v in cpu.items()}
