"""Runtime adaptation of the attenuation factor alpha of a speculative ordering buffer.

A speculative ordering unit releases events before the K-slack buffer would
(alpha < 1) and replays/retracts when a late event shows that the early release was
wrong. Smaller alpha means lower detection latency but more replay work; alpha = 1
switches speculation off and alpha = 0 is full speculation. The right alpha depends on
how much CPU time the unit has to spare, which changes at runtime (bursts,
expensive regions of a detector's state space).

This module implements the control loop of Mutschler & Philippsen, "Reliable
Speculative Processing of Out-of-Order Event Streams" (DEBS 2013), sec. 4.4,
Algorithm 3. It works like TCP congestion control with alpha playing the inverse of
the congestion window:

* every ``t_span`` seconds the busy factor ``b_c = t_busy / t_span`` (fraction
  of the span spent processing) is evaluated;
* ``b_c`` above the target zone ``[low, high]`` resets alpha to its safe initial
  value alpha0 = 1 and remembers the alpha that was too aggressive;
* ``b_c`` below the zone halves alpha, and once halving would undershoot the
  bisection line derived from the remembered alpha, alpha decreases in small linear
  steps instead ("slow mode");
* ``b_c`` inside the zone leaves alpha unchanged.

The paper's formula prints ``b_c = 1 - t_busy / t_span`` but its worked
example (t_busy = 0.41 s, t_span = 0.5 s gives b_c = 0.82) and the rest of the
text treat b_c as the used fraction, so ``t_busy / t_span`` is used here.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from specula.ordering.samples import SampleLog

__all__ = ["AlphaController", "AlphaSample", "ManualClock"]


class AlphaSample(NamedTuple):
    """One evaluation of the controller.

    Attributes
    ----------
    time : float
        Clock reading at which the span was evaluated.
    alpha : float
        The alpha chosen by this evaluation, i.e. the value in force for the *next*
        span.
    busy_factor : float
        Busy factor measured over the span that just ended (which ran under
        the alpha of the previous sample, or alpha0 for the first one).
    """

    time: float
    alpha: float
    busy_factor: float


class ManualClock:
    """A time source that only moves when told to.

    Passing an instance as ``clock`` to :class:`AlphaController` makes span
    boundaries and busy-time measurements fully deterministic, which is what
    tests and simulations need.

    Parameters
    ----------
    start : float, default 0.0
        Initial reading in seconds.

    Examples
    --------
    >>> clock = ManualClock()
    >>> clock.advance(0.25)
    >>> clock()
    0.25
    """

    def __init__(self, start: float = 0.0) -> None:
        if not math.isfinite(start):
            raise ValueError(f"start must be a finite number, got {start!r}")
        self._now = float(start)

    def __call__(self) -> float:
        """Return the current reading in seconds."""
        return self._now

    def advance(self, dt: float) -> None:
        """Move the clock forward by ``dt`` seconds.

        Parameters
        ----------
        dt : float
            Non-negative, finite step; a clock that runs backwards would make
            span lengths and busy times negative.
        """
        if not (math.isfinite(dt) and dt >= 0):
            raise ValueError(f"dt must be a finite number >= 0, got {dt!r}")
        self._now += dt


class AlphaController:
    """Adapts alpha from the measured busy factor (Algorithm 3 of the DEBS 2013 paper).

    The owner of the ordering unit reports processing time with
    :meth:`add_busy` or the :meth:`busy` context manager and calls
    :meth:`poll` regularly; every ``t_span`` seconds ``poll`` turns the
    accumulated busy time into a busy factor and applies :meth:`update`.

    The bisection line below which halving switches to slow mode is
    ``(1 - last_minimum) / 2``, exactly as written in Algorithm 3 (the text
    calls it ``(1 - alpha_best) / 2``). With the paper's numbers: alpha_best = 0.125
    gives a line of 0.4375, so after a reset alpha is halved from 1 to 0.5; the
    next halving (0.25) would fall below the line, so slow mode starts and alpha
    goes 0.45, 0.40, 0.35, ... until the busy factor enters the target zone.

    The controller is not thread-safe; callers that report busy time from
    several threads must serialise the calls.

    Parameters
    ----------
    alpha0 : float, default 1.0
        Initial and reset value of alpha, in [0, 1]. The paper uses 1 (no
        speculation), the safe choice when nothing has been measured yet.
    low, high : float, default 0.8 and 0.9
        Target zone ``[low, high]`` for the busy factor, ``0 <= low < high <= 1``.
    step : float, default 0.05
        Decrement of alpha in slow mode, in (0, 1].
    t_span : float, default 0.5
        Length of a measurement span in seconds, > 0.
    clock : callable, default time.perf_counter
        Monotonic time source in seconds, used for span boundaries and by
        :meth:`busy`.

    Examples
    --------
    >>> clock = ManualClock()
    >>> ctl = AlphaController(clock=clock)
    >>> ctl.add_busy(0.2)          # 40 % of a 0.5 s span: CPU time to spare
    >>> clock.advance(0.5)
    >>> ctl.poll()
    True
    >>> ctl.alpha
    0.5
    """

    def __init__(
        self,
        *,
        alpha0: float = 1.0,
        low: float = 0.8,
        high: float = 0.9,
        step: float = 0.05,
        t_span: float = 0.5,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        # Written as negated range checks so that NaN is rejected as well.
        if not (0.0 <= alpha0 <= 1.0):
            raise ValueError(f"alpha0 must be in [0, 1], got {alpha0!r}")
        if not (0.0 <= low < high <= 1.0):
            raise ValueError(
                f"low and high must satisfy 0 <= low < high <= 1, got low={low!r}, high={high!r}"
            )
        if not (0.0 < step <= 1.0):
            raise ValueError(f"step must be in (0, 1], got {step!r}")
        if not (t_span > 0.0 and math.isfinite(t_span)):
            raise ValueError(f"t_span must be a finite number > 0, got {t_span!r}")

        self._alpha0 = float(alpha0)
        self._low = float(low)
        self._high = float(high)
        self._step = float(step)
        self._t_span = float(t_span)
        self._clock = clock

        self._alpha = self._alpha0
        self._slow_mode = False
        # No overload seen yet: the initial value is the last "minimum". With
        # alpha0 = 1 the bisection line is 0, so the first descent only halves.
        self._last_minimum = self._alpha0
        self._history: SampleLog[AlphaSample] = SampleLog()

        self._span_start = clock()
        self._busy_seconds = 0.0
        self._shedding = False  # the node shed input in this span

    @property
    def alpha(self) -> float:
        """Current attenuation factor alpha in [0, 1]."""
        return self._alpha

    @property
    def slow_mode(self) -> bool:
        """Whether alpha currently decreases by ``step`` instead of halving."""
        return self._slow_mode

    @property
    def last_minimum(self) -> float:
        """The alpha at the most recent overload (alpha_best in the paper); alpha0 before any."""
        return self._last_minimum

    @property
    def history(self) -> list[AlphaSample]:
        """One :class:`AlphaSample` per evaluation by :meth:`poll`, oldest first (a copy;
        over a long run, evenly thinned to at most a :class:`SampleLog`'s capacity)."""
        return list(self._history)

    def state(self) -> dict[str, Any]:
        """The controller's state (alpha, mode, last minimum, history) as plain data, for a
        checkpoint; the span in progress is not part of it."""
        return {"alpha": self._alpha, "slow_mode": self._slow_mode,
                "last_minimum": self._last_minimum,
                "history": self._history.state(list)}

    def load_state(self, state: dict[str, Any]) -> None:
        """Return to a :meth:`state`; a new span starts now."""
        self._alpha = float(state["alpha"])
        self._slow_mode = bool(state["slow_mode"])
        self._last_minimum = float(state["last_minimum"])
        self._history.load_state(state["history"], lambda s: AlphaSample(*s))
        self._span_start = self._clock()
        self._busy_seconds = 0.0
        self._shedding = False  # the node shed input in this span

    def force(self, alpha: float) -> None:
        """Set alpha to a value it had before (a recovering actor replays the alpha
        each batch ran under); the controller goes on from it."""
        self._alpha = float(alpha)

    def note_overload(self) -> None:
        """The node sheds input in the current span: whatever its busy time, the span
        ends as an overloaded one (alpha goes back to ``alpha0``). Shedding makes time
        to spare; spent on more speculation, it would hand held events on at once, in
        a burst of work the drops did not allow for."""
        self._shedding = True

    def add_busy(self, seconds: float) -> None:
        """Add processing time to the current span's ``t_busy``.

        Parameters
        ----------
        seconds : float
            Time spent processing, >= 0. It is attributed to the span that is
            current when this is called.
        """
        if not (seconds >= 0.0 and math.isfinite(seconds)):
            raise ValueError(f"seconds must be a finite number >= 0, got {seconds!r}")
        self._busy_seconds += seconds

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Measure the enclosed block with ``clock`` and add it as busy time.

        The time is added when the block exits, also when it raises, since the
        processing time was spent either way. A block that straddles a span
        boundary is counted entirely in the span in which it ends, which can
        push that span's busy factor above 1; such a span resets alpha, which is
        the safe reaction to a long-running block.
        """
        start = self._clock()
        try:
            yield
        finally:
            self.add_busy(max(0.0, self._clock() - start))

    def poll(self) -> bool:
        """Evaluate the span if ``t_span`` has elapsed since it started.

        The busy factor is the accumulated busy time divided by the time that
        actually elapsed since the span started (which is at least ``t_span``,
        and more if ``poll`` is called late). Then alpha is updated with
        :meth:`update`, the evaluation is appended to :attr:`history` and a new
        span starts with zero busy time.

        Returns
        -------
        bool
            True if the span was evaluated, False if it is still running.
        """
        now = self._clock()
        elapsed = now - self._span_start
        if elapsed < self._t_span:
            return False
        busy_factor = self._busy_seconds / elapsed
        alpha = self.update(math.inf if self._shedding else busy_factor)
        self._history.append(AlphaSample(time=now, alpha=alpha, busy_factor=busy_factor))
        self._span_start = now
        self._busy_seconds = 0.0
        self._shedding = False
        return True

    def update(self, busy_factor: float) -> float:
        """Apply one step of Algorithm 3 for a measured busy factor.

        This is the pure control logic; it neither reads the clock nor touches
        the span bookkeeping, so it can be driven directly.

        Parameters
        ----------
        busy_factor : float
            Measured b_c, >= 0 (values above 1 are possible when busy time is
            reported from overlapping work and count as overload).

        Returns
        -------
        float
            The new alpha.
        """
        if not (busy_factor >= 0.0):
            raise ValueError(f"busy_factor must be a number >= 0, got {busy_factor!r}")

        # Overload: back off to no speculation and remember the alpha that was too
        # aggressive; the next descent uses it to place the bisection line.
        if busy_factor > self._high:
            self._last_minimum = self._alpha
            self._alpha = self._alpha0
            self._slow_mode = False

        # CPU time to spare: speculate more.
        if busy_factor < self._low:
            if self._slow_mode:
                target = self._alpha - self._step
            else:
                target = self._alpha / 2.0
                if (1.0 - self._last_minimum) / 2.0 > target:
                    # Halving would cross the bisection line: approach the
                    # previously overloaded alpha in small steps from here on.
                    self._slow_mode = True
                    target = self._alpha - self._step
            self._alpha = max(0.0, target)

        return self._alpha
