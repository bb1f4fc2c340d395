"""Levels 4-6: shots on goal, blocked shots, and shots that end a double pass."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specula.detectors import Detector, Emitter, EventView, type_ids
from specula.soccer.geometry import (
    BALL_DRAG_PER_M,
    GOALS,
    GRAVITY_MM_S2,
    PS,
    SHOT_HORIZON_PS,
    in_pitch,
)


def flight_s(path_mm, speed_mm_s):
    """Seconds a ball at ``speed`` takes to fly ``path_mm``, slowed by quadratic drag:
    v(t) = v0 / (1 + k v0 t), so the path s(t) = ln(1 + k v0 t) / k."""
    return np.expm1(BALL_DRAG_PER_M * path_mm / 1e3) / (BALL_DRAG_PER_M * speed_mm_s / 1e3)


def fall_mm(t, path_mm):
    """How far a ball has fallen under gravity after ``t`` s on a flight of ``path_mm``:
    drag, at the flight's mean speed, damps the fall as it damps the flight
    (c = k * mean speed; fall = g (c t - 1 + exp(-c t)) / c^2, g t^2 / 2 for c = 0)."""
    c = np.maximum(BALL_DRAG_PER_M * path_mm / 1e3 / np.maximum(t, 1e-9), 1e-9)
    return GRAVITY_MM_S2 * (c * t - 1 + np.exp(-c * t)) / (c * c)


def goal_reached(x, y, z, vx, vy, vz, speed_mm_s, horizon_s,
                 goals: tuple[int, ...] = (0, 1)) -> np.ndarray:
    """Index of the goal (of ``goals``) whose mouth the ball's projected path from
    (x, y, z) at ``speed`` along the unit direction (v*/10,000) enters within
    ``horizon_s``, or -1 (arrays in, array out).

    DEBS 2013 query 4 projects the ball along its velocity. The path here keeps its
    direction but slows with air drag (quadratic, ``BALL_DRAG_PER_M``, :func:`flight_s`),
    and falls under gravity (:func:`fall_mm`); a ball that comes down to the ground rolls
    on. A straight line at constant speed would carry a lofted shot over the bar that in
    fact drops under it, and bring a long shot in sooner than it comes. ``horizon_s`` may
    be one value per reading."""
    out = np.full(len(x), -1, np.int8)
    ux, uy, uz = vx / 1e4, vy / 1e4, vz / 1e4
    speed = np.maximum(np.asarray(speed_mm_s, np.float64), 1.0)
    for g in goals:
        goal = GOALS[g]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            path = (goal["y"] - y) / uy  # mm along the direction to the line; uy = 0: inf
            t = flight_s(path, speed)
            gx = x + ux * path
            gz = np.maximum(z + uz * path - fall_mm(t, path), 0)
        hit = (path > 0) & (t <= horizon_s) & (gx >= goal["x"][0]) & (gx <= goal["x"][1]) \
            & (gz <= goal["z"])
        out[hit & (out < 0)] = g
    return out


def straight_to_goal(r: np.ndarray, goal: int, left_ps) -> np.ndarray:
    """Whether each ball reading of ``r``, carried on a straight line along its
    direction at its speed, crosses ``goal``'s line between the posts and under the bar
    within ``left_ps`` (one value or one per reading): DEBS 2013 query 4's projection."""
    g = GOALS[goal]
    uy = r["vy"] / 1e4
    with np.errstate(divide="ignore", invalid="ignore"):
        path = np.where(uy != 0, (g["y"] - r["y"]) / uy, -1.0)  # mm along the direction
        x = r["x"] + r["vx"] / 1e4 * path
        z = r["z"] + r["vz"] / 1e4 * path
        seconds = path / (np.maximum(r["v"], 1) / 1e3)
    return (path > 0) & (r["v"] > 0) & (seconds * PS <= left_ps) & (x >= g["x"][0]) \
        & (x <= g["x"][1]) & (z >= 0) & (z <= g["z"])


def _first(flags: np.ndarray) -> int:
    """Index of the first true flag, or the length when none is."""
    found = np.flatnonzero(flags)
    return int(found[0]) if len(found) else len(flags)


#: The fields of a ball reading a ``shot_ball`` carries (query 4's output lists them).
_READING = ("x", "y", "z", "v", "vx", "vy", "vz", "a", "ax", "ay", "az")


class ShotOnGoal(Detector):
    """DEBS 2013 query 4: after a hit, the kicked ball's projected path
    (:func:`goal_reached`) reaches the goal the hitter's team attacks within 1.5 s of the
    hit. Judged on the ball's readings between ``after_ms`` and ``until_ms`` after the
    hit (the ball has left the foot); one ``shot`` per hit, with the hit's time stamp and
    the expected arrival ``eta``.

    The goal a team attacks is the one it does not defend (``side`` events of
    :class:`~specula.soccer.sides.TeamSides`, which follow the change of ends at half
    time); while only the other team's side is known, the team attacks the goal that one
    defends, and while neither is known a shot at either goal counts. So a firm
    back-pass towards one's own goalkeeper is no shot.

    Query 4's output, the ball's readings while it heads for goal, follows the
    challenge's own projection, a straight line at the ball's speed
    (:func:`straight_to_goal`), judged apart from the ``shot``: each reading of a hit's
    ball from ``after_ms`` after the hit is a ``shot_ball`` (key: the ball; the hitter,
    his team, and the reading's position, velocity and acceleration) from the first
    whose line enters the goal his team attacks within 1.5 s of the hit, while each
    line still enters it within 1.5 s of its reading; the stream ends at the first that
    does not (the ball no longer heads for goal), at the ball leaving the pitch, or at
    the next hit. The ``shot`` follows the ball's physics: a dipping shot saved before
    its straight line passes under the bar is a ``shot`` (what happened, scored against
    the match's truth, and the level above builds on it) with no ``shot_ball``, as the
    challenge's text reads.

    Examples
    --------
    Player 3 kicks ball 4 from 9 m in front of goal 0 towards it at 25 m/s, half a metre
    high; its readings every 10 ms:

    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> MS = 10**9  # picoseconds
    >>> hit = {"type": "hit", "ts": 1000 * MS, "key": 3, "player": 3, "team": 0, "ball": 4}
    >>> flight = [{"type": "ball", "ts": (1000 + t) * MS, "key": 4, "x": 26_000,
    ...            "y": 25_000 + 25 * t, "z": 500, "v": 25_000_000, "vy": 10_000}
    ...           for t in range(0, 400, 10)]
    >>> out = feed(ShotOnGoal(), [hit, *flight], registry=soccer_registry()).net
    >>> [(e["ts"] // MS, e["player"], e["goal"], e["eta"] // MS) for e in out
    ...  if e["type"] == "shot"]
    [(1000, 3, 0, 1372)]
    >>> stream = [e["ts"] // MS for e in out if e["type"] == "shot_ball"]
    >>> stream[:3], stream[-1]  # from 20 ms on, until the ball crosses the line
    ([1020, 1030, 1040], 1350)
    """

    inputs = ("hit", "ball", "side")
    outputs = ("shot", "shot_ball")
    clock = ("ball",)

    def __init__(self, after_ms: float = 20.0, until_ms: float = 150.0) -> None:
        self.after_ps = int(after_ms * 1e9)
        self.until_ps = int(until_ms * 1e9)
        self.open: tuple[int, int, int, int] | None = None  # (hit ts, player, team, ball)
        self.defends: dict[int, int] = {}  # team -> goal it defends
        # query 4's stream: (hit ts, player, team, ball, goal; -1 until the line shows it)
        self.heading: tuple[int, int, int, int, int] | None = None

    def attacks(self, team: int) -> tuple[int, ...]:
        """The goals a shot of ``team`` can be aimed at, by what is known of the sides."""
        if team in self.defends:
            return (1 - self.defends[team],)
        if 1 - team in self.defends:
            return (self.defends[1 - team],)
        return (0, 1)

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        types = events["type"]
        ball, side = type_ids(type_names, "ball", "side")
        is_ball = types == ball
        marks = np.flatnonzero(~is_ball).tolist()
        bounds = [*marks, len(events)]
        self._ball(events, is_ball, 0, bounds[0], emit)
        for m, end in zip(marks, bounds[1:], strict=True):
            r = events[m]
            if types[m] == side:
                self.defends[int(r["team"])] = int(r["goal"])
            else:
                self.open = (int(r["ts"]), int(r["player"]), int(r["team"]), int(r["ball"]))
                self.heading = (*self.open, -1)
            self._ball(events, is_ball, m + 1, end, emit)

    def _ball(self, events: np.ndarray, is_ball: np.ndarray, start: int, end: int,
              emit: Emitter) -> None:
        """Ball readings ``start:end`` (between two hit or side events): judge the open
        hit, then report the readings of its ball that head for goal."""
        if start < end:
            self._judge(events, is_ball, start, end, emit)
            self._stream(events, is_ball, start, end, emit)

    def _stream(self, events: np.ndarray, is_ball: np.ndarray, start: int, end: int,
                emit: Emitter) -> None:
        """Query 4's stream on readings ``start:end``: wait for the first reading of the
        hit's ball whose straight line shows a shot, then report each while it heads for
        goal."""
        if self.heading is None:
            return
        ts0, player, team, ball, goal = self.heading
        seg = np.arange(start, end)
        seg = seg[is_ball[seg] & (events["key"][seg] == ball)
                  & (events["ts"][seg] >= ts0 + self.after_ps)]
        e = events[seg]
        out = ~np.asarray(in_pitch(e["x"], e["y"]), bool)
        if goal < 0:
            stop = _first(out | (e["ts"] > ts0 + SHOT_HORIZON_PS))
            reached = np.full(stop, -1)
            for g in self.attacks(team):
                line = straight_to_goal(e[:stop], g, ts0 + SHOT_HORIZON_PS - e["ts"][:stop])
                reached[(reached < 0) & line] = g
            shown = _first(reached >= 0)
            if shown == stop:
                if stop < len(e):
                    self.heading = None
                return
            goal = int(reached[shown])
            seg, e, out = seg[shown:], e[shown:], out[shown:]
        stop = _first(out | ~straight_to_goal(e, goal, SHOT_HORIZON_PS))
        self.heading = None if stop < len(e) else (ts0, player, team, ball, goal)
        if stop:
            e = e[:stop]
            emit.many("shot_ball", ts=e["ts"], key=ball, cause=seg[:stop], player=player,
                      team=team, **{f: e[f] for f in _READING})

    def _judge(self, events: np.ndarray, is_ball: np.ndarray, start: int, end: int,
               emit: Emitter) -> None:
        """Judge the open hit on readings ``start:end`` by the ball's physics."""
        if self.open is None:
            return
        ts0, player, team, ball = self.open
        seg = np.arange(start, end)
        ts = events["ts"][seg]
        mine = seg[is_ball[seg] & (events["key"][seg] == ball)
                   & (ts >= ts0 + self.after_ps) & (ts <= ts0 + self.until_ps)]
        if len(mine):
            e = events[mine]
            left = (ts0 + SHOT_HORIZON_PS - e["ts"]) / PS  # within 1.5 s of the hit
            goal = goal_reached(e["x"], e["y"], e["z"], e["vx"], e["vy"], e["vz"],
                                e["v"] / 1e3, left, self.attacks(team))
            found = np.flatnonzero(goal >= 0)
            if len(found):
                i = found[0]
                path = (GOALS[goal[i]]["y"] - int(e["y"][i])) / (e["vy"][i] / 1e4)
                eta = int(e["ts"][i]) + int(flight_s(path, max(e["v"][i] / 1e3, 1.0)) * PS)
                emit.at(int(mine[i]))
                emit("shot", ts0, player, player=player, team=team, goal=int(goal[i]), eta=eta)
                self.open = None
                return
        if len(ts) and ts[-1] > ts0 + self.until_ps:
            self.open = None


class BlockedShot(Detector):
    """A shot on goal, then a hit by an opponent before the ball reaches the goal: the
    shot was blocked (paper Fig. 5); ``receiver`` is the blocker.

    Examples
    --------
    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> MS = 10**9  # picoseconds
    >>> events = [{"type": "shot", "ts": 1000 * MS, "key": 3, "player": 3, "team": 0,
    ...            "goal": 0, "eta": 2000 * MS},
    ...           {"type": "hit", "ts": 1500 * MS, "key": 9, "player": 9, "team": 1}]
    >>> [(e["ts"] // MS, e["player"], e["receiver"], e["received"] // MS)
    ...  for e in feed(BlockedShot(), events, registry=soccer_registry()).net]
    [(1000, 3, 9, 1500)]
    """

    inputs = ("shot", "hit")
    outputs = ("blocked_shot",)

    def __init__(self) -> None:
        self.shot: tuple[int, int, int, int] | None = None  # (ts, player, team, eta)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event.type == "shot":
            self.shot = (event.ts, event["player"], event["team"], event["eta"])
            return
        shot = self.shot
        if shot is None or event.ts <= shot[0]:
            return
        if event.ts > shot[3]:
            self.shot = None
        elif event["team"] != shot[2]:
            emit("blocked_shot", shot[0], shot[1], player=shot[1], team=shot[2],
                 receiver=event["player"], received=event.ts)
            self.shot = None


class CombinationShot(Detector):
    """A double pass followed by a shot of the same team within ``window_s``: an attack
    built on a one-two. ``receiver`` is the shooter, ``received`` the shot's time.

    Examples
    --------
    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> PS = 10**12
    >>> events = [{"type": "double_pass", "ts": 1 * PS, "key": 3, "player": 3, "team": 0,
    ...            "receiver": 5, "received": 4 * PS},
    ...           {"type": "shot", "ts": 6 * PS, "key": 5, "player": 5, "team": 0, "goal": 0,
    ...            "eta": 7 * PS}]
    >>> [(e["ts"] // PS, e["player"], e["receiver"], e["received"] // PS)
    ...  for e in feed(CombinationShot(), events, registry=soccer_registry()).net]
    [(1, 3, 5, 6)]
    """

    inputs = ("double_pass", "shot")
    outputs = ("combination_shot",)

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self.last: tuple[int, int, int] | None = None  # (ts, player, team)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event.type == "double_pass":
            self.last = (event.ts, event["player"], event["team"])
            return
        last = self.last
        if last is not None and event["team"] == last[2] and \
                event.ts - last[0] <= self.window_s * PS:
            emit("combination_shot", last[0], last[1], player=last[1], team=last[2],
                 receiver=event["player"], received=event.ts)
            self.last = None
