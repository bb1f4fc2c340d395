"""The player on the ball decides what to do, and how hard and where he kicks it.

Each function here draws a kick at random, as a player would choose it (a pass to an
open teammate ahead, a shot from near the goal, a clearance under pressure), simulates
the ball's free flight and finds who gets it (:func:`~.meeting.resolve`). It returns a
:class:`Kick` of kind ``PASS``, ``SHOT`` or ``CLEARANCE``; the script records it and
sets the ball on its way (dribble touches, which do not free the ball, it notes itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specula.soccer.match.bodies import KNOT_MS, Bodies
from specula.soccer.match.meeting import MEET_SPEED, Outcome, first_to_meet, resolve
from specula.soccer.match.physics import (
    ATTACK,
    BALL_RADIUS,
    GOAL_X,
    GOAL_Y,
    GOAL_Z,
    GRAVITY,
    LENGTH,
    WIDTH,
    Y_MAX,
    Y_MIN,
    Flight,
    draw_pulse_ms,
    simulate,
)
from specula.soccer.match.splines import rotate, unit
from specula.soccer.match.truth import CLEARANCE, PASS, SHOT

# Choosing what to do with the ball (chances are per touch once he may play it).
KEEPER_CLEAR = 0.4  # chance that a goalkeeper clears rather than passes
SHOT_RANGE = 25.0  # a player shoots only within this distance of the goal, m
SHOT_WIDTH = 16.0  # ... and this far across from its centre, m
SHOT_CHANCE = 0.15  # chance of a shot at SHOT_RANGE from the goal
SHOT_CHANCE_NEAR = 0.35  # ... growing by this much at the goal
DANGER_ZONE = 20.0  # a player this near his own goal (m) ...
PRESSURE_DISTANCE = 5.0  # ... with an opponent this near (m) ...
CLEAR_CHANCE = 0.5  # ... clears with this chance
EDGE_ZONE = 4.0  # a player this near a line (m) ...
PASS_CHANCE_EDGE = 0.7  # ... passes with this chance
PASS_CHANCE = 0.75  # elsewhere with this chance

# Passes.
LEAD_TIME = 1.0  # a pass is aimed where the teammate will be after this, s
OPEN_DISTANCE = 10.0  # a teammate is fully open with no opponent within this, m
FORWARD_WEIGHT = 1.5  # weight of a teammate's gain along the pitch (in lengths)
PREFERRED_DISTANCE = 12.0  # preferred length of a pass, m
DISTANCE_WEIGHT = 0.02  # penalty per m off that length
KEEPER_PENALTY = 1.0  # penalty for passing to the goalkeeper
PASS_RANGE = (5.0, 38.0)  # shortest and longest pass, m
CHOICE_SHARPNESS = 3.0  # teammates are drawn with weights exp(this * score)
PASS_TRIES = 3  # teammates tried before a pass that would go out is given up
MISPLACED = 0.15  # chance that a pass in open play is misplaced
MISPLACED_ANGLE = (12.0, 30.0)  # ... by this many degrees off ...
MISPLACED_LENGTH = (1.2, 1.8)  # ... and this many times too hard
LOFT_DISTANCE = 25.0  # passes longer than this (m) ...
LOFT_CHANCE = 0.5  # ... are lofted with this chance ...
LOFT_ELEVATION = (20.0, 35.0)  # ... at this elevation, degrees
LOFT_CARRY = 0.8  # share of a lofted pass's length covered in the air (drag-free)
ARRIVAL_SPEED = (7.5, 9.0)  # speed at which a ground pass is meant to arrive, m/s
GROUND_DECEL = 1.6  # deceleration of a ground pass assumed for its speed, m/s^2
PASS_PULSE_MS = (10, 20)  # range of a pass's kick pulse, ms

# Clearances.
CLEAR_ANGLE = 35.0  # a clearance goes up to this far off straight ahead, degrees
CLEAR_SPEED = (16.0, 22.0)  # m/s
CLEAR_ELEVATION = (25.0, 40.0)  # degrees
CLEAR_PULSE_MS = (10, 16)
GOAL_KICK_ANGLE = 30.0  # a long goal kick goes up to this far off straight, degrees
GOAL_KICK_SPEED = (17.0, 22.0)  # m/s

# Shots: aimed between the posts, wide or high; some along the ground.
AIM_ON_TARGET = 0.5  # chance of a shot aimed between the posts
AIM_WIDE = 0.85  # ... plus the chance of one aimed wide (the rest go high)
GROUND_ON_TARGET = 0.35  # chance of a ground shot aimed between the posts
GROUND_WIDE = 0.7  # AIM_ON_TARGET plus the chance of a ground shot aimed wide
POST_INSET = 0.4  # shots on target are aimed this far inside the posts, m
SHOT_HEIGHT = (0.3, 1.6)  # height above a lying ball of a shot in the air, m
WIDE_MISS = (0.5, 4.0)  # distance outside the post of a wide shot, m
WIDE_OF_POST0 = 0.5  # chance that a wide shot misses by the post of lower x
HIGH_Z = (2.7, 3.5)  # height of a high shot at the goal line, m
SHOT_SPEED = (17.0, 26.0)  # m/s
SHOT_PULSE_MS = (8, 14)
AIM_ITERATIONS = 4  # corrections of the aim for drag and bounces

# Blocks and saves.
BLOCK_Z = 0.6  # highest ball centre a player blocks, m
BLOCK_REACH = 0.6  # a blocker's body is at most this far from the ball, m
BLOCK_ACC = 6.0  # top acceleration of a defender stepping into a shot, m/s^2
BLOCK_REACT_MS = 100  # nobody blocks a shot sooner than this, ms
BLOCK_MARGIN = 0.5  # nobody blocks nearer than this to a line, m
DIVE_ACC = 25.0  # a goalkeeper dives with a short burst of up to this, m/s^2
DIVE_MARGIN = 0.3  # a goalkeeper saves up to this near a line, m
SAVE_CHANCE = 0.9  # chance that a goalkeeper who can reach a shot saves it
DEFLECT_ANGLE = 70.0  # a deflection goes up to this far off straight back, degrees
DEFLECT_KEEP = (0.15, 0.4)  # share of the horizontal speed the deflection keeps
DEFLECT_VZ = (0.0, 4.0)  # vertical speed of the deflection, m/s
DEFLECT_MIN_SPEED = 3.0  # slowest deflection, m/s
DEFLECT_PULSE_MS = (6, 10)


@dataclass
class Kick:
    """A kick decided and simulated: who kicks at ms ``t`` with a pulse of ``pulse`` ms,
    its kind, the ball's free flight and how it ends."""

    kicker: int
    t: int
    pulse: int
    kind: int
    flight: Flight
    outcome: Outcome
    target: int = -1  # a pass: the teammate it was aimed at
    on_target: int = 0  # a shot: 1 if its free path goes in
    ts_end: int = -1  # a shot: when it ended (half ms), as in SHOT_DTYPE; -1 if not (yet)
    ts_line: int = -1  # a shot: when its free path crosses the goal line (half ms), or -1


def choose_action(bodies: Bodies, rng: np.random.Generator, k: int, kicker: int,
                  must: bool) -> str:
    """What the carrier ``kicker`` does at knot ``k``: "shot", "clear", "pass" or "touch" (dribble
    on); a pass at least if he ``must`` play the ball."""
    cast = bodies.cast
    t = cast.team[kicker]
    p = bodies.position(k, kicker)
    goal = np.array([WIDTH / 2, GOAL_Y[t]])
    to_goal = float(np.linalg.norm(goal - p))
    own = np.array([WIDTH / 2, GOAL_Y[1 - t]])
    opp = bodies.players(team=1 - t)
    pressure = float(np.hypot(bodies.x[k, opp] - p[0], bodies.y[k, opp] - p[1]).min())
    r = rng.random()
    if cast.goalkeeper[kicker]:
        return "clear" if r < KEEPER_CLEAR else "pass"
    if to_goal < SHOT_RANGE and abs(p[0] - WIDTH / 2) < SHOT_WIDTH and \
            r < SHOT_CHANCE + SHOT_CHANCE_NEAR * (SHOT_RANGE - to_goal) / SHOT_RANGE:
        return "shot"
    if np.linalg.norm(own - p) < DANGER_ZONE and pressure < PRESSURE_DISTANCE and \
            r < CLEAR_CHANCE:
        return "clear"
    near_edge = min(p[0], WIDTH - p[0], p[1] - Y_MIN, Y_MAX - p[1]) < EDGE_ZONE
    if must or r < (PASS_CHANCE_EDGE if near_edge else PASS_CHANCE):
        return "pass"
    return "touch"


def pass_kick(bodies: Bodies, rng: np.random.Generator, k_s: int, t: int, kicker: int,
              restart: bool, p_ball: np.ndarray, v_ball: np.ndarray) -> Kick | None:
    """Up to three passes from ``kicker`` at ``t`` tried; the one played, or None.

    A pass goes to a teammate chosen by position (forward, open, 5-38 m away); one
    that would leave the pitch is tried again to another teammate, unless it is a
    misplaced pass (15 % of passes in open play: off by 12-30 degrees and too hard),
    which is played and goes out (a ``CLEARANCE``). A restart kick is played even if
    all tries would go out.
    """
    cast = bodies.cast
    team = int(cast.team[kicker])
    mates = bodies.players(exclude=(kicker,), team=team)
    pos = np.stack([bodies.x[k_s, mates], bodies.y[k_s, mates]], axis=1)
    vel = np.stack([bodies.vx[k_s, mates], bodies.vy[k_s, mates]], axis=1)
    aim = pos + LEAD_TIME * vel
    dist = np.linalg.norm(aim - p_ball[:2], axis=1)
    forward = ATTACK[team] * (aim[:, 1] - p_ball[1]) / LENGTH
    opp = bodies.players(team=1 - team)
    opp_pos = np.stack([bodies.x[k_s, opp], bodies.y[k_s, opp]], axis=1)
    open_ = np.minimum(np.linalg.norm(aim[:, None] - opp_pos[None], axis=2).min(axis=1),
                       OPEN_DISTANCE) / OPEN_DISTANCE
    score = FORWARD_WEIGHT * forward + open_ - DISTANCE_WEIGHT * np.abs(
        dist - PREFERRED_DISTANCE) - KEEPER_PENALTY * cast.goalkeeper[mates]
    score[(dist < PASS_RANGE[0]) | (dist > PASS_RANGE[1])] = -np.inf
    if not np.isfinite(score).any():
        return None
    tries = []
    weights = np.exp(CHOICE_SHARPNESS * (score - score[np.isfinite(score)].max()))
    weights[~np.isfinite(score)] = 0.0
    for _ in range(PASS_TRIES):
        if weights.sum() <= 0:
            break
        j = int(rng.choice(len(mates), p=weights / weights.sum()))
        weights[j] = 0.0
        d = float(dist[j])
        direction = unit(aim[j] - p_ball[:2])
        misplaced = not restart and rng.random() < MISPLACED
        if misplaced:
            ang = math.radians(rng.uniform(*MISPLACED_ANGLE) * rng.choice([-1.0, 1.0]))
            direction = rotate(direction, ang)
            d *= rng.uniform(*MISPLACED_LENGTH)
        if d > LOFT_DISTANCE and rng.random() < LOFT_CHANCE:
            elev = math.radians(rng.uniform(*LOFT_ELEVATION))
            speed = math.sqrt(GRAVITY * d * LOFT_CARRY / math.sin(2 * elev))
            launch = np.array([*(direction * speed * math.cos(elev)), speed * math.sin(elev)])
        else:
            arrival = rng.uniform(*ARRIVAL_SPEED)
            speed = math.sqrt(arrival * arrival + 2 * GROUND_DECEL * d)
            launch = np.array([*(direction * speed), 0.0])
        pulse = draw_pulse_ms(rng, *PASS_PULSE_MS)
        flight = simulate(t, p_ball, v_ball, launch - v_ball, pulse)
        out = resolve(bodies, flight, k_s, exclude=(kicker,))
        tries.append((flight, out, pulse, int(mates[j])))
        if out.kind == "meet" or (misplaced and out.kind == "out"):
            break
    if not tries:
        return None
    flight, out, pulse, target = tries[-1]
    if out.kind != "meet" and not restart and not misplaced:
        return None
    kind = PASS if out.kind == "meet" else CLEARANCE
    return Kick(kicker, t, pulse, kind, flight, out, target=target)


def _lofted_clearance(bodies: Bodies, k: int, t: int, kicker: int, direction: np.ndarray,
                      speed: float, elev: float, pulse: int, p_ball: np.ndarray,
                      v_ball: np.ndarray) -> Kick:
    """A long kick in the air from ``kicker`` along ``direction``: a ``CLEARANCE``."""
    launch = np.array([*(direction * speed * math.cos(elev)), speed * math.sin(elev)])
    flight = simulate(t, p_ball, v_ball, launch - v_ball, pulse)
    return Kick(kicker, t, pulse, CLEARANCE, flight, resolve(bodies, flight, k, exclude=(kicker,)))


def clearance(bodies: Bodies, rng: np.random.Generator, k_s: int, t: int, kicker: int,
              p_ball: np.ndarray, v_ball: np.ndarray) -> Kick:
    """An untargeted long kick upfield from ``kicker`` at ``t``."""
    team = int(bodies.cast.team[kicker])
    ang = math.radians(rng.uniform(-CLEAR_ANGLE, CLEAR_ANGLE))
    direction = rotate(np.array([0.0, ATTACK[team]]), ang)
    speed, elev = rng.uniform(*CLEAR_SPEED), math.radians(rng.uniform(*CLEAR_ELEVATION))
    pulse = draw_pulse_ms(rng, *CLEAR_PULSE_MS)
    return _lofted_clearance(bodies, k_s, t, kicker, direction, speed, elev, pulse, p_ball, v_ball)


def goal_kick(bodies: Bodies, rng: np.random.Generator, k: int, t: int, kicker: int,
              ball: np.ndarray) -> Kick:
    """A long goal kick upfield by the goalkeeper ``kicker`` from the lying ball at ``ball``."""
    team = int(bodies.cast.team[kicker])
    ang = math.radians(rng.uniform(-GOAL_KICK_ANGLE, GOAL_KICK_ANGLE))
    direction = np.array([math.sin(ang), ATTACK[team] * math.cos(ang)])
    speed, elev = rng.uniform(*GOAL_KICK_SPEED), math.radians(rng.uniform(*CLEAR_ELEVATION))
    pulse = draw_pulse_ms(rng, *CLEAR_PULSE_MS)
    return _lofted_clearance(bodies, k, t, kicker, direction, speed, elev, pulse, ball,
                             np.zeros(3))


def _shot_target(rng: np.random.Generator, team: int) -> tuple[np.ndarray, bool]:
    """Where a shot of ``team`` is aimed on the goal line (m), and whether it is a ground
    shot."""
    post0, post1 = GOAL_X[team]
    line_y = GOAL_Y[team]
    r = rng.random()
    ground = r < GROUND_ON_TARGET or AIM_ON_TARGET <= r < GROUND_WIDE
    if r < AIM_ON_TARGET:
        target = np.array([rng.uniform(post0 + POST_INSET, post1 - POST_INSET), line_y,
                           BALL_RADIUS if ground else BALL_RADIUS + rng.uniform(*SHOT_HEIGHT)])
    elif r < AIM_WIDE:
        x = (post0 - rng.uniform(*WIDE_MISS)) if rng.random() < WIDE_OF_POST0 else \
            (post1 + rng.uniform(*WIDE_MISS))
        target = np.array([x, line_y,
                           BALL_RADIUS if ground else BALL_RADIUS + rng.uniform(*SHOT_HEIGHT)])
    else:
        target = np.array([rng.uniform(post0, post1), line_y, rng.uniform(*HIGH_Z)])
    return target, ground


def shot(bodies: Bodies, rng: np.random.Generator, k_s: int, t: int, kicker: int,
         p_ball: np.ndarray, v_ball: np.ndarray) -> Kick:
    """A shot by ``kicker`` at ``t`` at the goal his team attacks, and its end: a block by a
    defender near its path, a save, or the ball flying on (in, wide, or picked up).

    The kick is aimed so that its simulated path (with drag) crosses the goal line at
    the target; a defender blocks it, or the goalkeeper saves it (a shot on target that
    he can reach, with chance ``SAVE_CHANCE``), as an ``Outcome`` with ``block`` set.
    """
    cast = bodies.cast
    team = int(cast.team[kicker])
    post0, post1 = GOAL_X[team]
    line_y = GOAL_Y[team]
    sign = ATTACK[team]
    target, ground = _shot_target(rng, team)
    speed = rng.uniform(*SHOT_SPEED)
    pulse = draw_pulse_ms(rng, *SHOT_PULSE_MS)
    aim = target.copy()
    for _ in range(AIM_ITERATIONS):
        d = aim[:2] - p_ball[:2]
        horiz = float(np.linalg.norm(d))
        tf = horiz / speed
        vz = 0.0 if ground else (aim[2] - BALL_RADIUS) / tf + 0.5 * GRAVITY * tf
        launch = np.array([*(d / horiz * speed), vz])
        flight = simulate(t, p_ball, v_ball, launch - v_ball, pulse)
        cross = np.flatnonzero(sign * (flight.pos[:, 1] - line_y) >= 0)
        if not len(cross):
            break
        aim[0] += target[0] - flight.pos[cross[0], 0]
        aim[2] += target[2] - flight.pos[cross[0], 2]
    cross = np.flatnonzero(sign * (flight.pos[:, 1] - line_y) >= 0)
    i_cross = int(cross[0]) if len(cross) else len(flight.pos)
    on_target = 0
    if i_cross < len(flight.pos):
        cx, cz = flight.pos[i_cross, 0], flight.pos[i_cross, 2]
        on_target = int(post0 <= cx <= post1 and cz <= GOAL_Z)
    ts_line = 2 * (t + i_cross) if i_cross < len(flight.pos) else -1
    i_stop = min(i_cross, flight.out)
    # A defender near the path, or the goalkeeper, may stop it first.
    blockers = bodies.players(team=1 - team, outfield=True)
    meet = first_to_meet(bodies, flight, k_s, blockers, np.full(len(blockers), BLOCK_ACC),
                         np.full(len(blockers), MEET_SPEED), BLOCK_Z, np.inf, i_stop,
                         BLOCK_REACT_MS, BLOCK_MARGIN, 0.0, BLOCK_REACH)
    if meet is None and on_target:
        keeper = np.flatnonzero(cast.playing & cast.goalkeeper & (cast.team == 1 - team))
        meet = first_to_meet(bodies, flight, k_s, keeper, np.full(len(keeper), DIVE_ACC),
                             np.full(len(keeper), MEET_SPEED), BLOCK_Z, np.inf, i_stop,
                             BLOCK_REACT_MS, DIVE_MARGIN, 0.0, BLOCK_REACH)
        if meet is not None and rng.random() > SAVE_CHANCE:
            meet = None
    if meet is not None:
        meet.block = True
        meet.i_end = meet.k * KNOT_MS
        return Kick(kicker, t, pulse, SHOT, flight, meet, on_target=on_target,
                    ts_end=2 * meet.i_end, ts_line=ts_line)
    out = resolve(bodies, flight, k_s, exclude=(kicker,))
    ts_end = -1
    if i_cross < len(flight.pos) and (out.kind != "meet" or out.i_end > t + i_cross):
        ts_end = 2 * (t + i_cross)
    return Kick(kicker, t, pulse, SHOT, flight, out, on_target=on_target, ts_end=ts_end,
                ts_line=ts_line)


def deflection(bodies: Bodies, rng: np.random.Generator, k: int, blocker: int, t: int,
               flight: Flight) -> Kick:
    """A blocked or saved shot of ``flight``: ``blocker`` deflects the ball at ``t``
    (a ``CLEARANCE``), back and to the side, slower, off the ground."""
    rel = t - flight.i0
    p_ball, v_in = flight.pos[rel].copy(), flight.vel[rel].copy()
    ang = math.radians(rng.uniform(-DEFLECT_ANGLE, DEFLECT_ANGLE))
    back = rotate(-v_in[:2] * rng.uniform(*DEFLECT_KEEP), ang)
    v_out = np.array([*back, rng.uniform(*DEFLECT_VZ)])
    if np.linalg.norm(v_out) < DEFLECT_MIN_SPEED:
        v_out *= DEFLECT_MIN_SPEED / max(float(np.linalg.norm(v_out)), 1e-9)
    pulse = draw_pulse_ms(rng, *DEFLECT_PULSE_MS)
    new = simulate(t, p_ball, v_in, v_out - v_in, pulse)
    return Kick(blocker, t, pulse, CLEARANCE, new, resolve(bodies, new, k, exclude=(blocker,)))
