"""The detector an ordering unit drives: handing it time-ordered events, numbering what
it generates, its snapshots, and the messages that revoke or revise what was sent.

The buffers decide *when* events reach the detector (:mod:`specula.ordering.kslack`,
:mod:`specula.ordering.speculative`); the :class:`DetectorDriver` decides *what goes
out* for them: every generated event gets the unit's producer, a counter (with
on-demand retraction a label logged with its cause, :mod:`specula.ordering._sent`), its
cause's K+ and origin. Counters and origin live in the unit's
:class:`~specula.ordering.state.UnitState`, and a :class:`Snapshot` carries them with
the detector's state.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple, Protocol

import numpy as np

from specula import events as ev
from specula.events import concat_records
from specula.ordering import _kernels
from specula.ordering._records import layout
from specula.ordering._sent import Revision, SentLog, causes
from specula.ordering.emitter import Emitter, Records
from specula.ordering.state import UnitState

_NO_KPLUS = np.zeros(0, np.int64)  # every input's K+ is 0
_NO_ORIGINS = np.zeros(0, np.int64)  # the output's origin is the unit's
# the fields a stamp writes, in its layout's order
_STAMPED = (("producer", np.int32), ("seq", np.int64), ("kplus", np.int64),
            ("origin", np.int64), ("ats", np.int64))


class DrivenDetector(Protocol):
    """What an ordering unit needs from the detector it wraps."""

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Any) -> None: ...
    def on_end(self, emit: Any) -> None: ...
    def on_time(self, now: int, emit: Any) -> None: ...
    def snapshot(self) -> Any: ...
    def restore(self, state: Any) -> None: ...
    def time_hold(self) -> int | None: ...


class DetectorError(RuntimeError):
    """A detector raised while processing an event; names the detector and the event."""


class Snapshot(NamedTuple):
    """Detector state plus what the unit piggybacks on it: the next output's counter (with
    on-demand retraction, the label bound between outputs in front and behind) and origin."""

    state: Any
    seq: int
    origin: int


class DetectorDriver:
    """One detector, driven: its input, its snapshots and the output queued for the push.

    ``sent`` is the log of what a replay may revise (on-demand retraction of a
    speculative unit), else None.
    """

    def __init__(self, detector: DrivenDetector, state: UnitState, *, name: str,
                 producer: int, out_dtype: np.dtype, outputs: dict[str, int],
                 type_names: Sequence[str], sent: SentLog | None) -> None:
        self.detector = detector
        self.state = state
        self.name = name
        self.producer = producer
        self.out_dtype = out_dtype
        self.type_names = type_names
        self.sent = sent
        self._output_ids = outputs
        self._emit = Emitter()
        self._out: list[np.ndarray] = []
        self._nothing = np.empty(0, out_dtype)  # what most pushes return, made once
        self._is_output = ev.SameDtype(out_dtype)

    # ------------------------------------------------------------ snapshots
    def snapshot(self) -> Snapshot:
        """The detector's state now, with the unit's counter and origin."""
        self.state.stats.snapshots += 1
        return Snapshot(self.detector.snapshot(), self.state.seq, self.state.origin)

    def restore(self, snap: Snapshot) -> None:
        """Go back to ``snap``: the detector, the counter and the origin."""
        st = self.state
        st.stats.restores += 1
        self.detector.restore(snap.state)
        st.seq = snap.seq
        st.origin = snap.origin

    def resume(self, current: Snapshot) -> None:
        """Back to the state taken before a replay that stopped early: the detector's,
        and the larger origin (the counter is the revision's to set)."""
        self.detector.restore(current.state)
        self.state.origin = max(self.state.origin, current.origin)

    # ------------------------------------------------------------ driving
    def process(self, events: np.ndarray, kplus: np.ndarray | None, now: int,
                update: bool) -> None:
        """Hand time-ordered events to the detector and stamp what it generates.

        ``kplus`` per event (None: all zero) is how prematurely each one is emitted;
        ``update``: an on-demand replay, whose output the sent log holds for the
        revision.
        """
        emit, st = self._emit, self.state
        emit.clear()
        try:
            self.detector.on_batch(events, self.type_names, emit)
        except Exception as exc:
            row = events[min(emit.cause, len(events) - 1)]
            raise DetectorError(
                f"detector {self.name!r} failed on event type={self.type_names[row['type']]} "
                f"ts={row['ts']} key={row['key']} producer={row['producer']} seq={row['seq']}: "
                f"{type(exc).__name__}: {exc}") from exc
        st.stats.emitted += len(events)
        if len(emit):
            kp = _NO_KPLUS if kplus is None else np.asarray(kplus, np.int64)
            st.origin = self._stamp(emit, kp, events["origin"], now, update, events)
        elif len(events) <= 16:  # a few: Python ints cost less than NumPy's max
            st.origin = max([st.origin, *events["origin"].tolist()])
        else:
            st.origin = max(st.origin, int(events["origin"].max()))

    def end(self, now: int) -> None:
        """Let the detector emit what it still holds, caused by the last input event."""
        emit = self._emit
        emit.clear()
        try:
            self.detector.on_end(emit)
        except Exception as exc:
            raise DetectorError(f"detector {self.name!r} failed at the end of the stream: "
                                f"{type(exc).__name__}: {exc}") from exc
        if len(emit):
            self._stamp(emit, _NO_KPLUS, _NO_ORIGINS, now, update=False)

    def time_passed(self, time: int, now: int) -> None:
        """Event time has reached ``time``: let the detector emit what that decides,
        caused by the passing of time, which comes behind every input of time stamp up
        to ``time`` (and is no input of its own that a replay repeats: a replay revokes
        this output, and the next passing of time fires it again if it still holds)."""
        emit = self._emit
        emit.clear()
        try:
            self.detector.on_time(time, emit)
        except Exception as exc:
            raise DetectorError(f"detector {self.name!r} failed as event time reached "
                                f"{time}: {type(exc).__name__}: {exc}") from exc
        if len(emit):
            self._stamp(emit, _NO_KPLUS, _NO_ORIGINS, now, update=False, time=time)

    def _stamp(self, emit: Emitter, kplus: np.ndarray, origins: np.ndarray, now: int,
               update: bool, events: np.ndarray | None = None, time: int | None = None
               ) -> int:
        """Number what the detector emitted for ``events`` (None: at the end, or as event
        time reached ``time``) and queue it; ``kplus`` and ``origins`` of each input
        (empty: K+ 0 and the unit's origin). On an on-demand replay (``update``) the sent
        log holds it until the revision. Returns the unit's origin after the inputs."""
        parts = []
        if emit.rows:
            parts.append((self._records(emit.rows), np.asarray(emit.causes, np.int64)))
        for name, columns, cause in emit.column_batches:
            parts.append((self._batch(name, columns, len(cause)), cause))
        out = parts[0][0] if len(parts) == 1 else concat_records([o for o, _ in parts])
        cause = parts[0][1] if len(parts) == 1 else np.concatenate([c for _, c in parts])
        # counters follow the input order, however the detector grouped its output, so
        # they do not depend on how the input was cut into batches
        if not _ascending(cause):
            order = np.argsort(cause, kind="stable")
            out, cause = np.take(out, order), cause[order]
        n = len(out)
        st = self.state
        # producer, K+, origin, arrival and (without a sent log) counters in one call
        origin = _kernels.stamp(
            np.frombuffer(out, np.uint8), self._layout, np.ascontiguousarray(cause, np.int64),
            np.ascontiguousarray(origins, np.int64), st.origin, kplus, self.producer, now,
            st.seq, self.sent is None)
        if self.sent is not None:  # labels, logged with the outputs' causes
            st.seq = self.sent.take(out, causes(events, cause, time), st.seq, update)
            if update:
                return origin
        else:
            st.seq += n
        st.stats.generated += n
        self._out.append(out)
        return origin

    def _batch(self, name: str, columns: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        """The ``n`` events of type ``name`` a detector emitted as ``columns``, as rows of
        the output: the rows themselves when it built them whole in the output's dtype
        (:meth:`Emitter.records`), else new rows filled column by column."""
        if (isinstance(columns, Records) and self._is_output(columns.rows.dtype)
                and columns.rows.flags.c_contiguous):
            out = columns.rows
        else:
            out = np.zeros(n, self.out_dtype)
            for f, v in columns.items():
                out[f] = v
        out["type"] = self._output_id(name)
        return out

    @functools.cached_property
    def _layout(self) -> np.ndarray:
        """Where :func:`~specula.ordering._kernels.stamp` writes in a row of the output."""
        return layout(self.out_dtype, _STAMPED)

    def _records(self, rows: list[tuple[str, int, int, dict[str, Any]]]) -> np.ndarray:
        """The events a detector emitted one by one (type name, ts, key, payload), as
        records: filled column by column (a field of a record set one at a time costs
        ~10x an item of a column), a payload field only in the rows that name it. Rows
        alike (one type; payloads naming the same fields, the usual case) take no Python
        loop of ours: the columns are gathered by ``map`` at C speed."""
        out = np.zeros(len(rows), self.out_dtype)
        names, ts, key, payloads = zip(*rows, strict=True)
        if names.count(names[0]) == len(names):
            out["type"] = self._output_id(names[0])
        else:
            ids = {name: self._output_id(name) for name in set(names)}
            out["type"] = list(map(ids.__getitem__, names))
        out["ts"] = ts
        out["key"] = key
        first = payloads[0].keys()
        if all(map(first.__eq__, map(dict.keys, payloads))):  # stops at the first unlike
            for f in first:
                out[f] = list(map(itemgetter(f), payloads))
            return out
        fields: dict[str, list[int]] = {}
        for i, payload in enumerate(payloads):
            for f in payload:
                fields.setdefault(f, []).append(i)
        for f, where in fields.items():
            values = [payloads[i][f] for i in where]
            if len(where) == len(rows):
                out[f] = values
            else:
                out[f][where] = values
        return out

    def _output_id(self, name: str) -> int:
        try:
            return self._output_ids[name]
        except KeyError:
            raise ValueError(f"detector {type(self.detector).__name__} emitted {name!r}, which is "
                             f"not among its outputs {sorted(self._output_ids)}") from None

    # ------------------------------------------------------------ revisions
    def send_revision(self, rev: Revision) -> None:
        """Send what an on-demand replay revised (see :meth:`SentLog.revise`)."""
        st = self.state
        rev.count(st.stats)
        if st.trace is not None and rev.retractions:
            st.trace.add("retract", "", rev.retracted_from)
        self._out.append(rev.messages)

    def send_retraction(self, from_seq: int, upto_seq: int, now: int) -> None:
        """Counter message: revoke this unit's events with seq in [from_seq, upto_seq)."""
        if upto_seq <= from_seq:
            return
        msg = np.zeros(1, self.out_dtype)
        msg["producer"] = self.producer
        msg["seq"] = from_seq
        msg["flags"] = ev.RETRACTION
        msg["ats"] = now
        st = self.state
        st.stats.retractions_sent += 1
        st.stats.events_retracted += upto_seq - from_seq
        if st.trace is not None:
            st.trace.add("retract", "", from_seq)
        self._out.append(msg)

    # ------------------------------------------------------------ output
    def take_output(self) -> np.ndarray:
        """What was queued since the last call, in the order consumers apply it."""
        if not self._out:
            return self._nothing
        out = self._out[0] if len(self._out) == 1 else np.concatenate(self._out)
        self._out.clear()
        return out


def _ascending(values: np.ndarray) -> bool:
    """Are ``values`` in ascending order (ties allowed)? A stable sort leaves them as
    they are then; a few are compared in Python, which costs less than NumPy's calls."""
    if len(values) <= 16:
        listed = values.tolist()
        return all(a <= b for a, b in itertools.pairwise(listed))
    return not np.count_nonzero(np.diff(values) < 0)
