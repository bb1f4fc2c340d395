"""Level 1 and 2 player detectors: running intensity, and the ball near a player's foot."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specula.detectors import Detector, Emitter
from specula.soccer import _kernels
from specula.soccer.geometry import INTENSITY_KMH, NEAR_FOOT_MM, SENSOR_STALE_PS


class RunningIntensity(Detector):
    """DEBS 2013 query 1: a player's running intensity class (0 standing ... 5 sprint),
    from the speed of his left leg sensor; ``intensity`` whenever the class changes."""

    inputs = ("player",)
    outputs = ("intensity",)

    def __init__(self) -> None:
        self.level: dict[int, int] = {}

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        legs = np.flatnonzero(events["limb"] == 0)
        if not len(legs):
            return
        kmh = events["v"][legs] * 3.6e-6
        level = np.searchsorted(np.array(INTENSITY_KMH), kmh, side="right")
        players = events["player"][legs]
        for p in np.unique(players).tolist():
            sel = np.flatnonzero(players == p)
            lv = level[sel]
            before = np.concatenate(([self.level.get(p, -1)], lv[:-1]))
            at = legs[sel[lv != before]]
            self.level[p] = int(lv[-1])
            if len(at):
                emit.many("intensity", ts=events["ts"][at], key=p, cause=at, player=p,
                          team=events["team"][at], speed=events["v"][at] // 1000,
                          level=level[sel[lv != before]])


class BallNearFoot(Detector):
    """The ball in play comes within 1 m of one of a player's feet (``near``), or moves
    away from all of them again (``not_near``); key and ``player`` name the player,
    ``ball`` the ball. ``closest`` marks a ``near`` whose player is, at that reading, the
    closest of those near; a player already near who becomes the closest gets another
    ``near`` with it (who is at the ball, when an opponent comes within 1 m too).

    Which ball is in play comes from :class:`~specula.soccer.ball.BallInPlay`
    (``ball_in`` / ``ball_out``); only its readings are measured, so spare balls never
    make a player "near", and the state is one per player. When the ball in play changes
    or leaves the pitch, every player near it gets a ``not_near`` (distance -1): "near"
    always refers to the ball in play. Feet are the players' leg sensors; a foot's last
    position counts for ``stale_ps`` (:data:`~specula.soccer.geometry.SENSOR_STALE_PS`)
    after its reading, so a short dropout keeps a player while a sensor silent for
    longer (switched off, a player gone) no longer counts. A Numba kernel walks the
    time-ordered batch, updating foot positions and measuring, for every reading of the
    ball in play, each player's nearest fresh foot.
    """

    inputs = ("player", "ball", "ball_in", "ball_out")
    outputs = ("near", "not_near")
    clock = ("ball",)

    def __init__(self, radius: int = NEAR_FOOT_MM, stale_ps: int = SENSOR_STALE_PS) -> None:
        self.radius = radius
        self.stale_ps = stale_ps
        self.in_play = -1  # sensor id of the ball in play, -1: none
        self.foot_slot: dict[int, int] = {}
        self.foot_player = np.zeros(0, np.int64)
        self.foot_team: dict[int, int] = {}
        self.foot_xyz = np.zeros((0, 3), np.int64)
        self.foot_ts = np.zeros(0, np.int64)  # time of each foot's last reading
        self.near = np.zeros(0, bool)
        self.closest = np.full(1, -1, np.int64)  # the near player closest to the ball

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        kind = np.asarray(type_names, dtype=object)[events["type"]]
        is_ball = kind == "ball"
        self._learn_feet(events, kind)
        active, release = self._active(events, kind, is_ball)
        slots = np.array([self.foot_slot.get(s, -1) for s in events["key"].tolist()], np.int64)
        slots[kind != "player"] = -1
        changes = _kernels.near_foot(
            is_ball, active, release, slots, events["ts"], events["x"], events["y"],
            events["z"], self.foot_xyz, self.foot_ts, self.foot_player, self.near,
            self.closest, self.radius, self.stale_ps, len(self.near))
        idx, player, now_near, dist, closest = changes.T
        for k, name in ((1, "near"), (0, "not_near")):
            sel = now_near == k
            if sel.any():
                extra = {"closest": closest[sel].astype(bool)} if k else {}
                emit.many(name, ts=events["ts"][idx[sel]], key=player[sel], cause=idx[sel],
                          player=player[sel],
                          team=np.array([self.foot_team[p] for p in player[sel].tolist()]),
                          ball=events["key"][idx[sel]], dist=dist[sel], **extra)

    def _learn_feet(self, events: np.ndarray, kind: np.ndarray) -> None:
        feet = np.flatnonzero((kind == "player") & (events["limb"] <= 1))
        new = [i for i in np.unique(events["key"][feet], return_index=True)[1].tolist()
               if int(events["key"][feet[i]]) not in self.foot_slot]
        for i in new:
            row = events[feet[i]]
            self.foot_slot[int(row["key"])] = len(self.foot_slot)
            self.foot_player = np.append(self.foot_player, int(row["player"]))
            self.foot_team[int(row["player"])] = int(row["team"])
        grow = len(self.foot_slot) - len(self.foot_ts)
        if grow:
            self.foot_xyz = np.concatenate([self.foot_xyz, np.zeros((grow, 3), np.int64)])
            self.foot_ts = np.concatenate([self.foot_ts, np.full(grow, -(1 << 62), np.int64)])
        n_players = int(self.foot_player.max()) + 1 if len(self.foot_player) else 0
        if n_players > len(self.near):
            self.near = np.concatenate([self.near, np.zeros(n_players - len(self.near), bool)])

    def _active(self, events: np.ndarray, kind: np.ndarray,
                is_ball: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: is it a reading of the ball in play (the last ``ball_in`` before it,
        in this batch or before, named its ball, and no ``ball_out`` of that ball came
        since), and does it change the ball in play (a ``ball_in`` of another ball, or
        the ``ball_out`` of the ball in play)?"""
        flips = np.flatnonzero((kind == "ball_in") | (kind == "ball_out"))
        release = np.zeros(len(events), bool)
        state = [self.in_play]
        for i in flips.tolist():
            key = int(events["key"][i])
            if kind[i] == "ball_in":
                state.append(key)
            else:
                state.append(-1 if key == state[-1] else state[-1])
            release[i] = state[-1] != state[-2]
        self.in_play = state[-1]
        in_play = np.array(state, np.int64)[np.searchsorted(flips, np.arange(len(events)),
                                                            side="right")]
        return is_ball & (events["key"] == in_play), release
