"""The producer's side of the push protocol between actors: numbered pushes, a window
of unacknowledged ones, and what a consumer has not yet checkpointed, to resend.

Every push from a sender (an instance's producer id, 0 for the source) to a consumer is
numbered per (sender, consumer) from 0 and carries the sender's incarnation, the
consumer's incarnation as the sender knows it (its *epoch*) and, from an actor, the
determinants of the sender's steps (:mod:`.recovery`). The consumer answers a
:class:`Reply`: its incarnation, how many of the sender's pushes its last checkpoint
covers, and how many it holds. The sender keeps every push its consumer's checkpoint
does not cover yet (:attr:`Channel.kept`), and drops them as replies say they are
covered. A reply with a newer incarnation says the consumer restarted from a
checkpoint: the sender resends what it kept from the position the consumer holds, and
tags what follows with the new epoch. A consumer that restarts asks its actor producers
to resend at once (:meth:`Publisher.resend`), since a producer with nothing more to say
would otherwise never learn of the restart; the source learns it from its next push,
or when the runtime flushes the consumer.

The window (``max_in_flight`` unacknowledged pushes per consumer) only pipelines the
calls; the consumer's inbox bounds the events between them (:mod:`.worker`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from specula.actors.addresses import InstanceHandle, Member
from specula.actors.recovery import pack_dets
from specula.actors.tally import Tally
from specula.ordering.checkpoint import pack_array, unpack_array


def answer(ref: Any) -> Any:
    """The result of a call: ``ray.get`` of an object ref, or a future's result (the
    tests drive actors in threads, without Ray)."""
    if hasattr(ref, "result"):
        return ref.result()
    import ray

    return ray.get(ref)


def named_actor(name: str, wait_s: float = 60.0) -> Any:
    """The Ray actor called ``name``, waiting up to ``wait_s`` seconds for it to exist:
    the actors of a resumed run restore and look up their peers while the driver is
    still creating them."""
    import ray

    deadline = time.monotonic() + wait_s
    while True:
        try:
            return ray.get_actor(name)
        except ValueError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class Peers:
    """Other actors as handles: a handle is used as it is, a name is looked up once
    (:func:`named_actor`; a restarted actor finds its peers by name), and an instance's
    :class:`~.addresses.Member` becomes ``local(member)`` where that gives one (the
    in-memory hand-over of an instance of the same chain, :mod:`.chain`), else an
    :class:`~.addresses.InstanceHandle` on its chain actor, looked up by name."""

    def __init__(self, local: Callable[[Member], Any] | None = None) -> None:
        self._handles: dict[Any, Any] = {}
        self._local = local

    def __call__(self, ref: Any) -> Any:
        if isinstance(ref, Member):
            if ref not in self._handles:
                near = self._local(ref) if self._local is not None else None
                self._handles[ref] = near if near is not None else InstanceHandle(
                    self(ref.chain), ref.producer)
            return self._handles[ref]
        if not isinstance(ref, str):
            return ref
        if ref not in self._handles:
            self._handles[ref] = named_actor(ref)
        return self._handles[ref]


class Reply(NamedTuple):
    """What a consumer answers a push."""

    #: the consumer's incarnation (0 until it first restarts)
    epoch: int
    #: pushes of this sender that the consumer's last checkpoint covers
    acked: int
    #: pushes of this sender the consumer holds (the number of the next one it takes)
    position: int


class Route:
    """Where one subscriber node's part of the output goes: its instances, by producer
    id, and their actors (a Ray handle, or a name that :class:`Peers` looks up)."""

    def __init__(self, node: str, partitions: int, consumers: list[int],
                 actors: list[Any]) -> None:
        self.node = node
        self.partitions = partitions
        self.consumers = consumers
        self.actors = actors


class Channel:
    """One consumer, as its producer sees it."""

    def __init__(self, consumer: int, actor: Any) -> None:
        self.consumer = consumer
        self.actor = actor
        self.sent = 0                # pushes numbered so far
        self.epoch = 0               # the consumer's incarnation, as last heard
        self.last_step = -1          # the last step whose determinants went with a push
        #: (n, batch, determinants) of every push the consumer's checkpoint does not cover
        self.kept: deque[tuple[int, np.ndarray, Any]] = deque()
        self.pending: deque[Any] = deque()  # object refs of unanswered pushes
        #: pushes to make once the window allows: (n, batch, determinants, resend)
        self.queue: deque[tuple[int, np.ndarray, Any, bool]] = deque()
        #: a restarted sender regenerating its pushes: those below ``covered`` are in the
        #: consumer's checkpoint (dropped), those below ``held`` in its inbox (kept only)
        self.covered = 0
        self.held = 0


class _Share:
    """One consumer's answer among those of a call made for several
    (:meth:`Publisher.send_all`): the ``k``-th of the call's replies."""

    __slots__ = ("_k", "_ref")

    def __init__(self, ref: Any, k: int) -> None:
        self._ref, self._k = ref, k

    def result(self) -> Any:
        return answer(self._ref)[self._k]


class Publisher:
    """Numbered pushes to consumers, at most ``max_in_flight`` unanswered per consumer,
    and the pushes each consumer's checkpoint does not cover, for resending.

    ``sender`` names the pushing side (an instance's producer id, 0 for the source) and
    ``incarnation`` the process (a restarted actor's pushes fence off its old ones).
    One lock guards the channels: the processing thread sends, Ray's threads resend.
    """

    def __init__(self, max_in_flight: int, sender: int = 0, incarnation: int = 0,
                 tally: Tally | None = None) -> None:
        self.max_in_flight = max_in_flight
        self.sender = sender
        self.incarnation = incarnation
        self.channels: dict[int, Channel] = {}
        self.sent_batches = 0
        #: counts the pushes resent, over all processes of the sender (:mod:`.tally`)
        self.tally = tally if tally is not None else Tally()
        self._lock = threading.RLock()

    def channel(self, consumer: int, actor: Any) -> Channel:
        """The channel to ``consumer`` (its producer id), made on first use."""
        with self._lock:
            ch = self.channels.get(consumer)
            if ch is None:
                ch = self.channels[consumer] = Channel(consumer, actor)
            elif ch.actor is None:
                ch.actor = actor
            return ch

    def send(self, ch: Channel, batch: np.ndarray, dets: Any = None) -> None:
        """Push ``batch`` (with the sender's determinants ``dets``) to the consumer of
        ``ch``; waits while ``max_in_flight`` pushes to it are unanswered."""
        with self._lock:
            n = self._number(ch, batch, dets)
            if n is not None:
                ch.queue.append((n, batch, dets, False))
        self._wait(ch, self.max_in_flight)

    def send_all(self, chs: list[Channel], batch: Any) -> None:
        """Push the same ``batch`` (an array, or Ray's reference to one) to the consumers
        of ``chs``, as :meth:`send` does to each, but in one Ray call per chain actor
        for those that are instances of one (:meth:`.ChainWorker.push_all`: a raw batch
        enters a chain once, not once per member that hears it). It waits for room in
        every consumer's window first; one with pushes still queued (a resend after a
        restart) gets its own push, in turn."""
        for ch in chs:  # room in every window first: then the batch goes in one call
            self._wait(ch, self.max_in_flight - 1)
        together: dict[int, list[tuple[Channel, int]]] = {}
        with self._lock:
            for ch in chs:
                n = self._number(ch, batch, None)
                if n is None:
                    continue
                if (isinstance(ch.actor, InstanceHandle) and not ch.queue
                        and len(ch.pending) < self.max_in_flight):
                    together.setdefault(id(ch.actor.actor), []).append((ch, n))
                else:
                    ch.queue.append((n, batch, None, False))
            for members in together.values():
                chain = members[0][0].actor.actor
                ref = chain.push_all.remote(
                    [(ch.actor.producer, n, ch.epoch) for ch, n in members], batch,
                    self.sender, self.incarnation)
                for k, (ch, _) in enumerate(members):
                    ch.pending.append(_Share(ref, k))
        for ch in chs:
            self._wait(ch, self.max_in_flight)

    def _number(self, ch: Channel, batch: Any, dets: Any) -> int | None:
        """Under the lock: number the next push to ``ch`` and keep it for resending;
        None if it is not to be made (a restarted sender's regenerated push that the
        consumer holds, :meth:`regenerate`)."""
        n = ch.sent
        ch.sent += 1
        if n < ch.covered:
            return None
        ch.kept.append((n, batch, dets))
        if n < ch.held:
            return None
        self.sent_batches += 1
        return n

    def regenerate(self, ch: Channel, covered: int, held: int, epoch: int) -> None:
        """This sender restarted and numbers its pushes to ``ch`` from 0 again: the
        consumer (incarnation ``epoch``) has the first ``held``, and its checkpoint
        covers the first ``covered``; send only those after ``held``."""
        with self._lock:
            ch.covered, ch.held, ch.epoch = covered, held, epoch

    def drain(self) -> None:
        """Wait until every push sent so far is answered (its batch is in its consumer's
        inbox, or was resent after the consumer restarted and is in now)."""
        for ch in list(self.channels.values()):
            self._wait(ch, 0)

    def in_flight(self) -> int:
        with self._lock:
            return sum(len(ch.pending) + len(ch.queue) for ch in self.channels.values())

    def resend(self, consumer: int, epoch: int, position: int) -> int:
        """The consumer ``consumer`` (incarnation ``epoch``) holds ``position`` of this
        sender's pushes: resend the kept ones from there and wait until they are in.
        Returns the pushes resent."""
        ch = self.channels.get(consumer)
        if ch is None:
            return 0
        with self._lock:
            n = self._resend(ch, max(epoch, ch.epoch), position)
        self._wait(ch, 0)
        return n

    def state(self) -> list[Any]:
        """Every channel's numbering and kept pushes, msgpack-ready, for a checkpoint."""
        with self._lock:
            return [[c, ch.sent, ch.epoch, ch.last_step,
                     [[n, pack_array(b), pack_dets(d)] for n, b, d in ch.kept]]
                    for c, ch in self.channels.items()]

    def restore(self, state: list[Any], actor: Callable[[int], Any]) -> None:
        """Set the channels back to a checkpoint's :meth:`state` (``actor``: a consumer's
        actor by its producer id)."""
        with self._lock:
            for c, sent, epoch, last_step, kept in state:
                ch = self.channel(int(c), actor(int(c)))
                ch.sent, ch.epoch, ch.last_step = sent, epoch, last_step
                ch.kept.extend((n, unpack_array(b), d) for n, b, d in kept)

    def kept_events(self) -> int:
        """Events kept for resending, over all consumers."""
        with self._lock:
            return sum(len(b) for ch in self.channels.values() for _, b, _ in ch.kept)

    # ------------------------------------------------------------------ plumbing
    def _wait(self, ch: Channel, limit: int) -> None:
        """Make the queued pushes the window allows, and take answers until at most
        ``limit`` pushes to ``ch`` are queued or unanswered. Resends share the window:
        a consumer has a thread for each push of a sender that can be in flight, and a
        push that waits for an earlier one must not keep that one from a thread."""
        while True:
            with self._lock:
                while ch.queue and len(ch.pending) < self.max_in_flight:
                    n, batch, dets, resend = ch.queue.popleft()
                    ch.pending.append(ch.actor.push.remote(
                        batch, self.sender, n, self.incarnation, ch.epoch, dets, resend))
                if len(ch.pending) + len(ch.queue) <= limit:
                    return
                ref = ch.pending.popleft()
            self._settle(ch, Reply(*answer(ref)))

    def _settle(self, ch: Channel, reply: Reply) -> None:
        """Act on a consumer's answer: forget what its checkpoint covers, or resend after
        it restarted."""
        with self._lock:
            if reply.epoch > ch.epoch:
                self._resend(ch, reply.epoch, reply.position)
            elif reply.epoch == ch.epoch:
                while ch.kept and ch.kept[0][0] < reply.acked:
                    ch.kept.popleft()

    def _resend(self, ch: Channel, epoch: int, position: int) -> int:
        """Under the lock: tag pushes with ``epoch`` from now on and queue the kept pushes
        from ``position`` on again (the answers to older pushes no longer matter), their
        count stored first (:mod:`.tally`)."""
        ch.epoch = epoch
        ch.pending.clear()
        ch.queue.clear()
        again = [(i, batch, dets, True) for i, batch, dets in ch.kept if i >= position]
        ch.queue.extend(again)
        if again:  # the count is stored before they go: they are sent under this lock
            self.tally.add("resent", len(again))
            self.tally.persist()
        return len(again)
