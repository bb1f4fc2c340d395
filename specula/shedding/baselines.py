"""The baseline shedders the papers compare against.

RI (random input shedding, the hybrid paper's first baseline, "as implemented for Apache
Kafka"): every plain event is dropped with probability ``share``, independently.
"""

from __future__ import annotations

import numpy as np

from specula.events.hashing import uniform
from specula.shedding.base import DropCommand

#: Tag of RI's hashed uniform numbers (:func:`~specula.events.hashing.uniform`).
_RI_TAG = 0x5249


class RandomInput:
    """RI: drop each plain event with probability ``command.share``.

    The random number of an event is a hash of ``(seed, producer, seq, ts)``: an event
    gets the same number whichever batch it arrives in, so at a given share the decision
    does not depend on how the stream is cut, and runs repeat exactly.

    >>> from specula.events import CORE_DTYPE
    >>> batch = np.zeros(10_000, CORE_DTYPE); batch["seq"] = np.arange(10_000)
    >>> kept = RandomInput(seed=1).keep(batch, DropCommand(0.25))
    >>> bool(abs((1 - kept.mean()) - 0.25) < 0.02)
    True
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def keep(self, batch: np.ndarray, command: DropCommand) -> np.ndarray:
        """Keep an event when its hashed uniform number is at least the share."""
        if command.share <= 0:
            return np.ones(len(batch), bool)
        u = uniform(self.seed, _RI_TAG, batch["producer"], batch["seq"], batch["ts"])
        return u >= command.share

    def __repr__(self) -> str:
        return f"RandomInput(seed={self.seed})"
