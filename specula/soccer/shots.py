"""Levels 4-6: shots on goal, blocked shots, and shots that end a double pass."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specula.detectors import Detector, Emitter, EventView
from specula.soccer.geometry import GOALS, PS, SHOT_HORIZON_PS


def goal_reached(x, y, z, vx, vy, vz, speed_mm_s, horizon_s: float) -> np.ndarray:
    """Index of the goal (0, 1) the straight path from (x, y, z) at ``speed`` along the
    unit direction (v*/10,000) enters within ``horizon_s``, or -1 (arrays in, array out).
    Gravity and drag are ignored, as in DEBS 2013 query 4."""
    out = np.full(len(x), -1, np.int8)
    dvx, dvy, dvz = vx / 1e4 * speed_mm_s, vy / 1e4 * speed_mm_s, vz / 1e4 * speed_mm_s
    for g, goal in enumerate(GOALS):
        with np.errstate(divide="ignore", invalid="ignore"):  # dvy = 0: t is +-inf or nan
            t = (goal["y"] - y) / dvy
            gx = x + dvx * t
            gz = z + dvz * t
        hit = (t > 0) & (t <= horizon_s) & (gx >= goal["x"][0]) & (gx <= goal["x"][1]) \
            & (gz >= 0) & (gz <= goal["z"])
        out[hit & (out < 0)] = g
    return out


class ShotOnGoal(Detector):
    """DEBS 2013 query 4: after a hit, the kicked ball's projected straight path reaches
    a goal within 1.5 s. Judged on the ball's readings between ``after_ms`` and
    ``until_ms`` after the hit (the ball has left the foot); one ``shot`` per hit, with
    the hit's time stamp and the expected arrival ``eta``."""

    inputs = ("hit", "ball")
    outputs = ("shot",)
    clock = ("ball",)

    def __init__(self, after_ms: float = 20.0, until_ms: float = 150.0) -> None:
        self.after_ps = int(after_ms * 1e9)
        self.until_ps = int(until_ms * 1e9)
        self.open: tuple[int, int, int, int] | None = None  # (hit ts, player, team, ball)

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        kind = np.asarray(type_names, dtype=object)[events["type"]]
        hits = np.flatnonzero(kind == "hit").tolist()
        bounds = [*hits, len(events)]
        self._judge(events, kind, 0, bounds[0], emit)
        for h, end in zip(hits, bounds[1:], strict=True):
            r = events[h]
            self.open = (int(r["ts"]), int(r["player"]), int(r["team"]), int(r["ball"]))
            self._judge(events, kind, h + 1, end, emit)

    def _judge(self, events: np.ndarray, kind: np.ndarray, start: int, end: int,
               emit: Emitter) -> None:
        if self.open is None or start >= end:
            return
        ts0, player, team, ball = self.open
        seg = np.arange(start, end)
        ts = events["ts"][seg]
        mine = seg[(kind[seg] == "ball") & (events["key"][seg] == ball)
                   & (ts >= ts0 + self.after_ps) & (ts <= ts0 + self.until_ps)]
        if len(mine):
            e = events[mine]
            goal = goal_reached(e["x"], e["y"], e["z"], e["vx"], e["vy"], e["vz"],
                                e["v"] / 1e3, SHOT_HORIZON_PS / PS)
            found = np.flatnonzero(goal >= 0)
            if len(found):
                i = found[0]
                dy = abs(GOALS[goal[i]]["y"] - int(e["y"][i]))
                eta = int(e["ts"][i]) + int(dy / max(abs(e["vy"][i]) / 1e4 * e["v"][i] / 1e3, 1)
                                            * PS)
                emit.at(int(mine[i]))
                emit("shot", ts0, player, player=player, team=team, goal=int(goal[i]), eta=eta)
                self.open = None
                return
        if len(ts) and ts[-1] > ts0 + self.until_ps:
            self.open = None


class BlockedShot(Detector):
    """A shot on goal, then a hit by an opponent before the ball reaches the goal: the
    shot was blocked (paper Fig. 5); ``receiver`` is the blocker."""

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
    built on a one-two. ``receiver`` is the shooter, ``received`` the shot's time."""

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
