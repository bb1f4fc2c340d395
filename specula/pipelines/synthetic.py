"""Synthetic out-of-order streams of the example types A, B, C (for demos and benchmarks)."""

from __future__ import annotations

import numpy as np

from specula.events import TypeRegistry


def abc_stream(registry: TypeRegistry, n: int, *, seed: int = 0, max_delay: int = 10,
               burst: float = 0.05, mix: tuple[float, float, float] = (0.4, 0.2, 0.4)
               ) -> np.ndarray:
    """``n`` raw events of types A, B, C in arrival order.

    Occurrence time stamps grow by 0-3 per event (ties happen); each event is delayed by
    a uniform 0..``max_delay``, and a fraction ``burst`` of them by up to 4x more.
    C carries a value ``v`` in [0, 100). ``seq`` numbers the events in occurrence order.
    """
    rng = np.random.default_rng(seed)
    dtype = registry.dtype(["A", "B", "C"])
    out = np.zeros(n, dtype)
    names = np.array(["A", "B", "C"])
    kinds = rng.choice(3, size=n, p=list(mix))
    ids = np.array([registry.id(t) for t in names], np.int32)
    out["type"] = ids[kinds]
    out["ts"] = np.cumsum(rng.integers(0, 4, size=n))
    out["key"] = rng.integers(0, 3, size=n)
    out["seq"] = np.arange(n)
    out["v"] = np.where(kinds == 2, rng.integers(0, 100, size=n), 0)
    delay = rng.integers(0, max_delay + 1, size=n)
    late = rng.random(n) < burst
    delay[late] += rng.integers(0, 4 * max_delay + 1, size=int(late.sum()))
    out["ats"] = out["ts"] + delay
    return out[np.argsort(out["ats"], kind="stable")]
