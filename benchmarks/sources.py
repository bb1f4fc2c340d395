"""Source actors against the driver: the soccer hierarchy on embedded Ray fed by the
driver (one process reads and routes every event) and by source actors (a part of the
stream each, cut by sensor, stepped together through arrival time).

    python benchmarks/sources.py --quick    # 10 s of play, ~5 min
    python benchmarks/sources.py            # 30 s of play

A generated match (profile ``paper``, with network delays) in arrival order; each
configuration runs once per round, the rounds alternate, and the figures are medians of
the wall seconds of the detection (``RunReport.wall_seconds``, start-up excluded). A
consumer takes a batch per source per step, so the steps cut the pushes finer than the
driver's batches, and a step's disorder adds to the delays K must cover (late events are
reported). On a machine with few cores parallel sources cannot win; what they remove is
the driver as the one reader and router of a large cluster's input.

The last line printed is one JSON object: the medians per configuration and
``sources_2_vs_driver`` (wall seconds of two sources over the driver's; below 1 is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics

import numpy as np
from scale import K0_MS, match_raw

from specula.actors.inprocess import prepare_raw
from specula.actors.ray_runtime import RayRuntime
from specula.actors.sources import ArrayPart, Sources
from specula.cluster import ray_session
from specula.soccer.graph import soccer_graph


def parts(raw: np.ndarray, n: int) -> list[ArrayPart]:
    """``raw`` cut by sensor into ``n`` parts, each in arrival order."""
    return [ArrayPart(raw[raw["key"] % n == j]) for j in range(n)]


def run(raw: np.ndarray | Sources, batch: int) -> tuple[float, int]:
    """Wall seconds of the detection and late events of one run."""
    graph = soccer_graph("adaptive", k0_ms=K0_MS)
    report = RayRuntime(graph).run(raw, batch_rows=batch)
    return report.wall_seconds, sum(len(report.late(n)) for n in graph.nodes)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10 s of play, 2 rounds")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=1_000, help="events per batch (replay's)")
    p.add_argument("--step", type=float, default=0.1, help="the sources' step, seconds")
    args = p.parse_args()
    raw = prepare_raw(match_raw(10.0 if args.quick else 30.0, args.seed))
    print(f"{len(raw):,} raw events, batches of {args.batch:,}, steps of {args.step} s")
    configs = {"driver": lambda: raw,
               "sources_2": lambda: Sources(parts(raw, 2), args.step),
               "sources_3": lambda: Sources(parts(raw, 3), args.step)}
    walls: dict[str, list[float]] = {c: [] for c in configs}
    late: dict[str, int] = {c: 0 for c in configs}
    with ray_session(num_cpus=2):
        run(raw[:args.batch * 4], args.batch)  # actor start-up and imports
        for _ in range(2 if args.quick else 3):
            for name, make in configs.items():
                wall, n_late = run(make(), args.batch)
                walls[name].append(wall)
                late[name] += n_late
                print(f"{name:10s} {wall:6.2f} s, {n_late} late")
    result = {f"{c}_wall_s": round(statistics.median(w), 2) for c, w in walls.items()}
    result |= {f"{c}_late": n for c, n in late.items()}
    result["sources_2_vs_driver"] = round(result["sources_2_wall_s"] / result["driver_wall_s"],
                                          2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
