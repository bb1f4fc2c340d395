"""An ordering unit's whole state as plain data, and back: what a checkpoint holds.

:func:`unit_state` returns a dict of Python scalars, lists and bytes (msgpack-ready):
clock, K, counters, the late side output, the buffer (its events, keys, emitted
prefix, horizon and the snapshots in front of emitted events), the versions a replay
may revise with their causes (:class:`~specula.ordering._sent.SentLog`), the channel
clocks, the alpha controller's state and the detector's current state. :func:`restore_unit` puts a
fresh unit (same node, same registry) into that state; from there it processes exactly
as the unit it was taken from would have.

Record arrays travel as their dtype's ``.npy`` description, shape and bytes
(:func:`pack_array`, read back without pickle).
The detector's state is whatever :meth:`~specula.detectors.base.Detector.snapshot`
returns, so it is the one thing pickled here; a snapshot shared by several buffer
positions is written once and shared again after the restore. Since unpickling runs
code, the actors' storage signs a checkpoint and checks it before it is parsed
(:mod:`specula.actors.signing`).

>>> from specula.detectors.examples import Threshold, example_registry
>>> from specula.detectors.graph import Graph
>>> g = Graph(example_registry(), sources=("C",)).add("big", Threshold(), alpha=0.5)
>>> unit = g.instances()[0].unit(g.registry)
>>> twin = g.instances()[0].unit(g.registry)
>>> restore_unit(twin, unit_state(unit)); twin.clk == unit.clk
True
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
from numpy.lib.format import descr_to_dtype, dtype_to_descr

from specula.ordering._buffer import Contents
from specula.ordering._records import is_set
from specula.ordering.clock import ChannelClock
from specula.ordering.driver import Snapshot
from specula.ordering.unit import OrderingUnit

#: Version of the layout below; a checkpoint of another version is refused (4: arrays
#: as description, shape and bytes, not ``.npy`` bytes).
STATE_VERSION = 4


def pack_array(a: np.ndarray) -> list[Any]:
    """``a`` as msgpack-ready data: its dtype as ``.npy`` files describe it, its shape
    and its bytes (one copy of the data; no pickle)."""
    return [dtype_to_descr(a.dtype), list(a.shape), np.ascontiguousarray(a).tobytes()]


def unpack_array(data: list[Any]) -> np.ndarray:
    """The array :func:`pack_array` packed (writable, own memory)."""
    descr, shape, raw = data
    return np.frombuffer(raw, descr_to_dtype(descr)).reshape(shape).copy()


def unit_state(unit: OrderingUnit) -> dict[str, Any]:
    """The state of ``unit`` between two pushes, as msgpack-ready data."""
    st, held = unit.state, unit.buffer.contents()
    late = np.concatenate(st.late) if st.late else np.empty(0, unit.in_dtype)
    clock, sent = unit.clock_source, unit.driver.sent
    state: dict[str, Any] = {
        "v": STATE_VERSION, "clk": st.clk, "k": st.k, "pending": st.pending,
        "handed": st.handed,
        "seq": st.seq, "origin": st.origin, "stats": st.stats.as_dict(),
        "late": pack_array(late),
        "detector": pickle.dumps(unit.detector.snapshot(), protocol=pickle.HIGHEST_PROTOCOL),
        "horizon": list(held.horizon),
        "purged_seq": [[p, s] for p, s in held.purged_seq.items()],
        "channels": pack_array(clock.clocks()) if isinstance(clock, ChannelClock) else None,
        "sent": None, "controller": None, "memory": unit.memory.state(),
    }
    if sent is not None:
        rows, why = sent.state()
        state["sent"] = {"rows": pack_array(rows), "why": pack_array(why)}
    if unit.controller is not None:
        state["controller"] = unit.controller.state()
    if held.snaps is None:
        state["buffer"] = {"kind": "kslack", "rows": pack_array(held.rows),
                           "ts": pack_array(held.ts), "tb": pack_array(held.tb)}
    else:
        state["buffer"] = _speculative_state(held, held.snaps)
    return state


def restore_unit(unit: OrderingUnit, state: dict[str, Any]) -> None:
    """Put ``unit`` (fresh, built for the same node) into ``state`` from :func:`unit_state`."""
    _check_fits(unit, state)
    st = unit.state
    st.clk, st.k, st.pending = state["clk"], state["k"], state["pending"]
    st.handed = state["handed"]
    st.seq, st.origin = state["seq"], state["origin"]
    for name, value in state["stats"].items():
        setattr(st.stats, name, value)
    late = unpack_array(state["late"])
    st.late = [late] if len(late) else []
    unit.detector.restore(pickle.loads(state["detector"]))
    clock, sent = unit.clock_source, unit.driver.sent
    if isinstance(clock, ChannelClock):
        clock.load_clocks(unpack_array(state["channels"]))
    if sent is not None:
        sent.load(unpack_array(state["sent"]["rows"]), unpack_array(state["sent"]["why"]))
    if unit.controller is not None:
        unit.controller.load_state(state["controller"])
    unit.memory.load_state(state["memory"])
    unit.buffer.load_contents(_contents(state))


def _check_fits(unit: OrderingUnit, state: dict[str, Any]) -> None:
    """A ValueError naming the unit unless ``state`` is of this layout and of a unit
    built like ``unit``: the same buffer, clock, sent log and alpha controller."""
    if state.get("v") != STATE_VERSION:
        raise ValueError(f"{unit.name}: checkpoint layout {state.get('v')!r} is not "
                         f"{STATE_VERSION}, the one this version reads")
    parts = {"a speculative buffer": state["buffer"]["kind"] == "speculative",
             "channel clocks": state["channels"] is not None,
             "a log of sent versions (on-demand retraction)": state["sent"] is not None,
             "an alpha controller": state["controller"] is not None}
    has = {"a speculative buffer": unit.speculative,
           "channel clocks": isinstance(unit.clock_source, ChannelClock),
           "a log of sent versions (on-demand retraction)": unit.driver.sent is not None,
           "an alpha controller": unit.controller is not None}
    for part, in_state in parts.items():
        if in_state != has[part]:
            held, lacks = ("the checkpoint", "the unit") if in_state else ("the unit",
                                                                           "the checkpoint")
            raise ValueError(f"{unit.name}: {held} has {part}, {lacks} has none: the "
                             f"checkpoint is of a unit built otherwise")


def _speculative_state(held: Contents, slots: np.ndarray) -> dict[str, Any]:
    """Events, keys, emitted prefix and snapshots (with the one in front of output fired
    by time, :attr:`Contents.time_fired`); each distinct snapshot once, the positions
    referring to it by index (-1: none)."""
    index: dict[int, int] = {}
    snaps: list[list[Any]] = []

    def ref(snap: Snapshot | None) -> int:
        if snap is None:
            return -1
        if id(snap) not in index:
            index[id(snap)] = len(snaps)
            snaps.append([pickle.dumps(snap.state, protocol=pickle.HIGHEST_PROTOCOL),
                          snap.seq, snap.origin])
        return index[id(snap)]

    refs = np.full(len(slots), -1, np.int64)
    taken = np.flatnonzero(is_set(slots))  # most positions hold none
    refs[taken] = [ref(s) for s in slots[taken].tolist()]
    fired = held.time_fired
    return {"kind": "speculative", "rows": pack_array(held.rows), "ts": pack_array(held.ts),
            "tb": pack_array(held.tb), "n_emitted": held.n_emitted,
            "refs": pack_array(refs), "snaps": snaps, "last": ref(held.last_snapshot),
            "time": None if fired is None else [fired[0], ref(fired[1])]}


def _contents(state: dict[str, Any]) -> Contents:
    """The buffer's contents in ``state``: events, keys, horizon, purged counters and,
    for a speculative buffer, the snapshots (shared again where they were shared)."""
    b = state["buffer"]
    horizon = (int(state["horizon"][0]), int(state["horizon"][1]))
    purged = {int(p): int(s) for p, s in state["purged_seq"]}
    rows, ts, tb = (unpack_array(b[f]) for f in ("rows", "ts", "tb"))
    if b["kind"] == "kslack":
        return Contents(rows, ts, tb, horizon, purged)
    snaps = [Snapshot(pickle.loads(data), int(seq), int(origin))
             for data, seq, origin in b["snaps"]]
    refs = unpack_array(b["refs"])
    slots = np.empty(len(refs), object)
    for i, r in enumerate(refs.tolist()):
        if r >= 0:
            slots[i] = snaps[r]
    fired = b.get("time")
    return Contents(rows, ts, tb, horizon, purged, slots, int(b["n_emitted"]),
                    snaps[b["last"]] if b["last"] >= 0 else None,
                    None if fired is None else (int(fired[0]), snaps[fired[1]]))
