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
def near_foot(is_ball, active, foot_slot, x, y, z, foot_xyz, foot_seen, foot_player,
              near_player, radius, n_players):
    """Track, reading by reading, which players have a foot within ``radius`` of the
    active ball.

    Player readings (``foot_slot >= 0``) update the foot positions; each reading of an
    active ball computes every player's nearest foot (3-D distance) and reports changes
    of the "near" state per player. Returns (batch index, player, 1 near / 0 not near,
    distance) of every change; ``near_player`` carries the state.
    """
    cap = 64
    out_i = np.empty(cap, np.int64)
    out_p = np.empty(cap, np.int64)
    out_k = np.empty(cap, np.int64)
    out_d = np.empty(cap, np.int64)
    n = 0
    best = np.empty(n_players, np.int64)
    for i in range(x.shape[0]):
        if not is_ball[i]:
            f = foot_slot[i]
            if f >= 0:
                foot_xyz[f, 0] = x[i]
                foot_xyz[f, 1] = y[i]
                foot_xyz[f, 2] = z[i]
                foot_seen[f] = True
            continue
        if not active[i]:
            continue
        for p in range(n_players):
            best[p] = 1 << 62
        for f in range(foot_xyz.shape[0]):
            if foot_seen[f]:
                dx = float(foot_xyz[f, 0] - x[i])
                dy = float(foot_xyz[f, 1] - y[i])
                dz = float(foot_xyz[f, 2] - z[i])
                d = np.int64(np.sqrt(dx * dx + dy * dy + dz * dz))
                p = foot_player[f]
                if d < best[p]:
                    best[p] = d
        for p in range(n_players):
            now = best[p] <= radius
            if now != near_player[p]:
                near_player[p] = now
                if n == cap:
                    cap *= 2
                    out_i = _grow(out_i, cap)
                    out_p = _grow(out_p, cap)
                    out_k = _grow(out_k, cap)
                    out_d = _grow(out_d, cap)
                out_i[n] = i
                out_p[n] = p
                out_k[n] = 1 if now else 0
                out_d[n] = best[p] if best[p] < (1 << 62) else -1
                n += 1
    return out_i[:n], out_p[:n], out_k[:n], out_d[:n]


@njit(cache=True)
def _grow(a, cap):
    b = np.empty(cap, a.dtype)
    b[:a.shape[0]] = a
    return b
