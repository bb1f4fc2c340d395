"""An ordering unit's whole state as plain data, and back: what a checkpoint holds.

:func:`unit_state` returns a dict of Python scalars, lists and bytes (msgpack-ready):
clock, K, counters, the late side output, the buffer (its events, keys, emitted
prefix, horizon and the snapshots in front of emitted events), the versions a replay
may revise with their causes (:class:`~specula.ordering._sent.SentLog`), the channel
clocks, the alpha controller's state and the detector's current state. :func:`restore_unit` puts a
fresh unit (same node, same registry) into that state; from there it processes exactly
as the unit it was taken from would have.

Record arrays travel as ``.npy`` bytes (:func:`pack_array`, read back without pickle).
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

import io
import pickle
from typing import TYPE_CHECKING, Any

import numpy as np

from specula.ordering.clock import ChannelClock
from specula.ordering.kslack import KSlackBuffer
from specula.ordering.speculative import Snapshot, SpeculativeBuffer

if TYPE_CHECKING:
    from specula.ordering.unit import OrderingUnit

#: Version of the layout below; a checkpoint of another version is refused.
STATE_VERSION = 3


def pack_array(a: np.ndarray) -> bytes:
    """``a`` as ``.npy`` bytes (dtype, shape and data; no pickle)."""
    out = io.BytesIO()
    np.save(out, np.ascontiguousarray(a), allow_pickle=False)
    return out.getvalue()


def unpack_array(data: bytes) -> np.ndarray:
    """The array :func:`pack_array` packed (writable, own memory)."""
    return np.load(io.BytesIO(data), allow_pickle=False).copy()


def unit_state(unit: OrderingUnit) -> dict[str, Any]:
    """The state of ``unit`` between two pushes, as msgpack-ready data."""
    buf = unit._buffer
    late = np.concatenate(unit._late) if unit._late else np.empty(0, unit.in_dtype)
    state: dict[str, Any] = {
        "v": STATE_VERSION, "clk": unit.clk, "k": unit.k, "pending": unit._pending,
        "handed": unit._handed,
        "seq": unit._seq, "origin": unit._origin, "stats": unit.stats.as_dict(),
        "late": pack_array(late),
        "detector": pickle.dumps(unit.detector.snapshot(), protocol=pickle.HIGHEST_PROTOCOL),
        "horizon": list(buf._horizon),
        "purged_seq": [[p, s] for p, s in buf._purged_seq.items()],
        "channels": (pack_array(unit.clock_source._clock)
                     if isinstance(unit.clock_source, ChannelClock) else None),
        "sent": None, "controller": None, "memory": unit.memory.state(),
    }
    if unit._sent is not None:
        rows, why = unit._sent.state()
        state["sent"] = {"rows": pack_array(rows), "why": pack_array(why)}
    if unit.controller is not None:
        state["controller"] = unit.controller.state()
    if isinstance(buf, KSlackBuffer):
        state["buffer"] = {"kind": "kslack", "rows": pack_array(buf.rows),
                           "ts": pack_array(buf._buf_ts), "tb": pack_array(buf._buf_tb)}
    else:
        state["buffer"] = _speculative_state(buf)
    return state


def restore_unit(unit: OrderingUnit, state: dict[str, Any]) -> None:
    """Put ``unit`` (fresh, built for the same node) into ``state`` from :func:`unit_state`."""
    if state.get("v") != STATE_VERSION:
        raise ValueError(f"{unit.name}: checkpoint layout {state.get('v')!r} is not "
                         f"{STATE_VERSION}, the one this version reads")
    unit.clk, unit.k, unit._pending = state["clk"], state["k"], state["pending"]
    unit._handed = state["handed"]
    unit._seq, unit._origin = state["seq"], state["origin"]
    for name, value in state["stats"].items():
        setattr(unit.stats, name, value)
    late = unpack_array(state["late"])
    unit._late = [late] if len(late) else []
    unit.detector.restore(pickle.loads(state["detector"]))
    buf = unit._buffer
    buf._horizon = (int(state["horizon"][0]), int(state["horizon"][1]))
    buf._purged_seq = {int(p): int(s) for p, s in state["purged_seq"]}
    if state["channels"] is not None:
        unit.clock_source._clock[:] = unpack_array(state["channels"])
    if state["sent"] is not None:
        unit._sent.load(unpack_array(state["sent"]["rows"]),
                        unpack_array(state["sent"]["why"]))
    if state["controller"] is not None:
        unit.controller.load_state(state["controller"])
    unit.memory.load_state(state["memory"])
    b = state["buffer"]
    if b["kind"] == "kslack":
        buf.load(unpack_array(b["rows"]), unpack_array(b["ts"]), unpack_array(b["tb"]))
    else:
        _restore_speculative(buf, b)


def _speculative_state(buf: SpeculativeBuffer) -> dict[str, Any]:
    """Events, keys, emitted prefix and snapshots; each distinct snapshot once, the
    positions referring to it by index (-1: none)."""
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

    refs = np.full(len(buf._snaps), -1, np.int64)
    held = np.flatnonzero(np.not_equal(buf._snaps, None))  # most positions hold none
    refs[held] = [ref(s) for s in buf._snaps[held].tolist()]
    return {"kind": "speculative", "rows": pack_array(buf._rows), "ts": pack_array(buf._ts),
            "tb": pack_array(buf._tb), "n_emitted": buf._n_emitted,
            "refs": pack_array(refs), "snaps": snaps, "last": ref(buf._last_snap)}


def _restore_speculative(buf: SpeculativeBuffer, b: dict[str, Any]) -> None:
    snaps = [Snapshot(pickle.loads(state), int(seq), int(origin))
             for state, seq, origin in b["snaps"]]
    refs = unpack_array(b["refs"])
    held = np.empty(len(refs), object)
    for i, r in enumerate(refs.tolist()):
        if r >= 0:
            held[i] = snaps[r]
    buf.load(unpack_array(b["rows"]), unpack_array(b["ts"]), unpack_array(b["tb"]), held)
    buf._n_emitted = int(b["n_emitted"])
    buf._last_snap = snaps[b["last"]] if b["last"] >= 0 else None
