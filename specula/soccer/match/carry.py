"""The ball at a player's feet: receiving it, and the dribble cycle that carries it on.

A player who meets a free ball does not kick it: he brings it to his foot with a
planned acceleration relative to him of at most ``RECEIVE_ACC``, so that receptions
stay below the kick detectors' threshold. From then on the ball follows the dribble
cycle in front of his body: a short touch pulse along his heading at the start of each
period, then a constant pull-back relative to him, so that the ball runs ahead and
comes back to his foot, once a period, until he passes, shoots or clears.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specula.soccer.match.bodies import Bodies
from specula.soccer.match.physics import BALL_RADIUS, draw_pulse_ms
from specula.soccer.match.splines import cubic, cubic_peak_acc, cubic_position, cubic_velocity

RECEIVE_ACC = 28.0  # bound on the ball's acceleration relative to the receiver, m/s^2
RECEIVE_MIN_MS = 300  # shortest reception, ms
RECEIVE_MAX_S = 1.5  # longest reception (and the fallback when none is soft enough), s
RECEIVE_STEP_S = 0.05  # step of the reception lengths tried, s
PERIOD_MS = (450, 700)  # range of the dribble period, ms
TOUCH_MS = (10, 16)  # range of a dribble touch's pulse, ms
D_MIN = (0.25, 0.3)  # range of the ball's nearest distance in front of the body, m
PULL_BACK = (3.0, 4.0)  # range of the ball's constant deceleration relative to him, m/s^2
DRIBBLE_SPEED = (2.5, 5.0)  # range of the carrier's top speed, m/s
DRIBBLE_BIAS = 50.0  # the carrier's direction is off the goal by up to this, degrees
MIN_DRIBBLE_MS = 400  # an outfield carrier dribbles at least up to this long, ms
MAX_DRIBBLE_MS = (500, 2000)  # range of the time after which he must play the ball, ms


@dataclass
class Spell:
    """The ball carried by one player from ``t_receive`` (ms) until ``end`` (ms).

    From ``t_receive`` to ``t_cycle`` the receiver brings the ball to his foot (a cubic
    in the ball's offset from his body, world frame); from ``t_cycle`` it follows the
    dribble cycle of period ``period`` ms: a touch pulse of ``touch`` ms along his
    heading at the start of each period, then a constant pull-back ``pull_back`` (m/s^2)
    relative to him, so that the ball's distance in front of his body runs from
    ``d_min`` up and back to it.
    """

    carrier: int
    t_receive: int
    t_cycle: int
    offset: np.ndarray  # (3,) ball offset from the body at t_receive, m
    offset_rate: np.ndarray  # (3,) its rate, m/s
    period: int
    touch: int
    d_min: float
    pull_back: float
    speed: float  # the carrier's top speed, m/s
    bias: float  # angle of his dribble direction off the goal, rad
    min_dribble: int  # ms of the cycle before he may play the ball
    max_dribble: int  # ms of the cycle after which he must
    end: int = -1

    @property
    def touch_dv(self) -> float:
        """The velocity change (m/s) of a touch: what the pull-back takes in a period."""
        return self.pull_back * self.period / 1000.0

    @property
    def closing_speed(self) -> float:
        """The speed (m/s) at which the ball comes back to the foot before a touch."""
        return self.pull_back * (self.period - self.touch) / 2000.0


def dribble_offset(s: np.ndarray, spell: Spell):
    """Distance (m) of the carried ball in front of the body and its rate (m/s), ``s``
    seconds into a dribble period: a Hann touch pulse of ``spell.touch_dv`` over
    ``spell.touch`` ms, against a constant pull-back ``spell.pull_back``; periodic by
    design."""
    T = spell.touch / 1000.0
    dv, mu, u = spell.touch_dv, spell.pull_back, spell.closing_speed
    inside = s < T
    phase = 2 * np.pi * np.minimum(s, T) / T
    pushed = np.where(inside, (np.minimum(s, T) - T / (2 * np.pi) * np.sin(phase)) / T, 1.0)
    pushed_integral = np.where(inside, s * s / (2 * T) - T * (1 - np.cos(phase)) /
                               (4 * np.pi**2), s - T / 2)
    d = spell.d_min - u * s + dv * pushed_integral - mu * s * s / 2
    dd = -u + dv * pushed - mu * s
    return d, dd


def cycle_start(bodies: Bodies, spell: Spell):
    """The ball's offset from the body and its rate where the dribble cycle starts."""
    _, _, _, _, heading, turn_rate = bodies.evaluate(np.array([spell.carrier]),
                                                     np.array([spell.t_cycle]))
    h = np.array([math.cos(heading[0]), math.sin(heading[0]), 0.0])
    normal = np.array([-math.sin(heading[0]), math.cos(heading[0]), 0.0])
    offset = h * spell.d_min + np.array([0.0, 0.0, BALL_RADIUS])
    rate = -spell.closing_speed * h + spell.d_min * turn_rate[0] * normal
    return offset, rate


def carried_ball(bodies: Bodies, spell: Spell, t_ms: np.ndarray):
    """Position and velocity (n, 3) of the carried ball at ``t_ms`` (>= ``t_receive``)."""
    t_ms = np.asarray(t_ms, np.int64)
    person = np.full(len(t_ms), spell.carrier)
    x, vx, y, vy, heading, turn_rate = bodies.evaluate(person, t_ms)
    pos = np.stack([x, y, np.full(len(t_ms), BALL_RADIUS)], axis=1)
    vel = np.stack([vx, vy, np.zeros(len(t_ms))], axis=1)
    h = np.stack([np.cos(heading), np.sin(heading)], axis=1)
    normal = np.stack([-np.sin(heading), np.cos(heading)], axis=1)
    cyc = t_ms >= spell.t_cycle
    if cyc.any():
        s = ((t_ms[cyc] - spell.t_cycle) % spell.period) / 1000.0
        d, dd = dribble_offset(s, spell)
        pos[cyc, :2] += h[cyc] * d[:, None]
        vel[cyc, :2] += h[cyc] * dd[:, None] + normal[cyc] * (d * turn_rate[cyc])[:, None]
    blend = ~cyc
    if blend.any():
        offset1, rate1 = cycle_start(bodies, spell)
        coef = cubic(spell.offset, spell.offset_rate, offset1, rate1,
                     (spell.t_cycle - spell.t_receive) / 1000.0)
        s = ((t_ms[blend] - spell.t_receive) / 1000.0)[:, None]
        pos[blend] += cubic_position(coef, s) - np.array([0, 0, BALL_RADIUS])
        vel[blend] += cubic_velocity(coef, s)
    return pos, vel


def soft_landing(z, vz, tau):
    """Whether a ball at height ``z`` (m, its centre) falling at ``vz`` (m/s) can be
    brought to the ground on a cubic of ``tau`` s that ends there at rest without going
    below it: the cubic stays above the ground exactly when ``3 (z - r) + vz tau >= 0``."""
    return 3 * (np.asarray(z) - BALL_RADIUS) + np.minimum(vz, 0.0) * tau >= -1e-9


def receive(bodies: Bodies, rng: np.random.Generator, person: int, t: int,
            ball_pos: np.ndarray, ball_vel: np.ndarray) -> Spell:
    """The spell of ``person``, who meets the ball (at ``ball_pos``, moving at
    ``ball_vel``) at ms ``t`` on a knot: his dribble, drawn at random, and the shortest
    soft enough reception that brings the ball into its cycle."""
    x, vx, y, vy, heading, _ = bodies.evaluate(np.array([person]), np.array([t]))
    body = np.array([x[0], y[0], 0.0])
    body_v = np.array([vx[0], vy[0], 0.0])
    offset = ball_pos - body
    offset_rate = ball_vel - body_v
    period = int(rng.integers(PERIOD_MS[0], PERIOD_MS[1] + 1))
    touch = draw_pulse_ms(rng, *TOUCH_MS)
    d_min = rng.uniform(*D_MIN)
    pull_back = rng.uniform(*PULL_BACK)
    goalkeeper = bodies.cast.goalkeeper[person]
    spell = Spell(person, t, t, offset, offset_rate, period, touch, d_min, pull_back,
                  speed=rng.uniform(*DRIBBLE_SPEED),
                  bias=math.radians(rng.uniform(-DRIBBLE_BIAS, DRIBBLE_BIAS)),
                  min_dribble=0 if goalkeeper else int(rng.integers(0, MIN_DRIBBLE_MS)),
                  max_dribble=int(rng.integers(*MAX_DRIBBLE_MS)))
    h = np.array([math.cos(heading[0]), math.sin(heading[0]), 0.0])
    offset1 = h * d_min + np.array([0.0, 0.0, BALL_RADIUS])
    rate1 = -spell.closing_speed * h
    tau = RECEIVE_MAX_S
    # Reception lengths from RECEIVE_MIN_MS up to RECEIVE_MAX_S, both included.
    tries = np.arange(RECEIVE_MIN_MS / 1000.0, RECEIVE_MAX_S + RECEIVE_STEP_S / 2, RECEIVE_STEP_S)
    # Receptions that would take the ball below the ground are not tried; the longest
    # one that does not is the fallback.
    tries = tries[soft_landing(ball_pos[2], ball_vel[2], tries)]
    if len(tries):
        tau = float(tries[-1])
    for cand in tries:
        if cubic_peak_acc(cubic(offset, offset_rate, offset1, rate1, cand), cand) <= RECEIVE_ACC:
            tau = float(cand)
            break
    spell.t_cycle = t + round(tau * 1000)
    return spell
