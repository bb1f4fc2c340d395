"""The source actor: one part of a raw stream (:class:`~.sources.RawPart`), read and fed
to the level-1 actors as the driver steps it through arrival time (:mod:`.sources`).

``SourceWorker`` is a plain class (it runs without Ray too); the Ray runtime deploys one
per part, as a restartable actor. It holds about one batch of its part at a time.

Recovery. A source keeps no checkpoint: its pushes are a function of its part (cut at
every step and every ``batch_rows`` events, :func:`~.sources.step_cuts`), so a restarted
source reads its part again from the start (the Ray runtime gives it in a form every
restart can read: :func:`~.sources.restartable`) and regenerates them. Each consumer tells it
(:meth:`~.worker.DetectorWorker.recover_producer`, which also fences off the old
process's pushes still on their way) how many of its pushes the consumer's checkpoint
covers, which are dropped, and how many it holds beyond, which are kept for resending
as the old process kept them; the rest are sent. Ray retries the step the old process
had not answered, so the driver never learns of the restart but from the report.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from specula.actors.channels import Peers, Publisher, Route, answer
from specula.actors.placement import this_host
from specula.actors.recovery import Checkpoints
from specula.actors.routing import Router
from specula.actors.sources import SOURCE_SENDERS, Feeder, RawPart, next_batch, step_cuts
from specula.actors.tally import Tally


class SourceWorker:
    """Feeds one part of the raw stream: ``feed(until)`` sends the events that arrived
    before ``until``, ``finish()`` waits until every push is in and reports."""

    def __init__(self, part: RawPart, index: int, routes: list[Route], router: Router,
                 table: np.ndarray | None, ticks_per_second: float, step_ticks: int,
                 batch_rows: int, max_in_flight: int,
                 checkpoints: Checkpoints | None = None) -> None:
        self.part = part
        self.index = index
        self.sender = SOURCE_SENDERS + index
        self.step_ticks = step_ticks
        self.batch_rows = batch_rows
        store = checkpoints.store(f"source-{index}") if checkpoints else None
        self.incarnation = store.next_incarnation() if store else 0
        self.publisher = Publisher(max_in_flight, self.sender, self.incarnation,
                                   Tally(store, self.incarnation))
        self.actor = Peers()  # a consumer's actor, by handle or name
        self.feeder = Feeder(router, routes, self.publisher, table, ticks_per_second,
                             actor=self.actor)
        self._batches: Iterator[np.ndarray] | None = None
        self._rows: np.ndarray | None = None  # read, not sent yet
        self._ended = False
        self._lock = threading.Lock()  # one step at a time (a retried one included)
        if self.incarnation > 0:
            self._recover(routes)

    def start(self, clock: tuple[int, int] | None = None) -> None:
        """``clock``: this host's offset from the driver's clock and its error, ns
        (:mod:`.clocks`); arrivals are stamped on the driver's clock."""
        if clock is not None:
            self.feeder.clock_offset = int(clock[0])

    def status(self) -> dict[str, Any]:
        """The source's incarnation, its host and its host's wall clock (:mod:`.clocks`)."""
        return {"incarnation": self.incarnation, "clock_ns": time.time_ns(),
                "host": this_host()}

    def next_arrival(self) -> int | None:
        """The arrival (``ats``) of the part's next event to send; None at its end."""
        with self._lock:
            rows = self._read_until(None)
            return int(rows["ats"][0]) if len(rows) else None

    def feed(self, until: int, since: int | None = None) -> tuple[int, int | None]:
        """Send the events that arrived before ``until`` (a multiple of the step; the
        driver's previous step for this source ended at ``since``) and wait until they
        are in the consumers' inboxes; returns how many
        arrived from ``since`` on (a restarted source sends the earlier ones again, to
        whom lacks them), and the arrival of the next one (None: the part ended)."""
        with self._lock:
            rows = self._read_until(until)
            n = int(np.searchsorted(rows["ats"], until, side="left"))
            due, self._rows = rows[:n], rows[n:]
            for a, b in step_cuts(due["ats"], self.step_ticks, self.batch_rows):
                self.feeder.feed(due[a:b])
            # the step ends when its pushes are in the consumers' inboxes: the next one's
            # cannot overtake another source's pushes of this one on their way
            self.publisher.drain()
            new = n - (int(np.searchsorted(due["ats"], since, side="left"))
                       if since is not None else 0)
            return new, (int(self._rows["ats"][0]) if len(self._rows) else None)

    def finish(self) -> dict[str, Any]:
        """Wait until every push is in its consumer's inbox; the source's report."""
        self.publisher.drain()
        return {"index": self.index, "sender": self.sender,
                "sent": {c: ch.sent for c, ch in self.publisher.channels.items()},
                "events": self.feeder.events,
                "seconds": self.feeder.played_seconds,
                "restarts": self.incarnation,
                "resent": self.publisher.tally.totals()["resent"],
                "host": this_host()}

    def resend(self, consumer: int, epoch: int, position: int) -> int:
        """Resend to a restarted ``consumer`` (incarnation ``epoch``, holding ``position``
        of this source's pushes) what its checkpoint does not cover."""
        return self.publisher.resend(consumer, epoch, position)

    def _read_until(self, until: int | None) -> np.ndarray:
        """The events read and not sent, after reading on until they reach ``until``
        (None: until there is one), or the part ends."""
        if self._batches is None:
            self._batches = iter(self.part.batches(self.batch_rows))
        while not self._ended and (self._rows is None or not len(self._rows) or (
                until is not None and int(self._rows["ats"][-1]) < until)):
            more = next_batch(self._batches)
            if more is None:
                self._ended = True
            else:
                self._rows = more if self._rows is None else np.concatenate([self._rows, more])
        if self._rows is None:
            self._rows = np.zeros(0, [("ats", np.int64)])
        return self._rows

    def _recover(self, routes: list[Route]) -> None:
        """A restarted source: fence off the old process and learn, per consumer, what
        to drop, keep and send of the pushes it regenerates."""
        for route in routes:
            for consumer, ref in zip(route.consumers, route.actors, strict=True):
                actor = self.actor(ref)
                held = answer(actor.recover_producer.remote(self.sender, self.incarnation))
                self.publisher.regenerate(self.publisher.channel(consumer, actor),
                                          covered=held[4], held=held[3], epoch=held[5])
