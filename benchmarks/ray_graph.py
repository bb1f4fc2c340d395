"""End-to-end raw events/s through a 4-level hierarchy, on Ray (chained instances and one
actor per instance) and in-process, in one run.

    python benchmarks/ray_graph.py --quick

The hierarchy: level 1 the vectorised A!BC and a vectorised threshold on C (they see
every raw event), level 2 D-followed-by-E (per event, on level-1 output only), level 3 a
running count, level 4 every 10th count. Pure K-slack (alpha = 1) everywhere, K starting
above what the fan-in at level 2 needs for the batch size, so nothing is late. Ray runs
embedded on this machine with 2 CPUs, with ``chaining="auto"`` (``ray_events_per_s``:
at most two chain actors, batches inside a chain handed over in memory) and
``chaining="none"`` (``ray_unchained_events_per_s``: one actor per detector); the source
sends batches as fast as the actors take them (bounded in-flight calls per edge). The
net output counts of all three runs are printed, and on Ray the start-up (from run() to
the first batch fed: actor processes, imports, kernels, clocks) apart from the stream
(``*_startup_s``, ``*_stream_events_per_s``). The warm-up runs' chain processes serve
the timed runs (a driver's later runs take the processes of its earlier ones,
:mod:`specula.actors.pool`), so ``*_startup_s`` is what a run pays with its processes
up: building its chains, the clocks, and the reports and hand-back at the end. The last
line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from specula import Graph, InProcessRuntime
from specula.actors.ray_runtime import RayRuntime
from specula.detectors import Detector
from specula.detectors.examples import (
    ANotBCBatch,
    FollowedWithin,
    RunningCount,
    Threshold,
    example_registry,
)
from specula.events import TypeRegistry
from specula.pipelines.synthetic import abc_stream


class DThenE(FollowedWithin):
    """Level 2: D followed by E, clocked by its own inputs (no raw A events)."""

    inputs = ("D", "E")
    clock = ("D", "E")


class CountMilestones(Detector):
    """Level 4: every 10th G becomes an H."""

    inputs = ("G",)
    outputs = ("H",)

    def on_event(self, event, emit):
        if event["count"] % 10 == 0:
            emit("H", event.ts, event.key, count=event["count"])


def registry() -> TypeRegistry:
    reg = example_registry()
    reg.register("H", count="i8")
    return reg


def graph(k0: int) -> Graph:
    g = Graph(registry(), sources=("A", "B", "C"))
    g.add("a_not_bc", ANotBCBatch(), k0=k0)
    g.add("big_c", Threshold(limit=80), k0=k0)
    g.add("d_then_e", DThenE(), k0=3 * k0)
    g.add("count", RunningCount(), k0=k0)
    g.add("milestones", CountMilestones(), k0=k0)
    return g


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="1M raw events, 2 repeats (< 60 s)")
    p.add_argument("--events", type=int, default=None)
    p.add_argument("--repeat", type=int, default=None)
    p.add_argument("--batch", type=int, default=20_000)
    args = p.parse_args()
    n = args.events or (1_000_000 if args.quick else 4_000_000)
    repeat = args.repeat or (2 if args.quick else 3)
    raw = abc_stream(registry(), n, seed=1, max_delay=20)
    span = int(raw["ts"].max() - raw["ts"].min())
    k0 = int(3 * args.batch * span / n)  # three batches of event time
    g = graph(k0)
    print(f"{n:,} raw events, batches of {args.batch:,}, K starts at {k0:,} ticks")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
             log_to_driver=False)
    # Ray with chained instances ("auto"), one actor per instance ("none"), in-process;
    # the warm-up runs start the chain processes the timed runs take (specula.actors.pool)
    runtimes = {"ray": lambda: RayRuntime(g, chaining="auto"),
                "ray_unchained": lambda: RayRuntime(g, chaining="none"),
                "inprocess": lambda: InProcessRuntime(g)}
    try:
        for chaining in ("auto", "none"):  # warm up workers, JIT
            RayRuntime(g, chaining=chaining).run(raw[:50_000], batch_rows=args.batch)
        rates: dict[str, list[float]] = {name: [] for name in runtimes}
        startup: dict[str, list[float]] = {name: [] for name in runtimes}
        reports = {}
        # batches of args.batch rows on Ray; in-process, steps of as much arrival time
        step_ticks = int(args.batch * span / n)
        for r in range(repeat):
            for name, make in runtimes.items():
                batching = ({"step_ticks": step_ticks} if name == "inprocess"
                            else {"batch_rows": args.batch})
                t0 = time.perf_counter()
                report = make().run(raw, **batching)
                wall = time.perf_counter() - t0
                rates[name].append(n / wall)
                # before the stream flows: actors started, kernels loaded, clocks read
                startup[name].append(wall - report.wall_seconds)
                reports[name] = report
                late = sum(len(report.late(d)) for d in g.nodes)
                print(f"  run {r + 1}/{repeat} {name:<13} {n / wall:>12,.0f} raw events/s "
                      f"({wall:.1f} s, of which start-up {startup[name][-1]:.1f} s; "
                      f"{len(report.net('milestones')):,} level-4 events, {late} late)")
    finally:
        ray.shutdown()
    chains = {d: reports["ray"].detectors[d].chains for d in g.nodes}
    print(f"  chains (auto): {chains}")
    nets = {name: {d: len(rep.net(d)) for d in g.nodes} for name, rep in reports.items()}
    same = all(counts == nets["inprocess"] for counts in nets.values())
    med = {k: statistics.median(v) for k, v in rates.items()}
    start = {k: statistics.median(v) for k, v in startup.items()}
    # the stream alone: raw events over the run's wall time less its start-up
    stream = {k: statistics.median(n / (n / r - s) for r, s in zip(rates[k], startup[k],
                                                                   strict=True))
              for k in rates}
    print(json.dumps({"ray_events_per_s": round(med["ray"]),
                      "ray_unchained_events_per_s": round(med["ray_unchained"]),
                      "inprocess_events_per_s": round(med["inprocess"]),
                      "ray_vs_inprocess": round(med["ray"] / med["inprocess"], 2),
                      "unchained_vs_inprocess": round(med["ray_unchained"] / med["inprocess"],
                                                      2),
                      "ray_startup_s": round(start["ray"], 2),
                      "ray_unchained_startup_s": round(start["ray_unchained"], 2),
                      "ray_stream_events_per_s": round(stream["ray"]),
                      "ray_unchained_stream_events_per_s": round(stream["ray_unchained"]),
                      "net_counts": nets["ray"], "unchained_net_counts": nets["ray_unchained"],
                      "inprocess_net_counts": nets["inprocess"],
                      "raw_events": n, "levels": 4, "same_net_counts": same}))


if __name__ == "__main__":
    main()
