"""Overload detection on a node's inbox: when to shed, and how much.

Two triggers, from the two shedding papers:

- **eSPICE, sec. 3.4** (``trigger="queue"``). An event at position n of the input queue
  has the estimated latency l(e) = n · l(p), l(p) the processing time per event
  (1 / th, th the operator's throughput). The latency bound LB thus allows
  q_max = LB / l(p) events in the queue, and shedding starts when
  q_size > f · q_max, f in [0, 1] (0.8 in the paper's experiments), leaving the margin
  q_max - f · q_max for the drops to take effect. The amount: with the input rate R above
  the throughput by δ = R - th, x = δ · p_size / R events of every dropping interval of
  p_size events, i.e. the share x / p_size = δ / R of the input.

  That share holds the queue where it is. A burst that has already filled the queue
  beyond f · q_max (or arrived all at once, so that R cannot be measured) would stay,
  and a queue beyond q_max violates the bound, so we also drop at least the share of the
  queue beyond f · q_max, 1 - f · q_max / q_size (:func:`backlog_share`, our addition):
  what is kept of the queue then takes f · LB to process.
- **Hybrid shedding** (``trigger="latency"``). Shed when the query latency μ(k), a
  sliding average over the last measurements (1,000 in the paper), exceeds the bound
  θ; the relative extent of the violation, (μ - θ) / μ, is how much of the load to shed
  (the paper's lower bound on the share of resources to save). The paper's problem is
  to keep μ <= θ throughout, and dropping only the violation of the moment leaves μ
  above θ for good: with the latency growing with the events kept, (μ - θ) / μ = s
  settles where μ = θ / (1 - s), 1.5 θ for an overload of 1/3. So the share is a
  level that persists and is corrected with every measurement: shedding a share s and
  still seeing μ > θ, the node sheds (μ - θ) / μ of what it still keeps, i.e.
  1 - s' = (1 - s) · θ / μ, and as much less when μ < θ. The correction is applied in
  proportion to the fresh measurements, a whole one per ``smoothing`` events, since μ
  needs that long to show the effect of a level; the fixed point is μ = θ. The share
  asked for is the level, and at least the violation of the moment, (μ - θ) / μ, the
  paper's lower bound, which covers the level's lag when the load jumps.

  With ``latency_quantile`` set (the paper's Fig. 5b and 7-10: the 95th percentile), the
  window's quantile cannot drive that correction: a 95th percentile over a window of a
  few batches is its worst batch, so one slow batch would read as a violation for a
  whole window and raise the level batch after batch (a ratchet: near a share of 1 the
  level then falls back by θ / μ per window only). The level follows the *fresh*
  measurements instead (:class:`QuantileLevel`): the worst latency L of the events
  completed since the last command, against a target c · θ; over it, the level sheds
  the violation of what is kept, 1 - s' = (1 - s) · (cθ / L) ** g, once per
  measurement; under it, it is lowered at once, by that ratio or by a step in
  proportion to the room left, (cθ - L) / cθ, whichever sheds less (a latency with a
  floor the shedding cannot remove barely moves with the kept share: the ratio alone
  would recover from a share near 1 in tens of windows). c tracks the quantile, a
  stochastic approximation: it falls when L is over θ and rises otherwise, by (1 - q)
  against q, so that it settles where a share 1 - q of the measurements is over θ
  (within ``QUANTILE_FLOOR`` and ``QUANTILE_MARGIN``). The share asked is the level,
  and at least the fresh violation, (L - θ) / L.

What "latency" means here: the time from an event's arrival in the node's inbox to the
end of the processing of the batch it was taken in; l(p) is measured as busy time per
event the node's ordering unit hands to its detector (which it does K after taking it:
counted per row taken, the work of the rows taken K earlier would be charged to the
fewer kept once drops start, see :meth:`~specula.actors.inbox.Gate.done`), R as events
arrived per second, both over the last ``smoothing`` events
(:class:`~specula.options.Shedding`; l(p) follows a rise within a tenth of them, see
:attr:`OverloadDetector.lp_s`). A drop at the inbox lightens the detector's work only K
after it; RI (a shedder with ``sheds_held``) also drops from what the unit holds, so
that the onset does not pass the bound (:meth:`~specula.actors.inbox.Gate.admit`). The
formulas are plain functions, checked against hand computations in ``tests/shedding``;
:class:`OverloadDetector` keeps the measurements of one instance and turns them into a
:class:`DropCommand` per batch.

A node whose detector sheds inside itself (``strategy="detector"``: eSPICE's window
operator drops (event, window) pairs, so every event still reaches it) does less work per
event while it sheds; l(p) measured then would overstate the throughput, and δ / R would
ask for less than the overload needs, batch after batch. The inbox therefore reports the
busy time a batch would have taken unshed: its busy time scaled by the detector's work
kept plus shed over work kept in that batch (:class:`~specula.actors.inbox.Gate`). th is
then what the paper defines it as, the most events per second the operator processes
unshed, and it follows the load while shedding: a window operator's cost per event grows
with the windows open, and an l(p) frozen at the last unshed batch lets the queue pass
q_max when windows open faster than before.
"""

from __future__ import annotations

import math
from collections import deque

from specula.options import Shedding
from specula.shedding.base import KEEP_ALL, DropCommand


def estimated_latency(n: int, lp_s: float) -> float:
    """eSPICE's l(e) = n · l(p): the latency of the event at position ``n`` (from 1) of
    the queue, each event taking ``lp_s`` seconds.

    >>> estimated_latency(4, 0.25)
    1.0
    """
    return n * lp_s


def max_queue(latency_bound_s: float, lp_s: float) -> float:
    """eSPICE's q_max = LB / l(p): the most events the queue may hold before an event's
    latency exceeds the bound (inf while l(p) is unknown, i.e. 0).

    >>> max_queue(1.0, 0.002)
    500.0
    """
    return latency_bound_s / lp_s if lp_s > 0 else math.inf


def queue_overloaded(q_size: float, q_max: float, f: float) -> bool:
    """eSPICE's trigger: q_size > f · q_max.

    >>> queue_overloaded(401, 500.0, 0.8), queue_overloaded(400, 500.0, 0.8)
    (True, False)
    """
    return q_size > f * q_max


def rate_share(rate_in: float, throughput: float) -> float:
    """The share of the input to drop so that what is kept matches the throughput:
    δ / R with δ = R - th (eSPICE's x / p_size); 0 when R <= th.

    >>> rate_share(1200.0, 1000.0)  # 20 % over: drop 1/6
    0.16666666666666666
    """
    if not rate_in > 0 or rate_in <= throughput:
        return 0.0
    return (rate_in - throughput) / rate_in


def backlog_share(q_size: float, q_max: float, f: float) -> float:
    """The share of a queue of ``q_size`` events to drop so that what is kept is
    f · q_max events, f · LB of processing: 1 - f · q_max / q_size; 0 when the queue is
    not longer than that. Not in eSPICE, which drops δ / R only (see the module).

    >>> backlog_share(1_000, 500.0, 0.8)  # keep 400 of 1,000
    0.6
    """
    return 1.0 - f * q_max / q_size if q_size > f * q_max else 0.0


def dropping_amount(rate_in: float, throughput: float, p_size: float) -> float:
    """eSPICE's x = δ · p_size / R: events to drop from every dropping interval (partition)
    of ``p_size`` events.

    >>> dropping_amount(1400.0, 1000.0, 70)  # δ = 400 events/s, 70 events last 0.05 s
    20.0
    """
    return rate_share(rate_in, throughput) * p_size


def latency_level(level: float, mu_s: float, theta_s: float, gain: float = 1.0) -> float:
    """The latency trigger's next share: ``level`` corrected by the relative extent of
    the violation of what is still kept, 1 - (1 - level) · (θ / μ) ** gain, at least 0
    (``gain`` in [0, 1]: the part of a smoothing window measured since the last one).

    >>> round(latency_level(0.0, 1.25, 1.0), 6)     # the paper's (μ - θ) / μ
    0.2
    >>> round(latency_level(0.2, 1.25, 1.0), 6)     # still 25 % over: shed 20 % more
    0.36
    >>> latency_level(0.2, 0.5, 1.0)        # far under the bound: stop
    0.0
    """
    if not mu_s > 0:
        return level
    return max(0.0, 1.0 - (1.0 - level) * (theta_s / mu_s) ** gain)


#: The quantile trigger's target at most this share of θ: the room a batch has to be
#: slower than the last before it passes θ
QUANTILE_MARGIN = 0.9
#: The quantile trigger lowers its level at this gain (raising at 1): slower down than
#: up, so that a share that just met the target is not given back at once
LOWER_GAIN = 0.5
#: ... and at least this share: batches over θ whatever the share (a spike the shedding
#: cannot remove, an onset's backlog draining) would otherwise drive the target, and the
#: share with it, to the end of the scale, from which a tracker's steps of (1 - q) take
#: hundreds of measurements to come back
QUANTILE_FLOOR = 0.5
#: The step of the quantile tracker's target per smoothing window of measurements
TRACKING_RATE = 1.0


class QuantileLevel:
    """The latency trigger's level with a quantile bound (see the module): fed the
    worst latency of the fresh measurements, it answers the share to shed.

    >>> c = QuantileLevel(0.95)
    >>> round(c.update(0.0, 2.0, 1.0, 1.0), 4)   # twice θ: shed to 0.9 θ of 2
    0.55
    >>> c.target < 0.9                           # over θ: the target falls
    True
    >>> round(c.update(0.99, 0.1, 1.0, 1.0), 2)  # far under: lowered at once
    0.59
    """

    def __init__(self, q: float) -> None:
        self.q = q
        self.target = QUANTILE_MARGIN  # c, a share of θ

    def update(self, level: float, worst_s: float, theta_s: float, gain: float) -> float:
        """The level after a measurement whose worst latency is ``worst_s``, ``gain``
        the part of a smoothing window it holds."""
        aim = self.target * theta_s
        over = 1.0 if worst_s > theta_s else 0.0
        self.target = min(QUANTILE_MARGIN, max(QUANTILE_FLOOR, self.target * math.exp(
            TRACKING_RATE * gain * ((1.0 - self.q) - over))))
        keep = 1.0 - level
        if worst_s > aim:
            keep *= (aim / worst_s) ** gain
        else:
            down = LOWER_GAIN * gain
            step = down * (aim - worst_s) / aim
            keep = min(1.0, max(keep + step, keep * (aim / max(worst_s, 1e-12)) ** down))
        return min(max(1.0 - keep, 0.0), 1.0)


def _trim(chunks: deque[list[float]], weight: float, size: int, *, pro_rata: bool
          ) -> tuple[float, float]:
    """Cut the oldest ``[value, weight]`` chunks until their weight is at most ``size``:
    whole chunks leave, and the one straddling the window's start keeps its part inside
    (``pro_rata``: its value is a total, cut in proportion; else a per-event value,
    kept). Returns the weight left and the value that left."""
    left = 0.0
    while weight > size:
        first = chunks[0]
        excess = weight - size
        if first[1] <= excess:
            chunks.popleft()
            weight -= first[1]
            left += first[0]
        else:
            if pro_rata:
                cut = first[0] * excess / first[1]
                first[0] -= cut
                left += cut
            first[1] -= excess
            weight = float(size)
    return weight, left


class SlidingMean:
    """The mean of a quantity over its last ``size`` units of weight (events), in bounded
    memory: values come in chunks (a batch's total busy time and its events, say), and
    the oldest chunk is cut down pro rata when it straddles the window's start.

    >>> m = SlidingMean(10)
    >>> m.add(10.0, 5); m.add(40.0, 10)   # 2 per event, then 4 per event
    >>> m.mean, m.weight
    (4.0, 10.0)
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._chunks: deque[list[float]] = deque()  # [value, weight], oldest first
        self._value = 0.0
        self._weight = 0.0

    def add(self, value: float, weight: float) -> None:
        """Add ``value`` spread over ``weight`` events (ignored when ``weight`` <= 0)."""
        if weight <= 0:
            return
        self._chunks.append([float(value), float(weight)])
        self._value += value
        self._weight, left = _trim(self._chunks, self._weight + weight, self.size,
                                   pro_rata=True)
        self._value -= left
        if not self._chunks:
            self._value = self._weight = 0.0

    @property
    def weight(self) -> float:
        """Events in the window (at most ``size``)."""
        return self._weight

    @property
    def mean(self) -> float:
        """The value per event over the window; 0 when empty."""
        return self._value / self._weight if self._weight > 0 else 0.0


class SlidingQuantile:
    """A quantile of a quantity over its last ``size`` units of weight (events): values
    come in chunks (a batch's latency, shared by its events), and the oldest chunk is
    cut down when it straddles the window's start.

    >>> m = SlidingQuantile(10, 0.95)
    >>> m.add(1.0, 5); m.add(3.0, 4); m.add(2.0, 1)
    >>> m.value      # the events' latencies, lowest first: 1 x5, 2, 3 x4
    3.0
    >>> m.add(0.5, 9)    # the window now holds 9 events at 0.5 and the last one at 2
    >>> m.value
    2.0
    """

    def __init__(self, size: int, q: float) -> None:
        self.size = size
        self.q = q
        self._chunks: deque[list[float]] = deque()  # [value, weight], oldest first
        self._weight = 0.0

    def add(self, value: float, weight: float) -> None:
        """Add ``weight`` events of latency ``value`` (ignored when ``weight`` <= 0)."""
        if weight <= 0:
            return
        self._chunks.append([float(value), float(weight)])
        self._weight, _ = _trim(self._chunks, self._weight + weight, self.size,
                                pro_rata=False)

    @property
    def value(self) -> float:
        """The smallest latency at or under which a share ``q`` of the window's events
        lie; 0 when empty."""
        if not self._chunks:
            return 0.0
        chunks = sorted(self._chunks)
        need, seen = self.q * self._weight, 0.0
        for value, weight in chunks:
            seen += weight
            if seen >= need * (1 - 1e-12):
                return value
        return chunks[-1][0]


class ArrivalRate:
    """Events per second arriving in an inbox, over the last arrivals that hold at least
    ``size`` events (and at least two arrivals: a rate needs a time span).

    >>> r = ArrivalRate(100)
    >>> for t in (0.0, 0.1, 0.2, 0.3): r.add(50, t)
    >>> round(r.rate, 6)  # kept: the last three; 100 events in the 0.2 s after the first
    500.0
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._arrivals: deque[tuple[float, int]] = deque()  # (time s, events)
        self._events = 0

    def add(self, n: int, t_s: float) -> None:
        """``n`` events arrived at ``t_s`` seconds."""
        self._arrivals.append((t_s, n))
        self._events += n
        # drop the oldest while what remains still spans `size` events past its first
        while len(self._arrivals) > 2 and self._events - self._arrivals[0][1] \
                - self._arrivals[1][1] >= self.size:
            self._events -= self._arrivals.popleft()[1]

    @property
    def rate(self) -> float:
        """Events per second after the first arrival of the window; 0 until measurable."""
        if len(self._arrivals) < 2:
            return 0.0
        span = self._arrivals[-1][0] - self._arrivals[0][0]
        return (self._events - self._arrivals[0][1]) / span if span > 0 else 0.0


class OverloadDetector:
    """One instance's overload detector: measurements in, a :class:`DropCommand` out.

    The runtime tells it what arrived (:meth:`arrived`), what was processed in how much
    busy time (:meth:`processed`) and the latencies of processed events
    (:meth:`completed`), and asks for a command for every batch it takes
    (:meth:`command`).

    >>> d = OverloadDetector(Shedding(latency_bound_s=1.0, f=0.8, smoothing=100))
    >>> d.processed(100, 0.2)             # l(p) = 2 ms: q_max = 500 events
    >>> for t in range(11): d.arrived(60, t * 0.05)   # R = 1200 events/s
    >>> d.command(400).share, round(d.command(401).share, 4)   # f·q_max = 400
    (0.0, 0.5833)
    >>> d.command(2_000).share   # a long queue: keep 400 of it
    0.8
    """

    def __init__(self, config: Shedding) -> None:
        self.config = config
        self.busy = SlidingMean(config.smoothing)      # seconds per processed event
        self.recent_busy = SlidingMean(max(1, config.smoothing // 10))  # ... of late
        self.latency = SlidingMean(config.smoothing)   # μ: seconds per completed event
        self.quantile = None if config.latency_quantile is None else \
            SlidingQuantile(config.smoothing, config.latency_quantile)
        self.arrivals = ArrivalRate(config.smoothing)
        self.level = 0.0   # latency trigger: the share of the load being shed
        self._fresh = 0    # events completed since the level was last updated
        self._worst = 0.0  # their worst latency (the quantile trigger's measurement)
        self.tracker = None if config.latency_quantile is None else \
            QuantileLevel(config.latency_quantile)

    def arrived(self, n: int, t_s: float) -> None:
        """``n`` events (rows) arrived in the inbox at ``t_s`` seconds."""
        self.arrivals.add(n, t_s)

    def processed(self, n: float, busy_s: float) -> None:
        """``n`` events were handed to the detector in ``busy_s`` seconds of busy time,
        as they would have taken unshed (see the module)."""
        self.busy.add(busy_s, n)
        self.recent_busy.add(busy_s, n)

    def completed(self, latency_s: float, n: int) -> None:
        """``n`` events were processed ``latency_s`` seconds after their arrival."""
        self.latency.add(latency_s * n, n)
        if self.quantile is not None:
            self.quantile.add(latency_s, n)
        if n > 0:
            self._fresh += n
            self._worst = max(self._worst, latency_s)

    @property
    def lp_s(self) -> float:
        """l(p): measured seconds of processing per event (0 until measured): the mean
        over the last ``smoothing`` events, or over the last tenth of them when that is
        higher. A window operator's cost per event grows while its windows open, and the
        long mean lags it: q_max then stays too high for the queue the bound allows, and
        the latency passes the bound before the drops catch up."""
        mean, recent = self.busy.mean, self.recent_busy.mean
        # the recent mean only when it is really higher, not by the rounding of a cut
        return recent if recent > mean * (1 + 1e-9) else mean

    @property
    def throughput(self) -> float:
        """th = 1 / l(p), events per second (inf until measured)."""
        return 1.0 / self.lp_s if self.lp_s > 0 else math.inf

    @property
    def mu_s(self) -> float:
        """μ: the mean latency of the last ``smoothing`` processed events, or its
        ``latency_quantile``, seconds."""
        return self.latency.mean if self.quantile is None else self.quantile.value

    def command(self, q_size: int) -> DropCommand:
        """The drop command for a batch taken while the inbox holds ``q_size`` events
        (the batch included)."""
        cfg = self.config
        q_max = max_queue(cfg.latency_bound_s, self.lp_s)
        rate, th = self.arrivals.rate, self.throughput
        if cfg.trigger == "queue":
            share = max(rate_share(rate, th), backlog_share(q_size, q_max, cfg.f)) \
                if queue_overloaded(q_size, q_max, cfg.f) else 0.0
        else:
            share = self._latency_level()
        if share <= 0:
            return KEEP_ALL
        return DropCommand(share, q_size, q_max, rate, th, cfg.f)

    def _latency_level(self) -> float:
        """The latency trigger's share: the level, corrected by the measurements since
        the last command, and at least the violation of the moment (see the module and
        :func:`latency_level`)."""
        theta = self.config.latency_bound_s
        if self.tracker is not None:
            return self._quantile_level(theta)
        mu = self.mu_s
        if self._fresh:
            gain = min(self._fresh / self.config.smoothing, 1.0)
            self.level = latency_level(self.level, mu, theta, gain)
            self._fresh = 0
        return max(self.level, latency_level(0.0, mu, theta))

    def _quantile_level(self, theta: float) -> float:
        """The quantile trigger's share: the level moved by the fresh measurements'
        worst latency (:class:`QuantileLevel`), and at least its violation."""
        if not self._fresh or self.tracker is None:
            return self.level
        gain = min(self._fresh / self.config.smoothing, 1.0)
        worst = self._worst
        self.level = self.tracker.update(self.level, worst, theta, gain)
        self._fresh, self._worst = 0, 0.0
        return max(self.level, latency_level(0.0, worst, theta))
