"""Pushes from the members of a chain to the members of another chain, one Ray call for
those made together.

Two members of a chain that take the same raw batch (one :meth:`~.chain.ChainWorker.push_all`)
step at about the same time, and each publishes its step's output; when both publish to
members of one other chain, each push was a Ray call of its own, its batch put into the
object store and its call taken by a Ray thread there. An :class:`Outbox` sends the
pushes to one other chain (``deliver``: :meth:`~.chain.ChainWorker.deliver`, which
dispatches them in memory as the calls of their own would have been) from a thread of
its own: every push queued when it sends goes in one call. It waits, before it sends,
for the members of its chain that were in the middle of a step when the first of those
pushes was queued (:class:`ChainSteps`) to end that step, so that their pushes go in the
same call; at most its ``wait_s`` (the ``buffer_timeout_s`` option, by default
:data:`WAIT_S`), and not at all once a push's answer is waited for
(a window full, a drain). Every push keeps its number, sender, epoch and answer: the
push protocol (:mod:`.channels`, :mod:`.recovery`) sees the calls it saw before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from specula.actors.addresses import InstanceHandle
from specula.actors.channels import answer
from specula.options import RUNTIME_OPTIONS

__all__ = ["WAIT_S", "ChainSteps", "Outbox", "OutboxHandle"]

#: Seconds a push waits at most for the pushes of its chain's members in a step, by
#: default (the ``buffer_timeout_s`` option).
WAIT_S: float = RUNTIME_OPTIONS["buffer_timeout_s"].default


class ChainSteps:
    """Which members of a chain are in a step, and how many steps each has ended; its
    condition is the one the chain's outboxes wait on."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._busy: set[int] = set()
        self._ended: dict[int, int] = {}

    def stepping(self, producer: int, busy: bool) -> None:
        """Member ``producer`` begins (``busy``) or ends a step."""
        with self.cond:
            if busy:
                self._busy.add(producer)
            else:
                self._busy.discard(producer)
                self._ended[producer] = self._ended.get(producer, 0) + 1
                self.cond.notify_all()

    def in_step(self, members: set[int]) -> dict[int, int]:
        """Under :attr:`cond`: of ``members``, those in a step, with the steps each has
        ended so far."""
        return {p: self._ended.get(p, 0) for p in members & self._busy}

    def done(self, steps: dict[int, int]) -> bool:
        """Under :attr:`cond`: has every member of ``steps`` (:meth:`in_step`) ended the
        step it was in?"""
        return all(self._ended.get(p, 0) > n for p, n in steps.items())


class _Delivery:
    """One push's answer: the ``k``-th reply of the call its outbox makes."""

    __slots__ = ("_error", "_k", "_outbox", "_ref")

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._ref: Any = None
        self._k = 0
        self._error: BaseException | None = None

    def sent(self, ref: Any, k: int) -> None:
        self._ref, self._k = ref, k

    def failed(self, error: BaseException) -> None:
        self._error = error

    def result(self) -> Any:
        self._outbox.wait_sent(self)
        if self._error is not None:
            raise self._error
        return answer(self._ref)[self._k]

    @property
    def pending(self) -> bool:
        return self._ref is None and self._error is None


class Outbox:
    """The pushes of one chain's members to another chain's (``actor()``: its Ray
    handle, looked up when first needed), sent together from a thread of its own (see
    the module); ``steps`` are its own chain's, and a push waits for them at most
    ``wait_s`` seconds."""

    def __init__(self, actor: Callable[[], Any], steps: ChainSteps,
                 wait_s: float = WAIT_S) -> None:
        self._actor = actor
        self._steps = steps
        self._wait_s = wait_s
        self._cond = steps.cond
        self._queue: list[tuple[int, tuple[Any, ...], _Delivery]] = []
        self._senders: set[int] = set()  # members that push through this outbox
        self._waits: dict[int, int] = {}  # members in a step when the queue began
        self._since = 0.0                 # when the queue began (monotonic)
        self._urgent = False
        self._closed = False
        self._thread: threading.Thread | None = None

    def sender(self, producer: int) -> None:
        """Member ``producer`` pushes through this outbox."""
        with self._cond:
            self._senders.add(producer)

    def push(self, producer: int, args: tuple[Any, ...]) -> _Delivery:
        """Queue a push (``args`` of :meth:`~.worker.DetectorWorker.push`; the sender's
        producer id is ``args[1]``) to member ``producer`` of the other chain; the
        answer's ``result()`` is the push's :class:`~.channels.Reply`."""
        delivery = _Delivery(self)
        with self._cond:
            if self._closed:
                raise RuntimeError("the chain has closed")
            if not self._queue:
                self._since = time.monotonic()
                self._waits = self._steps.in_step(self._senders - {args[1]})
            self._queue.append((producer, args, delivery))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="specula-outbox")
                self._thread.start()
            self._cond.notify_all()
        return delivery

    def wait_sent(self, delivery: _Delivery) -> None:
        """Until ``delivery``'s call is made (at once: its answer is awaited)."""
        with self._cond:
            if delivery.pending:
                self._urgent = True
                self._cond.notify_all()
            while delivery.pending:
                self._cond.wait()

    def close(self) -> None:
        """Send what is queued, then stop the thread."""
        with self._cond:
            self._closed = self._urgent = True
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closed:
                    self._cond.wait()
                if not self._queue:
                    return
                while not (self._urgent or self._steps.done(self._waits)):
                    left = self._since + self._wait_s - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                taken, self._queue, self._urgent = self._queue, [], self._closed
            self._send(taken)

    def _send(self, taken: list[tuple[int, tuple[Any, ...], _Delivery]]) -> None:
        """One call for the pushes ``taken``; their answers learn of it (or of its
        error)."""
        try:
            ref = self._actor().deliver.remote([(p, args) for p, args, _ in taken])
        except BaseException as exc:  # the call could not be made: each push's error
            with self._cond:
                for _, _, d in taken:
                    d.failed(exc)
                self._cond.notify_all()
            return
        with self._cond:
            for k, (_, _, d) in enumerate(taken):
                d.sent(ref, k)
            self._cond.notify_all()


class _Push:
    __slots__ = ("_outbox", "_producer")

    def __init__(self, outbox: Outbox, producer: int) -> None:
        self._outbox, self._producer = outbox, producer

    def remote(self, *args: Any) -> _Delivery:
        return self._outbox.push(self._producer, args)


class OutboxHandle:
    """An instance of another chain, as a handle for a member of this one: its ``push``
    goes through the ``outbox`` to that chain; any other method is a call of its own on
    the chain actor (``actor()``), as an :class:`~.addresses.InstanceHandle` makes it."""

    def __init__(self, outbox: Outbox, actor: Callable[[], Any], producer: int) -> None:
        self.outbox = outbox
        self.producer = producer
        self._actor = actor

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name == "push":
            return _Push(self.outbox, self.producer)
        return getattr(InstanceHandle(self._actor(), self.producer), name)
