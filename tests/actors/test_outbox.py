"""A chain's outbox to another chain (:mod:`specula.actors.outbox`): the pushes of
members that step together go in one call, each with its own answer; a push whose
answer is awaited, or whose sibling's step runs long, is not held back."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from specula.actors import outbox as ob
from specula.actors.channels import Reply, answer


class _Chain:
    """Another chain's actor: ``deliver`` answers each push with its number at once,
    or raises ``error``; records the calls."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.calls: list[list[tuple[int, int, int]]] = []
        self.error = error

    @property
    def deliver(self) -> _Chain:
        return self

    def remote(self, pushes: list[tuple[int, tuple[Any, ...]]]) -> Future:
        self.calls.append([(p, args[1], args[2]) for p, args in pushes])
        done: Future = Future()
        if self.error is not None:
            done.set_exception(self.error)
        else:
            done.set_result([Reply(0, 0, args[2] + 1) for _, args in pushes])
        return done


def _box(chain: _Chain, senders=(1, 2), wait_s: float = ob.WAIT_S
         ) -> tuple[ob.Outbox, ob.ChainSteps]:
    steps = ob.ChainSteps()
    box = ob.Outbox(lambda: chain, steps, wait_s)
    for s in senders:
        box.sender(s)
    return box, steps


def _args(sender: int, n: int) -> tuple[Any, ...]:
    return (None, sender, n, 0, 0, None, False)


def test_the_pushes_of_members_stepping_together_go_in_one_call():
    chain = _Chain()
    box, steps = _box(chain, wait_s=30.0)  # only the step's end sends
    try:
        for n in range(3):
            steps.stepping(1, True)
            steps.stepping(2, True)
            first = box.push(7, _args(2, n))  # 2 ends its step first ...
            steps.stepping(2, False)
            time.sleep(0.002)
            second = box.push(8, _args(1, n))  # ... 1 publishes before it ends its own
            steps.stepping(1, False)
            assert answer(first) == Reply(0, 0, n + 1) and answer(second) == Reply(0, 0, n + 1)
        assert chain.calls == [[(7, 2, n), (8, 1, n)] for n in range(3)]
    finally:
        box.close()


def test_a_lone_push_goes_at_once_and_an_awaited_one_is_not_held_back():
    chain = _Chain()
    box, steps = _box(chain, wait_s=30.0)
    try:
        t0 = time.monotonic()
        assert answer(box.push(7, _args(1, 0))) == Reply(0, 0, 1)  # nobody in a step
        steps.stepping(2, True)  # a sibling in a long step
        assert answer(box.push(7, _args(1, 1))) == Reply(0, 0, 2)  # awaited: sent now
        assert time.monotonic() - t0 < 10
        steps.stepping(2, False)
    finally:
        box.close()


@pytest.mark.parametrize("wait_s", [0.0, 0.05])
def test_a_push_waits_for_a_sibling_in_a_step_at_most_its_wait(wait_s):
    """Not awaited, a push waits for a sibling in a long step at most ``wait_s`` (the
    ``buffer_timeout_s`` option): 0 sends it at once."""
    chain = _Chain()
    box, steps = _box(chain, wait_s=wait_s)
    try:
        steps.stepping(2, True)  # a sibling in a long step
        t0 = time.monotonic()
        waiting = box.push(7, _args(1, 0))
        deadline = t0 + 10
        while not chain.calls and time.monotonic() < deadline:
            time.sleep(0.001)
        sent_after = time.monotonic() - t0
        assert len(chain.calls) == 1 and answer(waiting) == Reply(0, 0, 1)
        assert sent_after < wait_s + 2 and (wait_s == 0 or sent_after >= wait_s)
        steps.stepping(2, False)
    finally:
        box.close()


def test_every_push_of_a_failed_call_raises_its_error():
    error = RuntimeError("the other chain is gone")
    box, steps = _box(_Chain(error), wait_s=30.0)
    try:
        steps.stepping(2, True)
        pushes = [box.push(7, _args(1, 0)), box.push(8, _args(1, 1))]
        steps.stepping(2, False)
        for push in pushes:
            with pytest.raises(RuntimeError, match="gone"):
                answer(push)
    finally:
        box.close()


def test_many_senders_in_threads_each_get_their_own_answers():
    """Pushes from several threads, each awaited at random: every answer is its own
    push's, and each push was sent exactly once."""
    chain = _Chain()
    box, steps = _box(chain, senders=range(1, 5))
    got: dict[int, list[Reply]] = {}

    def member(sender: int) -> None:
        mine = []
        for n in range(40):
            steps.stepping(sender, True)
            push = box.push(sender * 10, _args(sender, n))
            steps.stepping(sender, False)
            mine.append(answer(push) if n % 3 else push)
        got[sender] = [answer(r) if not isinstance(r, Reply) else r for r in mine]

    threads = [threading.Thread(target=member, args=(s,)) for s in range(1, 5)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    finally:
        box.close()
    assert got == {s: [Reply(0, 0, n + 1) for n in range(40)] for s in range(1, 5)}
    sent = sorted((s, n) for call in chain.calls for _, s, n in call)
    assert sent == sorted((s, n) for s in range(1, 5) for n in range(40))
