"""The ``specula`` command."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from specula import events as ev
from specula.detectors.examples import example_registry
from specula.pipelines import CostModel, Graph, InProcessRuntime, RunReport
from specula.pipelines.synthetic import abc_stream, example_graph


def demo(args: argparse.Namespace) -> int:
    """Run the example hierarchy on a synthetic out-of-order stream twice, with pure
    K-slack buffering and with adaptive speculation, and compare latency and answers."""
    reg = example_registry()
    raw = abc_stream(reg, args.events, seed=args.seed, max_delay=args.max_delay)
    span = (raw["ts"].max() - raw["ts"].min()) / args.ticks_per_second
    print(f"{len(raw):,} raw events over {span:.1f} s of virtual time; arrival delays up to "
          f"{args.max_delay} ticks, 5 % bursts up to {5 * args.max_delay}; seed {args.seed}")
    cost = CostModel(per_event=args.cost_us * 1e-6, per_snapshot=args.cost_us * 0.5e-6,
                     per_restore=args.cost_us * 1e-6, per_comparison=args.cost_us * 0.25e-6)
    runs: dict[str, RunReport] = {}
    for label, alpha in (("kslack", 1.0), ("adaptive", "adaptive")):
        graph = example_graph(alpha, args.retraction, k0=args.k0)
        rt = InProcessRuntime(graph, cost_model=cost, ticks_per_second=args.ticks_per_second)
        t0 = time.perf_counter()
        runs[label] = rt.run(raw, batch_ticks=args.batch_ticks)
        print(f"  {label:<9} run: {time.perf_counter() - t0:.1f} s wall")
    print(_table(runs))
    same = all(_same(runs["kslack"], runs["adaptive"], name) for name in runs["kslack"].detectors)
    late = sum(len(r.late(n)) for r in runs.values() for n in r.detectors)
    print("net outputs identical: " + ("yes" if same else "no")
          + (f" ({late} late events; they may differ there)" if late else ""))
    return 0 if same or late else 1


def _table(runs: dict[str, RunReport]) -> str:
    a, b = runs["kslack"], runs["adaptive"]
    lines = [f"{'detector':<10} {'net':>7} {'late':>9} {'replays':>8} {'revised':>8} "
             f"{'mean alpha':>10} {'latency k-slack':>16} {'adaptive':>9} {'cut':>5}",
             ""]
    lines[1] = "-" * len(lines[0])
    for name in a.detectors:
        st = b.stats(name)
        la, lb = _mean(a.latencies(name)), _mean(b.latencies(name))
        alphas = [s.alpha for s in b.alpha_history(name)]
        lines.append(
            f"{name:<10} {len(b.net(name)):>7,} {len(a.late(name)):>4}/{len(b.late(name)):<4} "
            f"{st.relocations:>8,} {st.events_retracted + st.updates_sent:>8,} "
            f"{np.mean(alphas) if alphas else 1.0:>10.2f} {la:>16.1f} {lb:>9.1f} "
            f"{1 - lb / la if la else 0:>5.0%}")
    lines.append("late: k-slack/adaptive; latency: mean ticks from the newest raw input's "
                 "arrival to the first emission of the final version")
    return "\n".join(lines)


def _same(a: RunReport, b: RunReport, name: str) -> bool:
    x, y = a.net(name), b.net(name)
    names = [n for n in x.dtype.names if n not in ("flags", "ats", "kplus", "origin")]
    return len(x) == len(y) and bool(np.all(x[names] == y[names]))


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if len(x) else float("nan")


def run(args: argparse.Namespace) -> int:
    """Run a graph defined in a Python module against a source, on Ray (embedded by
    default, ``--address`` to join a cluster) or in-process, and print the report."""
    graph = _load(args.graph)
    if callable(graph) and not isinstance(graph, Graph):
        graph = graph()
    if not isinstance(graph, Graph):
        raise SystemExit(f"{args.graph} is not a specula Graph (nor a function returning one)")
    raw = _source(args.source, graph)
    if args.in_process:
        report = InProcessRuntime(graph).run(raw)
    else:
        from specula.pipelines.ray_runtime import RayRuntime

        report = RayRuntime(graph, address=args.address, batch_size=args.batch_size).run(raw)
    print(_summary_table(report))
    if args.report:
        Path(args.report).write_text(report.to_json())
        print(f"report written to {args.report}")
    return 0


def replay(args: argparse.Namespace) -> int:
    """Replay a DEBS 2013 log, or a generated match with network delays, through the soccer
    hierarchy (on Ray by default) and print the summary; for a generated match also how
    the detections compare with its ground truth."""
    from specula.detectors.soccer.graph import soccer_graph
    from specula.pipelines.delays import DelayModel
    from specula.pipelines.match import generate_match
    from specula.pipelines.scoring import format_scores, score_match

    alpha: float | str = args.alpha if args.alpha == "adaptive" else float(args.alpha)
    graph = soccer_graph(alpha, args.retraction, k0_ms=args.k0_ms)
    match = None
    if args.log:
        raw = _source(args.log, graph)
    else:
        match = generate_match(args.seconds, profile=args.profile, seed=args.seed)
        raw = DelayModel(seed=args.seed).arrival(match.events)
        print(f"generated {args.seconds:g} s of play ({args.profile}): {len(raw):,} readings")
    if args.in_process:
        report = InProcessRuntime(graph).run(raw, batch_ticks=5 * 10**9)
    else:
        from specula.pipelines.ray_runtime import RayRuntime

        report = RayRuntime(graph, address=args.address, batch_size=args.batch_size,
                            speed=args.speed).run(raw)
    print(_summary_table(report))
    if match is not None:
        print(format_scores(score_match(report, match)))
    if args.report:
        Path(args.report).write_text(report.to_json())
        print(f"report written to {args.report}")
    if args.plots:
        from specula.pipelines.plots import plot_alpha, plot_latency

        for name in ("passes", "hits"):
            print("wrote", plot_latency({args.alpha: report}, name,
                                        f"{args.plots}/{name}_latency.png"))
        if args.alpha == "adaptive":
            first = next(iter(report.detectors["near_foot"].alpha), "near_foot")
            print("wrote", plot_alpha(report, first, f"{args.plots}/near_foot_alpha.png"))
    return 0


def _load(spec: str) -> Any:
    """``package.module:attribute`` -> the attribute (the current directory is importable)."""
    if ":" not in spec:
        raise SystemExit(f"expected MODULE:NAME, got {spec!r}")
    module, name = spec.split(":", 1)
    sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"cannot load {spec}: {exc}") from exc


def _source(spec: str, graph: Graph) -> np.ndarray:
    """Raw events from a DEBS 2013 position log (``.csv``, ``.csv.gz``), a ``.npy`` file, a
    msgpack batch file (``encode_batch``), or a ``MODULE:FUNCTION`` returning an array of
    raw events (``ats`` sets arrival order)."""
    path = Path(spec)
    if spec.endswith((".csv", ".csv.gz")) and path.exists():
        from specula.pipelines.debs2013 import read_all

        raw, quarantined = read_all(path)
        for q in quarantined[:5]:
            print(f"quarantined: {q}", file=sys.stderr)
        if quarantined:
            print(f"{len(quarantined)} bad records quarantined", file=sys.stderr)
        return raw
    if path.suffix == ".npy" and path.exists():
        raw = np.load(path)
    elif path.suffix in (".msgpack", ".mpk") and path.exists():
        raw = ev.decode_batch(path.read_bytes())
    elif ":" in spec and not path.exists():
        raw = _load(spec)()
    else:
        raise SystemExit(f"source {spec!r}: not a .csv[.gz], .npy or .msgpack file, "
                         "nor MODULE:FUNCTION")
    bad, errors = ev.validate_batch(raw, graph.registry)
    if bad.any():
        for e in errors[:5]:
            print(f"quarantined: {e}", file=sys.stderr)
        print(f"{int(bad.sum())} bad records quarantined", file=sys.stderr)
        raw = raw[~bad]
    return raw


def _summary_table(report: RunReport) -> str:
    s = report.summary()
    rate = s["raw_events_per_s"] or 0
    lines = [f"{report.runtime}: {s['raw_events']:,} raw events in {s['wall_seconds']:.2f} s "
             f"({rate:,.0f} events/s)",
             f"{'detector':<14} {'net':>8} {'late':>6} {'replays':>8} {'retracted':>9} "
             f"{'latency mean':>13} {'p99':>9}"]
    for name, d in s["detectors"].items():
        mean = d["latency_mean_s"]
        p99 = d["latency_p99_s"]
        lines.append(f"{name:<14} {d['net_events']:>8,} {d['late']:>6} {d['relocations']:>8,} "
                     f"{d['events_retracted']:>9,} "
                     f"{'-' if mean is None else f'{mean * 1e3:.1f} ms':>13} "
                     f"{'-' if p99 is None else f'{p99 * 1e3:.1f} ms':>9}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specula", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="speculative ordering on a synthetic out-of-order stream",
                       description=demo.__doc__)
    p.add_argument("--events", type=int, default=50_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-delay", type=int, default=20, help="ticks")
    p.add_argument("--k0", type=int, default=100, help="initial K of level-1 units, ticks")
    p.add_argument("--retraction", choices=["on-demand", "full"], default="on-demand")
    p.add_argument("--batch-ticks", type=int, default=5,
                   help="raw events arriving within this many ticks form one delivery")
    p.add_argument("--ticks-per-second", type=float, default=1_000.0)
    p.add_argument("--cost-us", type=float, default=600.0,
                   help="modelled busy time per processed event, microseconds")
    p.set_defaults(func=demo)
    r = sub.add_parser("run", help="run a graph from a Python module against a source",
                       description=run.__doc__)
    r.add_argument("graph", metavar="MODULE:GRAPH",
                   help="a Graph, or a function returning one, in an importable module")
    r.add_argument("--source", required=True,
                   help="a .npy or .msgpack file of raw events, or MODULE:FUNCTION")
    r.add_argument("--address", default=None, help="join this Ray cluster (default: embedded)")
    r.add_argument("--in-process", action="store_true", help="run without Ray")
    r.add_argument("--batch-size", type=int, default=10_000)
    r.add_argument("--report", default=None, help="write the JSON report here")
    r.set_defaults(func=run)
    s = sub.add_parser("replay", help="replay a DEBS 2013 log or a generated match through "
                                      "the soccer hierarchy", description=replay.__doc__)
    s.add_argument("log", nargs="?", default=None,
                   help="a DEBS 2013 position log (.csv, .csv.gz); default: generate a match")
    s.add_argument("--seconds", type=float, default=20.0, help="length of a generated match")
    s.add_argument("--profile", choices=["debs2013", "paper"], default="debs2013")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--alpha", default="adaptive", help="'adaptive' or a number in [0, 1]")
    s.add_argument("--retraction", choices=["on-demand", "full"], default="on-demand")
    s.add_argument("--k0-ms", type=float, default=400.0,
                   help="initial K of level 1 (doubling per level), milliseconds")
    s.add_argument("--speed", type=float, default=None,
                   help="pace as a multiple of real time (default: as fast as possible)")
    s.add_argument("--in-process", action="store_true", help="run without Ray")
    s.add_argument("--address", default=None, help="join this Ray cluster")
    s.add_argument("--batch-size", type=int, default=1_000,
                   help="raw events per batch; K at fan-ins must cover a few batches")
    s.add_argument("--report", default=None, help="write the JSON report here")
    s.add_argument("--plots", default=None, help="write latency and alpha plots (PNG) here")
    s.set_defaults(func=replay)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
