"""A seedable model of how sensor readings arrive out of order.

The real DEBS 2013 file is totally ordered by time stamp; a distributed system does not
see it that way. Readings travel from the transmitters through receivers and the network
to the first detector, and each leg adds delay: a fixed latency per sensor (its
receiver, its route), a random delay per reading (queueing), and now and then a burst,
where a receiver or link stalls and the readings of a group of sensors are held back
and then released together. :class:`DelayModel` draws such delays for a batch of events
and returns the batch in arrival order, with ``ats`` set to the arrival time, so that
ordering units can be exercised on realistic disorder.

Examples
--------
>>> import numpy as np
>>> from specula.events import CORE_DTYPE
>>> events = np.zeros(1000, CORE_DTYPE)
>>> events["ts"] = np.arange(1000) * 10**8  # a reading every 0.1 ms ...
>>> events["key"] = np.arange(1000) % 5  # ... from 5 sensors
>>> arrived = DelayModel(seed=1).arrival(events)
>>> bool((arrived["ats"] >= arrived["ts"]).all()), bool(np.all(np.diff(arrived["ats"]) >= 0))
(True, True)
>>> 0.0 < out_of_order_fraction(arrived) < 1.0
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from specula.events import distinct
from specula.events.hashing import uniform as _uniform

__all__ = ["DelayModel", "out_of_order_fraction"]

_PS_PER_MS = 10**9
_PS_PER_S = 10**12


@dataclass(frozen=True)
class DelayModel:
    """Network delays of sensor readings: per sensor, per reading, and bursts.

    The arrival time of a reading with time stamp ``ts`` from sensor ``key`` is

    ``ats = ts + base[key] + jitter``, or, if a burst holds the reading's sensor at
    ``ts``, ``ats = max(that, release + base[key])``,

    where ``base[key]`` is the sensor's latency, uniform in ``jitter_ms``; ``jitter`` is
    drawn per reading from an exponential distribution with mean ``reading_ms``; and a
    burst holds all readings of a group of sensors whose time stamps fall in
    ``[start, release)`` with ``release = start + hold`` and releases them together at
    ``release`` (plus each sensor's base latency). Delays are never negative, so
    ``ats >= ts``. All times are integers in picoseconds.

    Every random number is a hash of the seed and what it belongs to (the sensor; the
    sensor and time stamp of a reading; the time slot and number of a burst), not a draw
    from a sequential generator. So the delay of a reading depends only on the reading,
    and any partition of a stream, in any order (a Spark partition, a chunk of a file),
    gets exactly the delays the whole stream gets.

    Parameters
    ----------
    seed : int, default 0
        Seed of all random numbers; the same model on the same events gives the same
        arrival, bit for bit.
    jitter_ms : (float, float), default (1.0, 5.0)
        Range (ms) of the per-sensor base latency. The spread between sensors is what
        makes most readings arrive after a later reading of another sensor.
    reading_ms : float, default 0.5
        Mean (ms) of the per-reading exponential delay; it also reorders readings of one
        sensor when it exceeds the sensor's sampling period (0.5 ms for a ball).
    burst_rate : float, default 0.5
        Expected bursts per second of stream time (Poisson, drawn per time slot of
        ``max(1 s, burst_ms[1])``); 0 disables bursts.
    burst_ms : (float, float), default (50.0, 300.0)
        Range (ms) of how long a burst holds its group's readings (uniform).
    burst_sensors : (int, int), default (1, 8)
        Range of the number of sensors a burst holds (uniform, inclusive): a run of
        that many consecutive sensor ids, from a random one on, wrapping around.

    Notes
    -----
    With the defaults, a generated ``debs2013`` match (13,600 readings/s from 41
    sensors; :func:`specula.soccer.match.generate_match`) arrives with about 84 % of
    its readings out of order (:func:`out_of_order_fraction`), a ``paper`` match
    (34,000 readings/s from 143 sensors) with about 92 %: readings of a sensor with a
    longer base latency are overtaken by later readings of quicker sensors. The median
    delay is 3.3-3.6 ms (65 s, seed 1); readings held by a burst are late by up to ``burst_ms[1]``
    plus their sensor's latency (the largest delays are about 0.3 s).
    """

    seed: int = 0
    jitter_ms: tuple[float, float] = (1.0, 5.0)
    reading_ms: float = 0.5
    burst_rate: float = 0.5
    burst_ms: tuple[float, float] = (50.0, 300.0)
    burst_sensors: tuple[int, int] = (1, 8)

    def __post_init__(self) -> None:
        for name in ("jitter_ms", "burst_ms", "burst_sensors"):
            lo, hi = getattr(self, name)
            if not (0 <= lo <= hi) or not math.isfinite(hi):
                raise ValueError(f"{name} must be a range 0 <= low <= high, got {(lo, hi)!r}")
        if self.burst_sensors[0] < 1:
            raise ValueError(f"burst_sensors must start at 1 or more, got {self.burst_sensors!r}")
        for name in ("reading_ms", "burst_rate"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be finite and >= 0, got {value!r}")

    def delays(self, events: np.ndarray | Mapping[str, np.ndarray],
               sensors: np.ndarray | None = None) -> np.ndarray:
        """Delay (ps, int64, ``>= 0``) of every event, in the order of ``events``.

        Only the ``ts`` and ``key`` fields are used (a batch, or a mapping of the two
        columns). ``sensors`` lists every sensor id of the stream (bursts hold runs of
        consecutive ones); by default the keys present in ``events``. Give it when
        ``events`` is only a part of the stream.
        """
        ts = np.asarray(events["ts"], np.int64)
        keys = np.asarray(events["key"], np.int64)
        if len(ts) == 0:
            return np.zeros(0, np.int64)
        sensors = distinct(keys) if sensors is None else np.asarray(sensors, np.int64)
        rank = np.searchsorted(sensors, keys)
        if np.any(rank >= len(sensors)) or np.any(sensors[np.minimum(rank, len(sensors) - 1)]
                                                   != keys):
            raise ValueError("delays: an event's key is not in 'sensors'")
        lo, hi = self.jitter_ms
        base = np.round((lo + (hi - lo) * _uniform(self.seed, _BASE, keys))
                        * _PS_PER_MS).astype(np.int64)
        arrival = ts + base
        if self.reading_ms > 0:
            u = _uniform(self.seed, _JITTER, keys, ts)
            arrival += np.round(-self.reading_ms * np.log1p(-u) * _PS_PER_MS).astype(np.int64)
        if self.burst_rate > 0:
            release = self._release(ts, rank, len(sensors))
            held = release > 0
            arrival[held] = np.maximum(arrival[held], release[held] + base[held])
        return arrival - ts

    def arrival(self, events: np.ndarray, sensors: np.ndarray | None = None) -> np.ndarray:
        """The events as they arrive: a copy with ``ats`` = arrival time (ps), sorted by
        ``ats``; events arriving at the same time keep their input order (stable sort)."""
        ats = np.asarray(events["ts"], np.int64) + self.delays(events, sensors)
        order = np.argsort(ats, kind="stable")
        out = events[order]
        out["ats"] = ats[order]
        return out

    def _release(self, ts: np.ndarray, rank: np.ndarray, n_sensors: int) -> np.ndarray:
        """Latest release time of a burst holding each reading; 0 where none holds it."""
        slot_ps = max(_PS_PER_S, math.ceil(self.burst_ms[1] * _PS_PER_MS))
        per_slot = self.burst_rate * slot_ps / _PS_PER_S
        slot = ts // slot_ps
        release = np.zeros(len(ts), np.int64)
        low, high = self.burst_sensors
        for s in (slot - 1, slot):  # a burst holds at most one slot length
            count = _poisson(per_slot, _uniform(self.seed, _COUNT, s))
            for j in range(int(count.max())):
                rows = np.flatnonzero(count > j)
                sj, r = s[rows], rank[rows]
                start = sj * slot_ps + np.floor(_uniform(self.seed, _START, sj, j)
                                                * slot_ps).astype(np.int64)
                hold = np.round((self.burst_ms[0] + (self.burst_ms[1] - self.burst_ms[0])
                                 * _uniform(self.seed, _HOLD, sj, j)) * _PS_PER_MS)
                size = low + np.floor(_uniform(self.seed, _SIZE, sj, j)
                                      * (high - low + 1)).astype(np.int64)
                first = np.floor(_uniform(self.seed, _GROUP, sj, j) * n_sensors).astype(np.int64)
                end = start + hold.astype(np.int64)
                inside = (ts[rows] >= start) & (ts[rows] < end) & ((r - first) % n_sensors
                                                                   < size)
                release[rows[inside]] = np.maximum(release[rows[inside]], end[inside])
        return release


# Tags that keep the random numbers of different purposes independent.
_BASE, _JITTER, _COUNT, _START, _HOLD, _SIZE, _GROUP = range(1, 8)


def _poisson(mean: float, u: np.ndarray) -> np.ndarray:
    """Poisson(``mean``) counts by inverting the CDF at the uniforms ``u``."""
    k = np.zeros(u.shape, np.int64)
    term = math.exp(-mean)
    cdf = np.full(u.shape, term)
    for i in range(1, 64):
        below = u >= cdf
        if not below.any():
            break
        k[below] = i
        term *= mean / i
        cdf = cdf + term
    return k


def out_of_order_fraction(events: np.ndarray) -> float:
    """Fraction of events that arrive after an event with a later time stamp.

    The row order of ``events`` is the arrival order. An event is out of order when its
    ``ts`` is smaller than the largest ``ts`` of the events before it (ties are in
    order). Returns 0.0 for fewer than two events.
    """
    ts = np.asarray(events["ts"], np.int64)
    if len(ts) < 2:
        return 0.0
    seen = np.maximum.accumulate(ts)
    return float(np.count_nonzero(ts[1:] < seen[:-1]) / len(ts))
