"""Hosts started before a run (:meth:`specula.actors.ray_runtime.RayRuntime.prestart`)
end with the Ray session that started them, whether a run took them or not: a job that
is interrupted before its run leaves no process behind. Its own Ray session: the test
shuts it down."""

from __future__ import annotations

import os
import time

import pytest

from specula.actors.ray_runtime import RayRuntime
from specula.detectors.examples import example_registry
from specula.pipelines.synthetic import abc_stream, example_graph

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # starts embedded Ray

ray = pytest.importorskip("ray")

#: Seconds the hosts' processes get to end after the session.
END_S = 20.0


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_prestarted_hosts_end_with_the_session_taken_or_not():
    graph = example_graph(0.0, "on-demand", k0=3_000)
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
             log_to_driver=False)
    try:
        taken = RayRuntime(graph)
        names = taken.prestart()
        names += RayRuntime(graph, max_restarts=3).prestart()  # never taken
        assert len(names) == 4
        pids = [ray.get(ray.get_actor(n).__ray_call__.remote(lambda _: os.getpid()))
                for n in names]
        taken.run(abc_stream(example_registry(), 500, seed=1, max_delay=20))
        assert all(_alive(p) for p in pids)  # waiting in the pool
    finally:
        ray.shutdown()
    deadline = time.monotonic() + END_S
    while (left := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left
