"""Every actor's time stamps on the driver's clock: the offset estimate and its use."""

from __future__ import annotations

import time

import numpy as np
from test_worker_inbox import c_batch

from specula import Graph
from specula.actors.clocks import estimate_offset
from specula.actors.routing import Router
from specula.actors.worker import DetectorWorker
from specula.detectors.examples import Threshold, example_registry


class Link:
    """A driver's clock and a remote one ``skew`` ns ahead, read after a random delay on
    the way out and before one on the way back (asymmetric, sometimes huge)."""

    def __init__(self, skew: int, rng: np.random.Generator) -> None:
        self.skew, self.rng, self.now = skew, rng, int(rng.integers(0, 10**12))

    def local(self) -> int:
        return self.now

    def remote(self) -> int:
        self.now += int(self.rng.exponential(self.rng.choice([1e4, 1e6, 1e8])))
        read = self.now + self.skew
        self.now += int(self.rng.exponential(self.rng.choice([1e4, 1e6, 1e8])))
        return read


def test_the_true_offset_is_within_the_error_bound_whatever_the_delays():
    rng = np.random.default_rng(0)
    for _ in range(500):
        link = Link(int(rng.integers(-10**10, 10**10)), rng)
        offset, error = estimate_offset(link.remote, probes=int(rng.integers(1, 8)),
                                        local_now=link.local)
        assert abs(offset - link.skew) <= error + 1


def test_a_worker_takes_its_time_stamps_on_the_driver_clock():
    g = Graph(example_registry(), sources=("C",)).add("node", Threshold(limit=10), k0=0)
    w = DetectorWorker(g.instances()[0], g.registry, router=Router(g))
    w.start(clock=(3_600 * 10**9, 20))  # this host an hour ahead of the driver
    w.push(c_batch(0, 50))
    w.flush()
    report = w.report()
    hour_ago = time.time_ns() - 3_600 * 10**9
    assert len(report["net"]) == 50 and report["clock"] == (3_600 * 10**9, 20)
    times, _ = report["net"].timeline()
    assert (abs(times - hour_ago) < 60 * 10**9).all()  # an hour behind this host's clock
    assert abs(report["series"][-1]["time_ns"] - hour_ago) < 60 * 10**9
