"""The detector contract: what a user writes, and what an ordering unit drives.

A detector is a small class. It declares the event types it consumes (``inputs``), the
types it generates (``outputs``) and the types that advance its ordering unit's clock
(``clock``, a subset of ``inputs``), and implements :meth:`Detector.on_event`, or
:meth:`Detector.on_batch` for vectorised low-level detectors. It sees its input in
occurrence-time order; the ordering unit around it buffers, speculates, snapshots and
replays. A detector does no I/O and never reads the wall clock: time comes in through
events.

Example
-------
>>> class Doubler(Detector):
...     inputs = ("x",)
...     outputs = ("y",)
...     def on_event(self, event, emit):
...         emit("y", event.ts, event.key, value=2 * event["value"])
"""

from __future__ import annotations

import pickle
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from specula.ordering.emitter import Columns, Emitter, EventView


class Detector:
    """Base class of every detector.

    Subclasses set ``inputs``, ``outputs`` and optionally ``clock`` (default: all
    inputs), and implement ``on_event`` or ``on_batch``. State lives in instance
    attributes; the default :meth:`snapshot` pickles them, so keep state small and
    picklable, or override :meth:`snapshot` and :meth:`restore` together (a checkpoint
    holding a snapshot is signed, and checked before it is unpickled). Two snapshots
    that compare equal must stand for the same state: on-demand retraction stops a
    replay as soon as the replayed state equals the recorded one.

    ``num_gpus`` declares the GPUs (a fraction is allowed) the detector needs: the
    default of its node's ``gpus`` option, which the Ray runtime asks for when it creates
    the node's actors (``Graph.add(..., gpus=...)`` sets another); 0 for CPU-only
    detectors.
    """

    # class attributes, or set in __init__ by detectors whose types are arguments
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    clock: ClassVar[tuple[str, ...] | None] = None
    num_gpus: float = 0.0

    def clock_types(self) -> tuple[str, ...]:
        """The input types whose time stamps set the ordering unit's clock."""
        return tuple(self.inputs if self.clock is None else self.clock)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        """Process one event, in occurrence-time order; generate events with ``emit``."""
        raise NotImplementedError(f"{type(self).__name__} implements neither on_event nor on_batch")

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        """Process a time-ordered batch. The default calls :meth:`on_event` per event.

        ``type_names[type_id]`` maps the ``type`` column to names.
        """
        columns = Columns(events)
        for i, t in enumerate(columns["type"]):
            emit.at(i)
            self.on_event(EventView(columns, type_names[t], i), emit)

    def work_done(self) -> int:
        """Units of work done so far beyond one per input event, for cost models (the
        in-process runtime's ``CostModel.per_work``): a window operator counts the
        (event, window) pairs it processed. A monotone counter of the run, not state:
        snapshots leave it alone. The default, 0, makes a detector's cost its events."""
        return 0

    def on_end(self, emit: Emitter) -> None:
        """End of stream: generate what the detector still holds (a window or an episode
        still open, events waiting for their time stamp to complete). The default does
        nothing. Events emitted here take the last input event as their cause.

        They go out before the end of the stream reaches the consumers, but the unit has
        already told them how far it got (its progress: the last clock less the slack);
        an event time-stamped before that is late there, like any event that comes
        behind its producer's progress. Time-stamp what the end closes at or after the
        newest input it covers."""

    def on_time(self, now: int, emit: Emitter) -> None:
        """Event time has reached ``now``: the unit has handed the detector every input
        with a time stamp up to ``now`` (its clock less its slack, moved by input,
        punctuations or idleness alike). Generate what that passing of time decides;
        the unit calls it only while :meth:`time_hold` is at or before ``now``. It is
        output like any other: a speculative unit that replays later retracts or
        revises it. The default does nothing."""

    def time_hold(self) -> int | None:
        """The earliest time stamp at which the detector may still generate an event
        because event time passes (a rule's absence at the end waiting for its
        deadline), or None (the default): nothing waits. Its ordering unit publishes
        no progress at or beyond it, so the output fired there, stamped in the past of
        the event that fires it, is never behind the unit's own punctuation."""
        return None

    def check_node_options(self, options: Mapping[str, Any], where: str) -> None:
        """Raise :class:`~specula.options.OptionError` (its message prefixed with
        ``where``, saying what to change) if the detector cannot run under a node's
        ``options`` (every one of :data:`~specula.options.NODE_OPTIONS`, resolved).
        :meth:`Graph.add <specula.detectors.Graph.add>` calls it, so a combination that
        cannot run is refused when the graph is built, not when an event first shows it.
        The default accepts every combination."""

    def snapshot(self) -> Any:
        """Return the detector's state; the default pickles the instance attributes."""
        return pickle.dumps(self.__dict__, protocol=pickle.HIGHEST_PROTOCOL)

    def restore(self, state: Any) -> None:
        """Return to a state produced by :meth:`snapshot`."""
        self.__dict__.clear()
        self.__dict__.update(pickle.loads(state))


def type_ids(type_names: Sequence[str], *names: str) -> tuple[int, ...]:
    """The type ids of ``names`` in ``type_names`` (what :meth:`Detector.on_batch`
    gets), -1 for a name it lacks: compare ``events["type"]`` with them instead of
    mapping every row to its name.

    >>> type_ids(["", "ball", "player"], "player", "ball", "goal")
    (2, 1, -1)
    """
    index = {name: i for i, name in enumerate(type_names)}
    return tuple(index.get(name, -1) for name in names)
