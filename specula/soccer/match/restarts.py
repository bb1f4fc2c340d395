"""The dead ball: what the laws give when the ball leaves the pitch, and the way back.

When the ball's centre crosses a line, :func:`ball_out` works out the restart (a
kick-in, a goal kick, a corner, or the kick-off after a goal), lets the ball roll on
until it is on the ground, carries it back along the ground to the restart spot on a
smooth path (a quintic of bounded acceleration, so the ball out of play makes no
kick-like peaks) and sends the taker to stand behind it. The restart kick itself is a
pass or a clearance (:mod:`.kicks`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specula.soccer.match.bodies import KNOT_MS, KNOT_S, Bodies, Plan
from specula.soccer.match.physics import (
    ATTACK,
    BALL_RADIUS,
    CENTRE,
    GOAL_X,
    GOAL_Z,
    WIDTH,
    Y_MAX,
    Y_MIN,
    Flight,
    crossing,
)
from specula.soccer.match.splines import (
    cubic,
    cubic_peak_acc,
    cubic_velocity,
    quintic_peak_acc,
    quintic_position,
    quintic_to_rest,
    unit,
)

# Where and when play restarts.
KICK_IN_INSET = 1.0  # kick-ins are taken this far inside the touch line, m
KICK_IN_END_MARGIN = 2.0  # ... and at least this far from the goal lines, m
CORNER_INSET = 1.0  # corners are taken this far inside both lines, m
GOAL_KICK_DEPTH = 5.5  # goal kicks are taken this far in front of the goal line, m
GOAL_KICK_SPREAD = 4.0  # ... up to this far to either side of its centre, m
#: Least time from the ball leaving the pitch to each restart, s (drawn in the range).
KICK_IN_PAUSE = (3.5, 5.0)
KICK_OFF_PAUSE = (6.0, 8.0)
GOAL_KICK_PAUSE = (4.0, 6.0)
CORNER_PAUSE = (5.0, 7.0)

# Carrying the ball back.
ROLL_ON_MS = 800  # the ball rolls on for this long after leaving the pitch, ms
PICK_UP_SPEED = 1.0  # ... and until it rolls away from the pitch no faster than this, m/s
DEAD_ACC = 20.0  # bound on the acceleration of the ball carried back, m/s^2
CARRY_MIN_S = 2.0  # shortest carry back, s
CARRY_STEP_S = 0.25  # step of the carry lengths tried, s
CARRY_MAX_S = 20.0  # beyond this the carry is taken however hard, s
LIE_MS = 500  # the ball lies at the spot at least this long before the restart, ms

# The taker.
TAKER_BEHIND = 0.3  # the taker stands this far behind the ball, m
TAKER_EARLY_MS = 300  # ... from at least this long before the restart, ms
TAKER_WAIT_MS = 100  # ... plus up to this long, drawn at random, ms
TAKER_ACC = 4.5  # top acceleration of his run to the spot, m/s^2
TAKER_SPEED = 7.0  # top speed of that run, m/s ...
TAKER_SPEED_CHECKS = 9  # ... checked at this many evenly spaced times
TAKER_MAX_S = 30.0  # beyond this the run is taken however hard, s


@dataclass
class DeadBall:
    """The ball out of play: carried to ``spot`` and kicked off from there at ``restart``."""

    restart: int
    spot: np.ndarray
    taker: int
    kind: str  # "kick-in", "corner", "goal kick", "kick-off"


def _restart_rule(rng: np.random.Generator, x: float, y: float, z: float, line: int,
                  last_team: int) -> tuple[int, np.ndarray, str, float, int]:
    """The restart after the ball crossed ``line`` at ``x, y, z`` (m), last kicked by
    ``last_team``: the team that takes it, its spot, its kind, the least pause before it
    (s), and the goal scored into (-1 for none)."""
    goal = -1
    if line == 0:
        team = 1 - last_team
        spot = np.array([KICK_IN_INSET if x < 0 else WIDTH - KICK_IN_INSET,
                         np.clip(y, Y_MIN + KICK_IN_END_MARGIN, Y_MAX - KICK_IN_END_MARGIN)])
        kind, pause = "kick-in", rng.uniform(*KICK_IN_PAUSE)
        return team, spot, kind, pause, goal
    g = 0 if y > 0 else 1
    post0, post1 = GOAL_X[g]
    if post0 <= x <= post1 and z <= GOAL_Z:
        goal = g
        team = 1 - g  # the team that conceded kicks off
        spot, kind, pause = CENTRE.copy(), "kick-off", rng.uniform(*KICK_OFF_PAUSE)
        return team, spot, kind, pause, goal
    defending = 1 - g
    line_y = Y_MAX if g == 0 else Y_MIN
    inward = -1.0 if g == 0 else 1.0
    if last_team != defending:
        team, kind, pause = defending, "goal kick", rng.uniform(*GOAL_KICK_PAUSE)
        spot = np.array([WIDTH / 2 + rng.uniform(-GOAL_KICK_SPREAD, GOAL_KICK_SPREAD),
                         line_y + inward * GOAL_KICK_DEPTH])
    else:
        team, kind, pause = 1 - defending, "corner", rng.uniform(*CORNER_PAUSE)
        spot = np.array([CORNER_INSET if x < WIDTH / 2 else WIDTH - CORNER_INSET,
                         line_y + inward * CORNER_INSET])
    return team, spot, kind, pause, goal


def carry_from(flight: Flight) -> int:
    """The step of ``flight`` the carry back starts from: ``ROLL_ON_MS`` after the ball
    left the pitch, or later, when it is on the ground and no longer rolling away from
    the pitch fast (it rebounded off the boards, or slowed to ``PICK_UP_SPEED``). A
    carry that started in the air with the ball falling would follow the fall on, below
    the ground; one that started with the ball rolling away, through the boards."""
    rel = min(flight.out + ROLL_ON_MS, len(flight.pos) - 1)
    pos, vel = flight.pos[rel:], flight.vel[rel:]
    away = np.sum(vel[:, :2] * (pos[:, :2] - CENTRE), axis=1) > 0
    speed = np.linalg.norm(vel[:, :2], axis=1)
    ok = (pos[:, 2] <= BALL_RADIUS) & (~away | (speed <= PICK_UP_SPEED))
    down = np.flatnonzero(ok)
    return rel + int(down[0]) if len(down) else len(flight.pos) - 1


def _carry_back(flight: Flight, spot: np.ndarray, ball: np.ndarray) -> int:
    """Let the ball of ``flight`` roll on until it touches the ground, then stop its
    bounce and carry it along the ground to ``spot`` on a quintic that ends at rest;
    write that into ``ball`` (the 1 ms grid) and return the ms at which it lies at the
    spot."""
    rel = carry_from(flight)
    t_dead = flight.i0 + rel
    p0, v0 = flight.pos[rel], flight.vel[rel] * [1.0, 1.0, 0.0]
    target = np.array([spot[0], spot[1], BALL_RADIUS])
    T = CARRY_MIN_S
    while True:
        coef = quintic_to_rest(p0, v0, target, T)
        if quintic_peak_acc(coef, T) <= DEAD_ACC or T > CARRY_MAX_S:
            break
        T += CARRY_STEP_S
    t_set = t_dead + int(T * 1000)
    # The ball's grid: flight until t_dead, quintic to the spot, rest until restart.
    n = min(len(ball), t_set) - t_dead
    if n > 0:
        s = np.arange(n) / 1000.0
        ball[t_dead:t_dead + n] = quintic_position(coef, s)
    ball[t_set:] = target
    return t_set


def _send_taker(bodies: Bodies, k: int, taker: int, spot: np.ndarray, facing: np.ndarray,
                restart: int) -> int:
    """Send ``taker`` from knot ``k`` to stand behind the ball at ``spot``, facing
    ``facing``, on a run within ``TAKER_ACC`` and ``TAKER_SPEED``; return the first knot
    at which he can be there, no earlier than ``TAKER_EARLY_MS`` before ``restart``."""
    q = spot - TAKER_BEHIND * facing
    p0 = bodies.position(k, taker)
    v0 = bodies.velocity(k, taker)
    k_arrive = -(-(restart - TAKER_EARLY_MS) // KNOT_MS)
    while True:
        T = (k_arrive - k) * KNOT_S
        coef = cubic(p0, v0, q, np.zeros(2), T)
        a = cubic_peak_acc(coef, T)
        s = np.linspace(0.0, T, TAKER_SPEED_CHECKS)[:, None]
        v = np.linalg.norm(cubic_velocity(coef, s), axis=1).max()
        if (a <= TAKER_ACC and v <= TAKER_SPEED) or T > TAKER_MAX_S:
            break
        k_arrive += 1
    bodies.plans[taker] = Plan(k, k_arrive, coef)
    bodies.standing = {taker: (q, math.atan2(facing[1], facing[0]))}
    return k_arrive


def ball_out(bodies: Bodies, rng: np.random.Generator, flight: Flight, k: int,
             last_kicker: int, ball: np.ndarray) -> tuple[list[float], DeadBall]:
    """The ball of ``flight`` leaves the pitch (handled at knot ``k``): its row of
    ``TruthLog.outs`` and the dead ball until the restart.

    Writes the ball's way back to the spot into ``ball`` (the 1 ms grid) and sends the
    taker there: the goalkeeper for a goal kick, else the nearest outfield player.
    """
    cast = bodies.cast
    i_out = flight.i0 + flight.out
    frac, line = crossing(flight.pos[flight.out - 1], flight.pos[flight.out])
    x, y, z = flight.pos[flight.out - 1] + frac * (flight.pos[flight.out] -
                                                   flight.pos[flight.out - 1])
    last_team = int(cast.team[last_kicker]) if last_kicker >= 0 else 0
    team, spot, kind, pause, goal = _restart_rule(rng, x, y, z, line, last_team)
    record = [i_out - 1 + frac, x, y, z, line, goal, -1]
    t_set = _carry_back(flight, spot, ball)
    restart = max(i_out + int(pause * 1000), t_set + LIE_MS)
    if kind == "goal kick":
        taker = int(np.flatnonzero(cast.playing & cast.goalkeeper & (cast.team == team))[0])
    else:
        taker = bodies.nearest(spot, team, k)
    facing = unit(CENTRE - spot) if kind != "kick-off" else np.array([0.0, ATTACK[team]])
    k_arrive = _send_taker(bodies, k, taker, spot, facing, restart)
    restart = max(restart, k_arrive * KNOT_MS + TAKER_EARLY_MS +
                  int(rng.integers(0, TAKER_WAIT_MS)))
    return record, DeadBall(restart, spot, taker, kind)
