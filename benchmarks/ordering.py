"""Throughput of the ordering unit: pure K-slack, speculative (alpha = 0.3), adaptive, and a
straightforward heapq K-slack written here as the baseline.

    python benchmarks/ordering.py --quick

The stream has one event type that also drives the clock; about 5 % of the events are
delayed (out of order). The detector does nothing, so the figures are the ordering
unit's own cost. Every variant runs ``--repeat`` times, interleaved, and the median is
reported. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import heapq
import json
import statistics
import time

import numpy as np

from specula.detectors import Detector
from specula.events import TypeRegistry
from specula.ordering import AlphaController, OrderingUnit


class Null(Detector):
    """Consumes everything, generates nothing, has an empty state."""

    inputs = ("x",)
    outputs = ("y",)

    def on_batch(self, events, type_names, emit):
        pass

    def snapshot(self):
        return None

    def restore(self, state):
        pass


def stream(n: int, seed: int, disorder: float = 0.05, max_delay: int = 2_000) -> np.ndarray:
    reg = registry()
    rng = np.random.default_rng(seed)
    out = np.zeros(n, reg.dtype(["x"]))
    out["type"] = reg.id("x")
    out["ts"] = np.arange(n, dtype=np.int64) * 10
    out["seq"] = np.arange(n)
    delayed = rng.random(n) < disorder
    out["ats"] = out["ts"] + np.where(delayed, rng.integers(1, max_delay, n), 0)
    arrivals = out[np.argsort(out["ats"], kind="stable")]
    return arrivals


def registry() -> TypeRegistry:
    reg = TypeRegistry()
    reg.register("x")
    reg.register("y")
    return reg


def run_unit(events: np.ndarray, alpha, batch: int) -> tuple[float, int]:
    unit = OrderingUnit(Null(), registry(), producer=1, inputs=("x",), outputs=("y",),
                        clock=("x",), alpha=alpha)
    t0 = time.perf_counter()
    for i in range(0, len(events), batch):
        unit.push(events[i:i + batch])
    unit.flush()
    dt = time.perf_counter() - t0
    return len(events) / dt, unit.stats.purged + unit.stats.late


def run_heapq(events: np.ndarray) -> tuple[float, int]:
    """K-slack with a binary heap, one event at a time: clock from every event, K the
    largest delay seen, emit while head.ts + K <= clk; an event behind the last emitted
    one is late (counted, dropped)."""
    ts_list = events["ts"].tolist()
    seq_list = events["seq"].tolist()
    t0 = time.perf_counter()
    heap: list[tuple[int, int]] = []
    clk, k, emitted, late = -(2**62), 0, 0, 0
    last = (-(2**62), 0)
    out = []
    for ts, seq in zip(ts_list, seq_list, strict=True):
        if (ts, seq) < last:
            late += 1
        else:
            heapq.heappush(heap, (ts, seq))
        if ts > clk:
            clk = ts
        if clk - ts > k:
            k = clk - ts
        while heap and heap[0][0] + k <= clk:
            last = heapq.heappop(heap)
            out.append(last)
            emitted += 1
    while heap:
        out.append(heapq.heappop(heap))
        emitted += 1
    dt = time.perf_counter() - t0
    return len(events) / dt, emitted + late


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true", help="1M events, 3 repeats (< 60 s)")
    p.add_argument("--events", type=int, default=None)
    p.add_argument("--repeat", type=int, default=None)
    p.add_argument("--batch", type=int, default=10_000)
    args = p.parse_args()
    n = args.events or (1_000_000 if args.quick else 5_000_000)
    repeat = args.repeat or (3 if args.quick else 5)
    events = stream(n, seed=1)
    ooo = float((np.diff(events["ts"]) < 0).mean())
    print(f"{n:,} events, {ooo:.1%} arrive after a later-stamped one; batches of {args.batch:,}")
    for alpha in (1.0, 0.3):  # compile the kernels of both buffers
        run_unit(events[:20_000], alpha, args.batch)
    variants = {
        "kslack": lambda: run_unit(events, 1.0, args.batch),
        "speculative": lambda: run_unit(events, 0.3, args.batch),
        "adaptive": lambda: run_unit(events, AlphaController(), args.batch),
        "heapq": lambda: run_heapq(events),
    }
    rates: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(repeat):
        for name, fn in variants.items():
            rate, emitted = fn()
            assert emitted == n, (name, emitted)
            rates[name].append(rate)
            print(f"  run {r + 1}/{repeat} {name:<12} {rate:>12,.0f} events/s")
    med = {k: statistics.median(v) for k, v in rates.items()}
    result = {f"{k}_events_per_s": round(v) for k, v in med.items()}
    result["kslack_vs_heapq"] = round(med["kslack"] / med["heapq"], 2)
    result["speculative_vs_heapq"] = round(med["speculative"] / med["heapq"], 2)
    result["adaptive_vs_heapq"] = round(med["adaptive"] / med["heapq"], 2)
    result["events"] = n
    result["out_of_order_fraction"] = round(ooo, 4)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
