"""Numba kernels of the low-level soccer detectors: arrays and scalars in and out."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def acceleration_peaks(slot, ts, a, x, y, z, az, threshold, in_exc, best):
    """Per ball (``slot``), each excursion of ``a`` above ``threshold`` yields one peak: the
    reading with the largest ``a``, reported when the excursion ends.

    ``in_exc[slot]`` and ``best[slot] = (a, ts, x, y, z, az)`` of the largest reading so
    far carry each ball's excursion across batches. Returns one row per peak,
    ``(ts, a, x, y, z, az, cause)``, where ``cause`` is the batch index of the reading
    that ended the excursion.
    """
    out = np.empty((ts.shape[0], 7), np.int64)
    n = 0
    for i in range(ts.shape[0]):
        s = slot[i]
        if a[i] > threshold:
            if not in_exc[s] or a[i] > best[s, 0]:
                best[s, 0] = a[i]
                best[s, 1] = ts[i]
                best[s, 2] = x[i]
                best[s, 3] = y[i]
                best[s, 4] = z[i]
                best[s, 5] = az[i]
            in_exc[s] = True
        elif in_exc[s]:
            out[n, 0] = best[s, 1]
            out[n, 1] = best[s, 0]
            out[n, 2] = best[s, 2]
            out[n, 3] = best[s, 3]
            out[n, 4] = best[s, 4]
            out[n, 5] = best[s, 5]
            out[n, 6] = i
            n += 1
            in_exc[s] = False
    return out[:n]


@njit(cache=True, nogil=True)
def ball_in_play(slot, inside, a, threshold, seen, was_inside, state):
    """Walk the time-ordered ball readings and say when the ball in play changes.

    ``slot`` is each reading's ball, ``inside`` whether it lies inside the pitch. The
    ball in play (``state[0]``, a slot or -1 for none) leaves play with its first reading
    outside the pitch. Another ball takes play with a reading inside the pitch whose
    acceleration exceeds ``threshold`` (it was kicked there: a restart kick), or, while
    no ball is in play and the referee has restarted play (``state[1]`` = 1), with one
    that follows a reading of it outside (a throw-in). A dead ball carried back onto the
    pitch takes no play by itself.
    ``seen`` and ``was_inside`` per slot carry each ball's last reading across batches.
    Returns the batch index and 1 (``ball_in``) or 0 (``ball_out``) of every change.
    """
    out_i = np.empty(slot.shape[0], np.int64)
    out_k = np.empty(slot.shape[0], np.int64)
    n = 0
    for i in range(slot.shape[0]):
        s = slot[i]
        if s == state[0]:
            if not inside[i]:
                out_i[n] = i
                out_k[n] = 0
                n += 1
                state[0] = -1
        elif inside[i] and (a[i] > threshold or (state[0] < 0 and state[1] == 1
                                                 and seen[s] and not was_inside[s])):
            out_i[n] = i
            out_k[n] = 1
            n += 1
            state[0] = s
            state[1] = 0
        seen[s] = True
        was_inside[s] = inside[i]
    return out_i[:n], out_k[:n]


@njit(cache=True, nogil=True)
def near_foot(is_ball, active, release, foot_slot, ts, x, y, z, foot_xyz, foot_ts,
              foot_player, near_player, closest, radius, stale, n_players):
    """Track, reading by reading, which players have a foot within ``radius`` of the
    ball in play, and which of them is the closest.

    Player readings (``foot_slot >= 0``) update the foot positions and their times
    (``foot_ts``); each reading of the ball in play (``active``) computes every player's
    nearest foot (3-D distance) among those read at most ``stale`` ago, and reports
    changes of the "near" state per player, and whether a player who is near is the
    closest of those near; a player already near who becomes the closest is reported
    "near" again. A ``release`` row (the ball in play changed) ends every "near": the
    state refers to one ball. Returns (batch index, player, 1 near / 0 not near,
    distance or -1 if none, 1 if the closest) of every change; ``near_player`` and
    ``closest[0]`` (-1: none) carry the state.
    """
    out = np.empty((64, 5), np.int64)  # rows: batch index, player, near, distance, closest
    n = 0
    best = np.empty(n_players, np.int64)
    far = np.int64(1 << 62)
    for i in range(x.shape[0]):
        if release[i]:
            best[:] = far
        elif not is_ball[i]:
            f = foot_slot[i]
            if f >= 0:
                foot_xyz[f, 0] = x[i]
                foot_xyz[f, 1] = y[i]
                foot_xyz[f, 2] = z[i]
                foot_ts[f] = ts[i]
            continue
        elif not active[i]:
            continue
        else:
            best[:] = far
            for f in range(foot_xyz.shape[0]):
                if ts[i] - foot_ts[f] <= stale:
                    dx = float(foot_xyz[f, 0] - x[i])
                    dy = float(foot_xyz[f, 1] - y[i])
                    dz = float(foot_xyz[f, 2] - z[i])
                    d = np.int64(np.sqrt(dx * dx + dy * dy + dz * dz))
                    p = foot_player[f]
                    if d < best[p]:
                        best[p] = d
        c = -1
        changed = False  # whether the closest became near at this reading
        first = n
        for p in range(n_players):
            now = best[p] <= radius
            if now and (c < 0 or best[p] < best[c]):
                c = p
                changed = now != near_player[p]
            if now != near_player[p]:
                near_player[p] = now
                out = _row(out, n, i, p, 1 if now else 0, best[p] if best[p] < far else -1, 0)
                n += 1
        for j in range(first, n):
            out[j, 4] = 1 if out[j, 1] == c and out[j, 2] == 1 else 0
        if c != closest[0]:
            if c >= 0 and not changed:  # near already: "near" again as the closest
                out = _row(out, n, i, c, 1, best[c], 1)
                n += 1
            closest[0] = c
    return out[:n].copy()


@njit(cache=True)
def _row(out, n, a, b, c, d, e):
    """``out`` (grown when full) with row ``n`` set to ``(a, b, c, d, e)``."""
    if n == out.shape[0]:
        grown = np.empty((2 * n, out.shape[1]), out.dtype)
        grown[:n] = out
        out = grown
    out[n, 0] = a
    out[n, 1] = b
    out[n, 2] = c
    out[n, 3] = d
    out[n, 4] = e
    return out
