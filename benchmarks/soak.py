"""Soak: a long generated match through Ray with bursts of network delay and periodic
actor kills; memory, restarts and whether the net output is the crash-free one.

    python benchmarks/soak.py                    # 120 s of play, a kill every ~8 s
    python benchmarks/soak.py --seconds 30 --kill-every 5

1. Generate a match and apply the delay model (per-sensor latency, jitter, bursts).
2. Replay it in-process (the crash-free reference: with nothing late, the net output of
   every detector is its in-order output).
3. Replay it on embedded Ray, paced at ``--speed`` times real time, while a killer
   thread kills a random detector actor (Ray restarts it from its checkpoint) every
   ``--kill-every`` seconds, give or take half, once the actor is up again.
4. Compare every detector's net output with the reference; measure each actor's
   resident memory from its per-batch samples.

The last line printed is one JSON object: ``events``, ``restarts``, ``late``,
``peak_rss_mb_per_actor``, ``rss_growth_mb_per_million_events`` (the largest over the
actors, from each actor's last process: its RSS growth per million raw events fed, the
first tenth of its samples off as warm-up), ``net_output_matches_reference``, and the
checkpoint figures (count, mean seconds, largest bytes).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time

import numpy as np

from specula import InProcessRuntime
from specula.actors.ray_runtime import RayRuntime
from specula.cluster import ray_session
from specula.pipelines.delays import DelayModel
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match

K0_MS = 400.0


def content(rows: np.ndarray) -> list[tuple]:
    names = [n for n in rows.dtype.names if n not in ("flags", "ats", "kplus", "origin")]
    return sorted(tuple(r[n].item() for n in names) for r in rows)


def killer(runtime: RayRuntime, every: float, seed: int, done: threading.Event,
           kills: list[str]) -> None:
    """Kill a random actor every ``every`` s (0.5x-1.5x), each time once it is up."""
    import ray

    rng = random.Random(seed)
    while not runtime.actors and not done.wait(0.1):
        pass
    while not done.wait(rng.uniform(0.5, 1.5) * every):
        actors = dict(runtime.actors)
        if not actors:
            return
        label = rng.choice(sorted(actors))
        ray.kill(actors[label], no_restart=False)
        kills.append(label)
        ray.get(actors[label].start.remote())  # up again


def growth(series: list[dict], raw_per_ns: float) -> float | None:
    """One actor's RSS growth in MB per million raw events fed, over its samples (the
    first tenth off, as warm-up); the events fed are the feed rate times the span."""
    series = series[len(series) // 10:]
    if len(series) < 2:
        return None
    fed = (series[-1]["time_ns"] - series[0]["time_ns"]) * raw_per_ns
    if fed < 1_000:
        return None
    return (series[-1]["rss_mb"] - series[0]["rss_mb"]) * 1e6 / fed


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seconds", type=float, default=120.0, help="seconds of play")
    p.add_argument("--speed", type=float, default=1.0, help="replay pace (x real time)")
    p.add_argument("--kill-every", type=float, default=8.0, help="seconds between kills")
    p.add_argument("--batch", type=int, default=2_000, help="raw events per batch")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()

    match = generate_match(args.seconds, seed=args.seed)
    raw = DelayModel(seed=args.seed).arrival(match.events)
    graph = soccer_graph(0.5, k0_ms=K0_MS)
    print(f"{args.seconds:g} s of play: {len(raw):,} readings", flush=True)
    reference = InProcessRuntime(graph).run(raw)
    print("reference done", flush=True)

    with ray_session(), tempfile.TemporaryDirectory() as store:
        runtime = RayRuntime(graph, checkpoint_uri=store, max_restarts=1_000)
        done, kills = threading.Event(), []
        thread = threading.Thread(target=killer,
                                  args=(runtime, args.kill_every, args.seed, done, kills))
        thread.start()
        t0 = time.perf_counter()
        try:
            report = runtime.run(raw, batch_rows=args.batch, speed=args.speed)
        finally:
            done.set()
            thread.join()
        wall = time.perf_counter() - t0

    late = sum(len(report.late(n)) for n in graph.nodes)
    late_reference = sum(len(reference.late(n)) for n in graph.nodes)
    matches = all(content(report.net(n)) == content(reference.net(n)) for n in graph.nodes)
    rec = [d.recovery for d in report.detectors.values()]
    by_actor: dict[str, list[dict]] = {}
    for d in report.detectors.values():
        for s in d.series:
            by_actor.setdefault(s["instance"], []).append(s)
    raw_per_ns = len(raw) / (wall * 1e9)
    growths = [g for g in (growth(s, raw_per_ns) for s in by_actor.values()) if g is not None]
    n_cp = sum(r["checkpoints"] for r in rec)
    print(json.dumps({
        "events": len(raw), "wall_s": round(wall, 1), "kills": len(kills),
        "restarts": sum(r["restarts"] for r in rec), "late": late,
        "late_reference": late_reference,
        "duplicates_dropped": sum(r["duplicates"] for r in rec),
        "divergent_duplicates": sum(r["divergent"] for r in rec),
        "peak_rss_mb_per_actor": round(max(r["peak_rss_mb"] for r in rec), 1),
        "rss_growth_mb_per_million_events": round(max(growths), 2) if growths else None,
        "checkpoints": n_cp,
        "checkpoint_mean_s": round(sum(r["checkpoint_s"] for r in rec) / max(n_cp, 1), 4),
        "checkpoint_max_bytes": max(r["checkpoint_bytes"] for r in rec),
        "net_output_matches_reference": bool(matches and late == 0 and late_reference == 0),
    }))


if __name__ == "__main__":
    main()
