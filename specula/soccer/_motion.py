"""Numba kernels of the DEBS 2013 queries 1 and 3: a player's motion from his two leg
sensors, intensity classes with the one-second rule, and time per heat-map cell.

A player is where the average of his two leg sensors is: each leg's last reading,
moved on along its own velocity to the time asked for (its ``|v|`` times its direction),
so that two legs read a few milliseconds apart still average to the body between them.
His velocity is the average of the legs' velocity vectors; averaging vectors, not
speeds, cancels the legs' motion about the body (a player turning on the spot moves his
feet, not himself). A leg counts for ``stale`` after its reading; a gap in which both
his legs went silent for longer (a dropout, a sensor switched off) is no segment: he is
not tracked there, and no time or distance is counted for it.

Motion is cut into *segments*, one per leg reading: from the player's previous reading
(or report boundary) to this one, along the straight line from where he was then to
where he is with this reading in (so his path is whole), at the speed of its start.
Segments never cross a report boundary: the detectors advance every player to the
boundary first.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: Columns of a segment row.
SEG_PLAYER, SEG_T0, SEG_T1, SEG_X0, SEG_Y0, SEG_X1, SEG_Y1, SEG_SPEED, SEG_SMOOTH = range(9)
PS = 1e12


@njit(cache=True, nogil=True)
def _estimate(p, t, fresh_at, leg_ts, leg_pos, leg_vel, stale, out):
    """Position (x, y) and velocity (vx, vy, vz) of player ``p`` at ``t`` into ``out``,
    from his legs that are fresh at ``fresh_at``; False if none is. Each leg moves on
    from its reading at its velocity. Not with its acceleration: a real leg sensor at
    rest reads 1-3 m/s^2 of noise in any direction (the sample's standing players),
    which, carried on, made a standing player's distance 10-20 % longer."""
    n = 0
    for j in range(5):
        out[j] = 0.0
    for leg in range(2):
        if leg_ts[p, leg] >= 0 and fresh_at - leg_ts[p, leg] <= stale:
            dt = (t - leg_ts[p, leg]) / PS
            for j in range(2):
                out[j] += leg_pos[p, leg, j] + leg_vel[p, leg, j] * dt
            for j in range(3):
                out[2 + j] += leg_vel[p, leg, j]
            n += 1
    if n == 0:
        return False
    for j in range(5):
        out[j] /= n
    return True


@njit(cache=True, nogil=True)
def _segment(p, t0, t1, leg_ts, leg_pos, leg_vel, stale, tau, ema, out, n, a, b):
    """Append the segment of player ``p`` over [t0, t1) to ``out`` (row ``n``), none if
    his last leg reading is stale at ``t1``; return the new row count. Its speed is the player's
    at its middle; its smoothed speed that of ``ema[p]`` (his velocity smoothed
    exponentially with time constant ``tau``, ps) once the segment is in."""
    if t1 <= t0 or not _estimate(p, t0, t0, leg_ts, leg_pos, leg_vel, stale, a):
        return n
    if t1 > max(leg_ts[p, 0], leg_ts[p, 1]) + stale:
        return n  # his legs went silent for longer than ``stale``: the gap is not his
    out[n, SEG_X0] = a[0]
    out[n, SEG_Y0] = a[1]
    _estimate(p, 0.5 * (t0 + t1), t0, leg_ts, leg_pos, leg_vel, stale, a)
    out[n, SEG_SPEED] = np.sqrt(a[2] * a[2] + a[3] * a[3] + a[4] * a[4])
    w = 1.0  # his first segment (nothing to smooth with yet), or no smoothing
    if ema[p, 3] >= 0 and tau > 0:
        w = 1.0 - np.exp(-(t1 - t0) / tau)
    for j in range(3):
        ema[p, j] += w * (a[2 + j] - ema[p, j])
    ema[p, 3] = 1.0
    out[n, SEG_SMOOTH] = np.sqrt(ema[p, 0] ** 2 + ema[p, 1] ** 2 + ema[p, 2] ** 2)
    _estimate(p, t1, t0, leg_ts, leg_pos, leg_vel, stale, b)
    out[n, SEG_PLAYER] = p
    out[n, SEG_T0] = t0
    out[n, SEG_T1] = t1
    out[n, SEG_X1] = b[0]
    out[n, SEG_Y1] = b[1]
    return n + 1


@njit(cache=True, nogil=True)
def segments(player, limb, ts, x, y, v, vx, vy, vz, leg_ts, leg_pos, leg_vel, last_t,
             stale, tau, ema, advance_to):
    """Segments of the time-ordered leg readings, then (``advance_to`` >= 0) of every
    player from his last reading to ``advance_to``.

    State, per player ``p`` and leg ``l`` (0 left, 1 right): ``leg_ts[p, l]`` (ps, -1:
    never read), ``leg_pos[p, l]`` (x, y in mm), ``leg_vel[p, l]`` (velocity in mm/s, 3-D), and
    ``last_t[p]``, the end of his last segment (-1: none yet), and ``ema[p]`` his
    smoothed velocity (mm/s; ``ema[p, 3]`` < 0: none yet). Returns float64 rows
    ``(player, t0, t1, x0, y0, x1, y1, speed, smoothed speed)``, times in ps, positions
    in mm, speeds in mm/s.
    """
    out = np.empty((ts.shape[0] + last_t.shape[0], 9))
    e0 = np.empty(5)  # scratch: estimates at a segment's start (and middle) and end
    e1 = np.empty(5)
    n = 0
    for i in range(ts.shape[0]):
        p = player[i]
        leg = limb[i]
        m = n
        if last_t[p] >= 0:
            m = _segment(p, last_t[p], ts[i], leg_ts, leg_pos, leg_vel, stale, tau, ema, out,
                         n, e0, e1)
        leg_ts[p, leg] = ts[i]
        leg_pos[p, leg, 0] = x[i]
        leg_pos[p, leg, 1] = y[i]
        speed = v[i] / 1e3 / 1e4  # um/s -> mm/s, direction scaled to 10,000
        leg_vel[p, leg, 0] = vx[i] * speed
        leg_vel[p, leg, 1] = vy[i] * speed
        leg_vel[p, leg, 2] = vz[i] * speed
        last_t[p] = ts[i]
        if m > n:  # the segment ends where he is with this reading in: his path is whole
            _estimate(p, ts[i], ts[i], leg_ts, leg_pos, leg_vel, stale, e1)
            out[n, SEG_X1] = e1[0]
            out[n, SEG_Y1] = e1[1]
        n = m
    if advance_to >= 0:
        for p in range(last_t.shape[0]):
            if 0 <= last_t[p] < advance_to:
                n = _segment(p, last_t[p], advance_to, leg_ts, leg_pos, leg_vel, stale,
                             tau, ema, out, n, e0, e1)
                last_t[p] = advance_to
    return out[:n]


#: Columns of a player's pending row and of his open run (see :func:`intensity`).
PEND_SECOND, PEND_US, PEND_MM, PEND_T0, PEND_T1 = range(5)
RUN_T0, RUN_T1, RUN_CLASS, RUN_MM = range(4)


@njit(cache=True, nogil=True)
def intensity(seg, second, bounds, min_run, run_cls, run_len, committed, pend, pend_n,
              cur, runs):
    """Time and distance per intensity class, with the DEBS 2013 one-second rule: a run
    of one class shorter than ``min_run`` (ps) counts for the next class that lasts at
    least that long. The class is that of the smoothed speed, the distance that of the
    speed.

    All segments lie in ``second`` (s of the sensor clock). ``bounds`` are the class
    bounds (mm/s, ascending; a speed equal to a bound is in the class above). Per
    player: ``run_cls``/``run_len`` the current run (class -1: none), ``committed``
    whether it has lasted ``min_run`` (its time then goes straight to its class), and
    ``pend[p, :pend_n[p]]`` the undecided time, rows ``(second, us, mm, t0, t1)`` of
    one second each and without a gap (a new row where a segment does not start where
    the last one ended). Decided time of the segments' second goes to
    ``cur[p, class] += (us, mm)``; decided time of an earlier second is returned as
    rows ``(second, player, class, us, mm)``. When more rows are pending than ``pend``
    holds, they are decided for the current run's class.

    Decided time also extends the player's open *decided run* ``runs[p]`` = ``(t0, t1,
    class, mm)`` (class -1: none), the stretch of his time decided for one class
    without a gap: Q1's current running statistic. Time decided for another class, or
    that does not start where the open run ends (play stopped, his sensors went
    silent), closes it: the second array returned holds the runs closed, rows
    ``(player, t0, t1, class, mm)``.
    """
    slots = pend.shape[1]
    # only pending time of earlier seconds leaves as rows: at most what was pending
    out = np.empty((run_cls.shape[0] * slots + 1, 5))
    closed = np.empty((seg.shape[0] + run_cls.shape[0] * slots + 1, 5))
    n = 0
    m = 0
    for i in range(seg.shape[0]):
        p = int(seg[i, SEG_PLAYER])
        t0 = seg[i, SEG_T0]
        t1 = seg[i, SEG_T1]
        dt = t1 - t0
        speed = seg[i, SEG_SPEED]
        c = 0
        while c < bounds.shape[0] and seg[i, SEG_SMOOTH] >= bounds[c]:
            c += 1
        us = dt / 1e6
        mm = speed * dt / PS
        if c != run_cls[p]:
            run_cls[p] = c
            run_len[p] = 0
            committed[p] = False
        run_len[p] += dt
        if committed[p]:
            cur[p, c, 0] += us
            cur[p, c, 1] += mm
            m = _extend(p, t0, t1, c, mm, runs, closed, m)
            continue
        k = pend_n[p]
        if k > 0 and pend[p, k - 1, PEND_SECOND] == second and pend[p, k - 1, PEND_T1] == t0:
            pend[p, k - 1, PEND_US] += us
            pend[p, k - 1, PEND_MM] += mm
            pend[p, k - 1, PEND_T1] = t1
        else:
            if k == slots:
                n, m = _decide(p, c, second, pend, pend_n, cur, out, n, runs, closed, m)
                k = 0
            pend[p, k, PEND_SECOND] = second
            pend[p, k, PEND_US] = us
            pend[p, k, PEND_MM] = mm
            pend[p, k, PEND_T0] = t0
            pend[p, k, PEND_T1] = t1
            pend_n[p] = k + 1
        if run_len[p] >= min_run:
            n, m = _decide(p, c, second, pend, pend_n, cur, out, n, runs, closed, m)
            committed[p] = True
    return out[:n], closed[:m]


@njit(cache=True, nogil=True)
def _extend(p, t0, t1, c, mm, runs, closed, m):
    """Player ``p``'s time [t0, t1) decided for class ``c``: onto his open run, or,
    another class or after a gap, closing it (into ``closed``, row ``m``) for a new one."""
    if runs[p, RUN_CLASS] == c and runs[p, RUN_T1] == t0:
        runs[p, RUN_T1] = t1
        runs[p, RUN_MM] += mm
        return m
    if runs[p, RUN_CLASS] >= 0:
        closed[m, 0] = p
        for j in range(4):
            closed[m, 1 + j] = runs[p, j]
        m += 1
    runs[p, RUN_T0] = t0
    runs[p, RUN_T1] = t1
    runs[p, RUN_CLASS] = c
    runs[p, RUN_MM] = mm
    return m


@njit(cache=True, nogil=True)
def _decide(p, c, second, pend, pend_n, cur, out, n, runs, closed, m):
    """Give player ``p``'s pending time to class ``c``."""
    for k in range(pend_n[p]):
        if pend[p, k, PEND_SECOND] == second:
            cur[p, c, 0] += pend[p, k, PEND_US]
            cur[p, c, 1] += pend[p, k, PEND_MM]
        else:
            out[n, 0] = pend[p, k, PEND_SECOND]
            out[n, 1] = p
            out[n, 2] = c
            out[n, 3] = pend[p, k, PEND_US]
            out[n, 4] = pend[p, k, PEND_MM]
            n += 1
        m = _extend(p, pend[p, k, PEND_T0], pend[p, k, PEND_T1], c, pend[p, k, PEND_MM],
                    runs, closed, m)
    pend_n[p] = 0
    return n, m


@njit(cache=True)
def _grow2(a):
    b = np.empty((a.shape[0] * 2, a.shape[1]))
    b[:a.shape[0]] = a
    return b


@njit(cache=True, nogil=True)
def heat_cells(seg, cols, rows, offsets, stride, x_range, y_range):
    """Time (us) of each segment in each cell it crosses, on every grid.

    Grid ``g`` has ``cols[g]`` columns across x and ``rows[g]`` rows along y over the
    pitch ``x_range`` x ``y_range`` (mm); positions outside it count for the nearest
    cell at the edge. A segment's time is shared among the cells its straight line
    crosses in proportion to the length inside each. Returns rows ``(slot, us)`` with
    ``slot = player * stride + offsets[g] + row * cols[g] + col``.
    """
    cap = seg.shape[0] * cols.shape[0] * 2 + 16
    out = np.empty((cap, 2))
    n = 0
    cuts = np.empty(256)
    width = x_range[1] - x_range[0]
    length = y_range[1] - y_range[0]
    for i in range(seg.shape[0]):
        p = int(seg[i, SEG_PLAYER])
        us = (seg[i, SEG_T1] - seg[i, SEG_T0]) / 1e6
        x0 = min(max(seg[i, SEG_X0], x_range[0]), x_range[1]) - x_range[0]
        y0 = min(max(seg[i, SEG_Y0], y_range[0]), y_range[1]) - y_range[0]
        x1 = min(max(seg[i, SEG_X1], x_range[0]), x_range[1]) - x_range[0]
        y1 = min(max(seg[i, SEG_Y1], y_range[0]), y_range[1]) - y_range[0]
        for g in range(cols.shape[0]):
            cw = width / cols[g]
            rl = length / rows[g]
            # where the line crosses a column or row border, as a share of its length
            m = 0
            cuts[m] = 0.0
            m += 1
            ca, cb = min(x0, x1) / cw, max(x0, x1) / cw
            for k in range(int(np.floor(ca)) + 1, int(np.ceil(cb))):
                if m < cuts.shape[0] - 1:
                    cuts[m] = (k * cw - x0) / (x1 - x0)
                    m += 1
            ra, rb = min(y0, y1) / rl, max(y0, y1) / rl
            for k in range(int(np.floor(ra)) + 1, int(np.ceil(rb))):
                if m < cuts.shape[0] - 1:
                    cuts[m] = (k * rl - y0) / (y1 - y0)
                    m += 1
            cuts[m] = 1.0
            m += 1
            c = np.sort(cuts[:m])
            for k in range(m - 1):
                share = c[k + 1] - c[k]
                if share <= 0.0:
                    continue
                mid = 0.5 * (c[k] + c[k + 1])
                col = min(max(int((x0 + (x1 - x0) * mid) / cw), 0), cols[g] - 1)
                row = min(max(int((y0 + (y1 - y0) * mid) / rl), 0), rows[g] - 1)
                if n == out.shape[0]:
                    out = _grow2(out)
                out[n, 0] = p * stride + offsets[g] + row * cols[g] + col
                out[n, 1] = us * share
                n += 1
    return out[:n]


@njit(cache=True, nogil=True)
def decide_all(second, run_cls, pend, pend_n, cur, runs):
    """End of stream: every player's pending time goes to his current run's class (no
    later run can take it); rows of earlier seconds and closed runs as :func:`intensity`
    returns them (the runs still open stay open in ``runs``)."""
    out = np.empty((run_cls.shape[0] * pend.shape[1] + 1, 5))
    closed = np.empty((run_cls.shape[0] * pend.shape[1] + 1, 5))
    n = 0
    m = 0
    for p in range(run_cls.shape[0]):
        if pend_n[p] > 0 and run_cls[p] >= 0:
            n, m = _decide(p, run_cls[p], second, pend, pend_n, cur, out, n, runs, closed, m)
    return out[:n], closed[:m]
