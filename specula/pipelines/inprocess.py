"""The in-process runtime: a whole detector graph in one process, on a virtual clock.

It is the reference the distributed runtime is checked against. Raw events are
delivered in the order of their arrival time stamp ``ats`` (stable for equal ones);
each delivery step runs every detector once, in topological order, and hands what a
detector generated to its subscribers in the same step (no network delay). Generated
events are stamped with the step's time, so a detection's latency in virtual time is
the time of the first emission of its final version minus the arrival of the newest
raw event it depends on.

With ``cost_model`` the busy time of each unit is not measured but computed from the
work it did (events processed, snapshots, restores, comparisons), and alpha-adaptation
runs on the virtual clock: runs are deterministic.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from specula import events as ev
from specula.ordering.adaptation import AlphaController, AlphaSample, ManualClock
from specula.ordering.net import NetOutput
from specula.ordering.unit import OrderingUnit, UnitStats
from specula.pipelines.graph import Graph, Node


@dataclass(frozen=True)
class CostModel:
    """Seconds of busy time per unit of work, for deterministic alpha-adaptation."""

    per_event: float = 2e-6
    per_snapshot: float = 1e-6
    per_restore: float = 1e-6
    per_comparison: float = 0.5e-6

    def busy(self, before: UnitStats, after: UnitStats) -> float:
        return ((after.emitted - before.emitted) * self.per_event
                + (after.snapshots - before.snapshots) * self.per_snapshot
                + (after.restores - before.restores) * self.per_restore
                + (after.snapshot_comparisons - before.snapshot_comparisons)
                * self.per_comparison)


@dataclass
class RunResult:
    """What an in-process run produced, per detector name."""

    outputs: dict[str, NetOutput]
    units: dict[str, OrderingUnit]
    messages: dict[str, list[np.ndarray]] = field(default_factory=dict)

    def net(self, name: str) -> np.ndarray:
        """Net output of a detector: emitted minus retracted, updates resolved."""
        return self.outputs[name].net()

    def latencies(self, name: str) -> np.ndarray:
        """Detection latency (virtual time units) of every net event of a detector."""
        return self.outputs[name].latencies()

    def stats(self, name: str) -> UnitStats:
        return self.units[name].stats

    def alpha_history(self, name: str) -> list[AlphaSample]:
        c = self.units[name].controller
        return c.history if c is not None else []

    def late(self, name: str) -> np.ndarray:
        return self.units[name].late_events()


class InProcessRuntime:
    """Run a :class:`~specula.pipelines.graph.Graph` deterministically in one process.

    Every run works on fresh copies of the graph's detectors; the graph is not changed.

    Parameters
    ----------
    graph
        The validated graph.
    ticks_per_second
        Virtual time units (of ``ats``) per second, for alpha-adaptation's ``t_span``.
    cost_model
        Busy time per unit of work; ``None`` measures wall time instead.
    trace
        Record every step of every unit (see :class:`~specula.ordering.TraceEntry`).
    keep_messages
        Keep every message each detector sent (for tests).
    """

    def __init__(self, graph: Graph, *, ticks_per_second: float = 1.0,
                 cost_model: CostModel | None = None, trace: bool = False,
                 keep_messages: bool = False) -> None:
        graph.validate()
        self.graph = graph
        self.ticks_per_second = ticks_per_second
        self.cost_model = cost_model
        self.trace = trace
        self.keep_messages = keep_messages
        self.order = graph.topological_order()
        self._clock = ManualClock()
        n_types = max(t.id for t in graph.registry.types()) + 1
        self._wanted: dict[str, np.ndarray] = {}
        self._hears: dict[tuple[str, str], bool] = {}
        for node in self.order:
            mask = np.zeros(n_types, bool)
            mask[[graph.registry.id(t) for t in node.inputs]] = True
            self._wanted[node.name] = mask
            for src in self.order:
                self._hears[node.name, src.name] = bool(set(node.inputs) & set(src.outputs))

    def _unit(self, node: Node, producer: int) -> OrderingUnit:
        alpha: float | AlphaController = node.alpha  # type: ignore[assignment]
        if node.alpha == "adaptive":
            alpha = AlphaController(clock=self._clock if self.cost_model else _wall_clock())
        return OrderingUnit(copy.deepcopy(node.detector), self.graph.registry, producer=producer,
                            inputs=node.inputs, outputs=node.outputs, clock=node.clock,
                            alpha=alpha, retraction=node.retraction, late=node.late,
                            k0=node.k0, trace=self.trace, name=node.name)

    def run(self, raw: np.ndarray, *, batch_ticks: int = 0) -> RunResult:
        """Deliver ``raw`` (with ``ats`` set) in arrival order, then flush level by level.

        Raw events should carry their source's counter in ``seq`` (it orders events
        with equal time stamps); if no event has one, they are numbered in time-stamp
        order.

        Raw events whose arrival falls within ``batch_ticks`` of the first event of a
        step are delivered together in that step.
        """
        self._clock = ManualClock()
        units = {n.name: self._unit(n, i + 1) for i, n in enumerate(self.order)}
        outputs = {n.name: NetOutput(units[n.name].out_dtype) for n in self.order}
        result = RunResult(outputs, units, {n.name: [] for n in self.order})
        raw = raw.copy()
        if len(raw) and not raw["seq"].any() and not raw["producer"].any():
            # raw events without a counter are numbered in occurrence order
            raw["seq"][np.argsort(raw["ts"], kind="stable")] = np.arange(len(raw))
        raw = raw[np.argsort(raw["ats"], kind="stable")]
        raw["origin"] = raw["ats"]
        for batch, now in _steps(raw, batch_ticks):
            self._step(result, {"": batch}, now, flush=False)
        now = int(raw["ats"][-1]) if len(raw) else 0
        self._step(result, {}, now, flush=True)
        return result

    def _for(self, node: Node, source: str, batch: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The part of ``batch`` (from detector ``source``, or raw for ``""``) that ``node``
        subscribes to: its input types, plus the counter messages of a producer it hears."""
        wanted = self._wanted[node.name]
        if source and not self._hears[node.name, source]:
            return batch[:0]
        keep = np.take(wanted, batch["type"], mode="clip")
        if source:
            keep |= (batch["flags"] & ev.RETRACTION) > 0
        if not keep.all():
            batch = batch[keep]
        if batch.dtype != dtype and len(batch):
            batch = ev.conform(batch, dtype, drop=True)
        return batch

    def _step(self, result: RunResult, produced: dict[str, np.ndarray], now: int,
              flush: bool) -> None:
        if self.cost_model:
            self._clock.advance(max(0.0, now / self.ticks_per_second - self._clock()))
        produced = dict(produced)
        for node in self.order:
            unit = result.units[node.name]
            inbox = [self._for(node, src, batch, unit.in_dtype) for src, batch in produced.items()]
            inbox = [b for b in inbox if len(b)]
            before = copy.copy(unit.stats) if self.cost_model else None
            out = [unit.push(np.concatenate(inbox), now)] if inbox else []
            if flush:
                out.append(unit.flush(now))
            if self.cost_model and unit.controller is not None:
                unit.controller.add_busy(self.cost_model.busy(before, unit.stats))
            out = [o for o in out if len(o)]
            if out:
                batch = out[0] if len(out) == 1 else np.concatenate(out)
                result.outputs[node.name].apply(batch, now)
                if self.keep_messages:
                    result.messages[node.name].append(batch)
                produced[node.name] = batch




def _steps(raw: np.ndarray, batch_ticks: int) -> Sequence[tuple[np.ndarray, int]]:
    ats = np.ascontiguousarray(raw["ats"])
    steps = []
    i = 0
    while i < len(raw):
        j = int(np.searchsorted(ats, ats[i] + batch_ticks, side="right"))
        steps.append((raw[i:j], int(ats[j - 1])))
        i = j
    return steps


def _wall_clock():
    import time

    return time.perf_counter
