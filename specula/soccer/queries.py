"""The DEBS 2013 Grand Challenge queries 1-3 as detectors: running analysis, ball
possession per player and per team, and heat maps.

Definitions (the Grand Challenge description, debs.org/grand-challenges/2013, and
Mutschler, Ziekow and Jerzak, "The DEBS 2013 Grand Challenge", DEBS 2013):

- **Q1 running analysis**: a player's intensity class by speed, standing below 1 km/h,
  trot below 11, low speed run below 14, medium below 17, high below 24, sprint above;
  a class that lasts less than a second counts with the next class that lasts at
  least one. Time and distance per class over the last 1, 5, 20 minutes and the game.
- **Q2 ball possession**: a player has the ball from his first hit to his last before
  another player hits it; the time between them is his. Play that stops (the ball
  leaves the pitch, another ball is put into play) ends a possession. Time and share
  per player and per team over the same windows.
- **Q3 heat map**: the time a player spends in each cell of a grid laid over the pitch,
  8 x 13, 16 x 25, 32 x 50 and 64 x 100 cells, over the last 1, 5, 10 minutes and the
  game.

Game time (queries 1 and 3). The challenge counts a player's running and his presence
on the pitch over the game, whose start and end time stamps it gives (10753295594424116,
14879639146403495), in two halves (the first ending at 12557295594424116, the second
starting at 13086639146403495): the time before the kick-off, half time and after the
final whistle are not game. Within the halves we also leave out the referee's
interruptions, as the issue tracker's reading of "time in play" asks (the challenge's
text is not among the project's seed documents, so this is our reading): the sums count
only time while play is on. Play is stopped from an ``interruption_begin`` to its
``interruption_end`` (``specula replay --referee`` sends the annotated interruptions and
the time outside the halves as such stops); a stream without them is all play. A
player's readings while play is stopped move him but add no time, distance or heat, and
a player first read then is reported from his first reading in play. The windows stay
windows of the sensor clock (the last 1, 5, 10 or 20 minutes), holding the play time
within them; "the whole game" (window 0) is all play so far.

A player's position and speed come from his two leg sensors, averaged
(:mod:`specula.soccer._motion`). Each detector reports once per second of the stream,
at the start of each second (``ts`` = the second's first picosecond; it counts what
happened before it), and once more at the end of the stream (``ts`` = the last input):
every sum is over whole seconds of the sensor clock, a window of ``w`` s being the last
``w`` seconds before the report (the second in progress included at the end).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specula.detectors import Emitter, type_ids
from specula.soccer import _motion
from specula.soccer._windows import SecondSums, _Aggregate
from specula.soccer.geometry import (
    HEAT_GRIDS,
    HEAT_WINDOWS_S,
    INTENSITY_KMH,
    INTENSITY_NAMES,
    INTENSITY_SMOOTHING_PS,
    MIN_INTENSITY_PS,
    PITCH_X,
    PITCH_Y,
    PS,
    RUNNING_WINDOWS_S,
    SENSOR_STALE_PS,
)
from specula.soccer.types import REFEREE_TYPES

#: Pending seconds a player's undecided intensity time may span (see ``_motion``).
PENDING_SECONDS = 16
_NO_ROWS = np.zeros(0, np.int64)  # no readings: a cut of every player's path only


class _PlayerMotion(_Aggregate):
    """Players' motion from their leg readings, cut at report boundaries and where play
    stops and restarts: subclasses turn segments of play into rows of per-second sums
    (``_take``) and report (``_report``). Segments while play is stopped are dropped
    (see the module's "game time")."""

    inputs = ("player", *REFEREE_TYPES)
    # the referee's annotations tell the time too: as clock events they are never
    # measured as delayed (see BallInPlay)
    clock = ("player", *REFEREE_TYPES)
    values = 1

    def __init__(self, windows_s: tuple[int, ...], stale_ps: int,
                 smoothing_ps: int = INTENSITY_SMOOTHING_PS) -> None:
        self.windows_s = tuple(windows_s)
        self.stale_ps = stale_ps
        self.smoothing_ps = smoothing_ps
        self.second = -1  # the second in progress (s), -1 before the first leg reading
        self.last_ts = -1
        self.team = np.zeros(0, np.int64)  # per player, -1: not seen
        self.leg_ts = np.zeros((0, 2))
        self.leg_pos = np.zeros((0, 2, 2))
        self.leg_vel = np.zeros((0, 2, 3))
        self.last_t = np.zeros(0)
        self.ema = np.zeros((0, 4))
        self.sums = SecondSums(self.values, max(w for w in self.windows_s))
        self.stopped = False  # the referee stopped play

    def _grow(self, n: int) -> None:
        """Room for players 0 .. n-1."""
        k = n - len(self.team)
        self.team = np.concatenate([self.team, np.full(k, -1, np.int64)])
        self.leg_ts = np.concatenate([self.leg_ts, np.full((k, 2), -1.0)])
        self.leg_pos = np.concatenate([self.leg_pos, np.zeros((k, 2, 2))])
        self.leg_vel = np.concatenate([self.leg_vel, np.zeros((k, 2, 3))])
        self.last_t = np.concatenate([self.last_t, np.full(k, -1.0)])
        self.ema = np.concatenate([self.ema, np.full((k, 4), -1.0)])

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        types = events["type"]
        player, begin = type_ids(type_names, "player", "interruption_begin")
        marks = np.flatnonzero(types != player).tolist()
        start = 0
        for m in [*marks, len(events)]:
            legs = start + np.flatnonzero((events["limb"][start:m] <= 1)
                                          & (events["player"][start:m] >= 0)
                                          & (types[start:m] == player))
            self._readings(events, legs, emit)
            if m < len(events):
                self._referee(events, m, bool(types[m] == begin), emit)
            start = m + 1

    def _readings(self, events: np.ndarray, legs: np.ndarray, emit: Emitter) -> None:
        """Leg readings ``legs`` (batch indices, in time order) between two annotations."""
        if not len(legs):
            return
        players = events["player"][legs]
        if players.max() >= len(self.team):
            self._grow(int(players.max()) + 1)
        ts = events["ts"][legs]
        if self.second < 0:
            self.second = int(ts[0] // PS)
        seconds = ts // PS
        start = 0
        while start < len(legs):
            s = int(seconds[start])
            self._boundaries(s, events, int(legs[start]), emit)
            end = int(np.searchsorted(seconds, s, side="right"))
            # a player is reported from the first second boundary after his first
            # reading in play
            if not self.stopped:
                self.team[players[start:end]] = events["team"][legs[start:end]]
            self._segments(legs[start:end], events, -1)
            start = end
        self.last_ts = int(ts[-1])

    def _boundaries(self, s: int, events: np.ndarray, cause: int, emit: Emitter) -> None:
        """Close and report every second before second ``s``."""
        for b in range(self.second + 1, s + 1):
            self._segments(_NO_ROWS, events, b * PS)
            self._close(b)
            self._report(b, b * PS, cause, emit)
            self.second = b

    def _referee(self, events: np.ndarray, i: int, begin: bool, emit: Emitter) -> None:
        """Play stops (``begin``) or goes on at annotation ``i``: every player's path is
        cut there, so that what lies before counts as it was (play or not)."""
        if self.second < 0 or begin == self.stopped:
            self.stopped = begin
            return
        ts = int(events["ts"][i])
        self._boundaries(int(ts // PS), events, i, emit)
        self._segments(_NO_ROWS, events, ts)
        self.stopped = begin
        self.last_ts = max(self.last_ts, ts)

    def _segments(self, rows: np.ndarray, events: np.ndarray, advance_to: int) -> None:
        seg = _motion.segments(
            events["player"][rows], events["limb"][rows], events["ts"][rows],
            events["x"][rows], events["y"][rows], events["v"][rows], events["vx"][rows],
            events["vy"][rows], events["vz"][rows], self.leg_ts, self.leg_pos, self.leg_vel,
            self.last_t, self.stale_ps, self.smoothing_ps, self.ema, advance_to)
        if len(seg) and not self.stopped:
            self._take(seg)

    def on_end(self, emit: Emitter) -> None:
        """End of stream: what is undecided is decided, and a last report."""
        if self.second < 0:
            return
        self._finish()
        self._close(self.second + 1)
        self._report(self.second + 1, self.last_ts, 0, emit)

    def _finish(self) -> None:
        """Decide what is still undecided at the end of the stream."""

    def _take(self, seg: np.ndarray) -> None:
        raise NotImplementedError

    def _close(self, end_s: int) -> None:
        """Close the second before ``end_s`` into the sums."""
        self.sums.close(end_s)

    def _report(self, end_s: int, ts: int, cause: int, emit: Emitter) -> None:
        raise NotImplementedError


class RunningAnalysis(_PlayerMotion):
    """DEBS 2013 query 1: per player, time (us) and distance (mm) in each intensity class
    (standing, trot, low, medium, high, sprint) over the last 1, 5 and 20 minutes and
    the whole game: one ``running_stats`` per player and window, every second and at the
    end of the stream; and the challenge's current running statistics, one
    ``current_running`` per decided run (below).

    Speed is that of the average of the player's two leg sensors' velocity vectors; the
    distance is its integral. The class comes from that velocity smoothed, in two
    steps: an exponential moving average with time constant ``smoothing_ps`` (250 ms),
    so that brief excursions across a class bound (noise of real sensors, a speed that
    grazes a bound for a few ms) do not cut a run, then the challenge's one-second
    rule: a run of one class shorter than ``min_run_ps`` counts with the next class that
    lasts at least that long. The time of a short run is decided when the next class
    has lasted a second: it enters the sums (of the seconds it happened in) then. At
    the end of the stream, undecided time goes to the class of the last run.

    Our reading of the current running statistics (the challenge: per player, at the
    sensors' rate, the current run's start and stop, intensity, distance and speed):
    a run is a stretch of the player's time in play decided for one class (by the
    one-second rule, so a short run is part of the next long one) without a gap (play
    stopped, his sensors silent). A run is reported once, complete, at the first report
    after its end is known: when the time after it is decided for another class, or
    follows a gap, or the stream ends. Rows at the sensors' rate would repeat the same
    run growing, and its class is known only a second after it starts.

    Examples
    --------
    A player stands for a second, then trots at 2 m/s for two; the whole game's window
    (``window`` 0) at each report, the last one at the end of the stream:

    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> MS = 10**9  # picoseconds
    >>> def legs(t, x, v):  # both leg sensors of player 3 at ms t
    ...     return [{"type": "player", "ts": t * MS, "key": key, "player": 3, "team": 0,
    ...              "limb": limb, "x": x, "v": v, "vx": 10_000 if v else 0}
    ...             for key, limb in ((13, 0), (14, 1))]
    >>> stream = [r for t in range(0, 3001, 100)  # still for 1 s, then 2 m/s for 2 s
    ...           for r in legs(t, 10_000 + 2 * max(t - 1000, 0), 2_000_000 if t >= 1000 else 0)]
    >>> out = feed(RunningAnalysis(), stream, registry=soccer_registry()).net
    >>> for e in out:
    ...     if e["type"] == "running_stats" and e["window"] == 0:
    ...         print(e["ts"] // MS, e["standing_us"], e["trot_us"], e["trot_mm"])
    1000 1000000 0 0
    2000 1000000 1000000 2000
    3000 1000000 2000000 4000
    3000 1000000 2000000 4000

    His decided runs (``current_running``), each at the first report after it ended:
    standing from 0 to 1 s, known once the trot has lasted a second, and the trot, which
    the end of the stream closes:

    >>> [(e["ts"] // MS, e["level"], e["since"] // MS, e["until"] // MS, e["mm"])
    ...  for e in out if e["type"] == "current_running"]
    [(2000, 0, 0, 1000, 0), (3000, 1, 1000, 3000, 4000)]
    """

    outputs = ("running_stats", "current_running")
    values = 2

    def __init__(self, windows_s: tuple[int, ...] = RUNNING_WINDOWS_S,
                 min_run_ps: int = MIN_INTENSITY_PS,
                 smoothing_ps: int = INTENSITY_SMOOTHING_PS,
                 stale_ps: int = SENSOR_STALE_PS) -> None:
        super().__init__(windows_s, stale_ps, smoothing_ps)
        self.min_run_ps = min_run_ps
        self.bounds = np.array(INTENSITY_KMH) / 3.6 * 1000.0  # mm/s
        self.run_cls = np.zeros(0, np.int64)
        self.run_len = np.zeros(0)
        self.committed = np.zeros(0, bool)
        self.pend = np.zeros((0, PENDING_SECONDS, 5))
        self.pend_n = np.zeros(0, np.int64)
        self.cur = np.zeros((0, 6, 2))  # decided (us, mm) of the second in progress
        self.runs = np.zeros((0, 4))  # per player, his open decided run (see _motion)
        self.closed = np.zeros((0, 5))  # decided runs closed since the last report

    def _grow(self, n: int) -> None:
        k = n - len(self.team)
        super()._grow(n)
        self.run_cls = np.concatenate([self.run_cls, np.full(k, -1, np.int64)])
        self.run_len = np.concatenate([self.run_len, np.zeros(k)])
        self.committed = np.concatenate([self.committed, np.zeros(k, bool)])
        self.pend = np.concatenate([self.pend, np.zeros((k, PENDING_SECONDS, 5))])
        self.pend_n = np.concatenate([self.pend_n, np.zeros(k, np.int64)])
        self.cur = np.concatenate([self.cur, np.zeros((k, 6, 2))])
        no_run = np.zeros((k, 4))
        no_run[:, _motion.RUN_CLASS] = -1
        self.runs = np.concatenate([self.runs, no_run])

    def _take(self, seg: np.ndarray) -> None:
        self._decided(*_motion.intensity(seg, float(self.second), self.bounds,
                                         float(self.min_run_ps), self.run_cls, self.run_len,
                                         self.committed, self.pend, self.pend_n, self.cur,
                                         self.runs))

    def _decided(self, rows: np.ndarray, closed: np.ndarray) -> None:
        """What the kernel decided: time of earlier seconds, and runs closed."""
        self._older(rows)
        if len(closed):
            self.closed = np.concatenate([self.closed, closed])

    def _older(self, rows: np.ndarray) -> None:
        """Decided time of earlier seconds: rows (second, player, class, us, mm)."""
        if len(rows):
            self.sums.add(np.column_stack([rows[:, 0], rows[:, 1] * 6 + rows[:, 2],
                                           rows[:, 3:5]]))

    def _finish(self) -> None:
        """Every player's undecided time to his last run's class, and his open decided
        run closed: no later time can extend it."""
        self._decided(*_motion.decide_all(float(self.second), self.run_cls, self.pend,
                                          self.pend_n, self.cur, self.runs))
        open_ = np.flatnonzero(self.runs[:, _motion.RUN_CLASS] >= 0)
        self._decided(np.zeros((0, 5)), np.column_stack([open_, self.runs[open_]]))
        self.runs[:, _motion.RUN_CLASS] = -1

    def _close(self, end_s: int) -> None:
        flat = self.cur.reshape(-1, 2)
        slot = np.flatnonzero(flat.any(axis=1))
        if len(slot):
            self.sums.add(np.column_stack([np.full(len(slot), end_s - 1.0), slot,
                                           flat[slot]]))
        self.cur[:] = 0.0
        self.sums.close(end_s)

    def _report(self, end_s: int, ts: int, cause: int, emit: Emitter) -> None:
        self._report_runs(ts, cause, emit)
        seen = np.flatnonzero(self.team >= 0)
        n = len(self.team) * 6
        for w, s in zip(self.windows_s, self.sums.sums(n, end_s, self.windows_s),
                        strict=True):
            table = np.rint(s[:n].reshape(-1, 6, 2)[seen]).astype(np.int64)
            cols = {f"{c}_{u}": table[:, i, j] for i, c in enumerate(INTENSITY_NAMES)
                    for j, u in enumerate(("us", "mm"))}
            emit.many("running_stats", ts=np.full(len(seen), ts), key=seen,
                      cause=np.full(len(seen), cause), player=seen, team=self.team[seen],
                      window=w, **cols)

    def _report_runs(self, ts: int, cause: int, emit: Emitter) -> None:
        """The decided runs closed since the last report, one ``current_running`` each
        (in the order they closed: per player, in time order)."""
        c = self.closed
        if not len(c):
            return
        player = c[:, 0].astype(np.int64)
        emit.many("current_running", ts=np.full(len(c), ts), key=player,
                  cause=np.full(len(c), cause), player=player, team=self.team[player],
                  level=c[:, 1 + _motion.RUN_CLASS].astype(np.int8),
                  since=np.rint(c[:, 1 + _motion.RUN_T0]).astype(np.int64),
                  until=np.rint(c[:, 1 + _motion.RUN_T1]).astype(np.int64),
                  mm=np.rint(c[:, 1 + _motion.RUN_MM]).astype(np.int64))
        self.closed = np.zeros((0, 5))


class HeatMap(_PlayerMotion):
    """DEBS 2013 query 3: per player, the time (us) he spends in each cell of four grids
    over the pitch (8 x 13, 16 x 25, 32 x 50, 64 x 100: columns across x, rows along
    y) over the last 1, 5 and 10 minutes and the whole game.

    Output layout, ``heat``: one event per (player, window, grid, cell) whose time
    changed since the last report, every second and at the end of the stream, carrying
    the cell's new time ``us`` (0 when a sliding window has lost it). Column ``col`` of
    grid ``g`` spans x in ``PITCH_X[0] + [col, col + 1) * width / cols``, row ``row`` y
    in ``PITCH_Y[0] + [row, row + 1) * length / rows``; positions outside the pitch
    count for the nearest cell at its edge. The heat map of a player, window and grid
    at a time ``t`` is, per cell, the ``us`` of its last ``heat`` event at or before
    ``t`` (0 if none): :func:`heat_table` builds it. The player's position is the
    average of his two leg sensors, and a segment of his path between two readings
    shares its time among the cells it crosses, in proportion to its length in each.

    Examples
    --------
    The same player as :class:`RunningAnalysis`'s example, on the 8 x 13 grid (``grid``
    0), whole game: he crosses from column 1 into column 2 in the last second.

    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> MS = 10**9  # picoseconds
    >>> def legs(t, x, v):  # both leg sensors of player 3 at ms t
    ...     return [{"type": "player", "ts": t * MS, "key": key, "player": 3, "team": 0,
    ...              "limb": limb, "x": x, "v": v, "vx": 10_000 if v else 0}
    ...             for key, limb in ((13, 0), (14, 1))]
    >>> stream = [r for t in range(0, 3001, 100)  # still for 1 s, then 2 m/s for 2 s
    ...           for r in legs(t, 10_000 + 2 * max(t - 1000, 0), 2_000_000 if t >= 1000 else 0)]
    >>> out = feed(HeatMap(), stream, registry=soccer_registry()).net
    >>> [(e["ts"] // MS, e["col"], e["row"], e["us"]) for e in out
    ...  if e["window"] == 0 and e["grid"] == 0]
    [(1000, 1, 6, 1000000), (2000, 1, 6, 2000000), (3000, 1, 6, 2560375), (3000, 2, 6, 439625)]
    """

    outputs = ("heat",)

    def __init__(self, windows_s: tuple[int, ...] = HEAT_WINDOWS_S,
                 grids: tuple[tuple[int, int], ...] = HEAT_GRIDS,
                 stale_ps: int = SENSOR_STALE_PS) -> None:
        super().__init__(windows_s, stale_ps)
        self.cols = np.array([g[0] for g in grids], np.int64)
        self.rows = np.array([g[1] for g in grids], np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.cols * self.rows)])
        self.stride = int(self.offsets[-1])
        self.closed = np.zeros((0, 3))  # rows of the second just closed, until reported

    def _take(self, seg: np.ndarray) -> None:
        cells = _motion.heat_cells(seg, self.cols, self.rows, self.offsets[:-1],
                                   self.stride, np.array(PITCH_X, np.float64),
                                   np.array(PITCH_Y, np.float64))
        self.sums.add(np.column_stack([np.full(len(cells), float(self.second)), cells]))

    def _close(self, end_s: int) -> None:
        self.closed = self.sums.close(end_s)

    def _report(self, end_s: int, ts: int, cause: int, emit: Emitter) -> None:
        n = len(self.team) * self.stride
        fresh = self.closed[:, 1].astype(np.int64)
        for w, s in zip(self.windows_s, self.sums.sums(n, end_s, self.windows_s),
                        strict=True):
            slots = fresh
            if w:  # a sliding window also changes where its oldest second drops out
                old = self.sums.rows(end_s - w - 1)
                slots = np.union1d(fresh, old[old[:, 0] == end_s - w - 1, 1].astype(np.int64))
            if not len(slots):
                continue
            player, local = np.divmod(slots, self.stride)
            grid = np.searchsorted(self.offsets, local, side="right") - 1
            row, col = np.divmod(local - self.offsets[grid], self.cols[grid])
            emit.many("heat", ts=np.full(len(slots), ts), key=player,
                      cause=np.full(len(slots), cause), player=player,
                      team=self.team[player], window=w, grid=grid, col=col, row=row,
                      us=np.rint(s[slots, 0]).astype(np.int64))
        self.closed = np.zeros((0, 3))


def heat_table(heat: np.ndarray, player: int, window: int, grid: int,
               at: int | None = None, grids: tuple[tuple[int, int], ...] = HEAT_GRIDS
               ) -> np.ndarray:
    """A player's heat map from ``heat`` events: time (us) per cell, ``(rows, cols)``
    (row 0 at the pitch's smallest y, column 0 at its smallest x), as reported at or
    before ``at`` (ps; None: the last report).

    Parameters
    ----------
    heat : numpy.ndarray
        ``heat`` events (a net output), in any order.
    player, window, grid : int
        Which player, window (its length in s, 0: the whole game) and grid (index in
        ``grids``).
    at : int, optional
        The time of the map.
    grids : tuple of (int, int)
        The grids, (columns, rows), as the detector had them.
    """
    cols, rows = grids[grid]
    sel = (heat["player"] == player) & (heat["window"] == window) & (heat["grid"] == grid)
    if at is not None:
        sel &= heat["ts"] <= at
    ev = heat[sel]
    ev = ev[np.argsort(ev["ts"], kind="stable")][::-1]  # the latest first
    cell = ev["row"].astype(np.int64) * cols + ev["col"]
    _, last = np.unique(cell, return_index=True)  # each cell's latest event
    table = np.zeros(rows * cols, np.int64)
    table[cell[last]] = ev["us"][last]
    return table.reshape(rows, cols)


class PossessionStats(_Aggregate):
    """DEBS 2013 query 2: ball possession per player and per team, over the last 1, 5
    and 20 minutes and the whole game: every second and at the end of the stream, one
    ``possession_stats`` per player (time ``us``, ``hits``, and ``share`` of all
    players' possession time in the window) and one ``team_possession`` per team
    (time and share of both teams').

    A player possesses the ball from a hit to his next hit when nobody else hit it in
    between and play did not stop: ``ball_out`` (the ball in play left the pitch) and
    ``ball_in`` (another ball was put into play) end every possession, so interruptions
    and the ball out of play count for nobody. The time between two hits enters the
    sums (of the seconds it spans) at the second hit. Raw ``ball`` readings drive the
    clock and the reports.

    Examples
    --------
    Player 3 (team 0) hits the ball twice, 1 s apart, then player 9 (team 1) twice, 0.4 s
    apart; the whole game's figures at the end of the stream:

    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> MS = 10**9  # picoseconds
    >>> hits = [{"type": "hit", "ts": t * MS, "key": p, "player": p, "team": team}
    ...         for t, p, team in [(100, 3, 0), (1100, 3, 0), (1500, 9, 1), (1900, 9, 1)]]
    >>> clock = [{"type": "ball", "ts": t * MS, "key": 4} for t in range(0, 2101, 100)]
    >>> out = feed(PossessionStats(), hits + clock, registry=soccer_registry()).net
    >>> [(e["player"], e["us"], e["hits"], round(e["share"], 2)) for e in out
    ...  if e["type"] == "possession_stats" and e["window"] == 0 and e["ts"] == 2100 * MS]
    [(3, 1000000, 2, 0.71), (9, 400000, 2, 0.29)]
    """

    inputs = ("hit", "ball_in", "ball_out", "ball")
    outputs = ("possession_stats", "team_possession")
    clock = ("ball",)

    def __init__(self, windows_s: tuple[int, ...] = RUNNING_WINDOWS_S) -> None:
        self.windows_s = tuple(windows_s)
        self.second = -1
        self.last_ts = -1
        self.holder = -1  # the player who hit the ball last, while play goes on
        self.since = -1  # his last hit (ps)
        self.team: dict[int, int] = {}
        self.sums = SecondSums(2, max(self.windows_s))

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        types = events["type"]
        ball, hit = type_ids(type_names, "ball", "hit")
        ts = events["ts"]
        if self.second < 0:
            self.second = int(ts[0] // PS)
        seconds = ts // PS
        crossing = np.flatnonzero(seconds > np.maximum.accumulate(
            np.concatenate([[self.second], seconds[:-1]])))
        plays = np.flatnonzero(types != ball)
        for i in np.union1d(crossing, plays).tolist():
            for b in range(self.second + 1, int(seconds[i]) + 1):
                self.sums.close(b)
                self._report(b, b * PS, i, emit)
                self.second = b
            if types[i] == hit:
                self._hit(int(ts[i]), int(events["player"][i]), int(events["team"][i]))
            elif types[i] != ball:
                self.holder = -1
        self.last_ts = int(ts[-1])

    def _hit(self, ts: int, player: int, team: int) -> None:
        self.team[player] = team
        rows = [(ts // PS, player, 0.0, 1.0)]
        if player == self.holder:  # his time since his last hit, cut at seconds
            t = self.since
            while t < ts:
                end = min(ts, (t // PS + 1) * PS)
                rows.append((t // PS, player, (end - t) / 1e6, 0.0))
                t = end
        self.holder, self.since = player, ts
        self.sums.add(np.array(rows, np.float64))

    def on_end(self, emit: Emitter) -> None:
        """End of stream: a last report."""
        if self.second < 0:
            return
        self.sums.close(self.second + 1)
        self._report(self.second + 1, self.last_ts, 0, emit)

    def _report(self, end_s: int, ts: int, cause: int, emit: Emitter) -> None:
        players = np.array(sorted(self.team), np.int64)
        if not len(players):
            return
        teams = np.array([self.team[p] for p in players.tolist()], np.int64)
        n = int(players.max()) + 1
        for w, s in zip(self.windows_s, self.sums.sums(n, end_s, self.windows_s),
                        strict=True):
            us, hits = s[players, 0], s[players, 1]
            total = us.sum()
            emit.many("possession_stats", ts=np.full(len(players), ts), key=players,
                      cause=np.full(len(players), cause), player=players, team=teams,
                      window=w, us=np.rint(us).astype(np.int64),
                      hits=np.rint(hits).astype(np.int32),
                      share=us / total if total > 0 else np.zeros(len(players)))
            team_us = np.array([us[teams == t].sum() for t in (0, 1)])
            both = team_us.sum()
            emit.many("team_possession", ts=np.full(2, ts), key=np.arange(2),
                      cause=np.full(2, cause), team=np.arange(2), window=w,
                      us=np.rint(team_us).astype(np.int64),
                      share=team_us / both if both > 0 else np.zeros(2))
