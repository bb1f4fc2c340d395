"""How a detector instance is reached on Ray: the chain actor that runs it and its
producer id.

The Ray runtime runs every instance in a *chain*, a Ray actor that hosts one or several
instances (:mod:`.chain`). An instance's address is a :class:`Member`: the chain actor's
name and the instance's producer id. From outside its chain an instance is reached
through an :class:`InstanceHandle`, which looks like an actor handle of the instance
(``handle.push.remote(...)``) and makes the call on the chain actor
(``chain.call.remote(producer, "push", ...)``); inside its chain, through the chain's
in-memory hand-over (:class:`~.chain.LocalHandle`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["InstanceHandle", "Member"]


class Member(NamedTuple):
    """An instance's address: the name of the chain actor that runs it and its producer
    id (a name, so that a restarted actor finds its peers again)."""

    chain: str
    producer: int


class _Method:
    """One method of an instance in a chain actor, called as Ray calls a method."""

    __slots__ = ("_actor", "_name", "_producer")

    def __init__(self, actor: Any, producer: int, name: str) -> None:
        self._actor, self._producer, self._name = actor, producer, name

    def remote(self, *args: Any) -> Any:
        return self._actor.call.remote(self._producer, self._name, *args)


class InstanceHandle:
    """An instance in the chain actor ``actor`` (a Ray handle), as if it were an actor
    of its own: ``handle.flush.remote(...)`` is ``actor.call.remote(producer, "flush",
    ...)``."""

    def __init__(self, actor: Any, producer: int) -> None:
        self.actor = actor
        self.producer = producer

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Method(self.actor, self.producer, name)
