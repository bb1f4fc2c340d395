"""Scale: memory of the driver and of the actors per million raw events, the cost of a
retraction among many live events, and raw events/s on one and on three Ray nodes.

    python benchmarks/scale.py --quick     # the cluster rates on 10 s of play, ~6 min
    python benchmarks/scale.py             # ... on 30 s of play, ~7 min

Memory is measured over 30 s and 65 s of play (the paper's snippet) in both modes: in
shorter matches the second half of an actor's samples still holds its start-up (the
level-2 buffers peak ~15 s in, while K learns the disorder), and a slope between two
short runs is mostly noise.

1. ``driver_mb_per_million_events``: a generated match (profile ``paper``, with network
   delays) is fed to :class:`~specula.actors.ray_runtime.RayRuntime` as an iterable of
   batches on embedded Ray, in a fresh process per match (after a short run that starts
   the actors); a thread samples the driver's resident memory every 20 ms.
   The figure is the growth of the peak over the memory just before the run, between
   the short and the long match, per million raw events more (the slope, so fixed costs
   such as Ray's client cancel out). The input array is made before the measurement.
2. ``actor_mb_per_million_events``: over the long match, the largest growth of an
   actor's private resident memory (``RssAnon``, as for the driver: the pages of Ray's
   object store an actor reads its pushes from are the store's, bounded by its size,
   and the per-batch samples report them apart as ``shm_mb``) per million raw events
   fed, over the second half of its per-batch samples (the first half holds the
   start-up: imports, compilation, buffers filling up to K).
   ``actor_mb_per_million_events_live``: the same for a run that hands its output on
   as it settles, as a watch does, so that the actors forget it;
   ``net_events_held`` / ``net_events_held_live``: the net events the actors hold at
   the end of each.
3. ``retraction_us_at_1m_live``: a :class:`~specula.ordering.net.NetOutput` holding
   10k, 100k and 1M live events of one producer retracts its newest 10, 20 times; the
   median, in microseconds (``benchmarks/net_output.py`` measures it, against the scan
   it replaced).
4. ``events_per_s_1_node`` / ``events_per_s_3_nodes``: 10 s (``--quick``) or 30 s of
   play through the soccer hierarchy on a ``ray.cluster_utils.Cluster`` of one node
   with 3 CPUs, then of three nodes with 1 CPU each (one machine: its cores bound both
   figures; what matters is that spreading does not make it slower). The nodes the
   actors ran on are printed.

The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
from net_output import retraction_us

from specula.actors.ray_runtime import RayRuntime
from specula.actors.report import rss_mb
from specula.ordering.net import NetOutput
from specula.pipelines.delays import DelayModel
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match

K0_MS = 400.0
BATCH = 5_000


class PeakRss:
    """Samples :func:`rss_mb` every 20 ms while in the ``with`` block; ``peak`` after."""

    def __enter__(self) -> PeakRss:
        self.peak = rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_mb())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())


def match_raw(seconds: float, seed: int) -> np.ndarray:
    match = generate_match(seconds, profile="paper", seed=seed)
    return DelayModel(seed=seed).arrival(match.events)


def batches(raw: np.ndarray) -> Iterator[np.ndarray]:
    for i in range(0, len(raw), BATCH):
        yield raw[i:i + BATCH]


def driver_run(raw: np.ndarray, hand_on: bool = False) -> tuple[float, float, dict]:
    """Driver memory growth (MB) over one run on the current Ray session, its wall
    seconds and the run's report. ``hand_on``: the run hands its output on as it
    settles (as a watch does; here to nobody) and the actors forget it."""
    graph = soccer_graph("adaptive", k0_ms=K0_MS)
    runtime = RayRuntime(graph)
    before = rss_mb()
    t0 = time.perf_counter()
    with PeakRss() as rss:
        report = runtime.run(batches(raw), on_settled=(lambda settled: None) if hand_on
                             else None)
    return rss.peak - before, time.perf_counter() - t0, report


def actor_growth(report, n_raw: int, wall: float) -> float | None:
    """The largest actor memory growth over the second half of its samples, MB per
    million raw events fed in that time (the first half holds the start-up: imports,
    compilation, buffers filling up to K)."""
    per_ns = n_raw / (wall * 1e9)
    by_actor: dict[str, list[dict]] = {}
    for d in report.detectors.values():
        for s in d.series:
            by_actor.setdefault(s["instance"], []).append(s)
    found = []
    for series in by_actor.values():
        half = series[len(series) // 2:]
        fed = (half[-1]["time_ns"] - half[0]["time_ns"]) * per_ns if len(half) > 1 else 0
        if fed >= 10_000:
            found.append((half[-1]["rss_mb"] - half[0]["rss_mb"]) * 1e6 / fed)
    return max(found) if found else None


def cluster_rate(raw: np.ndarray, nodes: int) -> tuple[float, int]:
    """Raw events/s of the soccer hierarchy on a local Ray cluster of ``nodes`` nodes
    (3 CPUs in all), and the number of nodes its actors ran on."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, connect=False,
                      head_node_args={"num_cpus": 3 // nodes, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, configure_logging=False, log_to_driver=False)
    try:
        runtime = RayRuntime(soccer_graph("adaptive", k0_ms=K0_MS))
        t0 = time.perf_counter()
        report = runtime.run(raw, batch_rows=BATCH)
        wall = time.perf_counter() - t0
    finally:
        ray.shutdown()
        cluster.shutdown()
    hosts = {h for d in report.detectors.values() for h in d.hosts}
    return len(raw) / wall, len(hosts)


def driver_figures(seconds: float, seed: int) -> dict:
    """In a fresh process: driver memory growth over a run of ``seconds`` of play (after
    a short run that starts the actors' processes), and the actors' growth."""
    from specula.cluster import ray_session

    raw = match_raw(seconds, seed)
    with ray_session(num_cpus=2):
        driver_run(raw[:BATCH * 4])  # actor start-up and imports, not measured
        grew, wall, report = driver_run(raw)
        _, wall_live, live = driver_run(raw, hand_on=True)
    return {"mb": grew, "events": len(raw), "actor_mb_per_million":
            actor_growth(report, len(raw), wall),
            "actor_mb_per_million_live": actor_growth(live, len(raw), wall_live),
            "net_held": sum(len(d.net) for d in report.detectors.values()),
            "net_held_live": sum(len(d.net) for d in live.detectors.values()),
            "handed_on_live": sum(d.handed_on.events for d in live.detectors.values()
                                  if d.handed_on is not None)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="cluster rates on 10 s of play")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--driver", type=float, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.driver is not None:
        print(json.dumps(driver_figures(args.driver, args.seed)))
        return
    short_s, long_s = 30.0, 65.0
    result: dict[str, float | int | None] = {}

    for live in (10_000, 100_000, 1_000_000):
        us = retraction_us(NetOutput, live, repeat=20)
        print(f"retraction among {live:>9,} live events: {us:7.1f} us (median of 20)")
    result["retraction_us_at_1m_live"] = round(us, 1)

    grew = {}
    for seconds in (short_s, long_s):
        cmd = [sys.executable, __file__, "--driver", str(seconds), "--seed", str(args.seed)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        grew[seconds] = json.loads(done.stdout.strip().splitlines()[-1])
    a, b = grew[short_s], grew[long_s]
    slope = (b["mb"] - a["mb"]) / ((b["events"] - a["events"]) / 1e6)
    print(f"driver memory growth: {a['mb']:.0f} MB over {a['events']:,} raw events, "
          f"{b['mb']:.0f} MB over {b['events']:,}: {slope:.1f} MB per million more")
    result["driver_mb_per_million_events"] = round(slope, 1)
    actor = b["actor_mb_per_million"]
    print(f"largest actor memory growth over {long_s:g} s of play: "
          f"{'n/a' if actor is None else f'{actor:.1f}'} MB per million raw events")
    result["actor_mb_per_million_events"] = None if actor is None else round(actor, 1)
    live = b["actor_mb_per_million_live"]
    print(f"the same run handing its output on as it settles (a watch): "
          f"{'n/a' if live is None else f'{live:.1f}'} MB per million; the actors hold "
          f"{b['net_held_live']:,} net events at the end ({b['handed_on_live']:,} handed "
          f"on and forgotten), against {b['net_held']:,}")
    result["actor_mb_per_million_events_live"] = None if live is None else round(live, 1)
    result["net_events_held_live"] = b["net_held_live"]
    result["net_events_held"] = b["net_held"]

    short = match_raw(10.0 if args.quick else short_s, args.seed)
    for nodes in (1, 3):
        rate, used = cluster_rate(short, nodes)
        print(f"{nodes} node(s): {rate:,.0f} raw events/s, actors on {used} node(s)")
        result[f"events_per_s_{nodes}_node{'s' if nodes > 1 else ''}"] = round(rate)
    result.update(short_events=a["events"], long_events=b["events"], batch=BATCH)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
