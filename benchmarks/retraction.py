"""What on-demand retraction costs against full retraction, through a chain of detectors.

    python benchmarks/retraction.py --quick

A 3-level chain of fully speculative detectors (alpha 0, K learned from the stream)
takes 10,000 raw events, each arriving up to 20 ticks late (uniformly at random), on
the in-process runtime; the same input runs once with every node on full and once on
on-demand retraction. Two chains: ``echo`` (three stateless echoes: a replay can stop
as soon as it has handed on the late event) and ``count`` (an echo, a running count mod 2
and an echo: an early event flips the count of everything behind it, so the count's
replays never stop early and each revises every output behind the late event).

Printed per chain and mode: the messages the nodes sent (events, updates, revocations,
retractions, all counted), the relocations (replays), the replays that stopped early,
and the process CPU seconds of the run (median of ``--repeat`` runs, interleaved). The
last line is one JSON object: ``ondemand_vs_full_messages`` (the echo chain),
``ondemand_vs_full_relocations`` and ``ondemand_vs_full_cpu`` likewise, and the same
three per chain as ``<chain>_ondemand_vs_full_*``, with the raw figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from specula import Graph, InProcessRuntime
from specula.detectors import Detector
from specula.events import TypeRegistry

N_EVENTS = 10_000
MAX_DELAY = 20


class Echo(Detector):
    """Stateless: each input as one output with its time stamp, key and value."""

    def __init__(self, source: str, target: str) -> None:
        self.inputs, self.outputs = (source,), (target,)

    def on_event(self, event, emit):
        emit(self.outputs[0], event.ts, event.key, v=event["v"])


class CountMod2(Detector):
    """Stateful: each input as an output carrying the running count mod 2."""

    def __init__(self, source: str, target: str) -> None:
        self.inputs, self.outputs = (source,), (target,)
        self.count = 0

    def on_event(self, event, emit):
        self.count = (self.count + 1) % 2
        emit(self.outputs[0], event.ts, event.key, v=self.count)

    def snapshot(self):
        return self.count

    def restore(self, state):
        self.count = state


CHAINS = {"echo": (Echo, Echo, Echo), "count": (Echo, CountMod2, Echo)}


def registry() -> TypeRegistry:
    reg = TypeRegistry()
    for name in ("A", "T0", "T1", "T2"):
        reg.register(name, v="i8")
    return reg


def stream(reg: TypeRegistry, seed: int = 0) -> np.ndarray:
    """One event per tick, keys 0-3, each delayed by 0..MAX_DELAY ticks; arrival order."""
    rng = np.random.default_rng(seed)
    ts = np.arange(N_EVENTS)
    raw = reg.batch("A", ts=ts, key=rng.integers(0, 4, N_EVENTS), v=ts % 10, seq=ts,
                    ats=ts + rng.integers(0, MAX_DELAY + 1, N_EVENTS), dtype=reg.dtype(["A"]))
    return raw[np.argsort(raw["ats"], kind="stable")]


def run(chain: str, retraction: str, raw: np.ndarray, reg: TypeRegistry) -> dict[str, float]:
    g = Graph(reg, sources=("A",))
    types = ("A", "T0", "T1", "T2")
    for level, kind in enumerate(CHAINS[chain]):
        g.add(f"n{level}", kind(types[level], types[level + 1]), alpha=0.0,
              retraction=retraction, k0=0)
    t0 = time.process_time()
    report = InProcessRuntime(g).run(raw, step_ticks=0)
    cpu = time.process_time() - t0
    stats = [report.stats(name) for name in g.nodes]
    return {"messages": sum(d.net.applied for d in report.detectors.values()),
            "relocations": sum(s.relocations for s in stats),
            "early_stops": sum(s.early_stops for s in stats),
            "late": sum(s.late for s in stats), "cpu": cpu}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one run per chain and mode")
    p.add_argument("--repeat", type=int, default=3, help="runs per chain and mode")
    args = p.parse_args()
    repeat = 1 if args.quick else args.repeat
    reg = registry()
    raw = stream(reg)
    run("echo", "on-demand", raw[:200], reg)  # compile the kernels outside the timing
    out: dict[str, float] = {}
    for chain in CHAINS:
        runs: dict[str, list[dict[str, float]]] = {"full": [], "on-demand": []}
        for _ in range(repeat):
            for mode in runs:
                runs[mode].append(run(chain, mode, raw, reg))
        fig = {mode: {**r[0], "cpu": statistics.median(x["cpu"] for x in r)}
               for mode, r in runs.items()}
        for mode, f in fig.items():
            print(f"{chain:>6} {mode:>9}: {f['messages']:>8,} messages "
                  f"{f['relocations']:>7,} relocations ({f['early_stops']:>6,} stopped early) "
                  f"{f['late']:>4} late  {f['cpu']:6.2f} s CPU")
        for key in ("messages", "relocations", "cpu"):
            ratio = fig["on-demand"][key] / fig["full"][key]
            out[f"{chain}_ondemand_vs_full_{key}"] = round(ratio, 3)
            for mode, f in fig.items():
                out[f"{chain}_{mode.replace('-', '')}_{key}"] = round(f[key], 3)
    for key in ("messages", "relocations", "cpu"):
        out[f"ondemand_vs_full_{key}"] = out[f"echo_ondemand_vs_full_{key}"]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
