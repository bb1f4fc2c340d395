"""The options of a detector node and of the runtimes, in two tables: what they mean,
their defaults, and what values they take; and the values of the options that are
objects (:class:`Shedding`, :class:`MemoryLimit`, :class:`CostModel`).

:data:`NODE_OPTIONS` holds a node's options: :meth:`specula.detectors.Graph.add`, the
:class:`~specula.ordering.OrderingUnit` and the ``specula`` command check them here.
:data:`RUNTIME_OPTIONS` holds the runtimes' options: the constructor options of
:class:`~specula.actors.inprocess.InProcessRuntime` and
:class:`~specula.actors.ray_runtime.RayRuntime`, and the arguments of ``run()`` that
both take alike (batching and pacing); :data:`RUNTIME_ARGUMENTS` says which takes
which. So a wrong value gets the same message wherever it is given, and the message
lists what would be right.

>>> check_option("retraction", "partial", where="hits")
Traceback (most recent call last):
...
specula.options.OptionError: hits: retraction must be one of 'on-demand', 'full'; got 'partial'
>>> node_options(alpha="adaptive")["retraction"]
'on-demand'
>>> runtime_options("run", batch_rows=0)
Traceback (most recent call last):
...
specula.options.OptionError: run: batch_rows must be None or an integer >= 1 (rows); got 0
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict


class OptionError(ValueError):
    """An option with a value it cannot take; the message says which values it can."""


@dataclass(frozen=True)
class Option:
    """One option: its name, default, meaning and valid values."""

    name: str
    default: Any
    doc: str
    #: The valid values, when they are a short list; otherwise ``valid`` describes them.
    choices: tuple[Any, ...] = ()
    valid: str = ""
    accepts: Callable[[Any], bool] | None = None

    def check(self, value: Any, where: str = "") -> Any:
        """``value`` if it is valid, else :class:`OptionError` naming the valid values."""
        try:
            ok = value in self.choices if self.choices else bool(self.accepts and
                                                                  self.accepts(value))
        except (TypeError, ValueError):  # a value that does not compare, e.g. an array
            ok = False
        if not ok:
            prefix = f"{where}: " if where else ""
            valid = ("one of " + ", ".join(map(repr, self.choices))) if self.choices \
                else self.valid
            raise OptionError(f"{prefix}{self.name} must be {valid}; got {value!r}")
        return value


def _is_alpha(value: Any) -> bool:
    if value == "adaptive":
        return True
    # numbers.Real promises only < and <= (no reflected comparison with an int), so the
    # bounds are written with those; NaN fails the first
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and value <= 1 and not value < 0)


def _is_int(value: Any, low: int, high: int = 2**63 - 1) -> bool:
    return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and low <= int(value) <= high)


#: The largest time stamp (and so K) an int64 column holds.
MAX_TICKS = 2**63 - 1

#: The most instances of one node: each is an ordering unit (and on Ray an actor, a
#: process of ~200 MB), so more is a typo, not a plan.
MAX_PARTITIONS = 1024


#: The input shedding strategies a :class:`Shedding` can name; :mod:`specula.shedding`
#: implements each (``make_shedder``). A strategy can also be given as an object.
#: ``"detector"``: the node's detector sheds inside itself (eSPICE's window operator drops
#: (event, window) pairs, :class:`specula.shedding.WindowDetector`).
SHEDDING_STRATEGIES: tuple[str, ...] = ("random", "detector")
#: When a node sheds: ``"queue"``, eSPICE's queue bound; ``"latency"``, the hybrid
#: shedding paper's bound on the smoothed latency (:mod:`specula.shedding.overload`).
SHEDDING_TRIGGERS: tuple[str, ...] = ("queue", "latency")


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) \
        and math.isfinite(value)


@dataclass(frozen=True)
class Shedding:
    """Load shedding on a node's inbox: the latency bound to keep, when to shed and what.

    An event's latency at a node is the time from its arrival in the node's inbox to the
    end of the processing of the batch it was taken in (eSPICE's l(e) = l(q) + l(p)).
    When that latency is at risk the node drops a share of the plain events it takes
    from its inbox before its ordering unit sees them; punctuations, retractions,
    updates and revocations are never dropped. Every dropped event is counted, per node
    and event type, in the run report.

    Parameters
    ----------
    latency_bound_s
        The bound, in seconds: eSPICE's LB, the hybrid paper's θ.
    f
        eSPICE's margin, in (0, 1]: shed once the queue holds more than ``f`` times the
        events the bound allows (q_size > f·q_max), before the bound is reached.
    trigger
        ``"queue"`` (eSPICE sec. 3.4: q_max = LB / l(p), with l(p) the measured
        processing time per event), or ``"latency"`` (the hybrid paper: shed when the
        latency averaged over the last ``smoothing`` events, μ, exceeds θ, at the level
        that brings μ back to θ).
    strategy
        Which events to drop: a name in :data:`SHEDDING_STRATEGIES` (``"random"``: RI,
        random input shedding; ``"detector"``: every event passes the inbox and the
        node's detector gets each drop command, for a detector that sheds inside itself,
        such as eSPICE's window operator), or an object implementing
        :class:`specula.shedding.InputShedder`, which every instance of the node copies.
    seed
        Seed of the hashed random numbers of ``"random"``.
    smoothing
        Events the measured processing time per event and μ are averaged over (the
        hybrid paper's sliding average over 1,000 measurements).
    latency_quantile
        With ``trigger="latency"``: μ is this quantile of the last ``smoothing``
        events' latencies instead of their mean (the hybrid paper's Fig. 5b and 7-10
        bound the 95th percentile: 0.95). None: the mean.

    >>> Shedding(latency_bound_s=0.5).f
    0.8
    >>> Shedding(latency_bound_s=0)
    Traceback (most recent call last):
    ...
    specula.options.OptionError: Shedding: latency_bound_s must be a number of seconds > 0; got 0
    """

    latency_bound_s: float
    f: float = 0.8
    trigger: Literal["queue", "latency"] = "queue"
    strategy: Any = "random"
    seed: int = 0
    smoothing: int = 1000
    latency_quantile: float | None = None

    def __post_init__(self) -> None:
        def bad(field: str, valid: str) -> OptionError:
            return OptionError(f"Shedding: {field} must be {valid}; got "
                               f"{getattr(self, field)!r}")

        if not (_is_number(self.latency_bound_s) and self.latency_bound_s > 0):
            raise bad("latency_bound_s", "a number of seconds > 0")
        if not (_is_number(self.f) and 0 < self.f <= 1):
            raise bad("f", "a number in (0, 1]")
        if self.trigger not in SHEDDING_TRIGGERS:
            raise bad("trigger", "one of " + ", ".join(map(repr, SHEDDING_TRIGGERS)))
        if isinstance(self.strategy, str):
            if self.strategy not in SHEDDING_STRATEGIES:
                raise bad("strategy", "one of " + ", ".join(map(repr, SHEDDING_STRATEGIES))
                          + " or an InputShedder object")
        elif not callable(getattr(self.strategy, "keep", None)):
            raise bad("strategy", "one of " + ", ".join(map(repr, SHEDDING_STRATEGIES))
                      + " or an InputShedder object (with a keep(batch, command) method)")
        if not _is_int(self.seed, 0, MAX_TICKS):
            raise bad("seed", "an integer >= 0")
        if not _is_int(self.smoothing, 1, MAX_TICKS):
            raise bad("smoothing", "an integer >= 1 (events)")
        if self.latency_quantile is not None and not (
                _is_number(self.latency_quantile) and 0 < self.latency_quantile <= 1):
            raise bad("latency_quantile", "None (the mean) or a number in (0, 1]")

    def describe(self) -> dict[str, Any]:
        """The settings as plain values (the strategy by name or class name), for JSON."""
        strategy = self.strategy if isinstance(self.strategy, str) \
            else type(self.strategy).__name__
        return {"latency_bound_s": self.latency_bound_s, "f": self.f, "trigger": self.trigger,
                "strategy": strategy, "seed": self.seed, "smoothing": self.smoothing,
                "latency_quantile": self.latency_quantile}


@dataclass(frozen=True)
class MemoryLimit:
    """How much one ordering unit of a node may hold: buffered events and the bytes of
    its detector snapshots (:mod:`specula.ordering.memory` says what the unit does near
    the limits: speculation backs off, then K is capped, then a clear error).

    Parameters
    ----------
    buffered_events
        Events the unit's buffer holds at most. K-slack holds about the input rate
        times K events, and K is the largest delay seen, so disorder alone can grow it
        without bound.
    snapshot_mb
        Megabytes of detector snapshots a speculative unit holds at most (estimated
        from the pickled size of sampled snapshots).

    >>> MemoryLimit().buffered_events
    1000000
    >>> MemoryLimit(buffered_events=0)
    Traceback (most recent call last):
    ...
    specula.options.OptionError: MemoryLimit: buffered_events must be an integer >= 2; got 0
    """

    buffered_events: int = 1_000_000
    snapshot_mb: float = 256.0

    def __post_init__(self) -> None:
        if not _is_int(self.buffered_events, 2, MAX_TICKS):
            raise OptionError(f"MemoryLimit: buffered_events must be an integer >= 2; got "
                              f"{self.buffered_events!r}")
        if not (_is_number(self.snapshot_mb) and self.snapshot_mb > 0):
            raise OptionError(f"MemoryLimit: snapshot_mb must be a number of megabytes > 0; "
                              f"got {self.snapshot_mb!r}")

    def describe(self) -> dict[str, Any]:
        """The settings as plain values, for JSON."""
        return {"buffered_events": self.buffered_events, "snapshot_mb": self.snapshot_mb}


#: The initial K when a node gives none, in seconds of event time: above the delays a
#: sensor network adds (the default DelayModel reaches about 0.3 s in bursts).
DEFAULT_K0_SECONDS = 0.4

#: Every option of a detector node, by name.
NODE_OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("alpha", 1.0,
           "How far the ordering unit speculates: 1.0 is pure K-slack (emit only what K "
           "guarantees), 0.0 emits at once and retracts when late events show it was "
           "wrong, values between emit once that share of K has passed, 'adaptive' "
           "adjusts it at run time to the spare capacity.",
           valid="a number in [0, 1] or 'adaptive'", accepts=_is_alpha),
    Option("retraction", "on-demand",
           "How wrong speculative output is revised: 'on-demand' replays and sends only "
           "what changed (as updates), 'full' retracts every event after the snapshot and "
           "sends them again.",
           choices=("on-demand", "full")),
    Option("late", "side",
           "What happens to an event behind the purge horizon: 'side' counts it and sends "
           "it to the late side output; 'process' also processes it out of order.",
           choices=("side", "process")),
    Option("k0", None,
           "The initial K, in time-stamp ticks; dynamic K grows it as delays are seen, "
           "so events delayed more than K before it has grown are late. None: "
           "DEFAULT_K0_SECONDS in the registry's unit, above the network delays of a "
           "sensor stream.",
           valid="an integer >= 0 and < 2**63 (ticks) or None",
           accepts=lambda v: v is None or _is_int(v, 0, MAX_TICKS)),
    Option("idle_after", None,
           "Ticks of event time a node clocked by raw events waits for its clock types "
           "when they go quiet: its clock is then the stream's newest time stamp less "
           "idle_after, so it releases what it holds, publishes progress, and the nodes "
           "below it are not held back. Its events that come back newer than that are "
           "in time; older ones are delays (K grows), late where a horizon has passed "
           "them (counted). None: its clock waits for its own clock events however "
           "long. A node clocked by producers only ignores it (their progress clocks "
           "it); each partition of a node is clocked by its node's clock events anyway.",
           valid="None or an integer >= 0 and < 2**63 (ticks)",
           accepts=lambda v: v is None or _is_int(v, 0, MAX_TICKS)),
    Option("partitions", 1,
           "Instances of the detector; instance i gets the events whose key hashes to i "
           "(partition_of; counter messages reach all of them).",
           valid=f"an integer in 1..{MAX_PARTITIONS}",
           accepts=lambda v: _is_int(v, 1, MAX_PARTITIONS)),
    Option("shedding", None,
           "Load shedding on the node's inbox: None never drops an event; a "
           "Shedding(latency_bound_s=...) drops a share of the input when the latency "
           "bound is at risk, and counts what it dropped.",
           valid="None or a Shedding(latency_bound_s=...) (specula.shedding.Shedding)",
           accepts=lambda v: v is None or isinstance(v, Shedding)),
    Option("cpus", 0.0,
           "CPUs each of the node's actors asks Ray for (a share: 0.5 is half a core): "
           "Ray places the actors where these are free, and a graph whose actors ask for "
           "more than the cluster has is refused before any starts. 0 asks for nothing "
           "(the actor runs wherever Ray puts it, unaccounted).",
           valid="a number >= 0 and <= 1024", accepts=lambda v: _is_number(v)
           and 0 <= v <= 1024),
    Option("gpus", None,
           "GPUs each of the node's actors asks Ray for (a share: 0.5 is half a GPU), "
           "placed and checked against the cluster as cpus are. None: what the node's "
           "detector declares (Detector.num_gpus; 0 for a detector that needs none).",
           valid="None or a number >= 0 and <= 1024",
           accepts=lambda v: v is None or (_is_number(v) and 0 <= v <= 1024)),
    Option("chain", True,
           "Whether the Ray runtime may run the node's instances in one actor process "
           "with other instances (RayRuntime's chaining='auto'): False gives each its "
           "own actor, e.g. for a detector that holds the GIL for long or that should "
           "crash and restart alone.",
           valid="True or False", accepts=lambda v: isinstance(v, bool)),
    Option("memory", MemoryLimit(),
           "What each of the node's ordering units may hold: near the limit speculation "
           "backs off to pure K-slack, at it K is capped (what then arrives behind the "
           "horizon is late, and counted), and a buffer no K can release is an error.",
           valid="a MemoryLimit(buffered_events=..., snapshot_mb=...) (specula.options)",
           accepts=lambda v: isinstance(v, MemoryLimit)),
)}


def k0_of_ms(k0_ms: Any, ticks_per_second: float) -> int:
    """The initial K of ``k0_ms`` milliseconds in ticks; :class:`OptionError` unless it is a
    number of milliseconds >= 0 with a finite number of ticks (``k0`` then checks the
    int64 bound).

    >>> k0_of_ms(400, 1e12)
    400000000000
    """
    if isinstance(k0_ms, bool) or not (isinstance(k0_ms, numbers.Real) and float(k0_ms) >= 0):
        raise OptionError(f"k0_ms must be a number of milliseconds >= 0; got {k0_ms!r}")
    ticks = float(k0_ms) * ticks_per_second / 1000
    if not math.isfinite(ticks):  # round() would raise OverflowError
        raise OptionError(f"k0_ms {k0_ms!r} is more ticks than any number holds")
    return round(ticks)


def check_option(name: str, value: Any, *, where: str = "") -> Any:
    """Check one node option; ``where`` (e.g. the detector's name) prefixes the message."""
    if name not in NODE_OPTIONS:
        raise OptionError(f"{where + ': ' if where else ''}unknown option {name!r}; the "
                          f"options are {', '.join(NODE_OPTIONS)}")
    return NODE_OPTIONS[name].check(value, where)


def node_options(*, where: str = "", **given: Any) -> dict[str, Any]:
    """Every node option: the given ones checked, the others at their defaults."""
    for name, value in given.items():
        check_option(name, value, where=where)
    return {name: given.get(name, option.default) for name, option in NODE_OPTIONS.items()}


class NodeOptions(TypedDict, total=False):
    """The types of :data:`NODE_OPTIONS`, for type checkers: ``Graph.add(**options)``."""

    alpha: float | Literal["adaptive"]
    retraction: Literal["on-demand", "full"]
    late: Literal["side", "process"]
    k0: int | None
    idle_after: int | None
    partitions: int
    shedding: Shedding | None
    cpus: float
    gpus: float | None
    chain: bool
    memory: MemoryLimit


@dataclass(frozen=True)
class CostModel:
    """Seconds of busy time per unit of work, for deterministic alpha-adaptation and
    queueing in the in-process runtime (its ``cost_model`` option).

    ``slower`` multiplies the busy time of the named nodes (default 1): one expensive
    detector in a graph of cheap ones, e.g. the node a shedding experiment overloads.
    ``per_work`` is the cost of a unit of the work a detector counts beyond its events
    (:meth:`~specula.detectors.Detector.work_done`: a window operator's (event, window)
    pairs), charged with a queueing model only.
    """

    per_event: float = 2e-6
    per_snapshot: float = 1e-6
    per_restore: float = 1e-6
    per_comparison: float = 0.5e-6
    slower: Mapping[str, float] = field(default_factory=dict)
    per_work: float = 0.0

    def busy(self, before: tuple[int, ...], after: tuple[int, ...], node: str | None = None,
             work_done: int = 0) -> float:
        """Busy time of the work between two readings of a unit's counters
        (:meth:`~specula.ordering.unit.UnitStats.work`, of ``node``), plus ``work_done``
        units of the detector's own work."""
        emitted, snapshots, restores, comparisons = (a - b for a, b in
                                                     zip(after, before, strict=True))
        work = (work_done * self.per_work + emitted * self.per_event
                + snapshots * self.per_snapshot + restores * self.per_restore
                + comparisons * self.per_comparison)
        return work * self.slower.get(node, 1.0) if node is not None else work


def _is_optional(accepts: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: v is None or accepts(v)


#: Every option of a runtime, by name: the constructor options of each runtime, and the
#: arguments of ``run()`` that both take alike (:data:`RUNTIME_ARGUMENTS` says which).
RUNTIME_OPTIONS: dict[str, Option] = {o.name: o for o in (
    # ---- how a stream is cut into steps and paced: run() of both runtimes
    Option("step_ticks", None,
           "Arrival time one step of a stream held in memory (an array, or Sources) "
           "covers, in ticks: a step holds the events that arrived within step_ticks of "
           "its first (source actors cut at every multiple of it, so that they keep in "
           "step); 0 is a step per arrival time. None: the runtime's default, 5 ms "
           "in-process (a step of its virtual clock), none on Ray from the driver, "
           "0.1 s between Ray's source actors. An iterable of batches is delivered a "
           "batch per step, as it comes.",
           valid="None or an integer >= 0 (ticks of arrival time)",
           accepts=_is_optional(lambda v: _is_int(v, 0, MAX_TICKS))),
    Option("batch_rows", None,
           "Rows one step (one push to an actor) of a stream held in memory holds at "
           "most: a longer step is cut into several. None: the runtime's default, no "
           "bound in-process, 10,000 on Ray.",
           valid="None or an integer >= 1 (rows)",
           accepts=_is_optional(lambda v: _is_int(v, 1, MAX_TICKS))),
    Option("speed", None,
           "Pace of the stream: 1.0 plays it in real time (by the raw events' time stamps "
           "and the graph's ticks per second), 10.0 ten times faster. None: as fast as "
           "the detectors take it.",
           valid="None or a number > 0 (a multiple of real time)",
           accepts=_is_optional(lambda v: _is_number(v) and v > 0)),
    # ---- InProcessRuntime(...)
    Option("ticks_per_second", None,
           "Virtual time units (of ats) per second, for alpha-adaptation's t_span, "
           "latencies in seconds and the default step. None: the registry's.",
           valid="None or a number > 0",
           accepts=_is_optional(lambda v: _is_number(v) and v > 0)),
    Option("cost_model", None,
           "Busy time per unit of work: alpha-adaptation and queueing then run on the "
           "virtual clock, and runs are deterministic. None measures wall time.",
           valid="None or a CostModel(...) (specula.options)",
           accepts=_is_optional(lambda v: isinstance(v, CostModel))),
    Option("trace", False,
           "Record every step of every unit (specula.ordering.TraceEntry; slow).",
           valid="True or False", accepts=lambda v: isinstance(v, bool)),
    Option("keep_messages", False,
           "Keep every message each detector sent, in the runtime's messages (for tests).",
           valid="True or False", accepts=lambda v: isinstance(v, bool)),
    Option("queueing", None,
           "Model every instance's inbox on the virtual clock: processing takes the busy "
           "time (of cost_model, else measured), arrivals wait while their instance is "
           "busy, and nodes with Shedding shed. None: on when some node sheds. Off, an "
           "instance takes what arrived in a step in that step and processing takes no "
           "virtual time (the report then has no inbox figures).",
           valid="None, True or False", accepts=_is_optional(lambda v: isinstance(v, bool))),
    # ---- RayRuntime(...)
    Option("address", None,
           "A Ray cluster to join ('host:port', 'ray://host:port'). None starts Ray on "
           "this machine (or uses the Ray this process is already connected to).",
           valid="None or a Ray address (a non-empty string)",
           accepts=_is_optional(lambda v: isinstance(v, str) and bool(v))),
    Option("max_in_flight", 4,
           "Pushes a sender may have unacknowledged per consumer before it waits (a push "
           "is acknowledged once its batch is in the consumer's inbox).",
           valid="an integer >= 1", accepts=lambda v: _is_int(v, 1, MAX_TICKS)),
    Option("inbox_events", 200_000,
           "Rows an actor's inbox holds before its producers wait (backpressure). A node "
           "with a latency bound should hold more than it allows (LB / l(p) events), or "
           "backpressure acts before shedding does.",
           valid="an integer >= 1 (rows)", accepts=lambda v: _is_int(v, 1, MAX_TICKS)),
    Option("step_events", 20_000,
           "Rows an actor takes from its inbox at most in one step (one push through its "
           "unit; at least one batch): an actor that fell behind catches up in fewer, "
           "larger steps. A node with shedding takes one batch per step.",
           valid="an integer >= 0 (rows)", accepts=lambda v: _is_int(v, 0, MAX_TICKS)),
    Option("checkpoint_uri", None,
           "Where actors checkpoint: a local directory or a URI pyarrow.fs opens "
           "(s3://bucket/prefix) that every node of the cluster reaches; each run writes "
           "under a folder of its own. None: a temporary directory on this machine, "
           "removed after the run (enough for embedded Ray).",
           valid="None or a directory or URI (a non-empty string)",
           accepts=_is_optional(lambda v: isinstance(v, str) and bool(v))),
    Option("checkpoint_every_batches", 50,
           "An actor checkpoints after this many batches or checkpoint_every_s seconds, "
           "whichever comes first, and at the end of the stream.",
           valid="an integer >= 1", accepts=lambda v: _is_int(v, 1, MAX_TICKS)),
    Option("checkpoint_every_s", 2.0,
           "An actor checkpoints after this many seconds or checkpoint_every_batches "
           "batches, whichever comes first; settled output is handed on as often.",
           valid="a number of seconds > 0", accepts=lambda v: _is_number(v) and v > 0),
    Option("chaining", "auto",
           "Which detector instances share a Ray actor process (operator chaining, as "
           "in Flink): 'none' runs each in an actor of its own; 'auto' forms at most as "
           "many chains as Ray has CPUs (more only where its rules need them), keeps the "
           "partitions of a node apart, a node with cpus=, gpus or chain=False alone and "
           "every chain closed (specula.actors.chaining); or a list of chains, each a list "
           "of instance labels. Inside a chain batches are handed over in memory, without "
           "serialisation or a Ray call; a chain restarts as a unit.",
           valid="'auto', 'none' or a list of lists of instance labels",
           accepts=lambda v: v in ("auto", "none") or (
               isinstance(v, (list, tuple)) and all(
                   isinstance(g, (list, tuple)) and all(isinstance(x, str) for x in g)
                   for g in v))),
    Option("buffer_timeout_s", 0.02,
           "Seconds a push from one chain to another waits at most, before its Ray call, "
           "for the chain-mates that are in the middle of a step to end it, so that "
           "their pushes go in the same call (Flink's buffer timeout): 0 sends at once "
           "(lowest latency, more calls); more trades latency for fewer calls. A push "
           "whose answer is waited for (a full window, a drain) never waits.",
           valid="a number of seconds >= 0", accepts=lambda v: _is_number(v) and v >= 0),
    Option("max_restarts", 5,
           "How often Ray restarts each actor after a crash (0: never; the run then "
           "fails).",
           valid="an integer >= 0", accepts=lambda v: _is_int(v, 0, MAX_TICKS)),
)}

#: The options of :data:`RUNTIME_OPTIONS` each runtime's constructor takes, and those
#: ``run()`` takes in both runtimes.
RUNTIME_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "InProcessRuntime": ("ticks_per_second", "cost_model", "trace", "keep_messages",
                         "queueing"),
    "RayRuntime": ("address", "max_in_flight", "inbox_events", "step_events",
                   "checkpoint_uri", "checkpoint_every_batches", "checkpoint_every_s",
                   "max_restarts", "chaining", "buffer_timeout_s"),
    "run": ("step_ticks", "batch_rows", "speed"),
}


def runtime_options(where: str, **given: Any) -> dict[str, Any]:
    """Every option ``where`` takes (a key of :data:`RUNTIME_ARGUMENTS`): the given ones
    checked, the others at their defaults. An option it does not take is an
    :class:`OptionError` that lists those it does.

    >>> runtime_options("RayRuntime", max_restarts=0)["max_in_flight"]
    4
    >>> runtime_options("InProcessRuntime", max_restarts=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    specula.options.OptionError: InProcessRuntime: max_restarts is an option of RayRuntime; ...
    """
    takes = RUNTIME_ARGUMENTS[where]
    for name, value in given.items():
        if name not in takes:
            other = [w for w, names in RUNTIME_ARGUMENTS.items() if name in names]
            what = (f"{name} is an option of {other[0]}" if other
                    else f"unknown option {name!r}")
            raise OptionError(f"{where}: {what}; {where} takes {', '.join(takes)}")
        RUNTIME_OPTIONS[name].check(value, where)
    return {name: given.get(name, RUNTIME_OPTIONS[name].default) for name in takes}


class InProcessOptions(TypedDict, total=False):
    """The types of the options ``InProcessRuntime(graph, **options)`` takes."""

    ticks_per_second: float | None
    cost_model: CostModel | None
    trace: bool
    keep_messages: bool
    queueing: bool | None


class RayOptions(TypedDict, total=False):
    """The types of the options ``RayRuntime(graph, **options)`` takes."""

    address: str | None
    max_in_flight: int
    inbox_events: int
    step_events: int
    checkpoint_uri: str | None
    checkpoint_every_batches: int
    checkpoint_every_s: float
    max_restarts: int
    chaining: Literal["auto", "none"] | list[list[str]]
    buffer_timeout_s: float
