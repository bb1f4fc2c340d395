"""Level 1 ball detectors: which ball is in play, and its acceleration peaks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specula.detectors import Detector, Emitter
from specula.soccer import _kernels
from specula.soccer.geometry import KICK_ACCELERATION, in_pitch


class BallInPlay(Detector):
    """A ball that enters the pitch is the active ball (``ball_in``); ``ball_out`` when it
    crosses a touch or goal line. Balls lying beside the pitch never become active.

    Vectorised: per ball sensor, the readings where inside/outside flips.
    """

    inputs = ("ball",)
    outputs = ("ball_in", "ball_out")

    def __init__(self) -> None:
        self.inside: dict[int, bool] = {}

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        inside = in_pitch(events["x"], events["y"])
        keys = events["key"]
        for sid in np.unique(keys).tolist():
            idx = np.flatnonzero(keys == sid)
            now = inside[idx]
            before = np.concatenate(([self.inside.get(sid, False)], now[:-1]))
            flips = idx[now != before]
            self.inside[sid] = bool(now[-1])
            for kind, sel in (("ball_in", inside[flips]), ("ball_out", ~inside[flips])):
                at = flips[sel]
                if len(at):
                    emit.many(kind, ts=events["ts"][at], key=sid, cause=at,
                              x=events["x"][at], y=events["y"][at])


class AccelerationPeak(Detector):
    """Each time a ball's acceleration rises above 55 m/s^2 (a kick or a bounce), one
    ``peak`` at the strongest reading, reported when the acceleration falls again; its
    time stamp is that of the strongest reading, so it lies in the past when it is
    generated (a detection delay). ``az`` is the vertical component of the acceleration's
    direction (scaled to 10,000): a bounce on the ground points up.
    """

    inputs = ("ball",)
    outputs = ("peak",)

    def __init__(self, threshold: int = KICK_ACCELERATION) -> None:
        self.threshold = threshold
        self.slots: dict[int, int] = {}
        self.in_excursion = np.zeros(0, bool)
        self.best = np.zeros((0, 6), np.int64)

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        for sid in np.unique(events["key"]).tolist():
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
