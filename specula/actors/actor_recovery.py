"""One detector actor's part in the recovery protocol of :mod:`.recovery`: the
positions of its senders' pushes, the fences, the determinants it logs and those it
keeps for its producers, its checkpoints, and what it does after a restart.

:class:`ActorRecovery` is the collaborator the actor loop
(:class:`~.worker.DetectorWorker`) hands every question of the protocol to: whether a
push is in turn, a duplicate or fenced off (:meth:`ActorRecovery.turn`), what a reply
says (:meth:`ActorRecovery.reply`), which batches a restarted actor takes again
(:meth:`ActorRecovery.planned_step`), what a push carries (:meth:`ActorRecovery.dets_for`),
when to checkpoint and how (:meth:`ActorRecovery.checkpoint`, :meth:`ActorRecovery.restore`,
:meth:`ActorRecovery.recover`). It shares the actor's lock: the methods that say so run
with it held by the caller; the others take it where they touch what the push calls read.
Without checkpoint storage it still numbers and fences pushes (a threaded actor runs
the pushes of one sender in any order), and logs nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, NamedTuple

import numpy as np

from specula.actors.channels import Channel, Publisher, Reply, answer
from specula.actors.output_log import ActorOutput
from specula.actors.recovery import (
    CHECKPOINT_VERSION,
    DIGESTS_KEPT,
    Checkpoints,
    Determinants,
    StepLog,
    Store,
    digest,
    pack_checkpoint,
    unpack_checkpoint,
)
from specula.actors.sources import DRIVER
from specula.actors.tally import Tally
from specula.ordering.checkpoint import restore_unit, unit_state
from specula.ordering.unit import OrderingUnit

__all__ = ["ActorRecovery", "CheckpointStats", "LoopPosition", "Turn"]


class Turn(Enum):
    """What a push may do now (:meth:`ActorRecovery.turn`)."""

    #: answered at once, not held: a duplicate, a fenced-off sender or a stale epoch
    DROP = "drop"
    #: an earlier push of its sender is not in yet: wait for it
    WAIT = "wait"
    #: next in its sender's order (or unnumbered): in once the inbox has room
    READY = "ready"


class LoopPosition(NamedTuple):
    """What a checkpoint holds of the actor loop besides its unit, output and channels."""

    #: the progress last published to the subscribers (:func:`~.routing.punctuate`)
    published: int | None
    #: events the final flush generated (None: not ended)
    ended: int | None
    #: this host's clock minus the driver's, and the error of that estimate, ns
    clock: tuple[int, int]
    #: what the gate shed (:meth:`~.inbox.Gate.counts`)
    shed: list[Any]


@dataclass
class CheckpointStats:
    """Checkpoints written by the actor (over its restarts: each holds its number), their
    seconds in all (those of the one a restarted process went back to, which it holds
    from before it was written, aside) and the size of the last one."""

    count: int = 0
    seconds: float = 0.0
    bytes: int = 0

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


class ActorRecovery:
    """The recovery protocol at one actor (``producer``, labelled ``label``), over its
    ``unit``, ``output`` and ``publisher``; ``lock`` is the actor's.

    ``store`` (opened from ``checkpoints``) is where it checkpoints, None for none; the
    actor's ``incarnation`` is the one the store gave this process (0 without one), and
    ``tally`` counts the pushes it drops (and its publisher's resends) over all its
    processes (:mod:`.tally`).
    ``mates`` gives the recovery of the other members of its chain, downstream first
    (None outside a chain of several): a checkpoint holds their determinants too.
    """

    def __init__(self, label: str, producer: int, unit: OrderingUnit, output: ActorOutput,
                 publisher: Publisher, lock: threading.Condition, *,
                 checkpoints: Checkpoints | None = None, store: Store | None = None,
                 incarnation: int = 0, tally: Tally,
                 mates: Callable[[], Sequence[ActorRecovery]] | None = None) -> None:
        self.label, self.producer = label, producer
        self.unit, self.output, self.publisher = unit, output, publisher
        self._lock = lock
        self.checkpoints, self.store = checkpoints, store
        self.incarnation = incarnation
        self._next: dict[int, int] = {}     # per sender: pushes held (taken or waiting)
        self._taken: dict[int, int] = {}    # per sender: pushes taken
        self._acked: dict[int, int] = {}    # per sender: pushes the last checkpoint took
        self._fence: dict[int, int] = {}    # per sender: its oldest incarnation that counts
        self._logs: dict[int, StepLog] = {}  # each producer's determinants
        self._digests: dict[int, dict[int, int]] = {}  # per sender: push number -> digest
        self._dets = Determinants()
        self._mates = mates
        self._mate_logs: dict[int, StepLog] = {}  # chain mates' determinants, restored
        self.tally = tally
        self.stats = CheckpointStats()
        self._since, self._last = 0, time.monotonic()  # batches, time since the last one

    @property
    def enabled(self) -> bool:
        """Whether the actor checkpoints (it has storage)."""
        return self.store is not None

    # ------------------------------------------------------------ pushes (lock held)
    def turn(self, sender: int, n: int | None, incarnation: int, epoch: int,
             batch: np.ndarray) -> Turn:
        """With the lock held: whether push ``n`` of ``sender`` (from its process
        ``incarnation``, to this actor's ``epoch`` as it knows it) is dropped, waits
        for an earlier one, or is next. A drop is counted here (:mod:`.tally`: the
        caller stores the count before it answers)."""
        if incarnation < self._fence.get(sender, 0):
            self.tally.add("fenced")
            return Turn.DROP
        if epoch < self.incarnation:
            self.tally.add("stale")
            return Turn.DROP
        held = self._next.get(sender, 0)
        if n is not None and n < held:
            self._duplicate(sender, n, batch)
            return Turn.DROP
        return Turn.READY if n is None or n == held else Turn.WAIT

    def received(self, sender: int, n: int | None, batch: np.ndarray, dets: Any) -> None:
        """With the lock held: push ``n`` of ``sender``, carrying its determinants
        ``dets``, is in the inbox."""
        if n is not None:
            self._next[sender] = n + 1
        if dets is not None:
            self._logs.setdefault(sender, StepLog()).extend(*dets)
        if n is not None and self.store is not None and sender != DRIVER:
            seen = self._digests.setdefault(sender, {})
            seen[n] = digest(batch)
            if len(seen) > DIGESTS_KEPT:
                del seen[next(iter(seen))]

    def reply(self, sender: int) -> Reply:
        """With the lock held: the answer to a push of ``sender``."""
        return Reply(self.incarnation, self._acked.get(sender, 0), self._next.get(sender, 0))

    def missing(self, expected: dict[int, int] | None) -> dict[int, int]:
        """With the lock held: the position held of each sender of ``expected`` (pushes
        it sent here) whose pushes are not all in."""
        return {s: h for s, n in (expected or {}).items() if (h := self._next.get(s, 0)) < n}

    def fence(self, producer: int, incarnation: int) -> list[Any]:
        """With the lock held: ``producer`` restarted as ``incarnation``; its older
        processes' pushes are dropped from now on. Returns its determinants held here
        (base step, senders, alphas), its pushes held and taken by the last checkpoint,
        and this actor's incarnation."""
        if incarnation > self._fence.get(producer, 0):
            self._fence[producer] = incarnation
            self._lock.notify_all()
        log = self._logs.get(producer, StepLog())
        return [*log.as_list(), self._next.get(producer, 0), self._acked.get(producer, 0),
                self.incarnation]

    def _duplicate(self, sender: int, n: int, batch: np.ndarray) -> None:
        """Count push ``n`` of ``sender``, held already, and count it as divergent if it
        differs from the push held (a regenerated push must be the same)."""
        self.tally.add("duplicates")
        held = self._digests.get(sender, {}).get(n)
        if held is not None and held != digest(batch):
            self.tally.add("divergent")

    # ------------------------------------------------------------ steps (processing thread)
    @property
    def step(self) -> int:
        """Batches taken in all (the flush counts as one)."""
        return self._dets.step

    @property
    def batches_taken(self) -> int:
        """Pushes taken, over all senders (the flush aside)."""
        return sum(self._taken.values())

    def planned_step(self) -> list[int]:
        """With the lock held: the senders of the next step a restarted actor takes
        again, in order ([]: no plan, or the plan's flush, which comes when asked)."""
        return self._dets.planned_step()

    def planned_alpha(self) -> float | None:
        """The alpha of the plan's next step, which is being taken."""
        return self._dets.planned_alpha()

    def log_step(self, sender: int, alpha: float | None, joined: bool = False) -> None:
        """A batch of ``sender`` is taken (-1: the flush): log the sender and the alpha of
        its step (none if it ``joined`` the step of the batch before); replaying a step,
        run it under its ``alpha``."""
        if self.store is None:
            return
        ctl = self.unit.controller
        if alpha is not None and ctl is not None:
            ctl.force(alpha)
        # the controller's alpha: a memory back-off is decided again from the input
        self._dets.log(sender, None if joined else ctl.alpha if ctl is not None
                       else self.unit.alpha)

    def took(self, sender: int) -> None:
        """A push of ``sender`` went through the unit."""
        self._taken[sender] = self._taken.get(sender, 0) + 1

    def dets_for(self, ch: Channel) -> Any:
        """What a push to ``ch`` carries: the determinants since its last push (or the
        checkpoint's step); None without checkpoints."""
        if self.store is None:
            return None
        dets = self._dets.since(ch.last_step)
        ch.last_step = self._dets.step - 1
        return dets

    def own_log(self) -> StepLog:
        """This actor's determinants since its last checkpoint (from any thread)."""
        return self._dets.logged()

    def mate_log(self, producer: int) -> StepLog | None:
        """The determinants of chain mate ``producer`` that the restored checkpoint
        holds (None: none)."""
        return self._mate_logs.get(producer)

    def batch_done(self) -> bool:
        """A batch went through: whether a checkpoint is due (``every_batches`` batches
        or ``every_s`` seconds since the last)."""
        self._since += 1
        cp = self.checkpoints
        return self.store is not None and cp is not None and (
            self._since >= cp.every_batches or time.monotonic() - self._last >= cp.every_s)

    # ------------------------------------------------------------ checkpoints
    def checkpoint(self, loop: LoopPosition) -> None:
        """Write the state (and the net output applied since the last checkpoint) to
        storage; then tell producers, through the replies, what it covers."""
        store = self._need_store()
        t0 = time.perf_counter()
        self.output.save(self.unit.take_late())
        channels = self.publisher.state()
        with self._lock:
            logs = [[p, *log.as_list()] for p, log in self._logs.items()]
            digests = self._taken_digests()
        # after this actor's state is fixed, downstream first (module notes, "Chains")
        mates = [[m.producer, *m.own_log().as_list()] for m in self._mates()] \
            if self._mates is not None else []
        state = {"v": CHECKPOINT_VERSION, "unit": unit_state(self.unit),
                 "step": self._dets.step,
                 "taken": [[s, n] for s, n in self._taken.items()], "channels": channels,
                 "logs": logs, "mates": mates, "published": loop.published,
                 "output": self.output.state(),
                 "settled": self.unit.settled_seq,
                 "ended": loop.ended, "digests": digests, "clock": loop.clock,
                 "shed": loop.shed,
                 "checkpoints": [self.stats.count + 1, self.stats.seconds]}
        data = pack_checkpoint(state)
        store.write("checkpoint", data)
        self.output.committed()
        self._dets.committed()
        self._since, self._last = 0, time.monotonic()
        with self._lock:
            self._acked = dict(self._taken)
            self.stats.count += 1
            self.stats.seconds += time.perf_counter() - t0
            self.stats.bytes = len(data)
            self._lock.notify_all()

    def _taken_digests(self) -> list[list[Any]]:
        """With the lock held: per sender, the push numbers and digests of the pushes
        taken (those a checkpoint holds; the others come again, resent), msgpack-ready."""
        kept = []
        for sender, seen in self._digests.items():
            taken = [n for n in seen if n < self._taken.get(sender, 0)]
            kept.append([sender, taken, [seen[n] for n in taken]])
        return kept

    def restore(self, consumer_actor: Callable[[int], Any]) -> LoopPosition | None:
        """A restarted actor: back to the last checkpoint; returns the loop's part of it
        (None: no checkpoint yet, the actor starts from the beginning).
        ``consumer_actor`` gives a consumer's actor by its producer id."""
        data = self._need_store().read("checkpoint")
        if data is None:
            return None
        state = unpack_checkpoint(data, self.label)
        restore_unit(self.unit, state["unit"])
        self._dets = Determinants(state["step"])
        self._taken = {int(s): n for s, n in state["taken"]}
        self._next, self._acked = dict(self._taken), dict(self._taken)
        self.publisher.restore(state["channels"], consumer_actor)
        self._logs = {int(p): StepLog(base, senders, alphas)
                      for p, base, senders, alphas in state["logs"]}
        self._mate_logs = {int(p): StepLog(base, senders, alphas)
                           for p, base, senders, alphas in state.get("mates", [])}
        self.output.restore(state["output"])
        self._digests = {int(s): dict(zip(ns, ds, strict=True))
                         for s, ns, ds in state["digests"]}
        self.stats.count, self.stats.seconds = state["checkpoints"]
        clock = state["clock"]
        return LoopPosition(state["published"], state["ended"], (clock[0], clock[1]),
                            state["shed"])

    def recover(self, consumers: list[tuple[int, Any]],
                producers: list[tuple[int, Any]]) -> None:
        """After a restart: fence off the old process at the ``consumers`` (producer id,
        actor) and take from them this actor's determinants (the longest log, theirs or
        one a chain mate's checkpoint holds, is the plan) and what they hold of its
        pushes (resent from there); ask the ``producers`` to resend."""
        answers = [answer(a.recover_producer.remote(self.producer, self.incarnation))
                   for _, a in consumers]
        logs = [StepLog(*a[:3]) for a in answers]
        if self._mates is not None:
            logs += [log for m in self._mates()
                     if (log := m.mate_log(self.producer)) is not None]
        with self._lock:
            self._dets.follow(logs)
        for (c, a), held in zip(consumers, answers, strict=True):
            self.publisher.channel(c, a)  # made if its checkpoint had none
            # tagged with the consumer's incarnation from now on: a regenerated push it
            # holds is then checked as a duplicate, not bounced for a stale epoch
            self.publisher.resend(c, held[5], held[3])
        for producer, actor in producers:
            actor.resend.remote(self.producer, self.incarnation, self._next.get(producer, 0))

    def _need_store(self) -> Store:
        if self.store is None:
            raise RuntimeError(f"{self.label}: no checkpoint storage configured")
        return self.store
