"""Level 1 ball detectors: which ball is in play, and its acceleration peaks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specula.detectors import Detector, Emitter, type_ids
from specula.events import distinct
from specula.soccer import _kernels
from specula.soccer.geometry import KICK_ACCELERATION, in_pitch
from specula.soccer.types import REFEREE_TYPES


class BallInPlay(Detector):
    """Which ball is in play: ``ball_in`` when play restarts with a ball, ``ball_out``
    when the ball in play crosses a touch or goal line, as the laws of the game put it.
    At most one ball is in play at a time, so a ``ball_in`` also ends the play of the
    ball before it; between a ``ball_out`` and the next ``ball_in`` the ball is out of
    play (a stoppage).

    A game has several balls (the DEBS 2013 game uses three in the first half and four
    in the second): one in the game, the others held or lying beside the pitch, and a
    spare may also lie inside the lines. A ball inside the pitch takes play when it is
    kicked there (its acceleration exceeds ``threshold``, 55 m/s^2 as for a kick): the
    kick-off, a kick-in, a goal kick, a corner, a free kick. A dead ball carried or
    thrown back onto the pitch while play is stopped does not take play, nor does a ball
    lying still, inside the pitch or beside it, nor a spare carried on while another is
    in play. A ball first seen inside the pitch (the kick-off ball at the start of a
    log) is in play from its first kick.

    The referee's annotations say when play stops and restarts. An
    ``interruption_begin`` takes the ball in play out of play (a ``ball_out`` where it
    was last read), and no ball takes play while it lasts. After its
    ``interruption_end`` play restarts, as the laws have it, when the ball is kicked
    inside the pitch (a free kick, a kick-in, the kick-off) or, a throw-in, when a ball
    comes onto the pitch from outside; without annotations only a kick restarts play.
    So play that the referee stopped (a foul, the wait for a kick-off, half time) gives
    no hit, possession, pass or shot above.

    Deciding here, once, which ball is in play lets every detector above follow one ball
    with one state per player, instead of keeping state per ball and each having to tell
    the ball in play from spares. A Numba kernel walks the readings (the ball in play
    couples the balls, so this is sequential).

    Examples
    --------
    Ball 8 lies beside the pitch (x < 0); ball 4, inside it, is kicked and leaves it:

    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> def ball(ts, key, x, a=0):
    ...     return {"type": "ball", "ts": ts, "key": key, "x": x, "y": 0, "a": a}
    >>> readings = [ball(1, 8, -5_000), ball(2, 4, 26_000), ball(3, 4, 26_100, a=90_000_000),
    ...             ball(4, 8, -5_000), ball(5, 4, -100)]
    >>> out = feed(BallInPlay(), readings, registry=soccer_registry())
    >>> [(e["type"], e["ts"], e["key"]) for e in out.net]
    [('ball_in', 3, 4), ('ball_out', 5, 4)]
    """

    inputs = ("ball", *REFEREE_TYPES)
    outputs = ("ball_in", "ball_out")
    # The referee's annotations tell the time as well as the readings: they enter the
    # stream stamped no earlier than its newest reading (specula.pipelines.replay's
    # Annotations), so as clock events they are never measured as delayed. As plain
    # input one that came while the balls were silent (before the game, the real
    # sample's first 5.5 s) would wait for the next ball reading to have its delay
    # measured, and that wait would become K.
    clock = ("ball", *REFEREE_TYPES)

    def __init__(self, threshold: int = KICK_ACCELERATION) -> None:
        self.threshold = threshold
        self.slots: dict[int, int] = {}
        self.seen = np.zeros(0, bool)
        self.was_inside = np.zeros(0, bool)
        # slot of the ball in play (-1: none), and 1 if the referee restarted play and no
        # ball has taken it yet (a throw-in may)
        self.state = np.array([-1, 0], np.int64)
        self.interrupted = False  # the referee stopped play
        self.last_xy = np.zeros((0, 2), np.int64)  # each ball's last position

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        types = events["type"]
        ball, begin = type_ids(type_names, "ball", "interruption_begin")
        balls = np.flatnonzero(types == ball)
        for sid in distinct(events["key"][balls]).tolist():
            if sid not in self.slots:
                self.slots[sid] = len(self.slots)
                self.seen = np.append(self.seen, False)
                self.was_inside = np.append(self.was_inside, False)
                self.last_xy = np.concatenate([self.last_xy, np.zeros((1, 2), np.int64)])
        marks = np.flatnonzero(types != ball).tolist()
        start = 0
        for m in [*marks, len(events)]:
            self._readings(events, balls[(balls >= start) & (balls < m)], emit)
            if m < len(events):
                self._referee(events, m, types[m] == begin, emit)
            start = m + 1

    def _readings(self, events: np.ndarray, rows: np.ndarray, emit: Emitter) -> None:
        """Ball readings ``rows`` (batch indices) between two referee events."""
        if not len(rows):
            return
        keys = events["key"][rows]
        slot = np.array([self.slots[s] for s in keys.tolist()], np.int64)
        inside = np.asarray(in_pitch(events["x"][rows], events["y"][rows]))
        last = len(slot) - 1 - np.unique(slot[::-1], return_index=True)[1]  # per ball
        if self.interrupted:  # no ball takes play: only remember where each one is
            at, kind = rows[:0], rows[:0]
            self.seen[slot] = True
            self.was_inside[slot[last]] = inside[last]
        else:
            at, kind = _kernels.ball_in_play(slot, inside, events["a"][rows], self.threshold,
                                             self.seen, self.was_inside, self.state)
        self.last_xy[slot[last]] = np.stack([events["x"][rows[last]],
                                             events["y"][rows[last]]], axis=1)
        for k, name in ((1, "ball_in"), (0, "ball_out")):
            sel = rows[at[kind == k]]
            if len(sel):
                emit.many(name, ts=events["ts"][sel], key=events["key"][sel], cause=sel,
                          x=events["x"][sel], y=events["y"][sel])

    def _referee(self, events: np.ndarray, i: int, begin: bool, emit: Emitter) -> None:
        """An interruption begins (the ball in play leaves play, where it was last read)
        or ends (a throw-in may now put a ball into play, as a kick may)."""
        self.interrupted = begin
        self.state[1] = 0 if begin else 1
        if begin and self.state[0] >= 0:
            slot = int(self.state[0])
            sid = next(s for s, k in self.slots.items() if k == slot)
            x, y = self.last_xy[slot].tolist()
            emit.at(i)
            emit("ball_out", int(events["ts"][i]), sid, x=x, y=y)
            self.state[0] = -1


class AccelerationPeak(Detector):
    """Each time a ball's acceleration rises above 55 m/s^2 (a kick or a bounce), one
    ``peak`` at the strongest reading, reported when the acceleration falls again; its
    time stamp is that of the strongest reading, so it lies in the past when it is
    generated (a detection delay). ``az`` is the vertical component of the acceleration's
    direction (scaled to 10,000): a bounce on the ground points up.

    An excursion still open when the stream ends (a log cut during a kick) is reported
    by :meth:`on_end`, at its strongest reading so far, rather than lost.

    Examples
    --------
    A kick: the acceleration rises to 90 m/s² (in µm/s²) and falls again, 1 ms apart:

    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> MS = 10**9  # picoseconds
    >>> readings = [{"type": "ball", "ts": t * MS, "key": 4, "a": a * 10**6}
    ...             for t, a in [(0, 10), (1, 60), (2, 90), (3, 70), (4, 20)]]
    >>> [(e["ts"] // MS, e["a"] // 10**6) for e in feed(AccelerationPeak(), readings,
    ...                                                  registry=soccer_registry()).net]
    [(2, 90)]
    """

    inputs = ("ball",)
    outputs = ("peak",)

    def __init__(self, threshold: int = KICK_ACCELERATION) -> None:
        self.threshold = threshold
        self.slots: dict[int, int] = {}
        self.in_excursion = np.zeros(0, bool)
        self.best = np.zeros((0, 6), np.int64)

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        for sid in distinct(events["key"]).tolist():
            if sid not in self.slots:
                self.slots[sid] = len(self.slots)
        if len(self.slots) > len(self.in_excursion):
            grow = len(self.slots) - len(self.in_excursion)
            self.in_excursion = np.concatenate([self.in_excursion, np.zeros(grow, bool)])
            self.best = np.concatenate([self.best, np.zeros((grow, 6), np.int64)])
        slot = np.array([self.slots[s] for s in events["key"].tolist()], np.int64)
        out = _kernels.acceleration_peaks(slot, events["ts"], events["a"], events["x"],
                                          events["y"], events["z"], events["az"],
                                          self.threshold, self.in_excursion, self.best)
        if len(out):
            cause = out[:, 6]
            emit.many("peak", ts=out[:, 0], key=events["key"][cause], cause=cause,
                      a=out[:, 1], x=out[:, 2], y=out[:, 3], z=out[:, 4], az=out[:, 5])

    def on_end(self, emit: Emitter) -> None:
        """End of stream: one ``peak`` per ball whose acceleration is still above the
        threshold, at the strongest reading of the open excursion."""
        sid_of = {slot: sid for sid, slot in self.slots.items()}
        for slot in np.flatnonzero(self.in_excursion).tolist():
            a, ts, x, y, z, az = self.best[slot].tolist()
            emit("peak", ts, sid_of[slot], a=a, x=x, y=y, z=z, az=az)
            self.in_excursion[slot] = False
