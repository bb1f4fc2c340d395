"""The pitch in metres, and the free ball: its flight, bounces, roll and leaving the pitch.

The simulation works in metres and seconds in the DEBS 2013 frame (see the package
docs); the constants here are those of :mod:`specula.soccer.geometry`, converted. A
kicked ball gets a Hann-window acceleration pulse and then flies under gravity and
quadratic air drag, bounces on the ground and rolls with friction, and rebounds off the
boards around the pitch: :func:`simulate` integrates that with a compiled kernel and
returns the ball on the 1 ms grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from specula.soccer.geometry import BALL_DRAG_PER_M, GOALS, PITCH_X, PITCH_Y

# ----------------------------------------------------------------------------- the pitch

WIDTH = PITCH_X[1] / 1000.0  # pitch width (x), m
Y_MIN, Y_MAX = PITCH_Y[0] / 1000.0, PITCH_Y[1] / 1000.0  # goal lines of the pitch box, m
LENGTH = Y_MAX - Y_MIN  # pitch length (y), m
CENTRE = np.array([WIDTH / 2, 0.0])  # the centre spot, m
#: Posts (x, m), goal line (y, m) of each goal, and the height of the bars (m).
GOAL_X = tuple((g["x"][0] / 1000.0, g["x"][1] / 1000.0) for g in GOALS)
GOAL_Y = tuple(g["y"] / 1000.0 for g in GOALS)
GOAL_Z = GOALS[0]["z"] / 1000.0
#: Direction along y in which team 0 and team 1 attack.
ATTACK = np.array([1.0, -1.0])

# ----------------------------------------------------------------------------- the ball

BALL_RADIUS = 0.11  # height of the ball's centre when it lies on the ground, m
GRAVITY = 9.81  # m/s^2
DRAG = BALL_DRAG_PER_M  # quadratic air drag, 1/m (a = -k |v| v)
ROLL_DECEL = 1.2  # rolling friction on grass, m/s^2
RESTITUTION = 0.55  # share of the vertical speed kept by a bounce
BOUNCE_KEEP = 0.8  # share of the horizontal speed kept by a bounce
ROLL_VZ = 0.8  # below this impact speed (m/s) the ball stops bouncing and rolls
#: The boards around the pitch, this far outside its box (m): a ball out of play
#: rebounds off them, keeping this share of its speed towards them.
BOARDS = 5.0
BOARDS_KEEP = 0.3
SUBSTEPS = 4  # integration steps per 1 ms grid step
HORIZON_MS = 15_000  # longest simulated free flight, ms


@njit(cache=True, nogil=True)
def _fly(p0, v0, dv, pulse_s, pos, vel, bounce):  # pragma: no cover - compiled
    """Integrate a free ball from ``p0, v0`` with a kick pulse ``dv`` over ``pulse_s``.

    Writes the state at every 1 ms step (index 0 = start) into ``pos``, ``vel`` and
    marks impacts in ``bounce``. Semi-implicit Euler at ``SUBSTEPS`` steps per ms.
    """
    n = pos.shape[0]
    h = 1e-3 / SUBSTEPS
    x, y, z = p0[0], p0[1], p0[2]
    vx, vy, vz = v0[0], v0[1], v0[2]
    on_ground = z <= BALL_RADIUS + 1e-6 and vz <= 1e-6
    if on_ground:
        z = BALL_RADIUS
        vz = 0.0
    pos[0, 0], pos[0, 1], pos[0, 2] = x, y, z
    vel[0, 0], vel[0, 1], vel[0, 2] = vx, vy, vz
    bounce[0] = False
    t = 0.0
    for i in range(1, n):
        bounced = False
        for _ in range(SUBSTEPS):
            ax = 0.0
            ay = 0.0
            az = 0.0
            if t < pulse_s:
                s = math.sin(math.pi * (t + 0.5 * h) / pulse_s)
                weight = 2.0 / pulse_s * s * s
                ax += dv[0] * weight
                ay += dv[1] * weight
                az += dv[2] * weight
            speed = math.sqrt(vx * vx + vy * vy + vz * vz)
            ax -= DRAG * speed * vx
            ay -= DRAG * speed * vy
            az -= DRAG * speed * vz + GRAVITY
            if on_ground:
                if az > 0.0:
                    on_ground = False
                else:
                    az = 0.0
            vx += ax * h
            vy += ay * h
            vz += az * h
            if on_ground:
                vz = 0.0
                horizontal = math.sqrt(vx * vx + vy * vy)
                friction = ROLL_DECEL * h
                if horizontal <= friction:
                    vx = 0.0
                    vy = 0.0
                else:
                    vx -= friction * vx / horizontal
                    vy -= friction * vy / horizontal
            x += vx * h
            y += vy * h
            z += vz * h
            if (x < -BOARDS and vx < 0.0) or (x > WIDTH + BOARDS and vx > 0.0):
                vx = -BOARDS_KEEP * vx
                bounced = True
            if (y < Y_MIN - BOARDS and vy < 0.0) or (y > Y_MAX + BOARDS and vy > 0.0):
                vy = -BOARDS_KEEP * vy
                bounced = True
            if on_ground:
                z = BALL_RADIUS
            elif z < BALL_RADIUS and vz < 0.0:
                z = BALL_RADIUS
                bounced = True
                if -vz > ROLL_VZ:
                    vz = -RESTITUTION * vz
                    vx *= BOUNCE_KEEP
                    vy *= BOUNCE_KEEP
                else:
                    vz = 0.0
                    on_ground = True
            t += h
        pos[i, 0], pos[i, 1], pos[i, 2] = x, y, z
        vel[i, 0], vel[i, 1], vel[i, 2] = vx, vy, vz
        bounce[i] = bounced
        if on_ground and t >= pulse_s and vx == 0.0 and vy == 0.0:
            for j in range(i + 1, n):
                pos[j, 0], pos[j, 1], pos[j, 2] = x, y, z
                vel[j, 0], vel[j, 1], vel[j, 2] = 0.0, 0.0, 0.0
                bounce[j] = False
            return


@dataclass
class Flight:
    """A simulated free ball from absolute ms ``i0``: positions and velocities per ms."""

    i0: int
    pos: np.ndarray
    vel: np.ndarray
    bounce: np.ndarray
    out: int  # relative index of the first step outside the pitch box, or len(pos)

    @property
    def end(self) -> int:
        """The absolute ms of the first step outside the pitch box (or past the flight)."""
        return self.i0 + self.out


def simulate(i0: int, p0: np.ndarray, v0: np.ndarray, dv: np.ndarray, pulse_ms: int,
             horizon_ms: int = HORIZON_MS) -> Flight:
    """The free ball kicked at ms ``i0`` from ``p0, v0`` with a velocity change ``dv``
    spread over a pulse of ``pulse_ms``, for ``horizon_ms`` ms (no player touches it)."""
    pos = np.empty((horizon_ms, 3))
    vel = np.empty((horizon_ms, 3))
    bounce = np.empty(horizon_ms, np.bool_)
    _fly(np.asarray(p0, np.float64), np.asarray(v0, np.float64),
         np.asarray(dv, np.float64), pulse_ms / 1000.0, pos, vel, bounce)
    outside = ~inside(pos[:, 0], pos[:, 1], 0.0)
    out = int(np.argmax(outside)) if outside.any() else horizon_ms
    return Flight(i0, pos, vel, bounce, out)


def crossing(prev: np.ndarray, cur: np.ndarray) -> tuple[float, int]:
    """Where between two grid points (fraction) the ball's centre leaves the pitch box,
    and over which line (0 touch line, 1 goal line)."""
    best, line = 1.0, 1
    for axis, lo, hi in ((0, 0.0, WIDTH), (1, Y_MIN, Y_MAX)):
        for bound in (lo, hi):
            a, b = prev[axis] - bound, cur[axis] - bound
            if (bound == lo and b < 0 <= a) or (bound == hi and b > 0 >= a):
                frac = a / (a - b)
                if frac < best or (frac == best and axis == 0):
                    best, line = frac, axis
    return float(best), line


def inside(x, y, margin: float):
    """Whether the points ``x, y`` (m) lie at least ``margin`` (m) inside the pitch box."""
    return (x >= margin) & (x <= WIDTH - margin) & (y >= Y_MIN + margin) & \
        (y <= Y_MAX - margin)


def draw_pulse_ms(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A kick pulse's duration in ms within ``[lo, hi]``, even so that its centre falls on
    a whole ms."""
    return 2 * int(rng.integers(lo // 2, hi // 2 + 1))
