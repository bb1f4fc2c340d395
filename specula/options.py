"""The options of a detector node, in one table: what they mean, their defaults, and
what values they take.

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
from typing import Any


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


def _is_int(value: Any, low: int, high: int) -> bool:
    return (isinstance(value, numbers.Integral) and not isinstance(value, bool)
            and low <= value <= high)


#: The largest time stamp (and so K) an int64 column holds.
MAX_TICKS = 2**63 - 1

#: The most instances of one node: each is an ordering unit (and on Ray an actor, a
#: process of ~200 MB), so more is a typo, not a plan.
MAX_PARTITIONS = 1024


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
    Option("partitions", 1,
           "Instances of the detector; instance i gets the events whose key hashes to i "
           "(partition_of; counter messages reach all of them).",
           valid=f"an integer in 1..{MAX_PARTITIONS}",
           accepts=lambda v: _is_int(v, 1, MAX_PARTITIONS)),
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
