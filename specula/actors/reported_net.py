"""A net output as a detector actor reports it: what the driver reads, in arrays.

An actor's :class:`~specula.ordering.net.NetOutput` indexes its live events in Python
dictionaries (producer -> counter -> batch, row, first emission time), so that it can
apply more. The report needs none of that: only the batches applied, when, and which
row of which batch each live event is. Pickled with the dictionaries, the net output of
an instance with ~160k live events took 28-56 ms to pickle in the actor and 34-42 ms to
unpickle in the driver, after the stream and before the run returns; with the live
events as an integer array (batch, row, time), 13-17 ms to pack, 12 to pickle and 8 to
unpickle. A :class:`ReportedNet` holds them and answers the reads a
:class:`~specula.actors.report.DetectorReport`'s users make of a net output
(:class:`NetView`), as the net output would.
"""

from __future__ import annotations

import itertools
from typing import Protocol

import numpy as np

from specula import events as ev
from specula.ordering.net import NetOutput, net_rows

__all__ = ["NetView", "ReportedNet"]


class NetView(Protocol):
    """What a report's net output answers: a :class:`~specula.ordering.net.NetOutput`
    (in-process) or a :class:`ReportedNet` (an actor's)."""

    dtype: np.dtype
    #: rows applied (events, updates and counter messages)
    applied: int

    def net(self) -> np.ndarray: ...

    def emissions(self, since: int | None = None) -> np.ndarray: ...

    def timeline(self) -> tuple[np.ndarray, np.ndarray]: ...

    def latencies(self) -> np.ndarray: ...

    def __len__(self) -> int: ...


class ReportedNet:
    """A net output, read-only: the batches it applied (``chunks``) and when
    (``times``), and its live events as rows of ``refs`` (batch index, row in that
    batch, first emission time), in the order the net output holds them (by producer,
    each in insertion order)."""

    def __init__(self, dtype: np.dtype, chunks: list[np.ndarray], times: np.ndarray,
                 refs: np.ndarray, applied: int) -> None:
        self.dtype = dtype
        self.chunks = chunks
        self.times = times
        self.refs = refs
        self.applied = applied

    @classmethod
    def of(cls, net: NetOutput) -> ReportedNet:
        """``net`` as it stands, for a report (its batches are shared, not copied)."""
        parts = net.parts()
        n = sum(len(live) for live in parts.live.values())
        flat = itertools.chain.from_iterable(
            itertools.chain.from_iterable(live.values() for live in parts.live.values()))
        refs = np.fromiter(flat, np.int64, 3 * n).reshape(n, 3)
        return cls(net.dtype, list(parts.chunks), np.array(parts.times, np.int64), refs,
                   net.applied)

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
                   np.concatenate([n.times for n in nets]), np.concatenate(refs),
                   sum(n.applied for n in nets))

    def __len__(self) -> int:
        return len(self.refs)

    def net(self) -> np.ndarray:
        """The live events in order of (ts, producer, seq); arrival fields zeroed."""
        return net_rows(self._gather()[0])

    def emissions(self, since: int | None = None) -> np.ndarray:
        """Everything applied, in order (what was applied at ``since`` or later, if
        given)."""
        chunks = [c for c, t in zip(self.chunks, self.times.tolist(), strict=True)
                  if since is None or t >= since]
        if not chunks:
            return np.empty(0, self.dtype)
        return ev.concat([c if c.dtype == self.dtype else ev.conform(c, self.dtype, drop=True)
                          for c in chunks], self.dtype)

    def timeline(self) -> tuple[np.ndarray, np.ndarray]:
        """(first emission time, latency) of every live event, in emission order."""
        rows, times = self._gather()
        order = np.argsort(times, kind="stable")
        return times[order], (times - rows["origin"])[order]

    def latencies(self) -> np.ndarray:
        """For every live event: first emission of its final version minus its origin."""
        rows, times = self._gather()
        return times - rows["origin"]

    def _gather(self) -> tuple[np.ndarray, np.ndarray]:
        """The live events' rows and first emission times, batch by batch (as the net
        output gathers them)."""
        if not len(self.refs):
            return np.empty(0, self.dtype), np.empty(0, np.int64)
        order = np.argsort(self.refs[:, 0], kind="stable")
        chunk, row = self.refs[order, 0], self.refs[order, 1]
        cuts = np.flatnonzero(np.diff(chunk)) + 1
        parts = []
        for start, end in zip([0, *cuts.tolist()], [*cuts.tolist(), len(chunk)], strict=True):
            part = np.take(self.chunks[int(chunk[start])], row[start:end])
            parts.append(part if part.dtype == self.dtype
                         else ev.conform(part, self.dtype, drop=True))
        return ev.concat_records(parts), self.refs[order, 2]
