"""Who gets a free ball: the first player who can reach it, or the line it crosses.

When the ball is kicked, its whole free flight is simulated at once; then every player
is asked at which knot he could meet it, on a cubic path from where he is that keeps
his acceleration and speed within bounds. The first one (the nearest on a tie) gets it,
and the script sends him there on that exact path. Nobody touches a ball that is too
high, too fast or too near a line: such a ball flies on and may leave the pitch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specula.soccer.match.bodies import INSET, KNOT_MS, KNOT_S, Bodies, Plan
from specula.soccer.match.carry import RECEIVE_MIN_MS, soft_landing
from specula.soccer.match.physics import WIDTH, Y_MAX, Y_MIN, Flight, inside
from specula.soccer.match.splines import clip_norm, cubic, cubic_velocity, unit

TRAP_SPEED = 9.0  # fastest ball a player receives, m/s
TRAP_Z = 0.45  # highest ball centre a player receives with his foot, m
MEET_AHEAD = 0.35  # a receiver's body is this far further along the ball's path, m
GO_WITH = 3.0  # a receiver arrives moving with the ball at up to this speed, m/s
GO_WITH_SHARE = 0.4  # ... and at most this share of the ball's speed
MOVING_BALL = 0.5  # a ball slower than this (m/s) is met from the receiver's side
MEET_ACC = 5.5  # top acceleration of a player running to meet the ball, m/s^2
MEET_SPEED = 7.5  # his top speed, m/s
REACT_MS = 250  # nobody meets a kicked ball sooner than this, ms
MEET_MARGIN = 1.5  # nobody meets the ball nearer than this to a line, m
#: Shares of a run's duration at which its speed is checked against the cap.
SPEED_CHECKS = (0.25, 0.5, 0.75)


@dataclass
class Outcome:
    """How a free ball ends: met by ``person`` at knot ``k`` (body at ``q``), or out."""

    kind: str  # "meet", "out", "none"
    k: int = -1
    person: int = -1
    q: np.ndarray | None = None
    i_end: int = -1  # absolute ms where the free flight ends (meet or dead transfer)
    block: bool = False  # the meeting player deflects the ball (a blocked or saved shot)
    v: np.ndarray | None = None  # the meeting player's velocity at ``k``


def first_to_meet(bodies: Bodies, flight: Flight, k_s: int, people: np.ndarray,
                  acc: np.ndarray, cap: np.ndarray, z_max: float, v_max: float, i_stop: int,
                  earliest_ms: int, margin: float, go_with: float,
                  reach: float = 0.0) -> Outcome | None:
    """The person of ``people`` who can first reach the ball of ``flight``.

    A person can meet the ball at knot ``k`` when a cubic from his state at knot
    ``k_s`` to the meeting point at ``k`` keeps his acceleration within ``acc`` and
    his speed within ``cap``, and the ball there is at most ``z_max`` high, at most
    ``v_max`` fast, ``margin`` inside the pitch and not yet past ``i_stop`` (relative
    ms). He meets it with his body ``MEET_AHEAD`` further along its path, moving with
    it at ``GO_WITH_SHARE`` times its speed, at most ``go_with``; or, if ``reach`` > 0
    (a block), with his body anywhere within ``reach`` of the ball, standing.
    """
    if len(people) == 0:
        return None
    k_lo = max(k_s + 1, -(-(flight.i0 + earliest_ms) // KNOT_MS))
    k_hi = min(bodies.n_knots - 1, (flight.i0 + min(i_stop, len(flight.pos)) - 1) // KNOT_MS)
    if k_hi < k_lo:
        return None
    knots = np.arange(k_lo, k_hi + 1)
    rel = knots * KNOT_MS - flight.i0
    ball_pos, ball_vel = flight.pos[rel], flight.vel[rel]
    playable = (ball_pos[:, 2] <= z_max) & (np.linalg.norm(ball_vel, axis=1) <= v_max) & \
        inside(ball_pos[:, 0], ball_pos[:, 1], margin)
    if reach == 0:  # a reception: the ball must not be falling too fast to be brought down
        playable &= soft_landing(ball_pos[:, 2], ball_vel[:, 2], RECEIVE_MIN_MS / 1000.0)
    if not playable.any():
        return None
    knots, ball_pos, ball_vel = knots[playable], ball_pos[playable], ball_vel[playable]
    p0 = np.stack([bodies.x[k_s, people], bodies.y[k_s, people]], axis=1)[:, None, :]
    v0 = np.stack([bodies.vx[k_s, people], bodies.vy[k_s, people]], axis=1)[:, None, :]
    ahead = unit(ball_vel[:, :2])
    moving = np.linalg.norm(ball_vel[:, :2], axis=1) > MOVING_BALL
    ball_xy = ball_pos[None, :, :2]
    meet_at = np.where(moving[None, :, None], ball_xy + MEET_AHEAD * ahead[None],
                       ball_xy - MEET_AHEAD * unit(ball_xy - p0))
    if reach > 0:  # a block: the body anywhere within ``reach`` of the ball
        meet_at = ball_xy + clip_norm((p0 - ball_xy).reshape(-1, 2),
                                      reach).reshape(meet_at.shape)
    lo = np.array([INSET, Y_MIN + INSET])
    meet_at = np.clip(meet_at, lo, np.array([WIDTH - INSET, Y_MAX - INSET]))
    with_ball = np.minimum(go_with, GO_WITH_SHARE * np.linalg.norm(ball_vel[:, :2], axis=1))
    meet_vel = (ahead * with_ball[:, None])[None]
    T = ((knots - k_s) * KNOT_S)[None, :, None]
    d = meet_at - p0
    coef = cubic(p0, v0, meet_at, meet_vel, T)
    c2, c3 = coef[2], coef[3]
    a0 = np.linalg.norm(2 * c2, axis=2)
    a1 = np.linalg.norm(2 * c2 + 6 * c3 * T, axis=2)
    ok = (a0 <= acc[:, None]) & (a1 <= acc[:, None])
    vmax = np.zeros_like(a0)
    for f in SPEED_CHECKS:
        vmax = np.maximum(vmax, np.linalg.norm(cubic_velocity(coef, f * T), axis=2))
    ok &= vmax <= cap[:, None]
    if not ok.any():
        return None
    first = np.where(ok.any(axis=1), ok.argmax(axis=1), len(knots))
    distance = np.linalg.norm(d[np.arange(len(people)), np.minimum(first, len(knots) - 1)],
                              axis=1)
    best = np.lexsort((distance, first))[0]
    if first[best] >= len(knots):
        return None
    j = int(first[best])
    return Outcome("meet", int(knots[j]), int(people[best]), meet_at[best, j].copy(),
                   v=meet_vel[0, j].copy())


def resolve(bodies: Bodies, flight: Flight, k_s: int, exclude: tuple[int, ...]) -> Outcome:
    """Who gets a free ball first (anybody but ``exclude``), or where it leaves the
    pitch; ``k_s`` is the knot from which the players can react."""
    people = bodies.players(exclude)
    acc, cap = np.full(len(people), MEET_ACC), np.full(len(people), MEET_SPEED)
    meet = first_to_meet(bodies, flight, k_s, people, acc, cap, TRAP_Z, TRAP_SPEED,
                         flight.out, REACT_MS, MEET_MARGIN, GO_WITH)
    if meet is not None:
        meet.i_end = meet.k * KNOT_MS
        return meet
    if flight.out < len(flight.pos):
        return Outcome("out", i_end=flight.i0 + flight.out)
    return Outcome("none", i_end=flight.i0 + len(flight.pos))


def send_to_meet(bodies: Bodies, k_s: int, outcome: Outcome) -> None:
    """Put the player who meets the ball on his exact path there from knot ``k_s``."""
    i = outcome.person
    coef = cubic(bodies.position(k_s, i), bodies.velocity(k_s, i), outcome.q, outcome.v,
                 (outcome.k - k_s) * KNOT_S)
    bodies.plans[i] = Plan(k_s, outcome.k, coef)
    bodies.standing.pop(i, None)
