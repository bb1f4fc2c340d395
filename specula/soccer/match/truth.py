"""The ground truth of a simulated match: its record types, and the log that keeps it.

The exact definitions of the records are in the package docs. During the simulation
the script notes kicks, passes and shots in half milliseconds (a kick's time is the
centre of its pulse, which lies on a whole or half ms), outs in (fractional) ms and
bounces on the 1 ms grid; :meth:`TruthLog.ground_truth` turns them into the record
arrays, in sensor picoseconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from specula.events import fields_of
from specula.soccer.debs2013 import Metadata
from specula.soccer.match import aggregates
from specula.soccer.match.physics import Flight
from specula.soccer.types import PLAY_STOP_DTYPE, interruption_events

if TYPE_CHECKING:
    from specula.soccer.match.bodies import Bodies

#: Kick kinds of :data:`KICK_DTYPE`.
PASS, SHOT, DRIBBLE, CLEARANCE, RECEPTION = 0, 1, 2, 3, 4

KICK_DTYPE = np.dtype([("ts", "i8"), ("player", "i4"), ("team", "i1"), ("kind", "i1")])
"""Kicks: pulse centre (ps), kicker, his team, kind (0 pass, 1 shot, 2 dribble, 3 clear/out,
4 a reception hard enough to peak like a kick)."""

PASS_DTYPE = np.dtype([
    ("ts_kick", "i8"), ("ts_receive", "i8"), ("from_player", "i4"), ("to_player", "i4"),
    ("team", "i1"), ("successful", "i1"), ("interceptor", "i4"),
])
"""Passes: kick and receive times (ps), passer, receiver (or intended receiver), outcome."""

SHOT_DTYPE = np.dtype([
    ("ts", "i8"), ("player", "i4"), ("team", "i1"), ("goal", "i1"), ("on_target", "i1"),
    ("blocked", "i1"), ("blocker", "i4"), ("scored", "i1"), ("ts_end", "i8"),
    ("ts_line", "i8"),
])
"""Shots: kick time (ps), shooter, attacked goal index, outcome (see the package docs)."""

OUT_DTYPE = np.dtype([
    ("ts", "i8"), ("x", "i8"), ("y", "i8"), ("z", "i8"), ("line", "i1"), ("goal", "i1"),
    ("ts_restart", "i8"),
])
"""Ball out of play: time (ps), position (mm), line, goal scored into, restart time."""

SUBSTITUTION_DTYPE = np.dtype([("ts", "i8"), ("team", "i1"), ("off", "i4"), ("on", "i4")])
"""Substitutions: when (ps; the ball went out), the team, who went off and who came on
(he plays from when he is on the pitch)."""

#: The referee whistles play on this long before a restart kick (ps).
WHISTLE_PS = 500 * 10**9

BOUNCE_DTYPE = np.dtype([("ts", "i8"), ("x", "i8"), ("y", "i8")])
"""Impacts of the ball: its bounces on the ground in play and, out of play, until it is
picked up (off the ground and the boards): time (ps) and position (mm)."""


@dataclass(frozen=True, eq=False)
class GroundTruth:
    """What happened in a simulated match; see the package docs for the exact definitions.

    Attributes
    ----------
    kicks : numpy.ndarray
        :data:`KICK_DTYPE`, by time.
    passes : numpy.ndarray
        :data:`PASS_DTYPE`, by kick time.
    shots : numpy.ndarray
        :data:`SHOT_DTYPE`, by time.
    out_of_play : numpy.ndarray
        :data:`OUT_DTYPE`, by time.
    bounces : numpy.ndarray
        :data:`BOUNCE_DTYPE`, by time.
    substitutions : numpy.ndarray
        :data:`SUBSTITUTION_DTYPE`, by time.
    bodies : Bodies, optional
        The simulated bodies, which the DEBS 2013 aggregates below are computed from.
    players : tuple of int
        The players (person indices = player ids) the aggregates are computed for.
    start_ps, duration_ps : int
        The simulated interval.

    The DEBS 2013 aggregates (:mod:`specula.soccer.match.aggregates`, per second of the
    sensor clock) are computed on first use: ``running`` (query 1,
    :data:`~.aggregates.RUNNING_DTYPE`), ``possession`` (query 2,
    :data:`~.aggregates.POSSESSION_DTYPE`) and ``heat`` (query 3,
    :data:`~.aggregates.HEAT_DTYPE`).
    """

    kicks: np.ndarray
    passes: np.ndarray
    shots: np.ndarray
    out_of_play: np.ndarray
    bounces: np.ndarray
    substitutions: np.ndarray
    bodies: Bodies | None = None
    players: tuple[int, ...] = ()
    start_ps: int = 0
    duration_ps: int = 0

    def _bodies(self) -> Bodies:
        """The bodies the running and heat aggregates are computed from."""
        if self.bodies is None:
            raise ValueError("running and heat are computed from the simulated bodies; "
                             "this truth has none (GroundTruth(bodies=...))")
        return self.bodies

    @cached_property
    def running(self) -> np.ndarray:
        """Query 1 per second, from the bodies' speeds."""
        return aggregates.running_truth(self._bodies(), np.array(self.players), self.start_ps,
                                        self.duration_ps)

    @cached_property
    def heat(self) -> np.ndarray:
        """Query 3 per second, from the bodies' positions."""
        return aggregates.heat_truth(self._bodies(), np.array(self.players), self.start_ps,
                                     self.duration_ps)

    @cached_property
    def possession(self) -> np.ndarray:
        """Query 2 per second, from the kicks and the times the ball went out of play."""
        return aggregates.possession_truth(self.kicks, self.out_of_play)

    @property
    def interruptions(self) -> np.ndarray:
        """The referee's interruptions, :data:`~specula.soccer.types.PLAY_STOP_DTYPE`: each
        time the ball left
        the pitch, from that moment until the whistle :data:`WHISTLE_PS` before the
        restart kick (not before the ball went out); ``end_ts`` -1 when play had not
        restarted by the end of the simulated time."""
        outs = self.out_of_play
        rows = np.zeros(len(outs), PLAY_STOP_DTYPE)
        rows["begin_ts"] = outs["ts"]
        rows["end_ts"] = np.where(outs["ts_restart"] >= 0,
                                  np.maximum(outs["ts"], outs["ts_restart"] - WHISTLE_PS), -1)
        return rows


@dataclass(frozen=True)
class MatchProfile:
    """Who and what transmits in a simulated match.

    Attributes
    ----------
    name : str
        ``"debs2013"`` or ``"paper"``.
    ball_in_play : int
        Sensor id of the ball that is played; the other balls lie still beside the pitch.
    spare_balls : tuple of int
        Sensor ids of the balls beside the pitch (transmitting, at rest).
    on_pitch : tuple of int
        Player ids (metadata) of the players on the pitch at the kick-off.
    substitutes : tuple of int
        Player ids of substitutes warming up beside the pitch (outside the touch lines)
        at the kick-off; :attr:`GroundTruth.substitutions` says who came on later.
    ball_hz, wearer_hz : float
        Nominal sampling rates; each transmitter's own rate is within 5 % of these.
    transmitters : int
        Number of transmitters (balls, players' and referee's sensors).
    events_per_second : float
        Nominal rate of the whole stream (sum of the nominal rates).
    """

    name: str
    ball_in_play: int
    spare_balls: tuple[int, ...]
    on_pitch: tuple[int, ...]
    substitutes: tuple[int, ...]
    ball_hz: float
    wearer_hz: float
    transmitters: int
    events_per_second: float


@dataclass(frozen=True, eq=False)
class Match:
    """A simulated match: its position stream, sensors, ground truth and profile.

    Attributes
    ----------
    events : numpy.ndarray
        Readings of all transmitters, dtype ``soccer_registry().dtype(["ball", "player",
        "referee"])``, sorted by ``ts``; ``seq`` is the row index, ``ats`` = ``ts``,
        ``producer`` 0; ``key`` is the sensor id; ``player``, ``team``, ``limb`` as in
        the metadata for wearers (referee: player and team -1) and 0 for balls.
    metadata : Metadata
        The sensors' roles (:meth:`Metadata.sensor_roles`).
    truth : GroundTruth
        What was simulated.
    profile : MatchProfile
        Which transmitters, at which rates.
    start_ps, end_ps : int
        The simulated interval ``[start_ps, end_ps)`` of sensor time.
    """

    events: np.ndarray
    metadata: Metadata
    truth: GroundTruth
    profile: MatchProfile
    start_ps: int
    end_ps: int

    def referee_events(self) -> np.ndarray:
        """The truth's interruptions as raw ``interruption_begin``/``interruption_end``
        events of the readings' dtype (key 0, numbered after the readings)."""
        return interruption_events(self.truth.interruptions, self.events.dtype,
                                   first_seq=len(self.events))

    def stream(self) -> np.ndarray:
        """The readings and the referee's interruptions, in ``ts`` order: what a live
        game sends."""
        both = np.concatenate([self.events, self.referee_events()])
        return both[np.argsort(both["ts"], kind="stable")]


#: Picoseconds per half millisecond, the unit of the log's kick, pass and shot times.
_PS_PER_HALF_MS = 500_000_000


class TruthLog:
    """What the script has done so far, kept as plain rows until the match is over.

    Rows: ``kicks`` (half-ms time, kicker, team, kind), ``passes`` and ``shots`` (the
    fields of :data:`PASS_DTYPE` and :data:`SHOT_DTYPE`, times in half ms, -1 for
    none), ``outs`` (the fields of :data:`OUT_DTYPE`, times in ms, position in m) and
    ``bounces`` (ms, x and y in m). Rows of shots and outs stay open to later updates
    (a goal, the restart time) as the play goes on.
    """

    def __init__(self, team: np.ndarray) -> None:
        self.team = team  # team of each person, as in the cast
        self.kicks: list[tuple[int, int, int, int]] = []
        self.passes: list[list[int]] = []
        self.shots: list[list[int]] = []
        self.outs: list[list[float]] = []
        self.bounces: list[tuple[int, float, float]] = []
        self.substitutions: list[tuple[int, int, int, int]] = []  # ms, team, off, on

    @property
    def last_kicker(self) -> int:
        """The person who kicked the ball last, or -1 before the first kick."""
        return self.kicks[-1][1] if self.kicks else -1

    def kick(self, player: int, t0: int, pulse: int, kind: int) -> int:
        """Note a kick whose pulse starts at ms ``t0`` and lasts ``pulse`` ms; return the
        time of its centre in half ms."""
        ts = 2 * t0 + pulse  # in half ms; the pulse's centre
        self.kicks.append((ts, player, int(self.team[player]), kind))
        return ts

    def flight_bounces(self, flight: Flight, end: int) -> None:
        """Note the ground impacts of ``flight`` up to ms ``end`` (inclusive)."""
        n = max(0, min(end - flight.i0 + 1, len(flight.pos)))
        for j in np.flatnonzero(flight.bounce[:n]).tolist():
            self.bounces.append((flight.i0 + j, flight.pos[j, 0], flight.pos[j, 1]))

    def ground_truth(self, start_ps: int, duration_ps: int) -> GroundTruth:
        """The records in sensor ps, of what happened in ``[start_ps, start_ps +
        duration_ps)``."""
        half = _PS_PER_HALF_MS

        def ps(v):
            return np.where(np.asarray(v) >= 0, start_ps + np.asarray(v, np.int64) * half, -1)

        end = start_ps + duration_ps
        kicks = np.array(self.kicks, np.int64).reshape(-1, 4)
        kicks = kicks[np.argsort(kicks[:, 0], kind="stable")]  # receptions come in last
        k = np.zeros(len(kicks), KICK_DTYPE)
        k["ts"] = ps(kicks[:, 0])
        k["player"], k["team"], k["kind"] = kicks[:, 1], kicks[:, 2], kicks[:, 3]
        k = k[k["ts"] < end]

        rows: np.ndarray = np.array(self.passes, np.int64).reshape(-1, 7)
        p = np.zeros(len(rows), PASS_DTYPE)
        for j, name in enumerate(fields_of(PASS_DTYPE)):
            p[name] = ps(rows[:, j]) if name.startswith("ts") else rows[:, j]
        p = p[p["ts_kick"] < end]

        rows = np.array(self.shots, np.int64).reshape(-1, len(fields_of(SHOT_DTYPE)))
        s = np.zeros(len(rows), SHOT_DTYPE)
        for j, name in enumerate(fields_of(SHOT_DTYPE)):
            s[name] = ps(rows[:, j]) if name.startswith("ts") else rows[:, j]
        s = s[s["ts"] < end]

        rows = np.array(self.outs, np.float64).reshape(-1, 7)
        o = np.zeros(len(rows), OUT_DTYPE)
        o["ts"] = start_ps + np.round(rows[:, 0] * 1e9).astype(np.int64)
        o["x"], o["y"], o["z"] = (np.round(rows[:, j] * 1000) for j in (1, 2, 3))
        o["line"], o["goal"] = rows[:, 4], rows[:, 5]
        o["ts_restart"] = np.where(rows[:, 6] >= 0,
                                   start_ps + np.round(rows[:, 6] * 1e9).astype(np.int64), -1)
        o = o[o["ts"] < end]

        rows = np.array(self.bounces, np.float64).reshape(-1, 3)
        b = np.zeros(len(rows), BOUNCE_DTYPE)
        b["ts"] = ps(2 * rows[:, 0].astype(np.int64))
        b["x"], b["y"] = np.round(rows[:, 1] * 1000), np.round(rows[:, 2] * 1000)
        b = b[b["ts"] < end]
        b = b[np.argsort(b["ts"], kind="stable")]

        rows = np.array(self.substitutions, np.int64).reshape(-1, 4)
        u = np.zeros(len(rows), SUBSTITUTION_DTYPE)
        u["ts"] = start_ps + rows[:, 0] * 10**9
        u["team"], u["off"], u["on"] = rows[:, 1], rows[:, 2], rows[:, 3]
        u = u[u["ts"] < end]
        return GroundTruth(kicks=k, passes=p, shots=s, out_of_play=o, bounces=b,
                           substitutions=u)
