"""Level 1 and 2 player detectors: running intensity, and the ball near a player's foot."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specula.detectors import Detector, Emitter, type_ids
from specula.soccer import _kernels
from specula.soccer.geometry import INTENSITY_KMH, NEAR_FOOT_MM, SENSOR_STALE_PS

_INTENSITY_KMH = np.array(INTENSITY_KMH)


class RunningIntensity(Detector):
    """DEBS 2013 query 1: a player's running intensity class (0 standing ... 5 sprint),
    from the speed of his left leg sensor; ``intensity`` whenever the class changes.

    Examples
    --------
    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> MS = 10**9  # picoseconds
    >>> leg = [{"type": "player", "ts": t * MS, "key": 13, "player": 3, "team": 0, "limb": 0,
    ...         "v": v} for t, v in [(0, 100_000), (5, 2_000_000), (10, 2_100_000),
    ...                              (15, 5_000_000)]]  # speeds in µm/s
    >>> out = feed(RunningIntensity(), leg, registry=soccer_registry())
    >>> [(e["ts"] // MS, e["level"], e["speed"]) for e in out.net]  # speed in mm/s
    [(0, 0, 100), (5, 1, 2000), (15, 4, 5000)]
    """

    inputs = ("player",)
    outputs = ("intensity",)

    def __init__(self) -> None:
        self.level: dict[int, int] = {}

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        legs = np.flatnonzero(events["limb"] == 0)
        if not len(legs):
            return
        # by player, in time order within each player: the order the changes are emitted
        players = events["player"][legs]
        order = np.argsort(players, kind="stable")
        legs, players = legs[order], players[order]
        level = np.searchsorted(_INTENSITY_KMH, events["v"][legs] * 3.6e-6, side="right")
        starts = np.flatnonzero(np.diff(players, prepend=players[0] - 1))
        firsts = players[starts].tolist()
        before = np.empty_like(level)
        before[1:] = level[:-1]
        before[starts] = [self.level.get(p, -1) for p in firsts]
        ends = np.append(starts[1:], len(legs)) - 1
        self.level.update(zip(firsts, level[ends].tolist(), strict=True))
        changed = np.flatnonzero(level != before)
        if len(changed):
            at = legs[changed]
            emit.many("intensity", ts=events["ts"][at], key=players[changed], cause=at,
                      player=players[changed], team=events["team"][at],
                      speed=events["v"][at] // 1000, level=level[changed])


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

    Examples
    --------
    Player 3's left foot is at x = 20 m; the ball in play comes within 0.5 m and leaves:

    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> MS = 10**9  # picoseconds
    >>> events = [
    ...     {"type": "player", "ts": 0, "key": 13, "player": 3, "team": 0, "limb": 0,
    ...      "x": 20_000},
    ...     {"type": "ball_in", "ts": 1 * MS, "key": 4, "x": 25_000},
    ...     *({"type": "ball", "ts": t * MS, "key": 4, "x": x}
    ...       for t, x in [(2, 25_000), (3, 20_500), (4, 22_000)])]
    >>> out = feed(BallNearFoot(), events, registry=soccer_registry())
    >>> [(e["type"], e["ts"] // MS, e["player"], e["ball"], e["dist"]) for e in out.net]
    [('near', 3, 3, 4, 500), ('not_near', 4, 3, 4, 2000)]
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
        types = events["type"]
        ball, player, ball_in, ball_out = type_ids(type_names, "ball", "player", "ball_in",
                                                   "ball_out")
        is_ball, is_player = types == ball, types == player
        self._learn_feet(events, is_player)
        active, release = self._active(events, types == ball_in, types == ball_out, is_ball)
        slots = self._slots(events["key"], is_player)
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

    def _learn_feet(self, events: np.ndarray, is_player: np.ndarray) -> None:
        feet = np.flatnonzero(is_player & (events["limb"] <= 1))
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

    def _slots(self, keys: np.ndarray, is_player: np.ndarray) -> np.ndarray:
        """Per row: the foot slot of a player sensor's reading, -1 for any other row."""
        slots = np.full(len(keys), -1, np.int64)
        rows = np.flatnonzero(is_player)
        if len(rows) and self.foot_slot:
            known = np.fromiter(self.foot_slot, np.int64, len(self.foot_slot))
            order = np.argsort(known)
            known = known[order]
            at = np.minimum(np.searchsorted(known, keys[rows]), len(known) - 1)
            hit = known[at] == keys[rows]
            slot_of = np.fromiter(self.foot_slot.values(), np.int64, len(self.foot_slot))
            slots[rows[hit]] = slot_of[order][at[hit]]
        return slots

    def _active(self, events: np.ndarray, is_in: np.ndarray, is_out: np.ndarray,
                is_ball: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: is it a reading of the ball in play (the last ``ball_in`` before it,
        in this batch or before, named its ball, and no ``ball_out`` of that ball came
        since), and does it change the ball in play (a ``ball_in`` of another ball, or
        the ``ball_out`` of the ball in play)?"""
        flips = np.flatnonzero(is_in | is_out)
        release = np.zeros(len(events), bool)
        state = [self.in_play]
        for i in flips.tolist():
            key = int(events["key"][i])
            if is_in[i]:
                state.append(key)
            else:
                state.append(-1 if key == state[-1] else state[-1])
            release[i] = state[-1] != state[-2]
        self.in_play = state[-1]
        in_play = np.array(state, np.int64)[np.searchsorted(flips, np.arange(len(events)),
                                                            side="right")]
        return is_ball & (events["key"] == in_play), release
