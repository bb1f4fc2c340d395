"""What recovery did at one actor, counted over all its processes: pushes dropped and
pushes resent.

An actor's report has three kinds of figures, and a restart treats each its own way.

* Counts of its *timeline*: its unit's (events in, emitted, late, replayed), its net
  output and late events, what its gate shed (:meth:`~.inbox.Gate.counts`). They go
  back with a restart to the last checkpoint, and the restarted process counts the
  steps after it again as it takes them again: they are the counts of the one
  timeline its net output comes from, as a crash-free run's (an event shed by a
  process that died is taken again, and counted once, as shed or not).
* Counts of *recovery*, which this module keeps: what happened to its processes, which
  a restart does not do again (a push dropped as a duplicate by a process that then
  died may never come again, or come again and be dropped again). They add up over
  all processes, as Flink's ``numRestarts`` does over a job's attempts, where a task's
  own metrics start from zero with each attempt and leave a reader with less than
  happened. ``restarts`` (the incarnation) and the checkpoints written are in storage
  too, and count over all processes.
* Measurements of the last process: inbox waits and latencies, rows pushed and
  processed, CPU, memory (Flink's per-attempt metrics).

The counts of recovery:

* ``duplicates``: pushes answered as duplicates (numbered below what the actor held);
  a push dropped by two processes, the second time after a restart, counts twice;
* ``divergent``: of those, the ones unlike the push held (:func:`~.recovery.digest`);
* ``fenced``: pushes of a sender process fenced off (one that has restarted since);
* ``stale``: pushes bounced for a stale epoch (sent to an earlier process of this
  actor), which their sender resends;
* ``resent``: pushes this actor (a detector or a source) queued again for a consumer
  that restarted or asked for them.

A count must not be lost with the process that made it, so it is not in the
checkpoint, which a restart goes back to: each process stores its own counts in its
actor's storage (the object ``tally-<incarnation>``) before it answers the push that
made them, or sends the pushes it resends; the writes of concurrent calls are one
(:meth:`Tally.persist`). A push that a crash left unanswered is retried on the new
process, which counts it if it drops it. The report reads the counts of every earlier
process (:meth:`Tally.totals`). Without storage there are no restarts, and the counts
are the process's.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import msgpack

if TYPE_CHECKING:
    from specula.actors.recovery import Store

#: What a tally counts (see the module).
COUNTS = ("duplicates", "divergent", "fenced", "stale", "resent")


class Tally:
    """The recovery counts of one process (``incarnation``) of an actor, stored in
    ``store`` (None: kept in memory only).

    Examples
    --------
    A process drops a duplicate and stores the count before it answers; it dies, and
    the restarted one drops two more:

    >>> import tempfile
    >>> from specula.actors.recovery import Checkpoints
    >>> from specula.actors.signing import random_key
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     store = Checkpoints(folder, "run", key=random_key()).store("a_not_bc-0")
    ...     first, restarted = Tally(store, 0), Tally(store, 1)
    ...     first.add("duplicates")
    ...     first.persist()
    ...     restarted.add("duplicates", 2)
    ...     print(restarted.count("duplicates"), restarted.totals()["duplicates"])
    2 3
    """

    def __init__(self, store: Store | None = None, incarnation: int = 0) -> None:
        self.store, self.incarnation = store, incarnation
        self._counts = dict.fromkeys(COUNTS, 0)
        self._cond = threading.Condition()
        self._made = self._stored = 0  # changes counted; of them, stored
        self._writing = False

    def add(self, name: str, n: int = 1) -> None:
        """Count ``n`` more of ``name`` (one of :data:`COUNTS`); stored by the next
        :meth:`persist`."""
        with self._cond:
            self._counts[name] += n
            self._made += 1

    def persist(self) -> None:
        """Return once every count made so far is stored: write them, or wait for the
        write on its way if it started after the last of them (a group commit)."""
        if self.store is None:
            return
        with self._cond:
            target = self._made
            while self._stored < target:
                if self._writing:
                    self._cond.wait()
                    continue
                self._writing = True
                made, data = self._made, msgpack.packb(self._counts)
                self._cond.release()
                try:
                    self.store.write(_name(self.incarnation), data)
                finally:
                    self._cond.acquire()
                    self._writing = False
                    self._cond.notify_all()
                self._stored = made

    def count(self, name: str) -> int:
        """This process's count of ``name``."""
        with self._cond:
            return self._counts[name]

    def totals(self) -> dict[str, int]:
        """Every count over all processes of the actor: this one's and those the earlier
        ones stored."""
        with self._cond:
            totals = dict(self._counts)
        for earlier in range(self.incarnation if self.store is not None else 0):
            data = self.store.read(_name(earlier)) if self.store is not None else None
            if data is not None:
                for name, n in msgpack.unpackb(data).items():
                    totals[name] = totals.get(name, 0) + int(n)
        return totals


def _name(incarnation: int) -> str:
    return f"tally-{incarnation}"
