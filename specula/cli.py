"""The ``specula`` command."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from specula.detectors.examples import example_registry
from specula.pipelines import CostModel, InProcessRuntime, RunReport
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
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
