"""The match script: the state of play, knot by knot, and what happens to the ball.

The ball is always in one of three modes: ``"held"`` (carried by a player in a
:class:`~.carry.Spell`), ``"free"`` (flying or rolling after a kick, its end already
known: a player meets it, or it leaves the pitch) or ``"dead"`` (out of play until a
restart). :class:`Script` steps the people one knot at a time and, in between, plays
the events that fall into that 100 ms: a dribble touch (and the carrier's choice to
pass, shoot or clear), a player meeting the free ball, the ball leaving the pitch, a
restart. It keeps the ball's centre on a 1 ms grid and notes the ground truth.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from specula.soccer.geometry import KICK_ACCELERATION
from specula.soccer.match import kicks
from specula.soccer.match.bodies import KNOT_MS, Bodies
from specula.soccer.match.carry import Spell, carried_ball, receive
from specula.soccer.match.meeting import Outcome, send_to_meet
from specula.soccer.match.physics import BALL_RADIUS, CENTRE, HORIZON_MS, Flight
from specula.soccer.match.profiles import Cast
from specula.soccer.match.restarts import TAKER_BEHIND, DeadBall, ball_out, carry_from
from specula.soccer.match.truth import DRIBBLE, PASS, RECEPTION, SHOT, GroundTruth, TruthLog

KICKOFF_MS = 1000  # the first kick-off is at least this far into the match, ms
KICKOFF_JITTER_MS = 500  # ... plus up to this much, drawn at random, ms
BALL_AHEAD = 0.3  # the players see a carried ball this far in front of the carrier, m
GOAL_KICK_LONG = 0.5  # chance that a goal kick is kicked long rather than passed
#: When the ball goes out, a team with substitutes left makes one with this chance
#: (a team picked at random), up to ``SUBSTITUTIONS`` per team, as the laws allow.
SUBSTITUTION_CHANCE = 0.35
SUBSTITUTIONS = 3
#: Most events handled between two knots (a guard; a few happen at most).
MAX_EVENTS_PER_KNOT = 50


class Script:
    """The event-driven match script on the 100 ms knot grid, with the ball on 1 ms.

    Build it, call :meth:`run`, then read ``bodies`` and ``ball`` (the ball's centre
    on the 1 ms grid, m) and :meth:`truth`.
    """

    def __init__(self, cast: Cast, seconds: float, rng: np.random.Generator) -> None:
        self.cast = cast
        self.rng = rng
        self.seconds = seconds
        n_knots = math.ceil(seconds * 1000 / KNOT_MS) + 3
        self.end_ms = (n_knots - 1) * KNOT_MS
        self.n_ms = self.end_ms + HORIZON_MS + 2
        self.bodies = Bodies(cast, n_knots)
        self.ball = np.zeros((self.n_ms, 3))  # the ball's centre on the 1 ms grid, m
        self.log = TruthLog(cast.team)
        self.spells: list[Spell] = []
        self.spell: Spell | None = None
        self.next_touch = -1
        self.flight: Flight | None = None
        self.outcome: Outcome | None = None
        self.dead: DeadBall | None = None
        self.mode = "dead"
        self.open_shot: list[int] | None = None  # a shot whose ball is still free
        self.pending_out: list[float] | None = None  # an out whose restart is to come
        # substitutions draw from a stream of their own: matches without substitutes
        # (the debs2013 profile) are the same with or without them
        self.sub_rng = rng.spawn(1)[0]
        self._kick_off()

    def _kick_off(self) -> None:
        """Everyone lined up; the ball on the centre spot, team A's most advanced
        outfield player behind it to kick off about a second in."""
        rng, bodies = self.rng, self.bodies
        ball0 = CENTRE.copy()
        bodies.line_up(rng, ball0)
        taker = bodies.nearest(ball0, team=0)
        q = ball0 - np.array([0.0, TAKER_BEHIND])
        bodies.x[0, taker], bodies.y[0, taker] = q
        self.ball[:, :] = (ball0[0], ball0[1], BALL_RADIUS)
        restart = KICKOFF_MS + int(rng.integers(0, KICKOFF_JITTER_MS))
        self.dead = DeadBall(restart, ball0, taker, "kick-off")
        bodies.standing[taker] = (q, math.pi / 2)

    # -------------------------------------------------------------- main loop

    def run(self) -> None:
        """Play the whole match."""
        for k in range(self.bodies.n_knots - 1):
            self._step(k)
            lo, hi = k * KNOT_MS, (k + 1) * KNOT_MS
            self._events(k, lo, hi)
        self._finish()

    def _step(self, k: int) -> None:
        """Compute knot ``k + 1`` of every person."""
        ball = self._ball_at_knot(k)
        carrier = self._spell().carrier if self.mode == "held" else -1
        last_kicker = self.log.last_kicker
        team_on_ball = self.cast.team[carrier] if carrier >= 0 else \
            (self.cast.team[last_kicker] if last_kicker >= 0 else -1)
        spell = self.spell if carrier >= 0 else None
        self.bodies.step(k, self.rng, ball, carrier, team_on_ball, spell)

    def _events(self, k: int, lo: int, hi: int) -> None:
        """Handle everything the ball does in ``(lo, hi]`` ms; knot ``k + 1`` is known."""
        for _ in range(MAX_EVENTS_PER_KNOT):
            if self.mode == "held" and lo < self.next_touch <= hi:
                self._touch(k + 1, self.next_touch)
            elif self.mode == "free" and self.outcome is not None and \
                    self.outcome.kind == "meet" and self.outcome.k == k + 1:
                self._meet(k + 1)
            elif self.mode == "free" and self.outcome is not None and \
                    self.outcome.kind == "out" and lo < self._flight().end <= hi:
                self._out(k + 1)
            elif self.mode == "dead" and lo < self._dead().restart <= hi:
                self._restart(k + 1)
            else:
                return

    def _ball_at_knot(self, k: int) -> np.ndarray:
        """Where (x, y) the ball is at knot ``k``, as the players see it."""
        if self.mode == "held":
            carrier = self._spell().carrier
            heading = self.bodies.heading[k, carrier]
            h = np.array([math.cos(heading), math.sin(heading)])
            return self.bodies.position(k, carrier) + BALL_AHEAD * h
        return self.ball[min(k * KNOT_MS, self.n_ms - 1), :2].copy()

    # what each mode holds: "held" a spell, "free" a flight and its outcome, "dead" a
    # dead ball

    def _spell(self) -> Spell:
        assert self.spell is not None, self.mode
        return self.spell

    def _flight(self) -> Flight:
        assert self.flight is not None, self.mode
        return self.flight

    def _outcome(self) -> Outcome:
        assert self.outcome is not None, self.mode
        return self.outcome

    def _dead(self) -> DeadBall:
        assert self.dead is not None, self.mode
        return self.dead

    # -------------------------------------------------------------- the ball carried

    def _held_state(self, t: int):
        """Position and velocity (m, m/s) of the carried ball at ms ``t``."""
        pos, vel = carried_ball(self.bodies, self._spell(), np.array([t]))
        return pos[0], vel[0]

    def _touch(self, k_s: int, t: int) -> None:
        """The carrier's touch at ms ``t``: a dribble touch, or the kick he chooses."""
        spell = self._spell()
        carrier = spell.carrier
        age = t - spell.t_cycle
        action = "touch"
        if age >= spell.min_dribble:
            action = kicks.choose_action(self.bodies, self.rng, k_s, carrier,
                                         age >= spell.max_dribble)
        kick = None
        if action == "shot":
            kick = kicks.shot(self.bodies, self.rng, k_s, t, carrier, *self._held_state(t))
        elif action == "clear":
            kick = kicks.clearance(self.bodies, self.rng, k_s, t, carrier, *self._held_state(t))
        elif action == "pass":
            kick = kicks.pass_kick(self.bodies, self.rng, k_s, t, carrier, False,
                                   *self._held_state(t))
        if kick is not None:
            self._play(kick, k_s)
        else:
            self.log.kick(carrier, t, spell.touch, DRIBBLE)
            self.next_touch = t + spell.period

    def _meet(self, k: int) -> None:
        """The ball reaches the planned player at knot ``k``: he deflects it (a block or
        a save) or receives it and starts a spell."""
        out, flight = self._outcome(), self._flight()
        t = k * KNOT_MS
        self.log.flight_bounces(flight, t)
        person = out.person
        self.open_shot = None
        if out.block:
            self._play(kicks.deflection(self.bodies, self.rng, k, person, t, flight), k)
            return
        rel = t - flight.i0
        spell = receive(self.bodies, self.rng, person, t, flight.pos[rel], flight.vel[rel])
        self.spell = spell
        self.spells.append(spell)
        self.mode = "held"
        self.next_touch = spell.t_cycle
        self.flight = self.outcome = None

    # -------------------------------------------------------------- kicks

    def _play(self, kick: kicks.Kick, k_s: int) -> None:
        """Note ``kick`` in the truth and set the ball on its flight."""
        log = self.log
        ts = log.kick(kick.kicker, kick.t, kick.pulse, kick.kind)
        team = int(self.cast.team[kick.kicker])
        out = kick.outcome
        shot = None
        if kick.kind == PASS:
            got = out.person
            ok = self.cast.team[got] == team
            log.passes.append([ts, 2 * out.k * KNOT_MS, kick.kicker, got if ok else kick.target,
                               team, int(ok), -1 if ok else got])
        elif kick.kind == SHOT:
            blocker = out.person if out.block else -1
            shot = [ts, kick.kicker, team, team, kick.on_target, int(out.block), blocker, 0,
                    kick.ts_end, kick.ts_line]
            log.shots.append(shot)
        self._launch(kick.flight, out, k_s)
        if shot is not None and not out.block:
            self.open_shot = shot

    def _launch(self, flight: Flight, outcome: Outcome, k_s: int) -> None:
        """Make ``flight`` the ball's path up to its outcome and plan the meeting."""
        if self.spell is not None and self.mode == "held":
            self.spell.end = flight.i0
            self.spell = None
        self.mode = "free"
        self.flight, self.outcome = flight, outcome
        self.bodies.standing.clear()
        n = min(len(flight.pos), self.n_ms - flight.i0)
        self.ball[flight.i0:flight.i0 + n] = flight.pos[:n]
        self.ball[flight.i0 + n:] = flight.pos[n - 1]
        if outcome.kind == "meet":
            send_to_meet(self.bodies, k_s, outcome)

    # -------------------------------------------------------------- the dead ball

    def _out(self, k: int) -> None:
        """The ball's centre left the pitch: record it and schedule the restart."""
        flight = self._flight()
        # impacts up to where the dead ball is picked up: on the ground, and off the boards
        self.log.flight_bounces(flight, flight.i0 + carry_from(flight))
        record, dead = ball_out(self.bodies, self.rng, flight, k, self.log.last_kicker,
                                self.ball)
        goal = record[5]
        if self.open_shot is not None and goal == self.open_shot[3]:
            self.open_shot[7] = 1
        self.open_shot = None
        self.log.outs.append(record)
        self.pending_out = record
        self.mode = "dead"
        self.dead = dead
        self.flight = self.outcome = None
        self._substitution(flight.end)

    def _substitution(self, t: int) -> None:
        """While the ball is out (ms ``t``), perhaps a substitution: an outfield player on
        the pitch (not the restart's taker) goes off for a substitute of his team."""
        cast, rng = self.cast, self.sub_rng
        bench = [int(i) for i in self.bodies.bench()]
        made = [row[1] for row in self.log.substitutions]
        teams = [t_ for t_ in (0, 1) if made.count(t_) < SUBSTITUTIONS
                 and any(cast.team[i] == t_ for i in bench)]
        if not teams or rng.random() >= SUBSTITUTION_CHANCE:
            return
        team = int(rng.choice(teams))
        off = [int(i) for i in self.bodies.players(team=team, outfield=True,
                                                   exclude=(self._dead().taker,))]
        on = [i for i in bench if cast.team[i] == team]
        if not off:
            return
        off_id, on_id = int(rng.choice(off)), int(rng.choice(on))
        self.bodies.substitute(off_id, on_id)
        self.log.substitutions.append((t, team, off_id, on_id))

    def _restart(self, k: int) -> None:
        """The restart kick: a pass, or half the goal kicks kicked long."""
        dead, rng = self._dead(), self.rng
        t = dead.restart
        ball = np.array([dead.spot[0], dead.spot[1], BALL_RADIUS])
        n_kicks = len(self.log.kicks)
        kick: kicks.Kick | None
        if dead.kind == "goal kick" and rng.random() < GOAL_KICK_LONG:
            kick = kicks.goal_kick(self.bodies, rng, k, t, dead.taker, ball)
        else:
            kick = kicks.pass_kick(self.bodies, rng, k, t, dead.taker, True, ball, np.zeros(3))
        if kick is None:  # no pass open: the ball stays dead and the taker tries again
            dead.restart = t + KNOT_MS
            return
        self._play(kick, k)
        if self.pending_out is not None and len(self.log.kicks) > n_kicks:
            self.pending_out[6] = self.log.kicks[-1][0] / 2
        self.pending_out = None
        self.dead = None

    # -------------------------------------------------------------- finishing

    def _finish(self) -> None:
        """Fill the carried-ball parts of the grid and close the open flight."""
        if self.mode == "free" and self.flight is not None:
            self.log.flight_bounces(self.flight, self.end_ms)
        limit = self.end_ms
        for spell in self.spells:
            end = spell.end if spell.end >= 0 else limit
            end = min(end, limit)
            if end <= spell.t_receive:
                continue
            pos, _ = carried_ball(self.bodies, spell, np.arange(spell.t_receive, end))
            self.ball[spell.t_receive:end] = pos
            if spell.end < 0:
                self.ball[end:] = pos[-1]
        for spell in self.spells:
            self.hard_reception(spell)

    def hard_reception(self, spell: Spell) -> None:
        """A reception whose ball (on the 1 ms grid) accelerates beyond a kick's 55 m/s^2
        somewhere (the planned bound holds relative to the receiver as planned, not as he
        then turns) is a kick of kind ``RECEPTION`` at its strongest ms."""
        lo, hi = max(spell.t_receive, 1), min(spell.t_cycle, self.end_ms)
        if hi - lo < 1:
            return
        seg = self.ball[lo - 1:hi + 2]
        acc = np.linalg.norm(seg[2:] - 2 * seg[1:-1] + seg[:-2], axis=1) / 1e-6
        j = int(np.argmax(acc))
        if acc[j] > KICK_ACCELERATION / 1e6:
            self.log.kicks.append((2 * (lo + j), spell.carrier,
                                   int(self.cast.team[spell.carrier]), RECEPTION))

    def truth(self, start_ps: int, duration_ps: int) -> GroundTruth:
        """The ground truth in sensor ps, for a stream of ``duration_ps`` from
        ``start_ps``."""
        players = tuple(np.flatnonzero(self.cast.team >= 0).tolist())
        return dataclasses.replace(self.log.ground_truth(start_ps, duration_ps),
                                   bodies=self.bodies, players=players,
                                   start_ps=start_ps, duration_ps=duration_ps)
