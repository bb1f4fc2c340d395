"""The people on the pitch: where everyone's body is, knot by knot, and why.

Every person has a position, velocity, heading and turn rate at each knot of a 100 ms
grid; between knots the body follows the cubic Hermite curve through them, so that
motion is smooth (C1) with bounded acceleration. At each knot a player steers towards a
target: his formation slot, shifted with the play (the ball smoothed; goalkeepers and
the referee follow the ball itself) and wandering a little (an Ornstein-Uhlenbeck
process), kept clear of the ball unless he plays it and, for the opponents of a
restart's taker, 9.15 m from its spot. Near his target he lets it come to him (so he
walks, jogs and stands, as real players mostly do); now and then he sprints 15-25 m.
The nearest opponent presses the ball carrier; the carrier runs his dribble. Whoever
must be at a given place at a given knot (to meet the ball, or to take a restart)
follows an exact cubic :class:`Plan` instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specula.soccer.match.physics import (
    ATTACK,
    GOAL_X,
    GOAL_Y,
    LENGTH,
    WIDTH,
    Y_MAX,
    Y_MIN,
)
from specula.soccer.match.splines import (
    clip_norm,
    cubic_position,
    cubic_velocity,
    rotate,
    unit,
    wrap,
)

if TYPE_CHECKING:
    from specula.soccer.match.carry import Spell
    from specula.soccer.match.profiles import Cast

KNOT_MS = 100  # knot spacing of the script, ms
KNOT_S = KNOT_MS / 1000.0  # the same in s
V_MAX = 7.8  # hard cap on a body's speed when it steers freely, m/s
INSET = 0.6  # bodies stay this far inside the pitch, m

# Formation: depths in pitch lengths from the team's own goal line, across in widths.
FOLLOW_DEPTH = 0.5  # the formation moves by this share of the ball's offset along y
IN_POSSESSION_DEPTH = 0.08  # the team on the ball pushes up by this much
OUT_OF_POSSESSION_DEPTH = -0.04  # the other team drops back by this much
DEPTH_MIN, DEPTH_MAX = 0.04, 0.96  # range of the outfield players' depths
KICKOFF_DEPTH_MAX = 0.47  # at the kick-off everyone stays in his own half
FOLLOW_ACROSS = 0.35  # the formation moves by this share of the ball's offset along x
KEEPER_FOLLOW_ACROSS = 0.5  # the goalkeeper moves by this share of the ball's x offset
KEEPER_POST_MARGIN = 0.5  # the goalkeeper stays this far inside his posts, m
KEEPER_DEPTH = 0.025  # the goalkeeper's depth with the ball on his own goal line
KEEPER_FOLLOW_DEPTH = 0.04  # ... plus this share of the ball's depth
REFEREE_ACROSS = 8.0  # the referee keeps this far to the side of the ball, m
REFEREE_ALONG = -4.0  # and this far along y from it, m

# Steering towards the targets.
WANDER_SD = 1.5  # standard deviation of the wandering around the targets, m
WANDER_TIME = 4.0  # its correlation time, s
KEEPER_WANDER = 0.2  # share of the wandering that a goalkeeper does
FOLLOW_TIME = 2.0  # the formation follows the ball smoothed over this time constant, s
RUN_SPEED = 5.0  # top speed of a player steering to his target, m/s
RUN_ACC = 3.5  # his top acceleration, m/s^2
APPROACH_TIME = 1.1  # a body's desired speed is its distance beyond SLACK over this, s
EAGER_TIME = 0.8  # ... or over this for a runner, the presser and the carrier, s
SLACK = 1.5  # within this distance of his target a player lets it come to him, m
SPRINT_RATE = 0.7  # an outfield player starts a run this often per minute of play
SPRINT_LENGTH = (15.0, 25.0)  # a run covers this far, m
SPRINT_SPEED = 7.6  # top speed of a run, m/s
SPRINT_ACC = 3.0  # its top acceleration, m/s^2
SPRINT_MAX_S = 4.5  # a run ends after this long at the latest, s
KEEP_AWAY = 2.5  # everybody but the one playing the ball keeps this far from it, m
RESTART_DISTANCE = 9.15  # opponents keep this far from a restart's ball, m
PRESS_DISTANCE = 2.5  # the presser stands this far from the ball, goal side, m
PRESS_SPEED = 6.0  # top speed of the player pressing the carrier, m/s
DRIBBLE_LOOKAHEAD = 3.0  # the carrier's target is this far along his dribble direction, m
RECEIVING_SPEED = 2.0  # top speed of a carrier still bringing the ball to his foot, m/s
CARRIER_ACC = 3.0  # top acceleration of the carrier, m/s^2
SUB_WANDER = 0.5  # share of the wandering that a warming-up substitute does
SUB_SPEED = 1.2  # top speed of a warming-up substitute, m/s
TARGET_INSET = 0.4  # targets lie this much further inside than ``INSET``, m
CARRIER_INSET = 1.0  # the carrier's target lies this much further in again, m
AVOID_RADIUS = 6.0  # the carrier turns away from opponents nearer than this, m
EDGE_AVOID = 5.0  # the carrier turns away from lines nearer than this, m

# Heading: along the motion, or towards the ball when (nearly) standing.
FACE_MOTION_SPEED = 1.0  # above this speed a player faces where he runs, m/s
CARRIER_FACE_SPEED = 0.3  # the same for the carrier, m/s
TURN_TIME = 0.3  # the desired turn rate is the heading error over this, s
TURN_RATE_MAX = 6.0  # top turn rate, rad/s
TURN_ACC_MAX = 40.0  # top angular acceleration, rad/s^2
CARRIER_TURN_RATE_MAX = 3.0  # the same for the carrier, rad/s
CARRIER_TURN_ACC_MAX = 15.0  # rad/s^2

# Where the substitutes warm up.
SUB_OUTSIDE = 3.5  # distance outside the touch line, m
SUB_Y_FIRST = -14.0  # y of the first substitute of a team, m
SUB_SPACING = 4.5  # distance between substitutes along y, m


@dataclass
class Plan:
    """A person's exact path from knot ``k0`` to knot ``k1`` (a cubic in s since ``k0``)."""

    k0: int
    k1: int
    coef: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

    def at(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Position and velocity at knot ``k``."""
        s = (k - self.k0) * KNOT_S
        return cubic_position(self.coef, s), cubic_velocity(self.coef, s)


class Bodies:
    """Position, velocity, heading and turn rate of every person at every knot.

    The arrays are ``(n_knots, n_people)``; knot ``k + 1`` is computed from knot ``k``
    by :meth:`step`. ``plans`` override the steering of the people who have one;
    ``standing`` holds the people who wait at a spot with a given heading (a restart's
    taker).
    """

    def __init__(self, cast: Cast, n_knots: int) -> None:
        self.cast = cast
        self.n_knots = n_knots
        n_people = len(cast.team)
        self.n_people = n_people
        self.x = np.zeros((n_knots, n_people))
        self.y = np.zeros((n_knots, n_people))
        self.vx = np.zeros((n_knots, n_people))
        self.vy = np.zeros((n_knots, n_people))
        self.heading = np.zeros((n_knots, n_people))
        self.turn_rate = np.zeros((n_knots, n_people))
        self.plans: list[Plan | None] = [None] * n_people
        self.standing: dict[int, tuple[np.ndarray, float]] = {}
        self.entering: set[int] = set()  # substitutes on their way onto the pitch
        self.wander = np.zeros((n_people, 2))
        self.home = np.zeros((n_people, 2))
        self.play_centre = np.zeros(2)  # the ball smoothed: where the formation follows
        self.runs: dict[int, tuple[np.ndarray, int]] = {}  # runner -> (run's end, last knot)

    def line_up(self, rng: np.random.Generator, centre: np.ndarray) -> None:
        """Knot 0: everyone in his kick-off formation, the substitutes beside the pitch."""
        cast = self.cast
        targets = self.formation(centre, team_on_ball=0, kickoff=True)
        self.x[0], self.y[0] = targets[:, 0], targets[:, 1]
        subs = np.array(cast.profile.substitutes, np.int64)
        for j, i in enumerate(subs.tolist()):
            side = cast.team[i]
            self.x[0, i] = -SUB_OUTSIDE if side == 0 else WIDTH + SUB_OUTSIDE
            self.y[0, i] = SUB_Y_FIRST + SUB_SPACING * (j % (len(subs) // 2 or 1))
        self.home = np.stack([self.x[0], self.y[0]], axis=1)
        self.heading[0] = np.where(cast.team == 1, -np.pi / 2, np.pi / 2)
        self.wander = rng.normal(0.0, WANDER_SD, (self.n_people, 2))
        self.play_centre = np.asarray(centre, np.float64)[:2].copy()

    def substitute(self, off: int, on: int) -> None:
        """Player ``on`` comes on for ``off``: ``off`` leaves play at once and walks to
        the warm-up spot ``on`` leaves; ``on`` takes ``off``'s formation slot, runs onto
        the pitch and plays from the moment he is on it."""
        cast = self.cast
        cast.playing[off] = cast.active[off] = False
        cast.slot[on] = cast.slot[off]
        self.home[off] = self.home[on]
        self.standing.pop(off, None)
        self.entering.add(on)

    def _come_on(self, p: np.ndarray) -> None:
        """Substitutes on their way who are now inside the pitch start to play."""
        cast = self.cast
        for i in sorted(self.entering):
            if INSET <= p[i, 0] <= WIDTH - INSET and Y_MIN + INSET <= p[i, 1] <= Y_MAX - INSET:
                cast.playing[i] = cast.active[i] = True
                self.entering.discard(i)

    def bench(self) -> np.ndarray:
        """Players beside the pitch: not playing, not on their way on."""
        out = (self.cast.team >= 0) & ~self.cast.playing
        out[list(self.entering)] = False
        return np.flatnonzero(out)

    # -------------------------------------------------------------- queries

    def position(self, k: int, i: int) -> np.ndarray:
        """Body position (m) of person ``i`` at knot ``k``."""
        return np.array([self.x[k, i], self.y[k, i]])

    def velocity(self, k: int, i: int) -> np.ndarray:
        """Body velocity (m/s) of person ``i`` at knot ``k``."""
        return np.array([self.vx[k, i], self.vy[k, i]])

    def players(self, exclude: tuple[int, ...] = (), team: int | None = None,
                outfield: bool = False) -> np.ndarray:
        """Person indices of the players on the pitch, of ``team`` if given, without
        goalkeepers if ``outfield``, and without those in ``exclude`` (-1 is ignored)."""
        ok = self.cast.playing.copy()
        if team is not None:
            ok &= self.cast.team == team
        if outfield:
            ok &= ~self.cast.goalkeeper
        for e in exclude:
            if e >= 0:
                ok[e] = False
        return np.flatnonzero(ok)

    def nearest(self, point: np.ndarray, team: int, k: int = 0) -> int:
        """The outfield player of ``team`` nearest to ``point`` at knot ``k``."""
        cast = self.cast
        ok = cast.playing & (cast.team == team) & ~cast.goalkeeper
        d = np.hypot(self.x[k] - point[0], self.y[k] - point[1])
        d[~ok] = np.inf
        return int(np.argmin(d))

    def evaluate(self, person: np.ndarray, t_ms: np.ndarray):
        """Body position, velocity, heading and turn rate of ``person`` at ``t_ms``, on
        the cubic Hermite curves through the knots: ``x, vx, y, vy, heading, turn_rate``."""
        t = np.asarray(t_ms, np.float64)
        k = np.clip((t // KNOT_MS).astype(np.int64), 0, self.n_knots - 2)
        u = (t - k * KNOT_MS) / KNOT_MS
        u2, u3 = u * u, u * u * u
        h00, h10, h01, h11 = 2 * u3 - 3 * u2 + 1, u3 - 2 * u2 + u, -2 * u3 + 3 * u2, u3 - u2
        d00, d10 = (6 * u2 - 6 * u) / KNOT_S, 3 * u2 - 4 * u + 1
        d01, d11 = (-6 * u2 + 6 * u) / KNOT_S, 3 * u2 - 2 * u
        out = []
        for val, der in ((self.x, self.vx), (self.y, self.vy), (self.heading, self.turn_rate)):
            a0, a1 = val[k, person], val[k + 1, person]
            b0, b1 = der[k, person], der[k + 1, person]
            out.append(h00 * a0 + h10 * KNOT_S * b0 + h01 * a1 + h11 * KNOT_S * b1)
            out.append(d00 * a0 + d10 * b0 + d01 * a1 + d11 * b1)
        return out

    # -------------------------------------------------------------- steering

    def formation(self, ball: np.ndarray, team_on_ball: int, kickoff: bool = False):
        """Everyone's formation spot (m) for the ball at ``ball``: the slots shifted with
        the ball, the team on it higher up; goalkeepers between their posts, the referee
        to the side of the ball."""
        cast = self.cast
        t = np.clip(cast.team, 0, 1)
        att = ATTACK[t]
        ball_depth = np.where(att > 0, (ball[1] - Y_MIN) / LENGTH, (Y_MAX - ball[1]) / LENGTH)
        depth = cast.slot[:, 1] + FOLLOW_DEPTH * (ball_depth - 0.5)
        depth += np.where(cast.team == team_on_ball, IN_POSSESSION_DEPTH,
                          OUT_OF_POSSESSION_DEPTH)
        depth = np.clip(depth, DEPTH_MIN, KICKOFF_DEPTH_MAX if kickoff else DEPTH_MAX)
        across = cast.slot[:, 0] + FOLLOW_ACROSS * (ball[0] / WIDTH - 0.5)
        x = across * WIDTH
        y = np.where(att > 0, Y_MIN + depth * LENGTH, Y_MAX - depth * LENGTH)
        post0 = np.array([GOAL_X[1][0], GOAL_X[0][0]])[t]
        post1 = np.array([GOAL_X[1][1], GOAL_X[0][1]])[t]
        keeper_x = np.clip(WIDTH / 2 + KEEPER_FOLLOW_ACROSS * (ball[0] - WIDTH / 2),
                           post0 + KEEPER_POST_MARGIN, post1 - KEEPER_POST_MARGIN)
        keeper_depth = KEEPER_DEPTH + KEEPER_FOLLOW_DEPTH * ball_depth
        keeper_y = np.where(att > 0, Y_MIN + keeper_depth * LENGTH,
                            Y_MAX - keeper_depth * LENGTH)
        x = np.where(cast.goalkeeper, keeper_x, x)
        y = np.where(cast.goalkeeper, keeper_y, y)
        out = np.stack([x, y], axis=1)
        # The referee keeps to the side of the ball, towards the centre line of x.
        side = -1.0 if ball[0] > WIDTH / 2 else 1.0
        out[cast.referee] = ball + np.array([REFEREE_ACROSS * side, REFEREE_ALONG])
        return out

    def step(self, k: int, rng: np.random.Generator, ball: np.ndarray, carrier: int,
             team_on_ball: int, spell: Spell | None) -> None:
        """Compute knot ``k + 1`` of every person from knot ``k``, with the ball at
        ``ball`` (m) and carried by ``carrier`` in ``spell`` (-1 and None if nobody)."""
        cast = self.cast
        # The team shape follows the play, not every touch: the ball smoothed; the
        # goalkeepers and the referee follow the ball itself.
        self.play_centre += (ball - self.play_centre) * (KNOT_S / FOLLOW_TIME)
        target = self.formation(self.play_centre, team_on_ball)
        watch = cast.goalkeeper.copy()
        watch[cast.referee] = True
        target[watch] = self.formation(ball, team_on_ball)[watch]
        # Ornstein-Uhlenbeck wandering around the formation slots.
        self.wander += -self.wander * (KNOT_S / WANDER_TIME) + rng.normal(
            0.0, WANDER_SD * math.sqrt(2 * KNOT_S / WANDER_TIME), (self.n_people, 2))
        target += np.where(cast.goalkeeper[:, None], KEEPER_WANDER, 1.0) * self.wander
        cap = np.full(self.n_people, RUN_SPEED)
        acc = np.full(self.n_people, RUN_ACC)
        p = np.stack([self.x[k], self.y[k]], axis=1)
        v = np.stack([self.vx[k], self.vy[k]], axis=1)
        # Everybody but the one playing the ball keeps clear of it.
        away = target - ball
        dist = np.linalg.norm(away, axis=1)
        close = dist < KEEP_AWAY
        target[close] = ball + unit(away[close] + 1e-3) * KEEP_AWAY
        retreat = self._restart_distance(p, target)
        if carrier >= 0:
            assert spell is not None, "a carrier has a spell"
            presser = self.nearest(ball, 1 - cast.team[carrier], k)
            own_goal = np.array([WIDTH / 2, Y_MIN if cast.team[presser] == 0 else Y_MAX])
            target[presser] = ball + PRESS_DISTANCE * unit(own_goal - ball)
            cap[presser] = PRESS_SPEED
            direction = self.dribble_direction(k, carrier, spell.bias)
            target[carrier] = p[carrier] + direction * DRIBBLE_LOOKAHEAD
            cap[carrier] = spell.speed if (k + 1) * KNOT_MS >= spell.t_cycle else RECEIVING_SPEED
            acc[carrier] = CARRIER_ACC
        self._start_runs(k, rng, p, team_on_ball, carrier)
        for i, (end, _) in self.runs.items():
            target[i], cap[i], acc[i] = end, SPRINT_SPEED, SPRINT_ACC
        for i, (q, _) in self.standing.items():
            target[i] = q
        bench = self.bench()
        if len(bench):
            target[bench] = self.home[bench] + SUB_WANDER * self.wander[bench]
            cap[bench] = SUB_SPEED
        lo = np.array([INSET + TARGET_INSET, Y_MIN + INSET + TARGET_INSET])
        hi = np.array([WIDTH - INSET - TARGET_INSET, Y_MAX - INSET - TARGET_INSET])
        target[cast.active] = np.clip(target[cast.active], lo, hi)
        if carrier >= 0:  # his ball is ahead of him: he keeps further in
            target[carrier] = np.clip(target[carrier], lo + CARRIER_INSET, hi - CARRIER_INSET)
        to_target = target - p
        dist = np.linalg.norm(to_target, axis=1)
        # Beyond SLACK a player goes at a speed that grows with the distance; runners,
        # the presser, the carrier and who must clear the ball or a restart's spot go
        # without slack.
        eager = retreat | (np.linalg.norm(p - ball, axis=1) < KEEP_AWAY)
        eager[list(self.runs)] = True
        if carrier >= 0:
            eager[carrier] = eager[presser] = True
        speed = np.where(eager, dist / EAGER_TIME, np.maximum(dist - SLACK, 0.0) / APPROACH_TIME)
        v_desired = clip_norm(unit(to_target) * speed[:, None], cap)
        # Nobody but the carrier runs through the ball: near it, a player's way towards
        # it is turned aside (a restart's taker walks up to it on his own plan).
        out = unit(p - ball)
        inward = np.minimum((v_desired * out).sum(axis=1), 0.0)
        turn = np.linalg.norm(p - ball, axis=1) < KEEP_AWAY
        if carrier >= 0:
            turn[carrier] = False
        turn[list(self.standing)] = False
        v_desired[turn] -= inward[turn, None] * out[turn]
        v_new = v + clip_norm(v_desired - v, acc * KNOT_S)
        v_new = clip_norm(v_new, V_MAX)
        p_new = p + 0.5 * (v + v_new) * KNOT_S
        for i, plan in enumerate(self.plans):
            if plan is not None and plan.k0 <= k + 1 <= plan.k1:
                p_new[i], v_new[i] = plan.at(k + 1)
            if plan is not None and k + 1 >= plan.k1:
                self.plans[i] = None
        # Bodies stay inside the pitch (a safety net: the targets are further in).
        clipped = np.clip(p_new, (INSET, Y_MIN + INSET), (WIDTH - INSET, Y_MAX - INSET))
        fix = cast.active[:, None] & (clipped != p_new)
        p_new[fix] = clipped[fix]
        v_new[fix] = 0.0
        self.x[k + 1], self.y[k + 1] = p_new[:, 0], p_new[:, 1]
        self.vx[k + 1], self.vy[k + 1] = v_new[:, 0], v_new[:, 1]
        self._turn(k, ball, p_new, v_new, carrier)
        self._come_on(p_new)

    def _restart_distance(self, p: np.ndarray, target: np.ndarray) -> np.ndarray:
        """While a restart's taker waits at the ball, his opponents keep ``RESTART_DISTANCE``
        from his spot, as the laws require: a target nearer is moved out to that distance
        on the player's own side of the spot (in ``target``, in place), so that nobody
        runs through the ball to reach it. Returns who is still nearer, to hurry away."""
        cast = self.cast
        retreat = np.zeros(self.n_people, bool)
        for taker, (q, _) in self.standing.items():
            opp = cast.playing & (cast.team == 1 - cast.team[taker])
            near = opp & (np.linalg.norm(target - q, axis=1) < RESTART_DISTANCE)
            target[near] = q + unit(p[near] - q + 1e-3) * RESTART_DISTANCE
            retreat |= opp & (np.linalg.norm(p - q, axis=1) < RESTART_DISTANCE)
        return retreat

    def _start_runs(self, k: int, rng: np.random.Generator, p: np.ndarray, team_on_ball: int,
                    carrier: int) -> None:
        """End the runs that are over and start new ones: now and then an outfield player
        sprints 15-25 m, forward into space when his team has the ball, back towards his
        own goal when it has not (a Poisson process of ``SPRINT_RATE`` per minute)."""
        cast = self.cast
        for i, (end, last) in list(self.runs.items()):
            if k >= last or float(np.linalg.norm(end - p[i])) < SLACK or i == carrier \
                    or not cast.playing[i]:
                del self.runs[i]
        free = cast.playing & ~cast.goalkeeper
        free[list(self.runs) + list(self.standing)] = False
        if carrier >= 0:
            free[carrier] = False
        start = free & (rng.random(self.n_people) < SPRINT_RATE * KNOT_S / 60.0)
        for i in np.flatnonzero(start).tolist():
            team = int(cast.team[i])
            sign = ATTACK[team] if team == team_on_ball else -ATTACK[team]
            angle = rng.uniform(-0.6, 0.6)
            direction = np.array([math.sin(angle), sign * math.cos(angle)])
            end = p[i] + rng.uniform(*SPRINT_LENGTH) * direction
            end = np.clip(end, (INSET + TARGET_INSET, Y_MIN + INSET + TARGET_INSET),
                          (WIDTH - INSET - TARGET_INSET, Y_MAX - INSET - TARGET_INSET))
            self.runs[i] = (end, k + round(SPRINT_MAX_S / KNOT_S))

    def _turn(self, k: int, ball: np.ndarray, p_new: np.ndarray, v_new: np.ndarray,
              carrier: int) -> None:
        """Heading and turn rate at knot ``k + 1``: along the motion, or towards the ball
        when (nearly) standing, with bounded turn rate and angular acceleration."""
        heading, turn_rate = self.heading[k], self.turn_rate[k]
        speed = np.linalg.norm(v_new, axis=1)
        to_ball = np.arctan2(ball[1] - p_new[:, 1], ball[0] - p_new[:, 0])
        goal = np.where(speed > FACE_MOTION_SPEED, np.arctan2(v_new[:, 1], v_new[:, 0]),
                        to_ball)
        for i, (_, facing) in self.standing.items():
            goal[i] = facing
        rate_max = np.full(self.n_people, TURN_RATE_MAX)
        turn_acc = np.full(self.n_people, TURN_ACC_MAX)
        if carrier >= 0:
            goal[carrier] = math.atan2(v_new[carrier, 1], v_new[carrier, 0]) \
                if speed[carrier] > CARRIER_FACE_SPEED else heading[carrier]
            rate_max[carrier], turn_acc[carrier] = CARRIER_TURN_RATE_MAX, CARRIER_TURN_ACC_MAX
        rate_desired = np.clip(wrap(goal - heading) / TURN_TIME, -rate_max, rate_max)
        rate_new = turn_rate + np.clip(rate_desired - turn_rate, -turn_acc * KNOT_S,
                                       turn_acc * KNOT_S)
        self.turn_rate[k + 1] = rate_new
        self.heading[k + 1] = heading + 0.5 * (turn_rate + rate_new) * KNOT_S

    def dribble_direction(self, k: int, carrier: int, bias: float) -> np.ndarray:
        """Where the carrier heads at knot ``k``: towards the goal he attacks, turned by
        his ``bias`` (rad), away from near opponents and from the lines."""
        cast = self.cast
        p = self.position(k, carrier)
        t = cast.team[carrier]
        goal = np.array([WIDTH / 2, GOAL_Y[t]])
        d = rotate(unit(goal - p), bias)
        opp = cast.playing & (cast.team == 1 - t)
        rel = np.stack([p[0] - self.x[k, opp], p[1] - self.y[k, opp]], axis=1)
        dist = np.linalg.norm(rel, axis=1)
        near = dist < AVOID_RADIUS
        if near.any():
            d = d + (unit(rel[near]) * ((AVOID_RADIUS - dist[near]) / AVOID_RADIUS)[:, None]
                     ).sum(axis=0)
        edge = EDGE_AVOID
        d = d + np.array([max(0.0, edge - p[0]) - max(0.0, p[0] - (WIDTH - edge)),
                          max(0.0, Y_MIN + edge - p[1]) - max(0.0, p[1] - (Y_MAX - edge))]) / edge
        return unit(d)
