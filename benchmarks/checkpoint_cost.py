"""What checkpoints cost one detector worker, without Ray: a speculative unit (A!BC,
alpha 0) takes 200,000 generated events in batches of 1,000 and checkpoints every
``--every`` batches to a local directory; the run without checkpoints between (only the
final one) is the baseline. Beside them, what a push's digest costs (the consumer keeps
one per numbered push while it checkpoints, :func:`specula.actors.recovery.digest`) per
push of 1 to 10,000 events, its share of a push of 1,000, and the bytes the digests of
one sender add to a checkpoint (``DIGESTS_KEPT`` at most); and what storing a count of
recovery costs a dropped push before it is answered (:mod:`specula.actors.tally`: one
write to the local store, when no other is on its way).

    python benchmarks/checkpoint_cost.py --every 5

The last line printed is one JSON object: the wall seconds of both runs, the
checkpoints written, their mean cost in milliseconds, the size of the largest, the
digest's figures and the tally's.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import timeit

import msgpack
import numpy as np

from specula.actors.recovery import DIGESTS_KEPT, Checkpoints, digest
from specula.actors.routing import Router
from specula.actors.signing import random_key
from specula.actors.tally import Tally
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


def digest_us(batch: np.ndarray) -> float:
    """Microseconds per :func:`digest` of ``batch`` (best of 5 repeats)."""
    number = max(20, 200_000 // max(len(batch), 1))
    return min(timeit.repeat(lambda: digest(batch), number=number, repeat=5)) / number * 1e6


def digest_figures(push_s: float, pushes: int) -> dict[str, float]:
    """The digest's cost per push of 1 to 10,000 events, its share of one push of the
    run (``pushes`` pushes of 1,000 events in ``push_s``), and the checkpoint bytes of
    one sender's digests."""
    registry = example_registry()
    figures = {f"digest_us_{rows}": round(digest_us(abc_stream(registry, rows, seed=1)), 2)
               for rows in (1, 150, 1_000, 10_000)}
    figures["digest_share_of_push"] = round(
        figures["digest_us_1000"] / (push_s / pushes * 1e6), 4)
    kept = msgpack.packb([1, list(range(DIGESTS_KEPT)),
                          [digest(abc_stream(registry, 2, seed=s)) for s in range(DIGESTS_KEPT)]])
    figures["digest_bytes_per_sender"] = len(kept)
    return figures


def tally_persist_us(writes: int = 300) -> float:
    """Microseconds to count a drop and store the count (:meth:`Tally.persist`) in a
    local directory, median of ``writes``."""
    with tempfile.TemporaryDirectory() as folder:
        tally = Tally(Checkpoints(folder, "bench", key=random_key()).store("a"), 0)
        times = []
        for _ in range(writes):
            t0 = time.perf_counter()
            tally.add("duplicates")
            tally.persist()
            times.append(time.perf_counter() - t0)
        return float(np.median(times) * 1e6)


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
                      "checkpoint_bytes_last": st["bytes"],
                      **digest_figures(wall_s, len(raw) // 1_000),
                      "tally_persist_us": round(tally_persist_us(), 1)}))


if __name__ == "__main__":
    main()
