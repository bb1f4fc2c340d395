"""The example hierarchy and synthetic out-of-order streams for it (demos, tests,
benchmarks)."""

from __future__ import annotations

import numpy as np

from specula.detectors.examples import (
    ANotBC,
    FollowedWithin,
    RunningCount,
    Threshold,
    example_registry,
)
from specula.detectors.graph import Alpha, Graph
from specula.events import TypeRegistry
from specula.ordering.unit import RetractionMode


def example_graph(alpha: Alpha, retraction: RetractionMode = "on-demand", k0: int = 0) -> Graph:
    """Three levels: A!BC and a threshold on C, then D-followed-by-E, then a running count.

    Level 2 also takes raw A events as clock, and the D and E events it gets were held up
    to K by level 1, so it starts with three times the initial K of the others.
    """
    g = Graph(example_registry(), sources=("A", "B", "C"))
    g.add("a_not_bc", ANotBC(), alpha=alpha, retraction=retraction, k0=k0)
    g.add("big_c", Threshold(), alpha=alpha, retraction=retraction, k0=k0)
    g.add("d_then_e", FollowedWithin(), alpha=alpha, retraction=retraction, k0=3 * k0)
    g.add("count", RunningCount(), alpha=alpha, retraction=retraction, k0=k0)
    return g


def abc_stream(registry: TypeRegistry, n: int, *, seed: int = 0, max_delay: int = 10,
               burst: float = 0.05, mix: tuple[float, float, float] = (0.4, 0.2, 0.4),
               keys: int = 3) -> np.ndarray:
    """``n`` raw events of types A, B, C in arrival order.

    Occurrence time stamps grow by 0-3 per event (ties happen); each event is delayed by
    a uniform 0..``max_delay``, and a fraction ``burst`` of them by up to 4x more.
    C carries a value ``v`` in [0, 100); keys are uniform in [0, ``keys``). ``seq``
    numbers the events in occurrence order.
    """
    rng = np.random.default_rng(seed)
    dtype = registry.dtype(["A", "B", "C"])
    out = np.zeros(n, dtype)
    names = np.array(["A", "B", "C"])
    kinds = rng.choice(3, size=n, p=list(mix))
    ids = np.array([registry.id(t) for t in names], np.int32)
    out["type"] = ids[kinds]
    out["ts"] = np.cumsum(rng.integers(0, 4, size=n))
    out["key"] = rng.integers(0, keys, size=n)
    out["seq"] = np.arange(n)
    out["v"] = np.where(kinds == 2, rng.integers(0, 100, size=n), 0)
    delay = rng.integers(0, max_delay + 1, size=n)
    late = rng.random(n) < burst
    delay[late] += rng.integers(0, 4 * max_delay + 1, size=int(late.sum()))
    out["ats"] = out["ts"] + delay
    return out[np.argsort(out["ats"], kind="stable")]
