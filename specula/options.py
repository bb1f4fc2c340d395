"""The options of a detector node, in one table: what they mean, their defaults, and
what values they take; and :class:`Shedding`, the value of the ``shedding`` option.

:func:`specula.detectors.Graph.add`, the :class:`~specula.ordering.OrderingUnit` and the
``specula`` command all check options here, so a wrong value gets the same message
wherever it is given, and the message lists what would be right.

>>> check_option("retraction", "partial", where="hits")
Traceback (most recent call last):
...
specula.options.OptionError: hits: retraction must be one of 'on-demand', 'full'; got 'partial'
>>> node_options(alpha="adaptive")["retraction"]
'on-demand'
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
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
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 <= value <= 1


def _is_int(value: Any, low: int, high: int = 2**63 - 1) -> bool:
    return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and low <= value <= high)


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

    def describe(self) -> dict[str, Any]:
        """The settings as plain values (the strategy by name or class name), for JSON."""
        strategy = self.strategy if isinstance(self.strategy, str) \
            else type(self.strategy).__name__
        return {"latency_bound_s": self.latency_bound_s, "f": self.f, "trigger": self.trigger,
                "strategy": strategy, "seed": self.seed, "smoothing": self.smoothing}


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
    if isinstance(k0_ms, bool) or not (isinstance(k0_ms, numbers.Real) and k0_ms >= 0):
        raise OptionError(f"k0_ms must be a number of milliseconds >= 0; got {k0_ms!r}")
    ticks = k0_ms * ticks_per_second / 1000
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
    memory: MemoryLimit
