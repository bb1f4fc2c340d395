"""What a running graph has made final, read from its actors' checkpoints as they are
written, so that a live run persists its detections as it goes.

Every checkpoint of an actor (:mod:`.recovery`) writes the net output applied since the
previous one as a numbered segment, and its state records the unit's settled counter
(:attr:`~specula.ordering.OrderingUnit.settled_seq`): the actor's events below it are
final, since no replay reaches them. :class:`SettledTail` follows each actor's segments
in a replica of its net output and hands on, once, the events that fell below the
settled counter of its last checkpoint; the replica then keeps only the events above it.
The checkpoint files are written whole (a new object moved over the old), so reading
them beside the running actors is safe; what is handed on trails the stream by a
checkpoint interval (``checkpoint_every_s``) and the ordering units' K.
"""

from __future__ import annotations

import numpy as np

from specula import events as ev
from specula.actors.recovery import Checkpoints, apply_segments, unpack_checkpoint
from specula.detectors.graph import Graph
from specula.ordering.net import NetOutput


class SettledTail:
    """Hands on the final events of a running graph's actors (see the module).

    ``since`` gives, per producer id, the counter below which events were handed on
    before (by an earlier run that suspended); :attr:`since` is then kept up to date.
    """

    def __init__(self, checkpoints: Checkpoints, graph: Graph,
                 since: dict[int, int] | None = None) -> None:
        self.since = dict(since or {})
        self._instances = graph.instances()
        self._stores = {i.producer: checkpoints.store(i.label) for i in self._instances}
        self._dtypes = {i.producer: i.unit(graph.registry).out_dtype for i in self._instances}
        self._nets = {p: NetOutput(d) for p, d in self._dtypes.items()}
        self._segments = dict.fromkeys(self._stores, 0)

    def take(self) -> dict[str, np.ndarray]:
        """Per node, the events that became final since the last call (none yet: no
        entry)."""
        found: dict[str, list[np.ndarray]] = {}
        for inst in self._instances:
            p, store = inst.producer, self._stores[inst.producer]
            data = store.read("checkpoint")
            if data is None:
                continue
            state = unpack_checkpoint(data, inst.label)
            net = self._nets[p]
            apply_segments(store, net, self._segments[p], state["segments"])
            self._segments[p] = state["segments"]
            lo, hi = self.since.get(p, 0), int(state["settled"])
            if hi <= lo:
                continue
            rows = net.net()
            final = rows[(rows["seq"] >= lo) & (rows["seq"] < hi)]
            if len(final):
                found.setdefault(inst.node.name, []).append(final)
            self.since[p] = hi
            self._nets[p] = net.keep_from(hi)
        return {name: ev.concat_records(parts) for name, parts in found.items()}
