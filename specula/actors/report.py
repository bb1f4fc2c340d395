"""What a run produced: per detector its net output, latencies, counters, late events,
alpha over time and what its inboxes saw (waits, shed events, the latency bound's
violations). The same report comes from the in-process and the Ray runtime."""

from __future__ import annotations

import json
import resource
import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from specula.actors.inbox import Histogram, InboxStats
from specula.actors.output_log import HandedOn
from specula.ordering.adaptation import AlphaSample
from specula.ordering.net import NetOutput, NetReads
from specula.ordering.unit import OrderingUnit, UnitStats


def rss_mb() -> float:
    """This process's private resident memory in MB (``RssAnon``: its own heap; on
    other systems than Linux its peak resident memory so far). Pages of Ray's object
    store the process touched are not in it (:func:`shared_mb`)."""
    return _read_memory()["rss_mb"]


def shared_mb() -> float:
    """This process's resident shared memory in MB (``RssShmem``; 0 where unknown):
    on Ray, mostly pages of the object store it read pushes from, which belong to the
    store and are bounded by its size, not by the process."""
    return _read_memory()["shm_mb"]


_memory_lock = threading.Lock()
_memory: tuple[float, dict[str, float]] = (float("-inf"), {})  # when read, what


def process_memory(every_s: float) -> dict[str, float]:
    """``rss_mb`` and ``shm_mb`` of this process (:func:`rss_mb`, :func:`shared_mb`),
    read from ``/proc`` at most once every ``every_s`` seconds, whoever asks: the
    instances of a chain share one process, and one reading serves them all."""
    global _memory
    with _memory_lock:
        when, figures = _memory
        now = time.monotonic()
        if now - when >= every_s:
            figures = _read_memory()
            _memory = (now, figures)
        return figures


def _read_memory() -> dict[str, float]:
    """``rss_mb`` and ``shm_mb`` from one reading of ``/proc/self/status``."""
    kb = _status_kb("RssAnon", "RssShmem")
    rss = kb["RssAnon"]
    return {"rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            if rss is None else rss / 1024,
            "shm_mb": (kb["RssShmem"] or 0) / 1024}


class CpuTimes:
    """Where an actor process's processor time goes: CPU seconds of its processing
    thread per phase of a step (``unit``: the ordering unit and the detector;
    ``publish``: the pushes to the consumers, Ray's serialisation of them included;
    ``checkpoint``), and of the whole process since :meth:`start`. ``other`` is the
    rest: Ray's threads (receiving calls, deserialising their batches, replying), the
    push handlers and an idle process's background work."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._start: float | None = None

    def start(self) -> None:
        """Count the process's time from now (the run starts)."""
        self._start = time.process_time()

    def add(self, **seconds: float) -> None:
        """Add thread CPU seconds to phases (from the processing thread only)."""
        for phase, s in seconds.items():
            self.phases[phase] = self.phases.get(phase, 0.0) + s

    def summary(self) -> dict[str, float]:
        process = time.process_time() - self._start if self._start is not None else 0.0
        return {"process": process, **self.phases, "other": process - sum(self.phases.values())}

    @staticmethod
    def shared(summaries: list[dict[str, float]]) -> list[dict[str, float]]:
        """The summaries of instances that ran in one process (a chain), each with its
        share of the process's time: its own phases, and of the rest (``other``) a part
        in proportion to them (equal parts if none has any); so that they add up to the
        process's time once, not once per instance.

        >>> CpuTimes.shared([{"process": 4.0, "unit": 1.0, "other": 3.0},
        ...                  {"process": 4.0, "unit": 3.0, "other": 1.0}])
        [{'process': 1.0, 'unit': 1.0, 'other': 0.0}, {'process': 3.0, 'unit': 3.0, 'other': 0.0}]
        """
        if len(summaries) < 2:
            return summaries
        own = [sum(v for k, v in one.items() if k not in ("process", "other"))
               for one in summaries]
        rest = max(max(one["process"] for one in summaries) - sum(own), 0.0)
        total = sum(own)
        out = []
        for one, mine in zip(summaries, own, strict=True):
            other = rest * (mine / total if total > 0 else 1 / len(summaries))
            out.append({**one, "process": mine + other, "other": other})
        return out

    @staticmethod
    def total(summaries: list[dict[str, float]]) -> dict[str, float]:
        """The sum of several instances' summaries, phase by phase."""
        out: dict[str, float] = {}
        for one in summaries:
            for phase, s in one.items():
                out[phase] = out.get(phase, 0.0) + s
        return out


def _status_kb(*fields: str) -> dict[str, int | None]:
    """Fields of ``/proc/self/status`` in kB (None where it lacks one: not Linux)."""
    found: dict[str, int | None] = dict.fromkeys(fields)
    try:
        with open("/proc/self/status") as f:
            for line in f:
                name = line.split(":", 1)[0]
                if name in found:
                    found[name] = int(line.split()[1])
    except OSError:
        pass
    return found


@dataclass
class DetectorReport:
    """One detector, all its partitions together."""

    name: str
    #: its net output (in-process) or what its actors reported of theirs (on Ray)
    net: NetReads
    stats: UnitStats
    late: np.ndarray
    alpha: dict[str, list[AlphaSample]] = field(default_factory=dict)
    #: samples after each batch taken, each with its instance's label (``instance``)
    series: list[dict[str, float | str]] = field(default_factory=list)
    #: the largest K of its instances at the end, in seconds of event time
    k_s: float = 0.0
    #: 1 for detectors of raw events, else one more than the highest of their producers
    level: int = 1
    #: its inboxes' waits, latencies, shed events and bound violations (None: the
    #: in-process runtime without queueing, which has no inboxes)
    inbox: InboxStats | None = None
    #: on Ray: restarts, pushes dropped (duplicates, divergent, fenced, stale) and
    #: resent, over all processes (:mod:`~specula.actors.tally`), checkpoints (count,
    #: seconds, bytes of the last) and peak resident memory per instance in MB
    #: (:func:`~specula.actors.ray_runtime.recovery_summary`); None in-process
    recovery: dict[str, Any] | None = None
    #: on Ray: its instances' processes' CPU seconds during the run, by phase
    #: (:class:`CpuTimes`); None in-process
    cpu_s: dict[str, float] | None = None
    #: its memory limit, the largest buffer and snapshot estimate of an instance, and
    #: whether speculation is backed off at the end
    #: (:meth:`~specula.ordering.memory.MemoryGuard.figures`)
    memory: dict[str, Any] | None = None
    #: on Ray: where each instance's actor ran (node address and id), in partition
    #: order; None in-process
    hosts: list[str] | None = None
    #: on Ray: per instance, in the same order, its host's clock minus the driver's and
    #: the error bound of that estimate, ms (its time stamps are shifted by the offset:
    #: :mod:`~specula.actors.clocks`)
    clocks_ms: list[tuple[float, float]] | None = None
    #: on Ray: per instance, in the same order, the chain (actor process) it ran in: its
    #: label if alone, ``chain-<k>`` if it shared one (:mod:`~specula.actors.chain`)
    chains: list[str] | None = None
    #: on Ray, in a run that hands its detections on as they settle (``on_settled``):
    #: the net events its actors handed on and no longer hold in :attr:`net`
    handed_on: HandedOn | None = None

    def detected(self) -> dict[int, int]:
        """Net events per type id, those handed on included."""
        types, counts = np.unique(self.net.net()["type"], return_counts=True)
        out = dict(zip(types.tolist(), counts.tolist(), strict=True))
        for t, n in (self.handed_on.by_type.items() if self.handed_on else ()):
            out[t] = out.get(t, 0) + n
        return out

    def latency_s(self, seconds_per_tick: float) -> tuple[float | None, float | None]:
        """Mean and 99th percentile of the detection latency in seconds, over the net
        events held and those handed on (then the percentile is a histogram bin's upper
        edge, ~6 % wide: :class:`~.inbox.Histogram`)."""
        lat = self.net.latencies() * seconds_per_tick
        if self.handed_on is not None and self.handed_on.events:
            h = Histogram()
            h.absorb(self.handed_on.latency)
            h.add_all(lat)
            return h.mean, h.percentile(99)
        if not len(lat):
            return None, None
        return float(lat.mean()), float(np.percentile(lat, 99))

    def summary(self, seconds_per_tick: float) -> dict[str, Any]:
        mean, p99 = self.latency_s(seconds_per_tick)
        alphas = [s.alpha for h in self.alpha.values() for s in h]
        return {
            "net_events": len(self.net) + (self.handed_on.events if self.handed_on else 0),
            "latency_mean_s": mean,
            "latency_p99_s": p99,
            "alpha_mean": float(np.mean(alphas)) if alphas else None,
            "level": self.level,
            "k_s": self.k_s,
            **self.stats.as_dict(),
            "inbox": self.inbox.summary() if self.inbox is not None else None,
            "recovery": self.recovery,
            "cpu_s": self.cpu_s,
            "memory": self.memory,
            "hosts": self.hosts,
            "clocks_ms": self.clocks_ms,
            "chains": self.chains,
        }


@dataclass
class RunReport:
    """The result of running a graph.

    ``seconds_per_tick`` converts the latency unit (virtual ticks in-process, nanoseconds
    on Ray) to seconds.
    """

    runtime: str
    detectors: dict[str, DetectorReport]
    raw_events: int
    wall_seconds: float
    seconds_per_tick: float
    units: dict[str, list[OrderingUnit]] = field(default_factory=dict, repr=False)
    #: Nodes of the Ray cluster the run used (None in-process).
    cluster_nodes: int | None = None
    #: Whole seconds of event time that hold a raw event: how long the stream played,
    #: gaps (a break, sensors off) left out.
    played_seconds: int = 0
    #: The source actors' reports, one per part of a run fed from
    #: :class:`~.sources.Sources` (events, restarts, pushes resent, host).
    sources: list[dict[str, Any]] = field(default_factory=list)
    #: Seconds from the runtime's start (``run()`` called) to the first event a detector
    #: processed: Ray's start where the runtime starts it, the actors' processes, their
    #: imports and warm-up, the first batch's way to a unit (Ray; None in-process, or
    #: when no event reached a unit).
    startup_s: float | None = None
    #: Seconds from that first event to the end of the stream's flush (Ray; None where
    #: ``startup_s`` is).
    stream_wall_s: float | None = None

    def net(self, name: str) -> np.ndarray:
        """Net output of a detector: emitted minus retracted, updates resolved."""
        return self.detectors[name].net.net()

    def latencies(self, name: str) -> np.ndarray:
        """Detection latency of every net event of a detector, in ticks."""
        return self.detectors[name].net.latencies()

    def stats(self, name: str) -> UnitStats:
        return self.detectors[name].stats

    def late(self, name: str) -> np.ndarray:
        return self.detectors[name].late

    def alpha_history(self, name: str) -> list[AlphaSample]:
        """Alpha over time of the detector's first instance (empty unless adaptive)."""
        histories = list(self.detectors[name].alpha.values())
        return histories[0] if histories else []

    def summary(self) -> dict[str, Any]:
        """A JSON-serialisable summary: throughput and per-detector figures."""
        return {
            "runtime": self.runtime,
            "raw_events": self.raw_events,
            "wall_seconds": self.wall_seconds,
            "startup_s": self.startup_s,
            "stream_wall_s": self.stream_wall_s,
            "raw_events_per_s": self.raw_events / self.wall_seconds if self.wall_seconds else None,
            "played_seconds": self.played_seconds,
            "sources": self.sources,
            "detectors": {n: d.summary(self.seconds_per_tick) for n, d in self.detectors.items()},
        }

    def restarts(self) -> dict[str, int]:
        """Restarts of each detector's actors (on Ray; empty in-process)."""
        return {n: d.recovery["restarts"] for n, d in self.detectors.items()
                if d.recovery is not None}

    def shed(self, name: str) -> dict[str, int]:
        """Events a detector's shedding dropped, by type (empty if it shed none)."""
        inbox = self.detectors[name].inbox
        return dict(inbox.shed) if inbox is not None else {}

    def time_series(self) -> dict[str, dict[str, list]]:
        """Per detector instance, for plotting: alpha and busy factor at every adaptation
        step (``alpha.*``), and after every batch it took from its inbox (on Ray, and
        in-process with queueing) the inbox's length, the batch's wait, the events shed
        and the bound's violations so far, and on Ray the unit's counters, buffer size and
        calls in flight to its consumers (``batch.*``)."""
        out: dict[str, dict[str, list]] = {}
        for d in self.detectors.values():
            for label, hist in d.alpha.items():
                out.setdefault(label, {}).update({
                    "alpha.time": [s.time for s in hist], "alpha.alpha": [s.alpha for s in hist],
                    "alpha.busy_factor": [s.busy_factor for s in hist]})
            for sample in d.series:
                series = out.setdefault(str(sample.get("instance", d.name)), {})
                for key, value in sample.items():
                    if key != "instance":
                        series.setdefault(f"batch.{key}", []).append(value)
        return out

    def to_json(self) -> str:
        return json.dumps({"summary": self.summary(), "time_series": self.time_series()},
                          default=float)


def format_detectors(detectors: dict[str, dict[str, Any]]) -> list[str]:
    """Lines of a table of per-detector summaries (``RunReport.summary()["detectors"]``):
    level, final K, net events, late, replays, retracted, latency mean and p99; then a
    line per detector with a latency bound: events shed, by type, and the violations;
    and one per detector whose memory limit acted: back-offs, caps of K, events released."""
    lines = [f"{'detector':<17} {'level':>5} {'K':>9} {'net':>8} {'late':>6} {'replays':>8} "
             f"{'retracted':>9} {'latency mean':>13} {'p99':>10}"]
    for name, d in detectors.items():
        mean, p99 = d["latency_mean_s"], d["latency_p99_s"]
        lines.append(f"{name:<17} {d.get('level', 1):>5} {d.get('k_s', 0) * 1e3:>6.0f} ms "
                     f"{d['net_events']:>8,} {d['late']:>6,} {d['relocations']:>8,} "
                     f"{d['events_retracted']:>9,} "
                     f"{'-' if mean is None else f'{mean * 1e3:.1f} ms':>13} "
                     f"{'-' if p99 is None else f'{p99 * 1e3:.1f} ms':>10}")
    for name, d in detectors.items():
        inbox = d.get("inbox") or {}
        if inbox.get("latency_bound_s") is not None:
            by_type = ", ".join(f"{t} {n:,}" for t, n in inbox["shed_by_type"].items())
            by_type = f" ({by_type})" if by_type else ""
            p99 = inbox["latency_p99_s"]
            pairs = inbox.get("shed_pairs", 0)
            by_type += f", {pairs:,} (event, window) pairs in the detector" if pairs else ""
            states = inbox.get("shed_partial_matches", 0)
            by_type += f", {states:,} partial matches in the detector" if states else ""
            lines.append(f"{name}: shed {inbox['shed']:,} events{by_type}"
                         f"; {inbox['violations']:,} over the {inbox['latency_bound_s']:g} s "
                         f"bound; latency at the node p99 "
                         f"{'-' if p99 is None else f'{p99 * 1e3:.1f} ms'}")
    for name, d in detectors.items():
        if d.get("memory_backoffs") or d.get("memory_caps"):
            mem = d.get("memory") or {}
            lines.append(f"{name}: memory limit ({mem.get('limit_events', 0):,} events): "
                         f"speculation backed off {d['memory_backoffs']:,} times, K capped "
                         f"{d['memory_caps']:,} times ({d['memory_released']:,} events "
                         f"released early; what then came behind the horizon is late, and "
                         f"the nodes below compute on its output without it); "
                         f"largest buffer {mem.get('peak_buffered', 0):,}")
    return lines


def sum_stats(stats: list[UnitStats]) -> UnitStats:
    """Counters of several instances added up."""
    total = UnitStats()
    for s in stats:
        for f in fields(UnitStats):
            setattr(total, f.name, getattr(total, f.name) + getattr(s, f.name))
    return total


def merge_nets(nets: list[NetOutput]) -> NetOutput:
    """The net outputs of several instances (disjoint producers) as one (the only one
    itself, which the caller hands over)."""
    if len(nets) == 1:
        return nets[0]
    merged = NetOutput(nets[0].dtype)
    for n in nets:
        merged.absorb(n)
    return merged
