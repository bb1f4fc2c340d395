"""What checkpoints cost one detector worker, without Ray: a speculative unit (A!BC,
alpha 0) takes 200,000 generated events in batches of 1,000 and checkpoints every
``--every`` batches to a local directory; the run without checkpoints between (only the
final one) is the baseline.

    python benchmarks/checkpoint_cost.py --every 5

The last line printed is one JSON object: the wall seconds of both runs, the
checkpoints written, their mean cost in milliseconds and the size of the largest.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np

from specula.actors.recovery import Checkpoints
from specula.actors.routing import Router
from specula.actors.signing import random_key
from specula.actors.worker import DetectorWorker
from specula.detectors.examples import example_registry
from specula.pipelines.synthetic import abc_stream, example_graph


def run(raw: np.ndarray, every: int) -> tuple[float, dict]:
    graph = example_graph(0.0, "on-demand", k0=3_000)
    with tempfile.TemporaryDirectory() as store:
        worker = DetectorWorker(graph.instances()[0], graph.registry, router=Router(graph),
                                checkpoints=Checkpoints(store, "bench", every, 1e9,
                                                        key=random_key()))
        worker.start()
        t0 = time.perf_counter()
        for i, batch in enumerate(np.array_split(raw, len(raw) // 1_000)):
            worker.push(batch, 0, i)
        worker.flush()
        return time.perf_counter() - t0, worker.report()["checkpoints"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--every", type=int, default=5, help="batches between checkpoints")
    p.add_argument("--events", type=int, default=200_000)
    args = p.parse_args()
    raw = abc_stream(example_registry(), args.events, seed=1, max_delay=20)
    base_s, _ = run(raw, 10**9)
    wall_s, st = run(raw, args.every)
    print(json.dumps({"events": args.events, "every_batches": args.every,
                      "wall_s_without": round(base_s, 2), "wall_s_with": round(wall_s, 2),
                      "checkpoints": st["count"],
                      "checkpoint_mean_ms": round(st["seconds"] / st["count"] * 1e3, 2),
                      "checkpoint_bytes_last": st["bytes"]}))


if __name__ == "__main__":
    main()
