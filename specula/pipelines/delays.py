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
from dataclasses import dataclass

import numpy as np

__all__ = ["DelayModel", "out_of_order_fraction"]

_PS_PER_MS = 10**9
_PS_PER_S = 10**12


@dataclass(frozen=True)
class DelayModel:
    """Network delays of sensor readings: per sensor, per reading, and bursts.

    The arrival time of a reading with time stamp ``ts`` from sensor ``key`` is

    ``ats = ts + base[key] + jitter``, or, if a burst holds the reading's sensor at
    ``ts``, ``ats = max(that, release + base[key])``,

    where ``base[key]`` is the sensor's latency, drawn once per sensor uniformly from
    ``jitter_ms``; ``jitter`` is drawn per reading from an exponential distribution with
    mean ``reading_ms``; and a burst, starting at a uniformly random time of the stream,
    holds all readings of a random group of sensors whose time stamps fall in
    ``[start, release)`` with ``release = start + hold`` and releases them together at
    ``release`` (plus each sensor's base latency). Delays are never negative, so
    ``ats >= ts``. All times are integers in picoseconds.

    Parameters
    ----------
    seed : int, default 0
        Seed of all random draws; the same model on the same events gives the same
        arrival, bit for bit.
    jitter_ms : (float, float), default (1.0, 5.0)
        Range (ms) of the per-sensor base latency. The spread between sensors is what
        makes most readings arrive after a later reading of another sensor.
    reading_ms : float, default 0.5
        Mean (ms) of the per-reading exponential delay; it also reorders readings of one
        sensor when it exceeds the sensor's sampling period (0.5 ms for a ball).
    burst_rate : float, default 0.5
        Expected bursts per second of stream time (Poisson); 0 disables bursts.
    burst_ms : (float, float), default (50.0, 300.0)
        Range (ms) of how long a burst holds its group's readings (uniform).
    burst_sensors : (int, int), default (1, 8)
        Range of the number of sensors a burst holds (uniform, inclusive), drawn from
        the sensors present in the events.

    Notes
    -----
    With the defaults, a generated ``debs2013`` match (13,600 readings/s from 41
    sensors; :func:`specula.pipelines.match.generate_match`) arrives with 82-84 % of
    its readings out of order (:func:`out_of_order_fraction`; 65 s, 12 seed pairs), a
    ``paper`` match (34,000 readings/s from 143 sensors) with 91 %: readings of a sensor
    with a longer base latency are overtaken by later readings of quicker sensors. The
    median delay is 3.4 ms; readings held by a burst are late by up to ``burst_ms[1]``
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

    def delays(self, events: np.ndarray) -> np.ndarray:
        """Delay (ps, int64, ``>= 0``) of every event, in the order of ``events``.

        Only the ``ts`` and ``key`` fields are used.
        """
        ts = np.asarray(events["ts"], np.int64)
        keys = np.asarray(events["key"], np.int64)
        n = len(ts)
        rng = np.random.default_rng(self.seed)
        if n == 0:
            return np.zeros(0, np.int64)
        sensors, sensor_of = _sensor_index(keys)
        lo, hi = self.jitter_ms
        base = np.round(rng.uniform(lo, hi, len(sensors)) * _PS_PER_MS).astype(np.int64)
        jitter = np.round(rng.exponential(self.reading_ms, n) * _PS_PER_MS).astype(np.int64) \
            if self.reading_ms > 0 else np.zeros(n, np.int64)
        arrival = ts + base[sensor_of] + jitter
        # Bursts: a group of sensors stalls from ``start`` to ``release``.
        first, last = int(ts.min()), int(ts.max())
        n_bursts = int(rng.poisson(self.burst_rate * (last - first) / _PS_PER_S))
        if n_bursts:
            order = np.argsort(ts, kind="stable")
            sorted_ts = ts[order]
            starts = rng.integers(first, last + 1, n_bursts)
            holds = np.round(rng.uniform(*self.burst_ms, n_bursts) * _PS_PER_MS).astype(np.int64)
            low, high = self.burst_sensors
            sizes = rng.integers(low, high + 1, n_bursts)
            for start, hold, size in zip(starts.tolist(), holds.tolist(), sizes.tolist(),
                                         strict=True):
                group = rng.choice(len(sensors), size=min(size, len(sensors)), replace=False)
                a = np.searchsorted(sorted_ts, start, side="left")
                b = np.searchsorted(sorted_ts, start + hold, side="left")
                rows = order[a:b]
                rows = rows[np.isin(sensor_of[rows], group)]
                release = start + hold + base[sensor_of[rows]]
                arrival[rows] = np.maximum(arrival[rows], release)
        return arrival - ts

    def arrival(self, events: np.ndarray) -> np.ndarray:
        """The events as they arrive: a copy with ``ats`` = arrival time (ps), sorted by
        ``ats``; events arriving at the same time keep their input order (stable sort)."""
        ats = np.asarray(events["ts"], np.int64) + self.delays(events)
        order = np.argsort(ats, kind="stable")
        out = events[order]
        out["ats"] = ats[order]
        return out


def _sensor_index(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys, ascending, and each event's index into them (like
    ``np.unique(keys, return_inverse=True)``, with a lookup table for compact keys)."""
    low, high = int(keys.min()), int(keys.max())
    if high - low >= 1 << 22:
        sensors, inverse = np.unique(keys, return_inverse=True)
        return sensors, inverse.reshape(-1)
    present = np.zeros(high - low + 1, bool)
    present[keys - low] = True
    table = np.cumsum(present) - 1
    return np.flatnonzero(present) + low, table[keys - low]


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
