"""Small generated streams and a runner for the shedding tests.

A stream is a time-ordered structured array with ``ts`` and ``type``; types are drawn
independently with given probabilities, so a window's content is random and only the
pattern and the selection policy make some (type, position) cells matter.
"""

from __future__ import annotations

import numpy as np

from specula.shedding import ClosedWindows, WindowAssigner, WindowOperator

DTYPE = np.dtype([("ts", "i8"), ("type", "i4")])


def stream(n: int, seed: int, probs: np.ndarray, *, max_gap: int = 20) -> np.ndarray:
    """``n`` events, types drawn with ``probs``, time stamps with gaps of 1..max_gap-1."""
    rng = np.random.default_rng(seed)
    out = np.zeros(n, DTYPE)
    out["type"] = rng.choice(len(probs), size=n, p=probs / probs.sum())
    out["ts"] = np.cumsum(rng.integers(1, max_gap, n))
    return out


def q1_probs(defenders: int = 6, others: int = 3, striker: float = 0.03,
             noise: float = 0.05) -> np.ndarray:
    """Soccer Q1's shape: type 0 the striker's possession (opens windows), 1..defenders the
    defenders' events, then other players (``noise`` in all)."""
    return np.r_[striker, np.full(defenders, (1 - striker - noise) / defenders),
                 np.full(others, noise / others)]


def run(batch: np.ndarray, assigner: WindowAssigner, pattern: object,
        shedder: object = None, step: int = 997) -> tuple[ClosedWindows, int]:
    """All windows of ``batch`` pushed in slices of ``step``, and the pairs processed."""
    op = WindowOperator(assigner, pattern, shedder)  # type: ignore[arg-type]
    parts = [op.push(batch[i:i + step]) for i in range(0, len(batch), step)]
    parts.append(op.flush())
    return ClosedWindows.concat(parts), op.work
