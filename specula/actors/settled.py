"""What a running graph has made final, read from its actors' checkpoints as they are
written, so that a live run persists its output as it goes and its actors can forget
it.

Every checkpoint of an actor writes the net output applied and the late events set
aside since the previous one as a numbered segment (:mod:`.output_log`), and its state
records the unit's settled counter (:attr:`~specula.ordering.OrderingUnit.settled_seq`):
the actor's events below it are final, since no replay reaches them.
:class:`SettledTail` follows each actor's segments in a replica of its net output and
hands on, once, the events that fell below the settled counter of its last checkpoint
(the replica then keeps only those above it), and every segment's emissions and late
events. The checkpoint files are written whole (a new object moved over the old), so
reading them beside the running actors is safe; what is handed on trails the stream by
a checkpoint interval (``checkpoint_every_s``) and the ordering units' K.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from specula import events as ev
from specula.actors.output_log import read_base, read_segment
from specula.actors.recovery import Checkpoints, Suspension, unpack_checkpoint
from specula.detectors.graph import Graph
from specula.ordering.net import NetOutput, net_rows


@dataclass
class Settled:
    """What a :meth:`SettledTail.take` hands on, per node (a node with none: no
    entry): net events that became final, emissions and late events."""

    complex: dict[str, np.ndarray] = field(default_factory=dict)
    emissions: dict[str, np.ndarray] = field(default_factory=dict)
    late: dict[str, np.ndarray] = field(default_factory=dict)


class SettledTail:
    """Hands on the final output of a running graph's actors (see the module).

    ``resume`` is the suspended run this one goes on from (None: a fresh run): its
    events below the settled counters and its segments were handed on by the runs
    before. :attr:`since` (per producer id, the counter below which every net event
    was handed on) and :attr:`segments` (the segments read) are kept up to date.
    """

    def __init__(self, checkpoints: Checkpoints, graph: Graph,
                 resume: Suspension | None = None) -> None:
        self.since = dict(resume.settled) if resume is not None else {}
        self._instances = graph.instances()
        self._stores = {i.producer: checkpoints.store(i.label) for i in self._instances}
        self._dtypes = {i.producer: i.unit(graph.registry).out_dtype for i in self._instances}
        self._nets: dict[int, NetOutput] = {}
        self.segments = dict.fromkeys(self._stores, 0)
        self._own = dict(resume.segments) if resume is not None else {}

    def take(self) -> Settled:
        """What became final since the last call."""
        found: dict[str, dict[str, list[np.ndarray]]] = {f: {} for f in _TABLES}
        for inst in self._instances:
            p, store = inst.producer, self._stores[inst.producer]
            data = store.read("checkpoint")
            if data is None:
                continue
            state = unpack_checkpoint(data, inst.label)
            if p not in self._nets:  # the first read: what earlier runs handed on
                base = read_base(store, state["output"]["base"] if self._own.get(p) else 0,
                                 self._dtypes[p])
                self._nets[p], self.segments[p] = base.net, base.index
            net, name = self._nets[p], inst.node.name
            for i in range(self.segments[p], state["output"]["segments"]):
                seg = read_segment(store, i)
                seg.apply_to(net)
                if i >= self._own.get(p, 0):
                    _add(found["emissions"], name, seg.rows)
                    _add(found["late"], name, seg.late)
            self.segments[p] = state["output"]["segments"]
            lo, hi = self.since.get(p, 0), int(state["settled"])
            if hi > lo:
                rows, _, self._nets[p] = net.split_at(hi)
                _add(found["complex"], name, net_rows(rows[rows["seq"] >= lo]))
                self.since[p] = hi
        return Settled(**{table: {n: ev.concat_records(parts) for n, parts in per_node.items()}
                          for table, per_node in found.items()})


_TABLES = ("complex", "emissions", "late")


def _add(table: dict[str, list[np.ndarray]], name: str, rows: np.ndarray) -> None:
    if len(rows):
        table.setdefault(name, []).append(rows)
