"""A chain: several detector instances in one actor process, as Flink chains operators
into one task.

A :class:`ChainWorker` hosts one :class:`~.worker.DetectorWorker` per instance of its
chain, each with all that makes it a detector of the system: its inbox, gate and
shedder, ordering unit, processing thread, checkpoints and recovery, its report. What
differs is how batches travel: a push between two instances of one chain is handed over
in memory (:class:`LocalHandle`: the consumer's own ``push``, with the batch as it is,
read-only, and no Ray call; made in the producer's thread when it need not wait, else
on a thread of the chain's pool), while pushes between chains, and every call from the
driver or a source, come through Ray to :meth:`ChainWorker.call`, which runs the
instance's method as a threaded actor of its own would; a raw batch for several members
comes in one call, :meth:`ChainWorker.push_all`. The hand-over keeps the semantics of a
Ray call (a push that waits does so on another thread, in any order among the
concurrent ones, and the answer is a future), so the push protocol and its recovery
work unchanged inside a chain. A member's pushes to another chain's members go
through an :class:`~.outbox.Outbox` per other chain, which sends the pushes of members
that step together in one call, :meth:`ChainWorker.deliver`.

A chain restarts as a unit: Ray runs the constructor again after a crash, and each
instance restores its own last checkpoint and recovers as a restarted actor of its own
does (:mod:`.recovery`); instances of the same chain find each other through the chain
(:meth:`ChainWorker.worker` waits for one the constructor has not made yet). A member's
checkpoint also holds its mates' determinants (:mod:`.recovery`, "Chains").
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from specula.actors.actor_recovery import ActorRecovery
from specula.actors.addresses import Member
from specula.actors.channels import Peers, Reply, Route
from specula.actors.outbox import WAIT_S, ChainSteps, Outbox, OutboxHandle
from specula.actors.recovery import Checkpoints
from specula.actors.routing import Router
from specula.actors.sources import forget_slabs
from specula.actors.worker import DetectorWorker
from specula.detectors.graph import Instance
from specula.events import TypeRegistry

__all__ = ["CALLS", "ChainMember", "ChainWorker", "LocalHandle"]

#: The methods of an instance that others call (Ray's ``call``, the local hand-over).
CALLS = frozenset({"push", "flush", "suspend", "resend", "recover_producer", "forget",
                   "checkpoint", "status", "report", "start"})


class ChainMember(NamedTuple):
    """One instance of a chain, with where its output goes (``routes``) and which actors
    publish to it (``producers``: producer id and address), as a
    :class:`~.worker.DetectorWorker` takes them."""

    instance: Instance
    routes: list[Route]
    producers: list[tuple[int, Any]]


class _LocalMethod:
    """One method of an instance of the same chain, called as Ray calls a method."""

    __slots__ = ("_chain", "_name", "_producer")

    def __init__(self, chain: ChainWorker, producer: int, name: str) -> None:
        self._chain, self._producer, self._name = chain, producer, name

    def remote(self, *args: Any) -> Future:
        return self._chain.submit(self._producer, self._name, args)


class LocalHandle:
    """An instance of the same chain, as a handle: ``handle.push.remote(batch, ...)``
    runs its ``push`` on a thread of the chain's pool and returns a future."""

    def __init__(self, chain: ChainWorker, producer: int) -> None:
        self.chain = chain
        self.producer = producer

    def __getattr__(self, name: str) -> _LocalMethod:
        if name not in CALLS:
            raise AttributeError(name)
        return _LocalMethod(self.chain, self.producer, name)


class ChainWorker:
    """The instances of one chain (``members``) in one process; ``name`` is the chain's
    name in the report, ``address`` its Ray actor's name (the chain of every
    :class:`~.addresses.Member` that lives here).

    The other arguments are those of :class:`~.worker.DetectorWorker`, which each
    member gets. ``threads`` bounds the pool that runs the in-memory hand-overs and the
    members' pushes of :meth:`push_all`: a push may wait in its thread for an earlier
    one of its sender, so the pool needs one for every push that can be in flight to a
    member from another member or in a ``push_all`` (and a few for the requests of a
    restarted member).
    """

    def __init__(self, name: str, address: str, members: list[ChainMember],
                 registry: TypeRegistry, max_in_flight: int, inbox_events: int, *,
                 router: Router, checkpoints: Checkpoints | None = None, step_events: int,
                 threads: int, buffer_timeout_s: float = WAIT_S) -> None:
        self.name = name
        self.address = address
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix=f"specula-{name}")
        self._cond = threading.Condition()
        self._workers: dict[int, DetectorWorker] = {}
        self._order = [m.instance.producer for m in members]
        self._steps = ChainSteps()
        self._buffer_timeout_s = buffer_timeout_s
        self._outboxes: dict[str, Outbox] = {}  # by the other chain's address
        self._chains = Peers()  # other chain actors, by name
        for m in members:
            p = m.instance.producer
            mates = functools.partial(self._mates, p) if len(members) > 1 else None
            worker = DetectorWorker(m.instance, registry, max_in_flight, inbox_events,
                                    router=router, routes=m.routes, producers=m.producers,
                                    checkpoints=checkpoints, step_events=step_events,
                                    peers=Peers(functools.partial(self._handle, p)),
                                    chain=name, mates=mates,
                                    stepping=functools.partial(self._steps.stepping, p))
            with self._cond:
                self._workers[m.instance.producer] = worker
                self._cond.notify_all()

    def call(self, producer: int, method: str, *args: Any) -> Any:
        """Run ``method`` (one of :data:`CALLS`) of the instance ``producer``: how the
        driver, the sources and the other chains reach an instance of this one."""
        if method not in CALLS:
            raise AttributeError(f"{method!r} is not a method an instance is called by")
        return getattr(self.worker(producer), method)(*args)

    def push_all(self, members: list[tuple[int, int, int]], batch: np.ndarray, sender: int,
                 incarnation: int) -> list[Reply]:
        """One batch of ``sender`` (a raw batch) for several members, each given as
        (producer id, the push's number among the sender's pushes to it, its epoch as
        the sender knows it): the one call a producer makes for all the members that
        take the batch (:meth:`~.channels.Publisher.send_all`). Each member's push runs
        on the pool, as a call of its own would, with the batch read-only; returns their
        replies, in order."""
        futures = [self.submit(p, "push", (batch, sender, n, incarnation, epoch))
                   for p, n, epoch in members]
        return [f.result() for f in futures]

    def deliver(self, pushes: list[tuple[int, tuple[Any, ...]]]) -> list[Reply]:
        """Pushes from the members of another chain (its :class:`~.outbox.Outbox`), each
        given as (producer id of the member it is for, the arguments of its
        :meth:`~.worker.DetectorWorker.push`): each runs as a call of its own would, on
        the pool where it waits (:meth:`submit`); returns their replies, in order."""
        futures = [self.submit(p, "push", args) for p, args in pushes]
        return [f.result() for f in futures]

    def status(self) -> dict[str, Any]:
        """The chain's name, its members' labels and its incarnation (its members
        restart together; without checkpoints it stays 0)."""
        with self._cond:
            workers = list(self._workers.values())
        return {"chain": self.name, "members": [w.instance.label for w in workers],
                "incarnation": max((w.recovery.incarnation for w in workers), default=0)}

    def close(self) -> None:
        """The run has ended (every member flushed or suspended, its thread stopped):
        let go of the driver's slabs and stop the pool's threads, for a process that goes
        on to another run
        (:mod:`.pool`)."""
        with self._cond:
            outboxes = list(self._outboxes.values())
        for outbox in outboxes:
            outbox.close()
        forget_slabs()
        self._pool.shutdown(wait=False)

    def worker(self, producer: int) -> DetectorWorker:
        """The member ``producer``, waiting while the constructor has not made it yet (a
        restarted member recovers, and calls its neighbours, while the others are made)."""
        with self._cond:
            while producer not in self._workers:
                self._cond.wait()
            return self._workers[producer]

    def _mates(self, producer: int) -> list[ActorRecovery]:
        """The recovery of every member but ``producer``, downstream first (the members
        are in topological order), waiting for those not made yet."""
        return [self.worker(p).recovery for p in reversed(self._order) if p != producer]

    def submit(self, producer: int, method: str, args: tuple[Any, ...]) -> Future:
        """Run a member's method (the in-memory hand-over): a push that need not wait
        (:meth:`~.worker.DetectorWorker.push` without ``wait``) in the caller's thread,
        anything else on the pool; a pushed batch goes as a read-only view, as a Ray
        call would deliver it. The answer is a future either way."""
        if method != "push":
            return self._pool.submit(self._run, producer, method, args)
        batch = args[0]
        if isinstance(batch, np.ndarray):  # not a RawSlice of the driver's stream
            batch = batch.view()
            batch.flags.writeable = False
            args = (batch, *args[1:])
        done: Future = Future()
        try:
            reply = self.worker(producer).push(*args, wait=False)
        except BaseException as exc:  # the consumer's error, for the caller's answer
            done.set_exception(exc)
            return done
        if reply is None:  # it would wait: on a thread of the pool
            return self._pool.submit(self._run, producer, method, args)
        done.set_result(reply)
        return done

    def _run(self, producer: int, method: str, args: tuple[Any, ...]) -> Any:
        return getattr(self.worker(producer), method)(*args)

    def _handle(self, sender: int, member: Member) -> LocalHandle | OutboxHandle:
        """``member`` as member ``sender`` reaches it: in memory if it lives in this
        chain, else through the outbox to its chain (:mod:`.outbox`)."""
        if member.chain == self.address:
            return LocalHandle(self, member.producer)
        with self._cond:
            outbox = self._outboxes.get(member.chain)
            if outbox is None:
                outbox = self._outboxes[member.chain] = Outbox(
                    functools.partial(self._chains, member.chain), self._steps,
                    self._buffer_timeout_s)
        outbox.sender(sender)
        return OutboxHandle(outbox, functools.partial(self._chains, member.chain),
                            member.producer)


def local_edges(members: list[Instance], hears: Any) -> int:
    """Pairs of members where the first publishes to the second (``hears(consumer node,
    producer node)``): the hand-overs that can be in flight inside a chain."""
    return sum(1 for c in members for p in members
               if c is not p and hears(c.node.name, p.node.name))

