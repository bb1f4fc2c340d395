"""A net output as a detector actor reports it: what the driver reads, in arrays.

An actor's :class:`~specula.ordering.net.NetOutput` indexes its live events in Python
dictionaries (producer -> counter -> batch, row, first emission time), so that it can
apply more. The report needs none of that: only the batches applied, when, and which
row of which batch each live event is. Pickled with the dictionaries, the net output of
an instance with ~160k live events took 28-56 ms to pickle in the actor and 34-42 ms to
unpickle in the driver, after the stream and before the run returns; with the live
events as an integer array (batch, row, time), 13-17 ms to pack, 12 to pickle and 8 to
unpickle. A :class:`ReportedNet` holds them and answers the reads of a net output
(:class:`~specula.ordering.net.NetReads`) as the net output would.
"""

from __future__ import annotations

import numpy as np

from specula.ordering.net import NetOutput, NetReads

__all__ = ["ReportedNet"]


class ReportedNet(NetReads):
    """A net output, read-only: the batches it applied (``chunks``) and when
    (``times``), and its live events as rows of ``refs`` (batch index, row in that
    batch, first emission time), in the order the net output holds them (by producer,
    each in insertion order)."""

    def __init__(self, dtype: np.dtype, chunks: list[np.ndarray], times: list[int],
                 refs: np.ndarray, applied: int) -> None:
        self.dtype = dtype
        self.chunks = chunks
        self.times = times
        self.refs = refs
        self.applied = applied

    @classmethod
    def of(cls, net: NetOutput) -> ReportedNet:
        """``net`` as it stands, for a report (its batches are shared, not copied)."""
        chunks, times = net.applied_batches()
        return cls(net.dtype, list(chunks), list(times), net.live_refs(), net.applied)

    @classmethod
    def merge(cls, nets: list[ReportedNet]) -> ReportedNet:
        """The reported nets of several instances (disjoint producers) as one, as
        :meth:`~specula.ordering.net.NetOutput.absorb` merges theirs (the only one
        itself)."""
        if len(nets) == 1:
            return nets[0]
        refs, base = [], 0
        for n in nets:
            refs.append(n.refs + np.array([base, 0, 0], np.int64))
            base += len(n.chunks)
        return cls(nets[0].dtype, [c for n in nets for c in n.chunks],
                   [t for n in nets for t in n.times], np.concatenate(refs),
                   sum(n.applied for n in nets))

    def __len__(self) -> int:
        return len(self.refs)

    def applied_batches(self) -> tuple[list[np.ndarray], list[int]]:
        return self.chunks, self.times

    def live_refs(self) -> np.ndarray:
        return self.refs
