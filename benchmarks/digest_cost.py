"""What a push's digest costs on the delivery path (:func:`specula.actors.recovery.digest`,
computed under the consumer's lock for every numbered push when it checkpoints).

Today's digest, an 8-byte BLAKE2b of the fields a regeneration repeats, against the
one it replaced (Python's ``hash`` of the same fields' bytes, salted per process, so
useless after a restart), per push of 1 to 10,000 generated events; and the share of a
push's whole cost at a worker (a speculative A!BC unit that checkpoints every 50
batches, pushes of 1,000 events, as ``benchmarks/checkpoint_cost.py``). Also the
bytes the digests add to a checkpoint: ``DIGESTS_KEPT`` per sender at most.

    python benchmarks/digest_cost.py

The last line printed is one JSON object.
"""

from __future__ import annotations

import json
import tempfile
import time
import timeit

import msgpack
import numpy as np

from specula.actors.recovery import DIGEST_FIELDS, DIGESTS_KEPT, Checkpoints, digest
from specula.actors.routing import Router
from specula.actors.signing import random_key
from specula.actors.worker import DetectorWorker
from specula.detectors.examples import example_registry
from specula.pipelines.synthetic import abc_stream, example_graph


def salted(batch: np.ndarray) -> int:
    """The digest before: Python's ``hash``, salted per process (PYTHONHASHSEED)."""
    return hash(tuple(batch[f].tobytes() for f in DIGEST_FIELDS))


def per_call_us(fn, batch: np.ndarray) -> float:
    number = max(20, 200_000 // max(len(batch), 1))
    return min(timeit.repeat(lambda: fn(batch), number=number, repeat=5)) / number * 1e6


def push_us(raw: np.ndarray, rows: int) -> float:
    """Wall microseconds per push of ``rows`` events through a checkpointing worker."""
    graph = example_graph(0.0, "on-demand", k0=3_000)
    with tempfile.TemporaryDirectory() as store:
        worker = DetectorWorker(graph.instances()[0], graph.registry, router=Router(graph),
                                checkpoints=Checkpoints(store, "bench", 50, 1e9,
                                                        key=random_key()))
        worker.start()
        batches = np.array_split(raw, len(raw) // rows)
        t0 = time.perf_counter()
        for i, batch in enumerate(batches):
            worker.push(batch, 0, i)
        worker.flush()
        return (time.perf_counter() - t0) / len(batches) * 1e6


def main() -> None:
    registry = example_registry()
    figures: dict[str, float] = {}
    for rows in (1, 150, 1_000, 10_000):
        batch = abc_stream(registry, rows, seed=1)
        old, new = per_call_us(salted, batch), per_call_us(digest, batch)
        print(f"{rows:>6} events: hash {old:7.2f} us, blake2b {new:7.2f} us, "
              f"x{new / old:.1f}")
        figures[f"hash_us_{rows}"], figures[f"blake2b_us_{rows}"] = old, new
    push = push_us(abc_stream(registry, 200_000, seed=3), 1_000)
    share = figures["blake2b_us_1000"] / push
    print(f"a push of 1000 events through a checkpointing worker: {push:.0f} us; "
          f"its digest {100 * share:.1f} % of it")
    kept = msgpack.packb([1, list(range(DIGESTS_KEPT)),
                          [digest(abc_stream(registry, 2, seed=s)) for s in range(DIGESTS_KEPT)]])
    print(f"{DIGESTS_KEPT} digests of one sender in a checkpoint: {len(kept)} bytes")
    print(json.dumps({**{k: round(v, 2) for k, v in figures.items()},
                      "push_us_1000": round(push), "digest_share_1000": round(share, 4),
                      "checkpoint_bytes_per_sender": len(kept)}))


if __name__ == "__main__":
    main()
