"""The in-process runtime's model of inboxes: every instance a single server on the
virtual clock.

Without it (the default) an instance takes what arrived in a step in that step and
processing takes no virtual time. With it each instance has an :class:`~.inbox.Inbox`
and is busy, after taking a batch, for the time the cost model gives its work (measured
wall time without a cost model). A step at time ``now`` then goes through the instances
in topological order; each one

1. appends what its producers (or the source) handed it in this step to its inbox, at
   the time they handed it over (raw events: ``now``; generated ones: the end of the
   producer's processing);
2. while it is free by ``now``, takes the oldest batch at ``start = max(free, arrival)``,
   asks its :class:`~.inbox.Gate` what to drop (a node with shedding), runs the rest
   through its ordering unit (which stamps its output ``ats = start``, as on Ray) and is
   free again at ``done = start + busy``. Its output reaches the net output and the
   subscribers' inboxes at ``done``: a detection's latency includes the waits in the
   inboxes on its way and the processing times;
3. at the end of the stream, takes everything left, then flushes its unit.

Runs stay deterministic with a cost model. Backpressure is not modelled: on the virtual
clock an inbox is unbounded (the Ray runtime's inboxes are bounded).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from specula import events as ev
from specula.actors.inbox import Gate, Inbox
from specula.detectors.base import Detector
from specula.detectors.graph import Instance
from specula.ordering.adaptation import ManualClock
from specula.ordering.net import NetOutput
from specula.ordering.samples import SampleLog
from specula.ordering.unit import OrderingUnit

if TYPE_CHECKING:
    from specula.actors.inprocess import InProcessRuntime


class Station:
    """One instance's detector (the copy its unit wraps), inbox, gate and the virtual
    time at which it is free again."""

    def __init__(self, instance: Instance, runtime: InProcessRuntime,
                 unit: OrderingUnit) -> None:
        spt = 1.0 / runtime.ticks_per_second
        detector = unit.detector
        if not isinstance(detector, Detector):  # Graph.add takes nothing else
            raise TypeError(f"{instance.label}: {type(detector).__name__} is not a Detector")
        self.detector = detector
        self.inbox = Inbox(None, spt)
        self.gate = Gate(instance.node.shedding, runtime.graph.registry, spt, unit.detector,
                         unit=unit)
        self.free_at = -math.inf
        self.series: SampleLog[dict[str, float]] = SampleLog()


def queued_step(rt: InProcessRuntime, stations: dict[int, Station],
                units: dict[int, OrderingUnit], nets: dict[int, NetOutput],
                clock: ManualClock, raw: np.ndarray, now: int, flush: bool) -> None:
    """One delivery step of ``rt`` at virtual time ``now`` (ticks), with inboxes."""
    if rt.cost_model:
        clock.advance(max(0.0, now / rt.ticks_per_second - clock()))
    # what each producer handed over in this step: (node or None for raw, batch, time)
    produced: list[tuple[str | None, np.ndarray, float]] = [(None, raw, now)] if len(raw) \
        else []
    for inst in rt.instances:
        unit, station = units[inst.producer], stations[inst.producer]
        for source, batch, t in produced:
            piece = rt.router.piece(inst, source, batch)
            if len(piece):
                station.inbox.push(ev.conform(piece, unit.in_dtype, drop=True), t)
                station.gate.arrived(len(piece), t)
        for out, t in _serve(rt, inst, station, unit, now, flush):
            _hand_over(rt, inst, unit, nets, out, t, produced)
        if flush:
            end = max(float(now), station.free_at)
            _hand_over(rt, inst, unit, nets, unit.flush(math.ceil(end)), end, produced)


def _hand_over(rt: InProcessRuntime, inst: Instance, unit: OrderingUnit,
               nets: dict[int, NetOutput], out: np.ndarray, t: float,
               produced: list[tuple[str | None, np.ndarray, float]]) -> None:
    """Record what ``unit`` generated at ``t`` and hand it, with a progress punctuation
    if its progress moved, to the subscribers: right after the call that generated it,
    so that no punctuation runs ahead of the events it vouches for."""
    out = rt.hand_on(inst, unit, nets[inst.producer], out, math.ceil(t))
    if len(out):
        produced.append((inst.node.name, out, t))


def _serve(rt: InProcessRuntime, inst: Instance, station: Station, unit: OrderingUnit,
           now: int, drain: bool) -> Iterator[tuple[np.ndarray, float]]:
    """Take batches while the instance is free by ``now`` (all of them if ``drain``);
    yields what the unit generated for each, with the time it was done, before taking
    the next."""
    inbox, gate = station.inbox, station.gate
    spt = 1.0 / rt.ticks_per_second
    while len(inbox):
        start = max(station.free_at, inbox.head_arrival)
        if start > now and not drain:
            break
        q_size = inbox.events
        batch, arrival, _, _ = inbox.pop(start)
        kept = gate.admit(batch, gate.command(q_size))
        before, work = unit.stats.work(), station.detector.work_done()
        first = unit.stats.handed()
        t0 = time.perf_counter()
        out = unit.push(kept, math.ceil(start)) if len(kept) else np.empty(0, unit.out_dtype)
        if rt.cost_model:
            busy = rt.cost_model.busy(before, unit.stats.work(), inst.node.name,
                                      station.detector.work_done() - work)
            if unit.controller is not None:
                unit.controller.add_busy(busy)
        else:
            busy = time.perf_counter() - t0
        done = start + busy / spt
        station.free_at = done
        gate.done(len(kept), busy, (done - arrival) * spt, unit.stats.handed() - first)
        station.series.append({"time_ns": done * spt * 1e9, "inbox_events": inbox.events,
                               "wait_s": (start - arrival) * spt, "shed": gate.shed_total,
                               "violations": gate.stats.violations, "alpha": unit.alpha})
        yield out, done
