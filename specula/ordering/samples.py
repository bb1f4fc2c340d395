"""A bounded log of samples over a whole run: alpha per adaptation step, figures per
batch. A stream that never ends would grow a plain list without bound; this one keeps
at most ``capacity`` samples spread evenly over everything offered.

When it is full it drops every other sample it holds and from then on keeps only every
second offered sample (then every fourth, ...): the samples kept are always those whose
offer index is a multiple of the current stride, so the log depends only on what was
offered, not on when it was read.

>>> log = SampleLog(capacity=4)
>>> for i in range(10):
...     log.append(i)
>>> list(log), log.stride
([0, 4, 8], 4)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: Samples a log keeps at most by default: plots and summaries need no more.
DEFAULT_CAPACITY = 4096


class SampleLog(Generic[T]):
    """Samples spread over a run, at most ``capacity`` of them (see the module)."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be at least 2, got {capacity}")
        self.capacity = capacity
        self.stride = 1
        self.offered = 0
        self._items: list[T] = []

    def append(self, item: T) -> None:
        """Offer one sample; it is kept if its index is a multiple of the stride."""
        keep = self.offered % self.stride == 0
        self.offered += 1
        if keep:
            self._items.append(item)
            if len(self._items) > self.capacity:
                self._items = self._items[::2]
                self.stride *= 2

    def __iter__(self) -> Iterator[T]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> T:
        return self._items[i]

    def state(self, item_state: Any = lambda x: x) -> dict[str, Any]:
        """The log as plain data (each item through ``item_state``), for checkpoints."""
        return {"items": [item_state(x) for x in self._items], "stride": self.stride,
                "offered": self.offered}

    def load_state(self, state: dict[str, Any], item: Any = lambda x: x) -> None:
        """Return to a :meth:`state` (each item through ``item``)."""
        self._items = [item(x) for x in state["items"]]
        self.stride, self.offered = int(state["stride"]), int(state["offered"])
