"""Soccer replay: generator speed, detection quality, and pass latency with and without
speculation, on a generated match with network delays.

    python benchmarks/soccer.py --quick          # 10 s of play, profile paper
    python benchmarks/soccer.py --seconds 65     # the paper's 65 s snippet

1. Generate a match (``--profile``, default ``paper``) and time the generator.
2. Apply the delay model (per-sensor latency, jitter, bursts up to 300 ms) to its
   readings and the referee's interruptions.
3. Replay it in-process on the virtual clock, pure K-slack (alpha = 1) and adaptive
   alpha (busy time from a cost model, so the run is deterministic), and score hits,
   passes and shots on target against the ground truth (30 ms tolerance); compare the pass
   detector's latency (first emission of the final version minus the arrival of the
   newest raw reading it depends on).
4. Replay it on embedded Ray, pure K-slack and adaptive, first as fast as the actors
   take it: the real-time factor (game time / wall time; ``realtime_factor`` is the
   adaptive one), the start-up and the actors' CPU. The actors' inboxes hold
   ``--inbox-events`` rows (20,000) before the driver waits: at the runtime's default,
   200,000 rows, ``near_foot`` filled its inbox on two cores and that queue, not the K
   wait, was the pass latency of both runs.
5. Replay it on Ray again, both ways, paced at ``--ray-speed`` (1.0: real time, as a
   live stream comes), for the pass latency in wall-clock time: from the driver sending
   the newest raw reading a pass depends on to the first emission of the pass's final
   version, the same feed in both runs (``ray_latency_reduction``). The unpaced runs'
   figure (``ray_latency_reduction_unpaced``) measures something else: there the stream
   runs R times faster than real time, so K-slack's wait, 400 ms of event time per
   level, lasts 400/R ms of wall time, and the actors never idle, so the adaptive runs'
   busy factor raises alpha (``ray_near_foot_alpha``: speculation backs off under
   overload, as the paper's Alg. 3 means it to). The faster the runtime, the less gain
   an unpaced replay can show: ``docs/measurements.md`` has the figures.
   Two passes in ``--quick``: each of these figures is thin.

The last line printed is one JSON object; besides the figures above it has
``inprocess_realtime_factor`` (game time / wall time of the adaptive in-process run;
``inprocess_realtime_factor_kslack`` of the pure K-slack one; both at the runtime's
default steps of 5 ms of arrival time, whose per-step cost over 16 nodes dominates;
``inprocess_realtime_factor_100ms_steps``: the adaptive run again in steps of 100 ms,
as a source shipping ten batches a second would; ``inprocess_realtime_factor_batches``:
the adaptive run fed as an iterable of ``--batch`` raw events, a step each, as
``specula run --in-process`` feeds a log and the Ray run below its actors),
``ray_latency_reduction`` (1 - the paced adaptive Ray run's mean pass latency over the
pure K-slack one's; ``ray_pass_latency_mean_<run>_s`` each run's), ``startup_s`` (the
first Ray run's start-up: from ``RayRuntime.run`` to the first event a detector
processed, its actor processes new, in the Ray that took ``ray_init_s`` to start;
``startup_s_second_run`` the second's, in the first's chain processes,
:mod:`specula.actors.pool`), ``ray_cpu_s`` (the
adaptive Ray run's actor processes' CPU seconds, summed by phase: ``unit``, ``publish``,
``checkpoint`` and ``other``, Ray's threads and idle work; see
:class:`specula.actors.report.CpuTimes`),
``shots_detected``/``shots_truth``/``shots_matched`` with ``--shot-minutes`` and
``generator_period_error_pct`` (the largest difference between a generated sensor's
period and the real one, over a 5 s DEBS 2013 match).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from specula import CostModel, InProcessRuntime
from specula.actors.ray_runtime import RayRuntime
from specula.actors.report import CpuTimes
from specula.ordering.net import ranked
from specula.pipelines.delays import DelayModel
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match
from specula.soccer.match.sampling import measured_periods, period_errors_pct
from specula.soccer.scoring import format_scores, score_match

K0_MS = 400.0
SAMPLE = Path(__file__).resolve().parents[1] / "tests/data/debs2013/sample-pregame-2000.csv"


def generator_period_error_pct() -> float:
    """The largest difference, in percent, between a sensor's period in a generated
    DEBS 2013 match and the real one (measured on the bundled real rows, or the law
    fitted to them for sensors they lack)."""
    rows = np.loadtxt(SAMPLE, delimiter=",", dtype=np.int64)
    real = np.zeros(len(rows), [("key", "i8"), ("ts", "i8")])
    real["key"], real["ts"] = rows[:, 0], rows[:, 1]
    measured = measured_periods(real)
    measured.pop(99, None)  # one dropout among few rows: its median is no period
    match = generate_match(5.0, profile="debs2013", seed=0)
    balls = {match.profile.ball_in_play, *match.profile.spare_balls}
    return max(period_errors_pct(match.events, measured, balls).values())


def shots_over_minutes(minutes: int) -> dict[str, float]:
    """Query 4 over ``minutes`` generated minutes of the debs2013 profile (seeds 0 ..
    minutes - 1, in order, pure K-slack): shots on goal are rare in generated play, about
    one every two minutes, so the short runs above seldom hold one."""
    detected = truth = matched = 0
    for seed in range(minutes):
        match = generate_match(60, profile="debs2013", seed=seed)
        graph = soccer_graph(1.0, metadata=match.metadata)
        report = InProcessRuntime(graph).run(match.stream(), step_ticks=100 * 10**9)
        s = score_match(report, match)["shots"]
        detected, truth, matched = detected + s.detected, truth + s.truth, matched + s.matched
    return {"shots_detected": detected, "shots_truth": truth, "shots_matched": matched}


def reduction(kslack: float | None, adaptive: float | None) -> float | None:
    """1 - adaptive / pure K-slack mean pass latency (None without both)."""
    return round(1 - adaptive / kslack, 4) if kslack and adaptive else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="10 s of play")
    p.add_argument("--seconds", type=float, default=None)
    p.add_argument("--profile", default="paper", choices=["paper", "debs2013"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cost-us", type=float, default=50.0,
                   help="modelled busy time per processed event (adaptive run), microseconds")
    p.add_argument("--no-ray", action="store_true")
    p.add_argument("--chaining", default="auto", choices=["auto", "none"],
                   help="RayRuntime's chaining: detectors chained into an actor per CPU, "
                        "or one actor each")
    p.add_argument("--no-queries", action="store_true",
                   help="without the DEBS 2013 aggregates (queries 1-3)")
    p.add_argument("--batch", type=int, default=5_000, help="raw events per Ray batch")
    p.add_argument("--ray-speed", type=float, default=1.0,
                   help="pace of the Ray runs that measure latency (1.0: real time)")
    p.add_argument("--inbox-events", type=int, default=20_000,
                   help="rows an actor's inbox holds before its producers wait (Ray runs)")
    p.add_argument("--plots", default=None, help="write Fig. 10/11-like PNG files here")
    p.add_argument("--shot-minutes", type=int, default=0,
                   help="also score query 4 over this many generated minutes (about 7 s "
                        "each)")
    args = p.parse_args()
    seconds = args.seconds or (10.0 if args.quick else 65.0)

    t0 = time.perf_counter()
    match = generate_match(seconds, profile=args.profile, seed=args.seed)
    gen_rate = len(match.events) / (time.perf_counter() - t0)
    raw = DelayModel(seed=args.seed).arrival(match.stream())  # readings and interruptions
    print(f"{seconds:g} s of play, profile {args.profile}: {len(raw):,} readings, generator "
          f"{gen_rate:,.0f} rows/s")

    def inprocess(alpha: float | str) -> InProcessRuntime:
        return InProcessRuntime(soccer_graph(alpha, k0_ms=K0_MS, queries=not args.no_queries,
                                             metadata=match.metadata),
                                cost_model=CostModel(per_event=args.cost_us * 1e-6))

    runs, walls = {}, {}
    for label, alpha in (("kslack", 1.0), ("adaptive", "adaptive")):
        rt = inprocess(alpha)
        t0 = time.perf_counter()
        runs[label] = rt.run(raw)
        wall = walls[label] = time.perf_counter() - t0
        late = sum(len(runs[label].late(n)) for n in runs[label].detectors)
        print(f"in-process {label:<9} {wall:6.1f} s wall, {late} late events")
        print(format_scores(score_match(runs[label], match)))
    rt = inprocess("adaptive")
    t0 = time.perf_counter()
    rt.run(raw, step_ticks=int(0.1 * rt.ticks_per_second))
    walls["adaptive_100ms"] = time.perf_counter() - t0
    print(f"in-process adaptive, 100 ms steps {walls['adaptive_100ms']:6.1f} s wall")
    rt = inprocess("adaptive")
    t0 = time.perf_counter()
    rt.run(raw[i:i + args.batch] for i in range(0, len(raw), args.batch))
    walls["adaptive_batches"] = time.perf_counter() - t0
    print(f"in-process adaptive, a step per {args.batch:,} raw events "
          f"{walls['adaptive_batches']:6.1f} s wall")
    lat = {k: r.latencies("passes") / 1e12 for k, r in runs.items()}
    # on-demand units name their outputs by labels: counters compared by rank
    same = all(np.array_equal(ranked(runs["kslack"].net(n)), ranked(runs["adaptive"].net(n)))
               for n in runs["kslack"].detectors)
    for k, v in lat.items():
        if len(v):
            print(f"pass latency {k:<9} mean {v.mean():.3f} s, p99 {np.percentile(v, 99):.3f} s")
    print(f"net outputs of the two runs identical: {same}")
    if args.plots:
        from specula.pipelines.plots import plot_alpha, plot_latency

        for name in ("passes", "hits"):
            print("wrote", plot_latency(runs, name, f"{args.plots}/{name}_latency.png"))
        print("wrote", plot_alpha(runs["adaptive"], "near_foot",
                                  f"{args.plots}/near_foot_alpha.png"))

    realtime, ray_lat, ray_cpu, startup, alpha = {}, {}, {}, {}, {}
    ray_init_s = None
    if not args.no_ray:
        import ray

        # a Ray of its own ("local"): without it, ray.init joins one that another
        # process left running on this machine, and refuses num_cpus there
        t0 = time.perf_counter()
        ray.init(address="local", num_cpus=2, include_dashboard=False, configure_logging=False,
                 log_to_driver=False)
        ray_init_s = time.perf_counter() - t0
        try:
            # as fast as the actors take it (throughput), then paced (latency)
            for pace, speed in (("unpaced", None), ("paced", args.ray_speed)):
                for label, a in (("kslack", 1.0), ("adaptive", "adaptive")):
                    graph = soccer_graph(a, k0_ms=K0_MS, queries=not args.no_queries,
                                         metadata=match.metadata)
                    report = RayRuntime(graph, inbox_events=args.inbox_events,
                                        chaining=args.chaining).run(
                        raw, batch_rows=args.batch, speed=speed)
                    run = f"{label}_{pace}"
                    ray_lat[run] = report.latencies("passes") / 1e9
                    mean = np.mean(ray_lat[run]) if len(ray_lat[run]) else float("nan")
                    alphas = [h.alpha for h in report.alpha_history("near_foot")]
                    alpha[run] = float(np.mean(alphas)) if alphas else 1.0
                    late = sum(len(report.late(n)) for n in report.detectors)
                    print(f"Ray {label:<9} {pace:<8} {late} late events")
                    print(format_scores(score_match(report, match)))
                    print(f"Ray {label:<9} {pace:<8} {report.wall_seconds:6.1f} s wall, "
                          f"real-time x{seconds / report.wall_seconds:.2f}, pass latency "
                          f"(wall clock) mean {mean:.3f} s, near_foot's alpha "
                          f"{alpha[run]:.2f}; start-up {report.startup_s:.2f} s, "
                          f"stream {report.stream_wall_s:.2f} s")
                    if speed is not None:
                        continue
                    realtime[label] = seconds / report.wall_seconds
                    startup[label] = report.startup_s
                    ray_cpu[label] = CpuTimes.total([d.cpu_s for d in report.detectors.values()])
                    print(f"Ray {label:<9} actors' CPU s: " + ", ".join(
                        f"{k} {v:.2f}" for k, v in ray_cpu[label].items()))
        finally:
            ray.shutdown()

    def stat(v: np.ndarray, f) -> float | None:
        return round(float(f(v)), 4) if len(v) else None

    def ray_mean(run: str) -> float | None:
        return stat(ray_lat.get(run, np.empty(0)), np.mean)

    mean_k = stat(lat["kslack"], np.mean)
    mean_a = stat(lat["adaptive"], np.mean)
    print(json.dumps({
        "generator_rows_per_s": round(gen_rate),
        "generator_period_error_pct": round(generator_period_error_pct(), 4),
        "inprocess_realtime_factor": round(seconds / walls["adaptive"], 3),
        "inprocess_realtime_factor_kslack": round(seconds / walls["kslack"], 3),
        "inprocess_realtime_factor_100ms_steps": round(seconds / walls["adaptive_100ms"], 3),
        "inprocess_realtime_factor_batches": round(seconds / walls["adaptive_batches"], 3),
        "realtime_factor": round(realtime["adaptive"], 3) if realtime else None,
        "realtime_factor_kslack": round(realtime["kslack"], 3) if realtime else None,
        "ray_init_s": round(ray_init_s, 3) if ray_init_s is not None else None,
        "startup_s": round(startup["kslack"], 3) if startup else None,
        "startup_s_second_run": round(startup["adaptive"], 3) if startup else None,
        "ray_cpu_s": {k: round(v, 3) for k, v in ray_cpu.get("adaptive", {}).items()},
        **{f"ray_pass_latency_mean_{run}_s": stat(v, np.mean) for run, v in ray_lat.items()},
        "ray_near_foot_alpha": {run: round(v, 3) for run, v in alpha.items()},
        "ray_latency_reduction": reduction(ray_mean("kslack_paced"), ray_mean("adaptive_paced")),
        "ray_latency_reduction_unpaced": reduction(ray_mean("kslack_unpaced"),
                                                   ray_mean("adaptive_unpaced")),
        "pass_latency_mean_kslack_s": mean_k,
        "pass_latency_mean_adaptive_s": mean_a,
        "pass_latency_p99_kslack_s": stat(lat["kslack"], lambda v: np.percentile(v, 99)),
        "pass_latency_p99_adaptive_s": stat(lat["adaptive"], lambda v: np.percentile(v, 99)),
        "latency_reduction": reduction(mean_k, mean_a),
        "precision_recall": {k: v.as_dict()
                             for k, v in score_match(runs["adaptive"], match).items()},
        "identical_net_outputs": same,
        **(shots_over_minutes(args.shot_minutes) if args.shot_minutes else {}),
    }))


if __name__ == "__main__":
    main()
