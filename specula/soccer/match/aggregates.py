"""Ground truth of the DEBS 2013 queries 1-3 in a simulated match, from its physics.

Queries 1 and 3 are computed from the players' bodies, the cubic Hermite curves the
script steered (:meth:`~.bodies.Bodies.evaluate`), sampled every ``step_ps`` (1 ms by
default) at the middle of each step: the body's speed (m/s, from the curve's derivative)
and position; the class is taken from the velocity smoothed exactly as the detector
smooths it (:func:`smoothed`). No sensor reading enters: the legs, their sampling and their finite
differences are what the detectors have to see through. Query 2 is computed from the
script's own record of who touched the ball (``kicks``) and when it was out of play.

The definitions are the DEBS 2013 Grand Challenge's, as :mod:`specula.soccer.queries`
states them: intensity classes by the speed bounds of
:data:`~specula.soccer.geometry.INTENSITY_KMH`, where a class run shorter than
:data:`~specula.soccer.geometry.MIN_INTENSITY_PS` counts for the next run that lasts at
least that long (and at the end for the last run); heat-map cells of the grids of
:data:`~specula.soccer.geometry.HEAT_GRIDS` over the pitch (positions outside it in the
nearest edge cell); possession as the time from a player's kick to his next one when
nobody else touched the ball in between and it did not go out of play.

Every record is per second of the sensor clock (``second`` = ps // 10^12), so that a
window of ``w`` seconds ending at second ``e`` (exclusive) is ``second in [e - w, e)``:
:func:`window` selects it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from specula.soccer.geometry import (
    HEAT_GRIDS,
    INTENSITY_KMH,
    INTENSITY_SMOOTHING_PS,
    MIN_INTENSITY_PS,
    PITCH_X,
    PITCH_Y,
    PS,
)

if TYPE_CHECKING:
    from specula.soccer.match.bodies import Bodies

RUNNING_DTYPE = np.dtype([("second", "i8"), ("player", "i4"), ("cls", "i1"), ("us", "f8"),
                          ("mm", "f8")])
"""Query 1: time (us) and distance (mm) of a player in an intensity class in a second."""

POSSESSION_DTYPE = np.dtype([("second", "i8"), ("player", "i4"), ("team", "i1"),
                             ("us", "f8"), ("hits", "i4")])
"""Query 2: a player's possession time (us) in a second, and his kicks in it."""

HEAT_DTYPE = np.dtype([("second", "i8"), ("player", "i4"), ("grid", "i1"), ("col", "i2"),
                       ("row", "i2"), ("us", "f8")])
"""Query 3: a player's time (us) in a cell of a grid in a second."""

DEFAULT_STEP_PS = 10**9  # 1 ms


def window(records: np.ndarray, end_s: int, window_s: int) -> np.ndarray:
    """The records of the ``window_s`` seconds before second ``end_s`` (0: all)."""
    if window_s == 0:
        return records[records["second"] < end_s]
    return records[(records["second"] >= end_s - window_s) & (records["second"] < end_s)]


def _samples(bodies: Bodies, person: int, start_ps: int, duration_ps: int, step_ps: int):
    """Second of each step, and the body's velocity (mm/s) and position (mm) at its
    middle."""
    t_ps = np.arange(0, duration_ps, step_ps, dtype=np.int64)
    mid_ms = (t_ps + step_ps / 2) / 1e9
    x, vx, y, vy, _, _ = bodies.evaluate(np.full(len(t_ps), person), mid_ms)
    second = (start_ps + t_ps) // PS
    return second, np.stack([vx, vy], axis=1) * 1000.0, x * 1000.0, y * 1000.0


def smoothed(velocity: np.ndarray, step_ps: int, tau_ps: int = INTENSITY_SMOOTHING_PS
             ) -> np.ndarray:
    """The speed of ``velocity`` (rows of steps, mm/s) after an exponential moving
    average with time constant ``tau_ps``, each step's value taken once it is in; the
    first step starts it."""
    return _ema_speed(np.ascontiguousarray(velocity), 1.0 - np.exp(-step_ps / tau_ps))


@njit(cache=True)
def _ema_speed(velocity, w):  # pragma: no cover - compiled
    out = np.empty(velocity.shape[0])
    ex, ey = velocity[0, 0], velocity[0, 1]
    for k in range(velocity.shape[0]):
        ex += w * (velocity[k, 0] - ex)
        ey += w * (velocity[k, 1] - ey)
        out[k] = np.sqrt(ex * ex + ey * ey)
    return out


def one_second_rule(cls: np.ndarray, step_ps: int, min_run_ps: int = MIN_INTENSITY_PS
                    ) -> np.ndarray:
    """The class each step counts for: a run of equal classes shorter than
    ``min_run_ps`` takes the class of the next run that lasts at least that long; runs
    after the last such run take the last run's class."""
    if not len(cls):
        return cls
    starts = np.flatnonzero(np.concatenate([[True], cls[1:] != cls[:-1]]))
    ends = np.concatenate([starts[1:], [len(cls)]])
    out = np.empty_like(cls)
    pending = 0  # first step not yet given a class
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if (e - s) * step_ps >= min_run_ps:
            out[pending:e] = cls[s]
            pending = e
    out[pending:] = cls[starts[-1]]
    return out


def running_truth(bodies: Bodies, players: np.ndarray, start_ps: int, duration_ps: int,
                  step_ps: int = DEFAULT_STEP_PS) -> np.ndarray:
    """Query 1 per second: :data:`RUNNING_DTYPE` records of ``players`` (person indices,
    which are the player ids)."""
    bounds = np.array(INTENSITY_KMH) / 3.6 * 1000.0  # mm/s
    parts = []
    for p in np.asarray(players).tolist():
        second, velocity, _, _ = _samples(bodies, p, start_ps, duration_ps, step_ps)
        speed = np.hypot(velocity[:, 0], velocity[:, 1])
        cls = one_second_rule(np.searchsorted(bounds, smoothed(velocity, step_ps),
                                              side="right"), step_ps)
        s0 = int(second[0])
        key = (second - s0) * 6 + cls
        n = (int(second[-1]) - s0 + 1) * 6
        us = np.bincount(key, minlength=n) * (step_ps / 1e6)
        mm = np.bincount(key, weights=speed * step_ps / PS, minlength=n)
        keep = np.flatnonzero(us > 0)
        rec = np.zeros(len(keep), RUNNING_DTYPE)
        rec["second"], rec["cls"] = np.divmod(keep, 6)
        rec["second"] += s0
        rec["player"], rec["us"], rec["mm"] = p, us[keep], mm[keep]
        parts.append(rec)
    return np.concatenate(parts) if parts else np.zeros(0, RUNNING_DTYPE)


def heat_truth(bodies: Bodies, players: np.ndarray, start_ps: int, duration_ps: int,
               step_ps: int = DEFAULT_STEP_PS,
               grids: tuple[tuple[int, int], ...] = HEAT_GRIDS) -> np.ndarray:
    """Query 3 per second: :data:`HEAT_DTYPE` records of ``players``."""
    parts = []
    for p in np.asarray(players).tolist():
        second, _, x, y = _samples(bodies, p, start_ps, duration_ps, step_ps)
        s0 = int(second[0])
        fx = (np.clip(x, *PITCH_X) - PITCH_X[0]) / (PITCH_X[1] - PITCH_X[0])
        fy = (np.clip(y, *PITCH_Y) - PITCH_Y[0]) / (PITCH_Y[1] - PITCH_Y[0])
        for g, (cols, rows) in enumerate(grids):
            col = np.minimum((fx * cols).astype(np.int64), cols - 1)
            row = np.minimum((fy * rows).astype(np.int64), rows - 1)
            key = ((second - s0) * rows + row) * cols + col
            us = np.bincount(key) * (step_ps / 1e6)
            keep = np.flatnonzero(us > 0)
            rec = np.zeros(len(keep), HEAT_DTYPE)
            sec, cell = np.divmod(keep, rows * cols)
            rec["second"] = sec + s0
            rec["row"], rec["col"] = np.divmod(cell, cols)
            rec["player"], rec["grid"], rec["us"] = p, g, us[keep]
            parts.append(rec)
    return np.concatenate(parts) if parts else np.zeros(0, HEAT_DTYPE)


def possession_truth(kicks: np.ndarray, out_of_play: np.ndarray) -> np.ndarray:
    """Query 2 per second: :data:`POSSESSION_DTYPE` records from the kicks (``ts``,
    ``player``, ``team``; every contact that gave the ball a velocity pulse) and the
    times the ball went out of play."""
    rows: dict[tuple[int, int, int], list[float]] = {}

    def add(second: int, player: int, team: int, us: float, hits: int) -> None:
        r = rows.setdefault((second, player, team), [0.0, 0])
        r[0] += us
        r[1] += hits

    outs = np.sort(out_of_play["ts"])
    holder, since = -1, -1
    for ts, player, team in zip(kicks["ts"].tolist(), kicks["player"].tolist(),
                                kicks["team"].tolist(), strict=True):
        add(ts // PS, player, team, 0.0, 1)
        went_out = np.searchsorted(outs, since, side="right") < np.searchsorted(outs, ts)
        if player == holder and not went_out:
            t = since
            while t < ts:
                end = min(ts, (t // PS + 1) * PS)
                add(t // PS, player, team, (end - t) / 1e6, 0)
                t = end
        holder, since = player, ts
    rec = np.zeros(len(rows), POSSESSION_DTYPE)
    for i, ((second, player, team), (us, hits)) in enumerate(sorted(rows.items())):
        rec[i] = (second, player, team, us, hits)
    return rec
