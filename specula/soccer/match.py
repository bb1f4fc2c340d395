"""Synthetic soccer matches in the DEBS 2013 format, with exact ground truth.

:func:`generate_match` simulates a match on the DEBS 2013 pitch and returns the raw
position stream of every transmitter (balls, players' limbs, the referee) as ``ball``,
``player`` and ``referee`` events (:mod:`specula.soccer.types`), together with
the sensor metadata and a :class:`GroundTruth` of what was simulated: kicks, passes,
shots and the ball leaving the pitch. Detectors are scored against that truth, so its
definitions below are exact statements about the simulation, not estimates.

Coordinates and units
---------------------
The DEBS 2013 frame: x across the pitch in [0, 52,483] mm, y along it in [-33,960,
33,965] mm, z up. The goals are those of :data:`specula.soccer.geometry.GOALS`:
goal index 0 on the positive-y side (line y = 33,941, posts x in [22,578, 29,898]),
goal index 1 on the negative-y side (y = -33,968, x in [22,560, 29,880]), both 2,440 mm
high. **Team A (team 0) attacks goal 0** (towards +y) and defends goal 1; **team B
(team 1) attacks goal 1** (towards -y). In general team ``t`` attacks ``GOALS[t]``.
Events use the DEBS units: ``ts`` in picoseconds, positions in mm, ``|v|`` in um/s,
``|a|`` in um/s^2, direction components scaled to length 10,000. Internally the
simulation works in metres and seconds.

How a match is made
-------------------
1. A script runs on a 100 ms grid of *knots*. Every person on the pitch has a position,
   velocity, heading and turn rate at each knot; between knots the body follows the
   cubic Hermite curve through them (C1, bounded acceleration). Players hold a formation
   that shifts with the ball, press the ball carrier, keep clear of the ball unless they
   play it, and are steered by exact cubic plans when they must meet the ball (receive
   a pass, intercept, block) or take a restart. Speeds stay below 8 m/s.
2. The ball lives on a 1 ms grid. Carried, it stays 0.25-0.5 m in front of the
   carrier's body, pushed on by small touches; kicked, it gets a short acceleration
   pulse (a Hann window of 6-20 ms whose integral is the kick's velocity change, so its
   peak is ``2 |dv| / duration``: about 170-560 m/s^2 for a dribble touch, 0.8-3 km/s^2
   for a pass, 3-5 km/s^2 for a shot), then flies with gravity, quadratic air drag,
   bounces and rolling friction (integrated at 0.25 ms). Passes are received softly:
   the ball is brought to the receiver's foot with a planned acceleration relative to
   him of at most 28 m/s^2, so receptions are not kicks. After the ball leaves the
   pitch it is carried back on a smooth path (at most 20 m/s^2) to the restart spot.
3. Every transmitter is sampled at its own rate with its own phase and jitter; the ball
   by linear interpolation of the 1 ms grid (position, and velocity and acceleration by
   finite differences on that grid), the wearers from the Hermite curves of their
   bodies, with ``|v|`` and ``|a|`` by finite differences over their own readings.

Ground truth
------------
All times are sensor-clock picoseconds (``start_ps`` plus the simulated time).

``kicks`` (:data:`KICK_DTYPE`)
    One row per contact that gives the ball a velocity pulse: ``ts`` is the centre of
    the pulse, where the ball's acceleration peaks; there the ball is within 1 m of one
    of the kicker's leg sensors and ``|a|`` exceeds 55 m/s^2. ``kind``: 0 pass (a kick
    aimed at a teammate, including kick-offs, kick-ins, corners and goal kicks), 1 shot
    at the attacked goal, 2 dribble touch, 3 clearance or out (an untargeted long kick,
    the deflection of a blocked or saved shot, or a pass that goes straight out of play:
    a misplaced one, or a restart kick with no teammate in reach). A reception is not a
    kick.
``passes`` (:data:`PASS_DTYPE`)
    One row per kick of kind 0. ``ts_kick`` is that kick's ``ts``; ``ts_receive`` the
    knot (100 ms grid) at which the player who gets it meets the ball (its centre 0.35 m
    from his body, at most 9 m/s fast and 0.45 m high); from there he carries it, and
    his next contact with it is a kick. ``successful`` is 1 when a teammate got it
    (``to_player`` = that teammate, ``interceptor`` = -1) and 0 when an opponent did
    (``to_player`` = the teammate it was aimed at, ``interceptor`` = the opponent).
    Passes never leave the pitch: a kick aimed at a teammate that goes out is a kick of
    kind 3 with no row here.
``shots`` (:data:`SHOT_DTYPE`)
    One row per kick of kind 1. ``goal`` is the index of the attacked goal (0 or 1, as
    in ``GOALS``, always ``team``); ``on_target`` is 1 when the simulated path, had
    nobody touched it, crosses the goal line between the posts and under the bar;
    ``blocked`` is 1 when a player of the other team stopped it first (``blocker``: a
    defender near the path, or the goalkeeper, whose deflection is a kick of kind 3 at
    ``ts_end``), else ``blocker`` is -1; ``scored`` is 1 when the ball went in.
    ``ts_end`` is when the shot ended: the block, or the ball's centre crossing the
    goal line; -1 if neither happened (a weak shot that was picked up).
``out_of_play`` (:data:`OUT_DTYPE`)
    One row each time the ball's centre leaves the pitch box (touch lines x = 0 and
    52,483 mm, goal lines y = -33,960 and 33,965 mm), goals included: ``ts`` and
    position ``x, y, z`` (mm) where the centre crosses the line (interpolated between
    the 1 ms steps, as the readings are, so every reading of the ball before ``ts`` is
    inside the box), ``line`` (0 touch line, 1 goal line), ``goal`` (index of the goal
    it went into: between the posts and under the bar; else -1), and ``ts_restart``,
    when play restarts (the ``ts`` of the restart kick: a kick-in from 1 m inside the
    touch line, a goal kick, a corner from 1 m inside the corner, or the kick-off after
    a goal; -1 if after the simulated time). Between ``ts`` and ``ts_restart`` the ball
    rolls on and is carried back to the restart spot; it may lie outside the box.
``bounces`` (:data:`BOUNCE_DTYPE`)
    Ground impacts of the ball in play (bounces, and the landing after which it rolls):
    they produce acceleration peaks as well but are no kicks; ``ts`` and position (mm)
    of the 1 ms step of the impact. Apart from kicks and impacts, the ball in play
    accelerates by less than 55 m/s^2 (by design; at most ~35 m/s^2 in our checks).

Records are kept when their own ``ts`` (``ts_kick`` for passes) lies in the simulated
interval; outcomes (receptions, restarts) can lie up to a few seconds after its end.

Typical content, per minute of a ``debs2013`` match (30 matches of 65 s): 42 kicks
(28 dribble touches), 11 passes of which 15 % are intercepted, 1.4 shots (half on
target, a fifth blocked or saved, a third scored), 1.6 times out of play (mostly over
the goal lines). This is a busier game than a real one, on purpose: detectors need
events to be scored against.

Examples
--------
>>> m = generate_match(5.0, seed=1)
>>> m.profile.name, m.profile.ball_in_play, m.profile.transmitters
('debs2013', 4, 41)
>>> m.profile.events_per_second, abs(len(m.events) / 5.0 - 13_600) < 300
(13600.0, True)
>>> bool(np.all(np.diff(m.events["ts"]) >= 0))
True
>>> int(m.truth.kicks["kind"][0]) == PASS  # the kick-off
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from specula.soccer.debs2013 import (
    LEFT_ARM,
    LEFT_LEG,
    RIGHT_ARM,
    RIGHT_LEG,
    Metadata,
    Player,
)
from specula.soccer.geometry import GOALS, PITCH_X, PITCH_Y
from specula.soccer.types import soccer_registry

__all__ = [
    "BOUNCE_DTYPE",
    "CLEARANCE",
    "DRIBBLE",
    "KICK_DTYPE",
    "OUT_DTYPE",
    "PASS",
    "PASS_DTYPE",
    "PROFILES",
    "SHOT",
    "SHOT_DTYPE",
    "GroundTruth",
    "Match",
    "MatchProfile",
    "generate_match",
]

# ----------------------------------------------------------------------------- truth

#: Kick kinds of :data:`KICK_DTYPE`.
PASS, SHOT, DRIBBLE, CLEARANCE = 0, 1, 2, 3

KICK_DTYPE = np.dtype([("ts", "i8"), ("player", "i4"), ("team", "i1"), ("kind", "i1")])
"""Kicks: pulse centre (ps), kicker, his team, kind (0 pass, 1 shot, 2 dribble, 3 clear/out)."""

PASS_DTYPE = np.dtype([
    ("ts_kick", "i8"), ("ts_receive", "i8"), ("from_player", "i4"), ("to_player", "i4"),
    ("team", "i1"), ("successful", "i1"), ("interceptor", "i4"),
])
"""Passes: kick and receive times (ps), passer, receiver (or intended receiver), outcome."""

SHOT_DTYPE = np.dtype([
    ("ts", "i8"), ("player", "i4"), ("team", "i1"), ("goal", "i1"), ("on_target", "i1"),
    ("blocked", "i1"), ("blocker", "i4"), ("scored", "i1"), ("ts_end", "i8"),
])
"""Shots: kick time (ps), shooter, attacked goal index, outcome (see the module docs)."""

OUT_DTYPE = np.dtype([
    ("ts", "i8"), ("x", "i8"), ("y", "i8"), ("z", "i8"), ("line", "i1"), ("goal", "i1"),
    ("ts_restart", "i8"),
])
"""Ball out of play: time (ps), position (mm), line, goal scored into, restart time."""

BOUNCE_DTYPE = np.dtype([("ts", "i8"), ("x", "i8"), ("y", "i8")])
"""Ground bounces of the ball in play: time (ps) and position (mm)."""


@dataclass(frozen=True, eq=False)
class GroundTruth:
    """What happened in a simulated match; see the module docs for the exact definitions.

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
    """

    kicks: np.ndarray
    passes: np.ndarray
    shots: np.ndarray
    out_of_play: np.ndarray
    bounces: np.ndarray


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
        Player ids (metadata) of the players on the pitch.
    substitutes : tuple of int
        Player ids of substitutes warming up beside the pitch (outside the touch lines).
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


# ----------------------------------------------------------------------------- geometry

_W = PITCH_X[1] / 1000.0  # pitch width (x), m
_Y0, _Y1 = PITCH_Y[0] / 1000.0, PITCH_Y[1] / 1000.0  # goal lines of the pitch box, m
_L = _Y1 - _Y0
_CENTRE = np.array([_W / 2, 0.0])
_GOAL_X = tuple((g["x"][0] / 1000.0, g["x"][1] / 1000.0) for g in GOALS)
_GOAL_Y = tuple(g["y"] / 1000.0 for g in GOALS)
_GOAL_Z = GOALS[0]["z"] / 1000.0
#: Direction along y in which team 0 and team 1 attack.
_ATTACK = np.array([1.0, -1.0])

# ----------------------------------------------------------------------------- physics

_R = 0.11  # ball radius: height of its centre when it lies on the ground, m
_G = 9.81  # m/s^2
_K_DRAG = 0.010  # quadratic air drag, 1/m (a = -k |v| v)
_ROLL_DECEL = 1.2  # rolling friction on grass, m/s^2
_RESTITUTION = 0.55  # vertical speed kept by a bounce
_BOUNCE_KEEP = 0.8  # horizontal speed kept by a bounce
_ROLL_VZ = 0.8  # below this impact speed (m/s) the ball stops bouncing and rolls
_SUBSTEPS = 4  # integration steps per 1 ms grid step

_KNOT_MS = 100  # knot spacing of the script
_DT = _KNOT_MS / 1000.0
_HORIZON_MS = 15_000  # longest simulated free flight
_V_MAX = 7.8  # hard cap on a body's speed, m/s
_FOOT_Z = 0.12  # height of leg sensors, m
_ARM_Z = 1.30  # height of arm sensors, m
_LEG_SIDE = 0.10  # legs are 0.2 m apart
_ARM_SIDE = 0.22
_INSET = 0.6  # bodies stay this far inside the pitch, m
_TRAP_SPEED = 9.0  # fastest ball a player receives (m/s)
_TRAP_Z = 0.45  # highest ball centre a player receives with his foot (m)
_BLOCK_Z = 0.6  # highest ball centre a player blocks (m)
_BLOCK_REACH = 0.6  # a blocker's body is at most this far from the ball (m)
_MEET_AHEAD = 0.35  # a receiver's body is this far further along the ball's path (m)
_RECEIVE_ACC = 28.0  # planned bound on the ball's acceleration relative to the receiver
_RECEIVE_MIN_MS = 300  # shortest reception
_GO_WITH = 3.0  # a receiver arrives moving with the ball at up to this speed (m/s)
_DEAD_ACC = 20.0  # bound on the acceleration of the ball carried back to a restart

_SPARE_SPOTS = ((-7.164, -9.401), (-5.080, 15.892), (-4.0, 3.0))  # as in the real sample

# ----------------------------------------------------------------------------- profiles

#: Formation slots of outfield players: (across, depth) in the team's frame, depth 0 at
#: its own goal line and 1 at the opponent's.
_FORMATIONS = {
    7: ((0.2, 0.22), (0.5, 0.18), (0.8, 0.22), (0.2, 0.48), (0.5, 0.42), (0.8, 0.48),
        (0.5, 0.68)),
    10: ((0.15, 0.22), (0.38, 0.18), (0.62, 0.18), (0.85, 0.22), (0.15, 0.48),
         (0.38, 0.44), (0.62, 0.44), (0.85, 0.48), (0.4, 0.68), (0.6, 0.68)),
}


@dataclass(frozen=True)
class _ProfileSpec:
    players_on_pitch: int  # per team, goalkeeper included
    substitutes: int  # per team
    ball_hz: float
    wearer_hz: float


#: The simulated set-ups. ``debs2013``: the Grand Challenge game's real sensors
#: (:meth:`Metadata.default`): 8 players a side, two leg sensors each and two arm sensors
#: for the goalkeepers, the referee's two leg sensors, and the three balls of the first
#: half (4 in play; 8 and 10 beside the pitch): 41 transmitters, 3 x 2,000 + 38 x 200 =
#: 13,600 events/s. ``paper``: the set-up of Mutschler and Philippsen's evaluation (DEBS
#: 2013: 144 transmitters, four per player, 2.2M events in 65 s): 11 players a side on
#: the pitch plus 6 substitutes a side beside it and the referee, four transmitters
#: each (35 x 4 = 140), and three balls: 143 transmitters, 140 x 200 + 3 x 2,000 =
#: 34,000 events/s, 2.21M events in 65 s. (A 144th transmitter would have to be a
#: fourth ball, 36,000 events/s; the event rate is kept instead.) Its sensor ids are
#: invented and disjoint from the real ones: balls 201-203, player ``p`` limb ``l``
#: ``300 + 4p + l``, referee 500-503.
PROFILES: dict[str, _ProfileSpec] = {
    "debs2013": _ProfileSpec(8, 0, 2000.0, 200.0),
    "paper": _ProfileSpec(11, 6, 2000.0, 200.0),
}


@dataclass
class _Cast:
    """Everyone who wears a transmitter, as arrays indexed by person (players, referee)."""

    metadata: Metadata
    profile: MatchProfile
    team: np.ndarray  # (N,) 0/1, -1 referee
    gk: np.ndarray  # (N,) bool
    active: np.ndarray  # (N,) on the pitch (players and referee)
    player: np.ndarray  # (N,) bool: on-pitch players
    referee: int  # person index of the referee
    base: np.ndarray  # (N, 2) formation slot (across, depth) of outfield players
    sensors: list[list[tuple[int, int]]]  # per person: (sid, limb)
    type_name: list[str]


def _build_cast(name: str) -> _Cast:
    spec = PROFILES[name]
    if name == "debs2013":
        meta = Metadata.default()
        balls = meta.balls[1]
        in_play, spares = balls[0], tuple(balls[1:])
        players = meta.players
    else:
        per_team = spec.players_on_pitch + spec.substitutes
        built = []
        for pid in range(2 * per_team):
            team, number = divmod(pid, per_team)
            sensors = {limb: 300 + 4 * pid + limb for limb in
                       (LEFT_LEG, RIGHT_LEG, LEFT_ARM, RIGHT_ARM)}
            built.append(Player(pid, f"{'AB'[team]}{number + 1:02d}", team, sensors,
                                number == 0))
        balls = (201, 202, 203)
        in_play, spares = balls[0], balls[1:]
        referee = {limb: 500 + limb for limb in (LEFT_LEG, RIGHT_LEG, LEFT_ARM, RIGHT_ARM)}
        meta = Metadata(balls={1: balls, 2: balls}, players=tuple(built), referee=referee)
        players = meta.players
    n_players = len(players)
    n = n_players + 1
    team = np.array([p.team for p in players] + [-1], np.int64)
    gk = np.array([p.goalkeeper for p in players] + [False])
    # Per team: the first ``players_on_pitch`` in metadata order play, the rest are subs.
    on_pitch, subs = [], []
    for t in (0, 1):
        ids = [p.id for p in players if p.team == t]
        on_pitch += ids[: spec.players_on_pitch]
        subs += ids[spec.players_on_pitch:]
    active = np.zeros(n, bool)
    active[on_pitch] = True
    active[n_players] = True
    player = active.copy()
    player[n_players] = False
    base = np.zeros((n, 2))
    slots = _FORMATIONS[spec.players_on_pitch - 1]
    for t in (0, 1):
        outfield = [i for i in on_pitch if team[i] == t and not gk[i]]
        for slot, i in zip(slots, outfield, strict=True):
            base[i] = (slot[0] if t == 0 else 1.0 - slot[0], slot[1])
    sensors = [sorted((sid, limb) for limb, sid in p.sensors.items()) for p in players]
    sensors.append(sorted((sid, limb) for limb, sid in meta.referee.items()))
    n_wearer_sensors = sum(len(s) for s in sensors)
    profile = MatchProfile(
        name=name, ball_in_play=in_play, spare_balls=tuple(spares),
        on_pitch=tuple(sorted(on_pitch)), substitutes=tuple(sorted(subs)),
        ball_hz=spec.ball_hz, wearer_hz=spec.wearer_hz,
        transmitters=1 + len(spares) + n_wearer_sensors,
        events_per_second=spec.ball_hz * (1 + len(spares)) + spec.wearer_hz * n_wearer_sensors,
    )
    names = ["player"] * n_players + ["referee"]
    return _Cast(meta, profile, team, gk, active, player, n_players, base, sensors, names)


# ----------------------------------------------------------------------------- public API


def generate_match(
    seconds: float = 65.0,
    *,
    profile: str = "debs2013",
    seed: int = 0,
    start_ps: int = 10_629_342_490_369_879,
) -> Match:
    """Simulate a soccer match and return its position stream and ground truth.

    Parameters
    ----------
    seconds : float, default 65.0
        Length of the stream in seconds of sensor time (the paper's benchmark stream is
        65 s long). The match starts with a kick-off about one second in.
    profile : str, default "debs2013"
        Which transmitters (see :data:`PROFILES`): ``"debs2013"``, the Grand
        Challenge's real sensor ids (about 13,600 events/s), or ``"paper"``, four
        transmitters per person (about 34,000 events/s, 2.2M events in 65 s).
    seed : int, default 0
        Seed of everything random: the same arguments give the same match, bit for bit.
    start_ps : int, default 10,629,342,490,369,879
        Sensor time (ps) of the start of the stream; the default is the first time stamp
        of the real game's file.

    Returns
    -------
    Match
        Events sorted by ``ts`` (ties, which are rare, in a fixed order), metadata,
        ground truth and profile.

    Notes
    -----
    The 65 s ``paper`` stream (2.2M events, 282 MB) takes about 1 s on one core and
    peaks at about twice its size in memory.

    Raises
    ------
    ValueError
        If ``seconds`` is not positive or ``profile`` is unknown.
    """
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; known: {sorted(PROFILES)}")
    rng = np.random.default_rng(seed)
    cast = _build_cast(profile)
    sim = _Script(cast, seconds, rng)
    sim.run()
    duration_ps = round(seconds * 1e12)
    events = _sample(cast, sim, rng, start_ps, duration_ps)
    truth = sim.truth(start_ps, duration_ps)
    return Match(events=events, metadata=cast.metadata, truth=truth, profile=cast.profile,
                 start_ps=start_ps, end_ps=start_ps + duration_ps)


# ----------------------------------------------------------------------------- ball physics


@njit(cache=True, nogil=True)
def _fly(p0, v0, dv, pulse_s, pos, vel, bounce):  # pragma: no cover - compiled
    """Integrate a free ball from ``p0, v0`` with a kick pulse ``dv`` over ``pulse_s``.

    Writes the state at every 1 ms step (index 0 = start) into ``pos``, ``vel`` and
    marks impacts in ``bounce``. Semi-implicit Euler at ``_SUBSTEPS`` steps per ms.
    """
    n = pos.shape[0]
    h = 1e-3 / _SUBSTEPS
    x, y, z = p0[0], p0[1], p0[2]
    vx, vy, vz = v0[0], v0[1], v0[2]
    ground = z <= _R + 1e-6 and vz <= 1e-6
    if ground:
        z = _R
        vz = 0.0
    pos[0, 0], pos[0, 1], pos[0, 2] = x, y, z
    vel[0, 0], vel[0, 1], vel[0, 2] = vx, vy, vz
    bounce[0] = False
    t = 0.0
    for i in range(1, n):
        bounced = False
        for _ in range(_SUBSTEPS):
            ax = 0.0
            ay = 0.0
            az = 0.0
            if t < pulse_s:
                s = math.sin(math.pi * (t + 0.5 * h) / pulse_s)
                w = 2.0 / pulse_s * s * s
                ax += dv[0] * w
                ay += dv[1] * w
                az += dv[2] * w
            sp = math.sqrt(vx * vx + vy * vy + vz * vz)
            ax -= _K_DRAG * sp * vx
            ay -= _K_DRAG * sp * vy
            az -= _K_DRAG * sp * vz + _G
            if ground:
                if az > 0.0:
                    ground = False
                else:
                    az = 0.0
            vx += ax * h
            vy += ay * h
            vz += az * h
            if ground:
                vz = 0.0
                sh = math.sqrt(vx * vx + vy * vy)
                dec = _ROLL_DECEL * h
                if sh <= dec:
                    vx = 0.0
                    vy = 0.0
                else:
                    vx -= dec * vx / sh
                    vy -= dec * vy / sh
            x += vx * h
            y += vy * h
            z += vz * h
            if ground:
                z = _R
            elif z < _R and vz < 0.0:
                z = _R
                bounced = True
                if -vz > _ROLL_VZ:
                    vz = -_RESTITUTION * vz
                    vx *= _BOUNCE_KEEP
                    vy *= _BOUNCE_KEEP
                else:
                    vz = 0.0
                    ground = True
            t += h
        pos[i, 0], pos[i, 1], pos[i, 2] = x, y, z
        vel[i, 0], vel[i, 1], vel[i, 2] = vx, vy, vz
        bounce[i] = bounced
        if ground and t >= pulse_s and vx == 0.0 and vy == 0.0:
            for j in range(i + 1, n):
                pos[j, 0], pos[j, 1], pos[j, 2] = x, y, z
                vel[j, 0], vel[j, 1], vel[j, 2] = 0.0, 0.0, 0.0
                bounce[j] = False
            return


@dataclass
class _Flight:
    """A simulated free ball from absolute ms ``i0``: positions and velocities per ms."""

    i0: int
    pos: np.ndarray
    vel: np.ndarray
    bounce: np.ndarray
    out: int  # relative index of the first step outside the pitch box, or len(pos)


def _simulate(i0: int, p0: np.ndarray, v0: np.ndarray, dv: np.ndarray, pulse_ms: int,
              horizon_ms: int = _HORIZON_MS) -> _Flight:
    pos = np.empty((horizon_ms, 3))
    vel = np.empty((horizon_ms, 3))
    bounce = np.empty(horizon_ms, np.bool_)
    _fly(np.asarray(p0, np.float64), np.asarray(v0, np.float64),
         np.asarray(dv, np.float64), pulse_ms / 1000.0, pos, vel, bounce)
    outside = ~_inside(pos[:, 0], pos[:, 1], 0.0)
    out = int(np.argmax(outside)) if outside.any() else horizon_ms
    return _Flight(i0, pos, vel, bounce, out)


def _crossing(prev: np.ndarray, cur: np.ndarray) -> tuple[float, int]:
    """Where between two grid points (fraction) the ball's centre leaves the pitch box,
    and over which line (0 touch line, 1 goal line)."""
    best, line = 1.0, 1
    for axis, lo, hi in ((0, 0.0, _W), (1, _Y0, _Y1)):
        for bound in (lo, hi):
            a, b = prev[axis] - bound, cur[axis] - bound
            if (bound == lo and b < 0 <= a) or (bound == hi and b > 0 >= a):
                frac = a / (a - b)
                if frac < best or (frac == best and axis == 0):
                    best, line = frac, axis
    return float(best), line


def _inside(x, y, margin: float):
    return (x >= margin) & (x <= _W - margin) & (y >= _Y0 + margin) & (y <= _Y1 - margin)


# ----------------------------------------------------------------------------- helpers


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.divide(v, n, out=np.zeros_like(v), where=n > 1e-12)


def _clip_norm(v: np.ndarray, cap) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    cap = np.asarray(cap, np.float64).reshape(-1, 1) if np.ndim(cap) else cap
    scale = np.minimum(1.0, np.divide(cap, n, out=np.ones_like(n), where=n > 1e-12))
    return v * scale


def _wrap(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


def _cubic(p0, v0, p1, v1, T):
    """Coefficients of the cubic from ``(p0, v0)`` at 0 to ``(p1, v1)`` at ``T``."""
    d = p1 - p0
    c2 = (3 * d - (2 * v0 + v1) * T) / T**2
    c3 = (-2 * d + (v0 + v1) * T) / T**3
    return p0, v0, c2, c3


def _quintic_rest(p0, v0, p1, T):
    """Coefficients of the quintic from ``(p0, v0, a=0)`` to ``(p1, 0, 0)`` over ``T``."""
    d = p1 - p0
    c3 = (10 * d - 6 * v0 * T) / T**3
    c4 = (-15 * d + 8 * v0 * T) / T**4
    c5 = (6 * d - 3 * v0 * T) / T**5
    return p0, v0, c3, c4, c5


def _quintic_eval(c, s):
    p0, v0, c3, c4, c5 = c
    s = s[:, None]
    return p0 + v0 * s + c3 * s**3 + c4 * s**4 + c5 * s**5


def _max_quintic_acc(c, T) -> float:
    s = np.linspace(0, T, 41)[:, None]
    _, _, c3, c4, c5 = c
    acc = 6 * c3 * s + 12 * c4 * s**2 + 20 * c5 * s**3
    return float(np.linalg.norm(acc, axis=1).max())


def _even_ms(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A pulse duration in ms, even so that its centre falls on a whole ms."""
    return 2 * int(rng.integers(lo // 2, hi // 2 + 1))


@dataclass
class _Plan:
    """A person's exact path from knot ``k0`` to knot ``k1`` (a cubic in s since ``k0``)."""

    k0: int
    k1: int
    coef: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

    def at(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        s = (k - self.k0) * _DT
        c0, c1, c2, c3 = self.coef
        return c0 + c1 * s + c2 * s * s + c3 * s**3, c1 + 2 * c2 * s + 3 * c3 * s * s


@dataclass
class _Spell:
    """The ball carried by one player from ``t_r`` (ms) until ``end`` (ms).

    From ``t_r`` to ``t_c0`` the receiver brings the ball to his foot (a cubic in the
    ball's offset from his body, world frame); from ``t_c0`` it follows the dribble cycle
    of period ``period`` ms: a touch pulse of ``touch`` ms along his heading at the start
    of each period, then a constant pull-back ``mu`` (m/s^2) relative to him, so that the
    ball's distance in front of his body runs from ``d_min`` up and back to it.
    """

    carrier: int
    t_r: int
    t_c0: int
    w0: np.ndarray  # (3,) ball offset from the body at t_r, m
    w0d: np.ndarray  # (3,) its rate, m/s
    period: int
    touch: int
    d_min: float
    mu: float
    speed: float
    bias: float
    min_dribble: int
    max_dribble: int
    end: int = -1

    @property
    def dv(self) -> float:
        return self.mu * self.period / 1000.0

    @property
    def u(self) -> float:
        return self.mu * (self.period - self.touch) / 2000.0


@dataclass
class _Dead:
    """The ball out of play: carried to ``spot`` and kicked off from there at ``restart``."""

    restart: int
    spot: np.ndarray
    taker: int
    kind: str  # "kick-in", "corner", "goal kick", "kick-off"


@dataclass
class _Outcome:
    """How a free ball ends: met by ``person`` at knot ``k`` (body at ``q``), or out."""

    kind: str  # "meet", "out", "none"
    k: int = -1
    person: int = -1
    q: np.ndarray | None = None
    i_end: int = -1  # absolute ms where the free flight ends (meet or dead transfer)
    block: bool = False  # the meeting player deflects the ball (a blocked or saved shot)
    v: np.ndarray | None = None  # the meeting player's velocity at ``k``


# ----------------------------------------------------------------------------- the script


class _Script:
    """The event-driven match script on the 100 ms knot grid, with the ball on 1 ms."""

    def __init__(self, cast: _Cast, seconds: float, rng: np.random.Generator) -> None:
        self.cast = cast
        self.rng = rng
        self.seconds = seconds
        self.K = math.ceil(seconds * 1000 / _KNOT_MS) + 3
        self.end_ms = (self.K - 1) * _KNOT_MS
        self.n_ms = self.end_ms + _HORIZON_MS + 2
        n = len(cast.team)
        self.n = n
        self.px = np.zeros((self.K, n))
        self.py = np.zeros((self.K, n))
        self.vx = np.zeros((self.K, n))
        self.vy = np.zeros((self.K, n))
        self.th = np.zeros((self.K, n))
        self.om = np.zeros((self.K, n))
        self.ball = np.zeros((self.n_ms, 3))  # the ball's centre on the 1 ms grid, m
        self.plans: list[_Plan | None] = [None] * n
        self.stand: dict[int, tuple[np.ndarray, float]] = {}
        self.noise = np.zeros((n, 2))
        self.spells: list[_Spell] = []
        self.spell: _Spell | None = None
        self.next_touch = -1
        self.flight: _Flight | None = None
        self.outcome: _Outcome | None = None
        self.dead: _Dead | None = None
        self.mode = "dead"
        self.last_kicker = -1
        self.kicks: list[tuple[int, int, int, int]] = []
        self.passes: list[list[int]] = []
        self.shots: list[list[int]] = []
        self.outs: list[list[float]] = []
        self.bounces: list[tuple[int, float, float]] = []
        self.open_shot: list[int] | None = None  # a shot whose ball is still free
        self.pending_out: list[float] | None = None
        self._setup()

    # -------------------------------------------------------------- set-up

    def _setup(self) -> None:
        cast, rng = self.cast, self.rng
        ball0 = _CENTRE.copy()
        targets = self._formation(ball0, team_on_ball=0, kickoff=True)
        self.px[0], self.py[0] = targets[:, 0], targets[:, 1]
        subs = np.array(cast.profile.substitutes, np.int64)
        for j, i in enumerate(subs.tolist()):
            side = cast.team[i]
            self.px[0, i] = -3.5 if side == 0 else _W + 3.5
            self.py[0, i] = -14.0 + 4.5 * (j % (len(subs) // 2 or 1))
        self.home = np.stack([self.px[0], self.py[0]], axis=1)
        self.th[0] = np.where(cast.team == 1, -np.pi / 2, np.pi / 2)
        self.noise = rng.normal(0.0, 1.5, (self.n, 2))
        # Kick-off by team A's most advanced outfield player, from the centre spot.
        taker = self._nearest(ball0, team=0)
        q = ball0 - np.array([0.0, 0.3])
        self.px[0, taker], self.py[0, taker] = q
        self.ball[:, :] = (ball0[0], ball0[1], _R)
        restart = 1000 + int(rng.integers(0, 500))
        self.dead = _Dead(restart, ball0, taker, "kick-off")
        self.stand[taker] = (q, math.pi / 2)

    # -------------------------------------------------------------- main loop

    def run(self) -> None:
        for k in range(self.K - 1):
            self._step(k)
            lo, hi = k * _KNOT_MS, (k + 1) * _KNOT_MS
            self._events(k, lo, hi)
        self._finish()

    def _events(self, k: int, lo: int, hi: int) -> None:
        """Handle everything the ball does in ``(lo, hi]`` ms; knot ``k + 1`` is known."""
        for _ in range(50):
            if self.mode == "held" and lo < self.next_touch <= hi:
                self._touch(k + 1, self.next_touch)
            elif self.mode == "free" and self.outcome is not None and \
                    self.outcome.kind == "meet" and self.outcome.k == k + 1:
                self._meet(k + 1)
            elif self.mode == "free" and self.outcome is not None and \
                    self.outcome.kind == "out" and lo < self.flight.i0 + self.flight.out <= hi:
                self._out(k + 1)
            elif self.mode == "dead" and lo < self.dead.restart <= hi:
                self._restart(k + 1)
            else:
                return

    # -------------------------------------------------------------- people

    def _ball_at_knot(self, k: int) -> np.ndarray:
        if self.mode == "held":
            c = self.spell.carrier
            h = np.array([math.cos(self.th[k, c]), math.sin(self.th[k, c])])
            return np.array([self.px[k, c], self.py[k, c]]) + 0.3 * h
        return self.ball[min(k * _KNOT_MS, self.n_ms - 1), :2].copy()

    def _formation(self, ball: np.ndarray, team_on_ball: int, kickoff: bool = False):
        cast = self.cast
        t = np.clip(cast.team, 0, 1)
        att = _ATTACK[t]
        ball_depth = np.where(att > 0, (ball[1] - _Y0) / _L, (_Y1 - ball[1]) / _L)
        depth = cast.base[:, 1] + 0.5 * (ball_depth - 0.5)
        depth += np.where(cast.team == team_on_ball, 0.08, -0.04)
        depth = np.clip(depth, 0.04, 0.47 if kickoff else 0.96)
        across = cast.base[:, 0] + 0.35 * (ball[0] / _W - 0.5)
        x = across * _W
        y = np.where(att > 0, _Y0 + depth * _L, _Y1 - depth * _L)
        gx0 = np.array([_GOAL_X[1][0], _GOAL_X[0][0]])[t]
        gx1 = np.array([_GOAL_X[1][1], _GOAL_X[0][1]])[t]
        gk_x = np.clip(_W / 2 + 0.5 * (ball[0] - _W / 2), gx0 + 0.5, gx1 - 0.5)
        gk_depth = 0.025 + 0.04 * ball_depth
        gk_y = np.where(att > 0, _Y0 + gk_depth * _L, _Y1 - gk_depth * _L)
        x = np.where(cast.gk, gk_x, x)
        y = np.where(cast.gk, gk_y, y)
        out = np.stack([x, y], axis=1)
        # The referee keeps 8 m to the side of the ball, towards the centre line of x.
        side = -1.0 if ball[0] > _W / 2 else 1.0
        out[cast.referee] = ball + np.array([8.0 * side, -4.0])
        return out

    def _nearest(self, point: np.ndarray, team: int, k: int = 0) -> int:
        """The outfield player of ``team`` nearest to ``point`` at knot ``k``."""
        cast = self.cast
        ok = cast.player & (cast.team == team) & ~cast.gk
        d = np.hypot(self.px[k] - point[0], self.py[k] - point[1])
        d[~ok] = np.inf
        return int(np.argmin(d))

    def _step(self, k: int) -> None:
        """Compute knot ``k + 1`` of every person from knot ``k``."""
        cast, rng = self.cast, self.rng
        ball = self._ball_at_knot(k)
        carrier = self.spell.carrier if self.mode == "held" else -1
        team_on_ball = cast.team[carrier] if carrier >= 0 else \
            (cast.team[self.last_kicker] if self.last_kicker >= 0 else -1)
        target = self._formation(ball, team_on_ball)
        # Ornstein-Uhlenbeck wandering around the formation slots (sd 1.5 m, 4 s).
        self.noise += -self.noise * (_DT / 4.0) + rng.normal(0.0, 1.5 * math.sqrt(2 * _DT / 4.0),
                                                              (self.n, 2))
        target += np.where(cast.gk[:, None], 0.2, 1.0) * self.noise
        cap = np.full(self.n, 5.0)
        acc = np.full(self.n, 3.5)
        p = np.stack([self.px[k], self.py[k]], axis=1)
        v = np.stack([self.vx[k], self.vy[k]], axis=1)
        # Everybody but the one playing the ball keeps 2.5 m from it.
        away = target - ball
        dist = np.linalg.norm(away, axis=1)
        close = dist < 2.5
        target[close] = ball + _unit(away[close] + 1e-3) * 2.5
        if carrier >= 0:
            presser = self._nearest(ball, 1 - cast.team[carrier], k)
            own_goal = np.array([_W / 2, _Y0 if cast.team[presser] == 0 else _Y1])
            target[presser] = ball + 2.5 * _unit(own_goal - ball)
            cap[presser] = 6.0
            target[carrier] = p[carrier] + self._dribble_direction(k, carrier) * 3.0
            cap[carrier] = self.spell.speed if (k + 1) * _KNOT_MS >= self.spell.t_c0 else 2.0
            acc[carrier] = 3.0
        for i, (q, _) in self.stand.items():
            target[i] = q
        subs = np.array(cast.profile.substitutes, np.int64)
        if len(subs):
            target[subs] = self.home[subs] + 0.5 * self.noise[subs]
            cap[subs] = 1.2
        lo = np.array([_INSET + 0.4, _Y0 + _INSET + 0.4])
        hi = np.array([_W - _INSET - 0.4, _Y1 - _INSET - 0.4])
        target[cast.active] = np.clip(target[cast.active], lo, hi)
        if carrier >= 0:  # his ball is ahead of him: he keeps further in
            target[carrier] = np.clip(target[carrier], lo + 1.0, hi - 1.0)
        vdes = _clip_norm((target - p) / 0.8, cap)
        vn = v + _clip_norm(vdes - v, acc * _DT)
        vn = _clip_norm(vn, _V_MAX)
        pn = p + 0.5 * (v + vn) * _DT
        for i, plan in enumerate(self.plans):
            if plan is not None and plan.k0 <= k + 1 <= plan.k1:
                pn[i], vn[i] = plan.at(k + 1)
            if plan is not None and k + 1 >= plan.k1:
                self.plans[i] = None
        # Bodies stay inside the pitch (a safety net: the targets are further in).
        clipped = np.clip(pn, (_INSET, _Y0 + _INSET), (_W - _INSET, _Y1 - _INSET))
        fix = cast.active[:, None] & (clipped != pn)
        pn[fix] = clipped[fix]
        vn[fix] = 0.0
        self.px[k + 1], self.py[k + 1] = pn[:, 0], pn[:, 1]
        self.vx[k + 1], self.vy[k + 1] = vn[:, 0], vn[:, 1]
        # Heading: along the motion, or towards the ball when (nearly) standing.
        th, om = self.th[k], self.om[k]
        speed = np.linalg.norm(vn, axis=1)
        to_ball = np.arctan2(ball[1] - pn[:, 1], ball[0] - pn[:, 0])
        goal = np.where(speed > 1.0, np.arctan2(vn[:, 1], vn[:, 0]), to_ball)
        for i, (_, heading) in self.stand.items():
            goal[i] = heading
        om_max = np.full(self.n, 6.0)
        alpha = np.full(self.n, 40.0)
        if carrier >= 0:
            goal[carrier] = math.atan2(vn[carrier, 1], vn[carrier, 0]) if speed[carrier] > 0.3 \
                else th[carrier]
            om_max[carrier], alpha[carrier] = 3.0, 15.0
        om_des = np.clip(_wrap(goal - th) / 0.3, -om_max, om_max)
        om_new = om + np.clip(om_des - om, -alpha * _DT, alpha * _DT)
        self.om[k + 1] = om_new
        self.th[k + 1] = th + 0.5 * (om + om_new) * _DT

    def _dribble_direction(self, k: int, c: int) -> np.ndarray:
        cast, spell = self.cast, self.spell
        p = np.array([self.px[k, c], self.py[k, c]])
        t = cast.team[c]
        goal = np.array([_W / 2, _GOAL_Y[t]])
        d = _unit(goal - p)
        b = spell.bias
        d = np.array([d[0] * math.cos(b) - d[1] * math.sin(b),
                      d[0] * math.sin(b) + d[1] * math.cos(b)])
        opp = cast.player & (cast.team == 1 - t)
        rel = np.stack([p[0] - self.px[k, opp], p[1] - self.py[k, opp]], axis=1)
        dist = np.linalg.norm(rel, axis=1)
        near = dist < 6.0
        if near.any():
            d = d + (_unit(rel[near]) * ((6.0 - dist[near]) / 6.0)[:, None]).sum(axis=0)
        edge = 5.0
        d = d + np.array([max(0.0, edge - p[0]) - max(0.0, p[0] - (_W - edge)),
                          max(0.0, _Y0 + edge - p[1]) - max(0.0, p[1] - (_Y1 - edge))]) / edge
        return _unit(d)

    # -------------------------------------------------------------- knot evaluation

    def knots_at(self, person: np.ndarray, t_ms: np.ndarray):
        """Body position, velocity, heading and turn rate of ``person`` at ``t_ms``."""
        t = np.asarray(t_ms, np.float64)
        k = np.clip((t // _KNOT_MS).astype(np.int64), 0, self.K - 2)
        u = (t - k * _KNOT_MS) / _KNOT_MS
        u2, u3 = u * u, u * u * u
        h00, h10, h01, h11 = 2 * u3 - 3 * u2 + 1, u3 - 2 * u2 + u, -2 * u3 + 3 * u2, u3 - u2
        d00, d10 = (6 * u2 - 6 * u) / _DT, 3 * u2 - 4 * u + 1
        d01, d11 = (-6 * u2 + 6 * u) / _DT, 3 * u2 - 2 * u
        out = []
        for val, der in ((self.px, self.vx), (self.py, self.vy), (self.th, self.om)):
            a0, a1 = val[k, person], val[k + 1, person]
            b0, b1 = der[k, person], der[k + 1, person]
            out.append(h00 * a0 + h10 * _DT * b0 + h01 * a1 + h11 * _DT * b1)
            out.append(d00 * a0 + d10 * b0 + d01 * a1 + d11 * b1)
        return out  # x, vx, y, vy, th, om

    def _held(self, spell: _Spell, t_ms: np.ndarray):
        """Position and velocity (n, 3) of the carried ball at ``t_ms`` (>= ``t_r``)."""
        t_ms = np.asarray(t_ms, np.int64)
        person = np.full(len(t_ms), spell.carrier)
        x, vx, y, vy, th, om = self.knots_at(person, t_ms)
        pos = np.stack([x, y, np.full(len(t_ms), _R)], axis=1)
        vel = np.stack([vx, vy, np.zeros(len(t_ms))], axis=1)
        h = np.stack([np.cos(th), np.sin(th)], axis=1)
        nrm = np.stack([-np.sin(th), np.cos(th)], axis=1)
        cyc = t_ms >= spell.t_c0
        if cyc.any():
            s = ((t_ms[cyc] - spell.t_c0) % spell.period) / 1000.0
            d, dd = _dribble_offset(s, spell)
            pos[cyc, :2] += h[cyc] * d[:, None]
            vel[cyc, :2] += h[cyc] * dd[:, None] + nrm[cyc] * (d * om[cyc])[:, None]
        blend = ~cyc
        if blend.any():
            w1, w1d = self._blend_end(spell)
            coef = _cubic(spell.w0, spell.w0d, w1, w1d, (spell.t_c0 - spell.t_r) / 1000.0)
            s = ((t_ms[blend] - spell.t_r) / 1000.0)[:, None]
            c0, c1, c2, c3 = coef
            pos[blend] += c0 + c1 * s + c2 * s * s + c3 * s**3 - np.array([0, 0, _R])
            vel[blend] += c1 + 2 * c2 * s + 3 * c3 * s * s
        return pos, vel

    def _blend_end(self, spell: _Spell):
        _, _, _, _, th, om = self.knots_at(np.array([spell.carrier]), np.array([spell.t_c0]))
        h = np.array([math.cos(th[0]), math.sin(th[0]), 0.0])
        nrm = np.array([-math.sin(th[0]), math.cos(th[0]), 0.0])
        w1 = h * spell.d_min + np.array([0.0, 0.0, _R])
        w1d = -spell.u * h + spell.d_min * om[0] * nrm
        return w1, w1d

    # -------------------------------------------------------------- meeting the ball

    def _meet_first(self, flight: _Flight, k_s: int, people: np.ndarray, acc: np.ndarray,
                    cap: np.ndarray, z_max: float, v_max: float, i_stop: int,
                    earliest_ms: int, margin: float, go_with: float,
                    reach: float = 0.0) -> _Outcome | None:
        """The person of ``people`` who can first reach the ball of ``flight``.

        A person can meet the ball at knot ``k`` when a cubic from his state at knot
        ``k_s`` to the meeting point at ``k`` keeps his acceleration within ``acc`` and
        his speed within ``cap``, and the ball there is at most ``z_max`` high, at most
        ``v_max`` fast, ``margin`` inside the pitch and not yet past ``i_stop`` (relative
        ms). He meets it with his body ``_MEET_AHEAD`` further along its path, moving with
        it at 0.4 times its speed, at most ``go_with``; or, if ``reach`` > 0 (a block),
        with his body anywhere within ``reach`` of the ball, standing.
        """
        if len(people) == 0:
            return None
        k_lo = max(k_s + 1, -(-(flight.i0 + earliest_ms) // _KNOT_MS))
        k_hi = min(self.K - 1, (flight.i0 + min(i_stop, len(flight.pos)) - 1) // _KNOT_MS)
        if k_hi < k_lo:
            return None
        ks = np.arange(k_lo, k_hi + 1)
        rel = ks * _KNOT_MS - flight.i0
        bp, bv = flight.pos[rel], flight.vel[rel]
        ok_ball = (bp[:, 2] <= z_max) & (np.linalg.norm(bv, axis=1) <= v_max) & \
            _inside(bp[:, 0], bp[:, 1], margin)
        if not ok_ball.any():
            return None
        ks, bp, bv = ks[ok_ball], bp[ok_ball], bv[ok_ball]
        p0 = np.stack([self.px[k_s, people], self.py[k_s, people]], axis=1)[:, None, :]
        v0 = np.stack([self.vx[k_s, people], self.vy[k_s, people]], axis=1)[:, None, :]
        ahead = _unit(bv[:, :2])
        moving = np.linalg.norm(bv[:, :2], axis=1) > 0.5
        q = np.where(moving[None, :, None], bp[None, :, :2] + _MEET_AHEAD * ahead[None],
                     bp[None, :, :2] - _MEET_AHEAD * _unit(bp[None, :, :2] - p0))
        if reach > 0:  # a block: the body anywhere within ``reach`` of the ball
            q = bp[None, :, :2] + _clip_norm((p0 - bp[None, :, :2]).reshape(-1, 2),
                                             reach).reshape(q.shape)
        lo = np.array([_INSET, _Y0 + _INSET])
        q = np.clip(q, lo, np.array([_W - _INSET, _Y1 - _INSET]))
        v1 = (ahead * np.minimum(go_with, 0.4 * np.linalg.norm(bv[:, :2], axis=1))[:, None])[None]
        T = ((ks - k_s) * _DT)[None, :, None]
        d = q - p0
        c2 = (3 * d - (2 * v0 + v1) * T) / T**2
        c3 = (-2 * d + (v0 + v1) * T) / T**3
        a0 = np.linalg.norm(2 * c2, axis=2)
        a1 = np.linalg.norm(2 * c2 + 6 * c3 * T, axis=2)
        ok = (a0 <= acc[:, None]) & (a1 <= acc[:, None])
        vmax = np.zeros_like(a0)
        for f in (0.25, 0.5, 0.75):
            s = f * T
            vmax = np.maximum(vmax, np.linalg.norm(v0 + 2 * c2 * s + 3 * c3 * s * s, axis=2))
        ok &= vmax <= cap[:, None]
        if not ok.any():
            return None
        first = np.where(ok.any(axis=1), ok.argmax(axis=1), len(ks))
        best = np.lexsort((np.linalg.norm(d[np.arange(len(people)), np.minimum(first, len(ks) - 1)],
                                          axis=1), first))[0]
        if first[best] >= len(ks):
            return None
        j = int(first[best])
        return _Outcome("meet", int(ks[j]), int(people[best]), q[best, j].copy(),
                        v=v1[0, j].copy())

    def _plan_meet(self, k_s: int, out: _Outcome) -> None:
        i = out.person
        p0 = np.array([self.px[k_s, i], self.py[k_s, i]])
        v0 = np.array([self.vx[k_s, i], self.vy[k_s, i]])
        coef = _cubic(p0, v0, out.q, out.v, (out.k - k_s) * _DT)
        self.plans[i] = _Plan(k_s, out.k, coef)
        self.stand.pop(i, None)


    def _players(self, exclude: tuple[int, ...] = (), team: int | None = None,
                 outfield: bool = False) -> np.ndarray:
        ok = self.cast.player.copy()
        if team is not None:
            ok &= self.cast.team == team
        if outfield:
            ok &= ~self.cast.gk
        for e in exclude:
            if e >= 0:
                ok[e] = False
        return np.flatnonzero(ok)

    def _resolve(self, flight: _Flight, k_s: int, exclude: tuple[int, ...]) -> _Outcome:
        """Who gets a free ball first, or where it leaves the pitch."""
        people = self._players(exclude)
        acc, cap = np.full(len(people), 5.5), np.full(len(people), 7.5)
        meet = self._meet_first(flight, k_s, people, acc, cap, _TRAP_Z, _TRAP_SPEED,
                                flight.out, 250, 1.5, _GO_WITH)
        if meet is not None:
            meet.i_end = meet.k * _KNOT_MS
            return meet
        if flight.out < len(flight.pos):
            return _Outcome("out", i_end=flight.i0 + flight.out)
        return _Outcome("none", i_end=flight.i0 + len(flight.pos))

    # -------------------------------------------------------------- kicks

    def _record_kick(self, player: int, t0: int, pulse: int, kind: int) -> int:
        ts = 2 * t0 + pulse  # in half ms; the pulse's centre
        self.kicks.append((ts, player, int(self.cast.team[player]), kind))
        self.last_kicker = player
        return ts

    def _launch(self, flight: _Flight, outcome: _Outcome, k_s: int) -> None:
        """Make ``flight`` the ball's path up to its outcome and plan the meeting."""
        if self.spell is not None and self.mode == "held":
            self.spell.end = flight.i0
            self.spell = None
        self.mode = "free"
        self.flight, self.outcome = flight, outcome
        self.stand.clear()
        n = min(len(flight.pos), self.n_ms - flight.i0)
        self.ball[flight.i0:flight.i0 + n] = flight.pos[:n]
        self.ball[flight.i0 + n:] = flight.pos[n - 1]
        if outcome.kind == "meet":
            self._plan_meet(k_s, outcome)

    def _touch(self, k_s: int, t: int) -> None:
        spell = self.spell
        c = spell.carrier
        age = t - spell.t_c0
        action = "touch"
        if age >= spell.min_dribble:
            action = self._choose(k_s, c, age >= spell.max_dribble)
        done = False
        if action == "shot":
            done = self._shoot(k_s, t)
        elif action == "clear":
            done = self._clear(k_s, t, c)
        elif action == "pass":
            done = self._pass(k_s, t, c, restart=False)
        if not done:
            self._record_kick(c, t, spell.touch, DRIBBLE)
            self.next_touch = t + spell.period

    def _choose(self, k: int, c: int, must: bool) -> str:
        cast, rng = self.cast, self.rng
        t = cast.team[c]
        p = np.array([self.px[k, c], self.py[k, c]])
        goal = np.array([_W / 2, _GOAL_Y[t]])
        to_goal = float(np.linalg.norm(goal - p))
        own = np.array([_W / 2, _GOAL_Y[1 - t]])
        opp = self._players(team=1 - t)
        pressure = float(np.hypot(self.px[k, opp] - p[0], self.py[k, opp] - p[1]).min())
        r = rng.random()
        if cast.gk[c]:
            return "clear" if r < 0.4 else "pass"
        if to_goal < 25.0 and abs(p[0] - _W / 2) < 16.0 and r < 0.15 + 0.35 * (25 - to_goal) / 25:
            return "shot"
        if np.linalg.norm(own - p) < 20.0 and pressure < 5.0 and r < 0.5:
            return "clear"
        near_edge = min(p[0], _W - p[0], p[1] - _Y0, _Y1 - p[1]) < 4.0
        if must or r < (0.7 if near_edge else 0.45):
            return "pass"
        return "touch"

    def _held_state(self, t: int):
        pos, vel = self._held(self.spell, np.array([t]))
        return pos[0], vel[0]

    def _pass(self, k_s: int, t: int, c: int, restart: bool, ball=None) -> bool:
        """Try up to three passes from ``c`` at ``t``; True if one is played.

        A pass goes to a teammate chosen by position (forward, open, 5-38 m away); one
        that would leave the pitch is tried again to another teammate, unless it is a
        misplaced pass (15 % of passes in open play: off by 12-30 degrees and too hard),
        which is played and goes out. A restart kick is played even if all tries would
        go out.
        """
        cast, rng = self.cast, self.rng
        team = int(cast.team[c])
        if ball is None:
            p_ball, v_ball = self._held_state(t)
        else:
            p_ball, v_ball = ball, np.zeros(3)
        mates = self._players(exclude=(c,), team=team)
        pos = np.stack([self.px[k_s, mates], self.py[k_s, mates]], axis=1)
        vel = np.stack([self.vx[k_s, mates], self.vy[k_s, mates]], axis=1)
        aim = pos + 0.5 * vel
        dist = np.linalg.norm(aim - p_ball[:2], axis=1)
        forward = _ATTACK[team] * (aim[:, 1] - p_ball[1]) / _L
        opp = self._players(team=1 - team)
        opp_pos = np.stack([self.px[k_s, opp], self.py[k_s, opp]], axis=1)
        open_ = np.minimum(np.linalg.norm(aim[:, None] - opp_pos[None], axis=2).min(axis=1),
                           10.0) / 10.0
        score = 1.5 * forward + open_ - 0.02 * np.abs(dist - 15.0) - 1.0 * cast.gk[mates]
        score[(dist < 5.0) | (dist > 38.0)] = -np.inf
        if not np.isfinite(score).any():
            return False
        tries = []
        weights = np.exp(3.0 * (score - score[np.isfinite(score)].max()))
        weights[~np.isfinite(score)] = 0.0
        for _ in range(3):
            if weights.sum() <= 0:
                break
            j = int(rng.choice(len(mates), p=weights / weights.sum()))
            weights[j] = 0.0
            d = float(dist[j])
            direction = _unit(aim[j] - p_ball[:2])
            misplaced = not restart and rng.random() < 0.15
            if misplaced:
                ang = math.radians(rng.uniform(12.0, 30.0) * rng.choice([-1.0, 1.0]))
                direction = np.array([direction[0] * math.cos(ang) - direction[1] * math.sin(ang),
                                      direction[0] * math.sin(ang) + direction[1] * math.cos(ang)])
                d *= rng.uniform(1.2, 1.8)
            if d > 25.0 and rng.random() < 0.5:
                elev = math.radians(rng.uniform(20.0, 35.0))
                speed = math.sqrt(_G * d * 0.8 / math.sin(2 * elev))
                launch = np.array([*(direction * speed * math.cos(elev)), speed * math.sin(elev)])
            else:
                vf = rng.uniform(6.0, 9.0)
                speed = math.sqrt(vf * vf + 2 * 1.6 * d)
                launch = np.array([*(direction * speed), 0.0])
            pulse = _even_ms(rng, 10, 20)
            flight = _simulate(t, p_ball, v_ball, launch - v_ball, pulse)
            out = self._resolve(flight, k_s, exclude=(c,))
            tries.append((flight, out, pulse, int(mates[j])))
            if out.kind == "meet" or (misplaced and out.kind == "out"):
                break
        if not tries:
            return False
        flight, out, pulse, target = tries[-1]
        if out.kind != "meet" and not restart and not misplaced:
            return False
        kind = PASS if out.kind == "meet" else CLEARANCE
        ts = self._record_kick(c, t, pulse, kind)
        if kind == PASS:
            got = out.person
            ok = cast.team[got] == team
            self.passes.append([ts, 2 * out.k * _KNOT_MS, c, got if ok else target, team,
                                int(ok), -1 if ok else got])
        self._launch(flight, out, k_s)
        return True

    def _clear(self, k_s: int, t: int, c: int) -> bool:
        rng = self.rng
        team = int(self.cast.team[c])
        p_ball, v_ball = self._held_state(t)
        ang = math.radians(rng.uniform(-35.0, 35.0))
        fwd = np.array([0.0, _ATTACK[team]])
        direction = np.array([fwd[0] * math.cos(ang) - fwd[1] * math.sin(ang),
                              fwd[0] * math.sin(ang) + fwd[1] * math.cos(ang)])
        speed, elev = rng.uniform(16.0, 22.0), math.radians(rng.uniform(25.0, 40.0))
        launch = np.array([*(direction * speed * math.cos(elev)), speed * math.sin(elev)])
        pulse = _even_ms(rng, 10, 16)
        flight = _simulate(t, p_ball, v_ball, launch - v_ball, pulse)
        out = self._resolve(flight, k_s, exclude=(c,))
        self._record_kick(c, t, pulse, CLEARANCE)
        self._launch(flight, out, k_s)
        return True

    def _shoot(self, k_s: int, t: int) -> bool:
        cast, rng = self.cast, self.rng
        c = self.spell.carrier
        team = int(cast.team[c])
        p_ball, v_ball = self._held_state(t)
        gx0, gx1 = _GOAL_X[team]
        gy = _GOAL_Y[team]
        sign = _ATTACK[team]
        # Ground shots (along the grass), shots in the air, wide and high ones.
        r = rng.random()
        ground = r < 0.35 or 0.5 <= r < 0.7
        if r < 0.5:
            target = np.array([rng.uniform(gx0 + 0.4, gx1 - 0.4), gy,
                               _R if ground else _R + rng.uniform(0.3, 1.6)])
        elif r < 0.85:
            x = (gx0 - rng.uniform(0.5, 4.0)) if rng.random() < 0.5 else \
                (gx1 + rng.uniform(0.5, 4.0))
            target = np.array([x, gy, _R if ground else _R + rng.uniform(0.3, 1.6)])
        else:
            target = np.array([rng.uniform(gx0, gx1), gy, rng.uniform(2.7, 3.5)])
        speed = rng.uniform(17.0, 26.0)
        pulse = _even_ms(rng, 8, 14)
        aim = target.copy()
        for _ in range(4):
            d = aim[:2] - p_ball[:2]
            horiz = float(np.linalg.norm(d))
            tf = horiz / speed
            vz = 0.0 if ground else (aim[2] - _R) / tf + 0.5 * _G * tf
            launch = np.array([*(d / horiz * speed), vz])
            flight = _simulate(t, p_ball, v_ball, launch - v_ball, pulse)
            cross = np.flatnonzero(sign * (flight.pos[:, 1] - gy) >= 0)
            if not len(cross):
                break
            aim[0] += target[0] - flight.pos[cross[0], 0]
            aim[2] += target[2] - flight.pos[cross[0], 2]
        cross = np.flatnonzero(sign * (flight.pos[:, 1] - gy) >= 0)
        i_cross = int(cross[0]) if len(cross) else len(flight.pos)
        on_target = 0
        if i_cross < len(flight.pos):
            cx, cz = flight.pos[i_cross, 0], flight.pos[i_cross, 2]
            on_target = int(gx0 <= cx <= gx1 and cz <= _GOAL_Z)
        i_stop = min(i_cross, flight.out)
        ts = self._record_kick(c, t, pulse, SHOT)
        shot = [ts, c, team, team, on_target, 0, -1, 0, -1]
        self.shots.append(shot)
        # A defender near the path, or the goalkeeper, may stop it first.
        blockers = self._players(team=1 - team, outfield=True)
        meet = self._meet_first(flight, k_s, blockers, np.full(len(blockers), 6.0),
                                np.full(len(blockers), 7.5), _BLOCK_Z, np.inf, i_stop, 100, 0.5,
                                0.0, _BLOCK_REACH)
        if meet is None and on_target:
            # The goalkeeper dives: a short burst of up to 25 m/s^2.
            keeper = np.flatnonzero(cast.player & cast.gk & (cast.team == 1 - team))
            meet = self._meet_first(flight, k_s, keeper, np.full(len(keeper), 25.0),
                                    np.full(len(keeper), 7.5), _BLOCK_Z, np.inf, i_stop, 100,
                                    0.3, 0.0, _BLOCK_REACH)
            if meet is not None and rng.random() > 0.9:
                meet = None
        if meet is not None:
            meet.block = True
            meet.i_end = meet.k * _KNOT_MS
            shot[5], shot[6], shot[8] = 1, meet.person, 2 * meet.i_end
            self._launch(flight, meet, k_s)
            return True
        out = self._resolve(flight, k_s, exclude=(c,))
        if i_cross < len(flight.pos) and (out.kind != "meet" or out.i_end > t + i_cross):
            shot[8] = 2 * (t + i_cross)
        self._launch(flight, out, k_s)
        self.open_shot = shot
        return True

    # -------------------------------------------------------------- outcomes

    def _meet(self, k: int) -> None:
        """The ball reaches the planned player at knot ``k``."""
        out, flight = self.outcome, self.flight
        t = k * _KNOT_MS
        self._flight_bounces(flight, t)
        person = out.person
        self.open_shot = None
        if out.block:
            self._deflect(k, person, t)
            return
        rel = t - flight.i0
        x, vx, y, vy, th, _ = self.knots_at(np.array([person]), np.array([t]))
        body = np.array([x[0], y[0], 0.0])
        body_v = np.array([vx[0], vy[0], 0.0])
        w0 = flight.pos[rel] - body
        w0d = flight.vel[rel] - body_v
        rng = self.rng
        period = int(rng.integers(450, 701))
        touch = _even_ms(rng, 10, 16)
        d_min = rng.uniform(0.25, 0.3)
        mu = rng.uniform(3.0, 4.0)
        spell = _Spell(person, t, t, w0, w0d, period, touch, d_min, mu,
                       speed=rng.uniform(2.5, 5.0), bias=math.radians(rng.uniform(-50, 50)),
                       min_dribble=0 if self.cast.gk[person] else int(rng.integers(0, 1000)),
                       max_dribble=int(rng.integers(1000, 3500)))
        h = np.array([math.cos(th[0]), math.sin(th[0]), 0.0])
        w1 = h * d_min + np.array([0.0, 0.0, _R])
        w1d = -spell.u * h
        tau = 1.5
        for cand in np.arange(_RECEIVE_MIN_MS / 1000.0, 1.51, 0.05):
            _, _, c2, c3 = _cubic(w0, w0d, w1, w1d, cand)
            a = max(np.linalg.norm(2 * c2), np.linalg.norm(2 * c2 + 6 * c3 * cand))
            if a <= _RECEIVE_ACC:
                tau = float(cand)
                break
        spell.t_c0 = t + round(tau * 1000)
        self.spell = spell
        self.spells.append(spell)
        self.mode = "held"
        self.next_touch = spell.t_c0
        self.flight = self.outcome = None

    def _deflect(self, k: int, blocker: int, t: int) -> None:
        """A blocked or saved shot: the blocker deflects the ball (a kick of kind 3)."""
        flight, rng = self.flight, self.rng
        rel = t - flight.i0
        p_ball, v_in = flight.pos[rel].copy(), flight.vel[rel].copy()
        ang = math.radians(rng.uniform(-70.0, 70.0))
        back = -v_in[:2] * rng.uniform(0.15, 0.4)
        back = np.array([back[0] * math.cos(ang) - back[1] * math.sin(ang),
                         back[0] * math.sin(ang) + back[1] * math.cos(ang)])
        v_out = np.array([*back, rng.uniform(0.0, 4.0)])
        if np.linalg.norm(v_out) < 3.0:
            v_out *= 3.0 / max(np.linalg.norm(v_out), 1e-9)
        pulse = _even_ms(rng, 6, 10)
        new = _simulate(t, p_ball, v_in, v_out - v_in, pulse)
        out = self._resolve(new, k, exclude=(blocker,))
        self._record_kick(blocker, t, pulse, CLEARANCE)
        self._launch(new, out, k)

    def _flight_bounces(self, flight: _Flight, end: int) -> None:
        """Record the ground impacts of ``flight`` up to ms ``end`` (inclusive)."""
        n = max(0, min(end - flight.i0 + 1, len(flight.pos)))
        for j in np.flatnonzero(flight.bounce[:n]).tolist():
            self.bounces.append((flight.i0 + j, flight.pos[j, 0], flight.pos[j, 1]))

    def _out(self, k: int) -> None:
        """The ball's centre left the pitch: record it and schedule the restart."""
        cast, rng, flight = self.cast, self.rng, self.flight
        i_out = flight.i0 + flight.out
        self._flight_bounces(flight, i_out)
        frac, line = _crossing(flight.pos[flight.out - 1], flight.pos[flight.out])
        x, y, z = flight.pos[flight.out - 1] + frac * (flight.pos[flight.out] -
                                                       flight.pos[flight.out - 1])
        goal = -1
        last_team = int(cast.team[self.last_kicker]) if self.last_kicker >= 0 else 0
        if line == 0:
            team = 1 - last_team
            spot = np.array([1.0 if x < 0 else _W - 1.0, np.clip(y, _Y0 + 2.0, _Y1 - 2.0)])
            kind, pause = "kick-in", rng.uniform(3.5, 5.0)
        else:
            g = 0 if y > 0 else 1
            gx0, gx1 = _GOAL_X[g]
            if gx0 <= x <= gx1 and z <= _GOAL_Z:
                goal = g
                team = 1 - g  # the team that conceded kicks off
                spot, kind, pause = _CENTRE.copy(), "kick-off", rng.uniform(6.0, 8.0)
            else:
                defending = 1 - g
                line_y = _Y1 if g == 0 else _Y0
                inward = -1.0 if g == 0 else 1.0
                if last_team != defending:
                    team, kind, pause = defending, "goal kick", rng.uniform(4.0, 6.0)
                    spot = np.array([_W / 2 + rng.uniform(-4.0, 4.0), line_y + inward * 5.5])
                else:
                    team, kind, pause = 1 - defending, "corner", rng.uniform(5.0, 7.0)
                    spot = np.array([1.0 if x < _W / 2 else _W - 1.0, line_y + inward * 1.0])
        if self.open_shot is not None and goal == self.open_shot[3]:
            self.open_shot[7] = 1
        self.open_shot = None
        record = [i_out - 1 + frac, x, y, z, line, goal, -1]
        self.outs.append(record)
        self.pending_out = record
        # Carry the ball back: let it roll on for a while, then a smooth quintic to the spot.
        rel = min(flight.out + 800, len(flight.pos) - 1)
        t_dead = flight.i0 + rel
        p0, v0 = flight.pos[rel], flight.vel[rel]
        target = np.array([spot[0], spot[1], _R])
        T = 2.0
        while True:
            coef = _quintic_rest(p0, v0, target, T)
            if _max_quintic_acc(coef, T) <= _DEAD_ACC or T > 20:
                break
            T += 0.25
        t_set = t_dead + int(T * 1000)
        restart = max(i_out + int(pause * 1000), t_set + 500)
        # The taker: the goalkeeper for goal kicks, else the nearest outfield player.
        if kind == "goal kick":
            taker = int(np.flatnonzero(cast.player & cast.gk & (cast.team == team))[0])
        else:
            taker = self._nearest(spot, team, k)
        facing = _unit(_CENTRE - spot) if kind != "kick-off" else np.array([0.0, _ATTACK[team]])
        q = spot - 0.3 * facing
        p0t = np.array([self.px[k, taker], self.py[k, taker]])
        v0t = np.array([self.vx[k, taker], self.vy[k, taker]])
        k_arrive = -(-(restart - 300) // _KNOT_MS)
        while True:
            T_t = (k_arrive - k) * _DT
            c = _cubic(p0t, v0t, q, np.zeros(2), T_t)
            a = max(np.linalg.norm(2 * c[2]), np.linalg.norm(2 * c[2] + 6 * c[3] * T_t))
            s = np.linspace(0.0, T_t, 9)[:, None]
            v = np.linalg.norm(c[1] + 2 * c[2] * s + 3 * c[3] * s * s, axis=1).max()
            if (a <= 4.5 and v <= 7.0) or T_t > 30:
                break
            k_arrive += 1
        restart = max(restart, k_arrive * _KNOT_MS + 300 + int(rng.integers(0, 100)))
        self.plans[taker] = _Plan(k, k_arrive, c)
        self.stand = {taker: (q, math.atan2(facing[1], facing[0]))}
        # The ball's grid: flight until t_dead, quintic to the spot, rest until restart.
        n = min(self.n_ms, t_set) - t_dead
        if n > 0:
            s = np.arange(n) / 1000.0
            self.ball[t_dead:t_dead + n] = _quintic_eval(coef, s)
        self.ball[t_set:] = target
        self.mode = "dead"
        self.dead = _Dead(restart, spot, taker, kind)
        self.flight = self.outcome = None

    def _restart(self, k: int) -> None:
        dead, rng = self.dead, self.rng
        t = dead.restart
        ball = np.array([dead.spot[0], dead.spot[1], _R])
        n_kicks = len(self.kicks)
        if dead.kind == "goal kick" and rng.random() < 0.5:
            self._restart_clear(k, t, dead.taker, ball)
        else:
            self._pass(k, t, dead.taker, restart=True, ball=ball)
        if self.pending_out is not None and len(self.kicks) > n_kicks:
            self.pending_out[6] = self.kicks[-1][0] / 2
        self.pending_out = None
        self.dead = None

    def _restart_clear(self, k: int, t: int, c: int, ball: np.ndarray) -> None:
        rng = self.rng
        team = int(self.cast.team[c])
        ang = math.radians(rng.uniform(-30.0, 30.0))
        direction = np.array([math.sin(ang), _ATTACK[team] * math.cos(ang)])
        speed, elev = rng.uniform(17.0, 22.0), math.radians(rng.uniform(25.0, 40.0))
        launch = np.array([*(direction * speed * math.cos(elev)), speed * math.sin(elev)])
        pulse = _even_ms(rng, 10, 16)
        flight = _simulate(t, ball, np.zeros(3), launch, pulse)
        out = self._resolve(flight, k, exclude=(c,))
        self._record_kick(c, t, pulse, CLEARANCE)
        self._launch(flight, out, k)

    # -------------------------------------------------------------- finishing

    def _finish(self) -> None:
        """Fill the carried-ball parts of the grid and close the open flight."""
        if self.mode == "free" and self.flight is not None:
            self._flight_bounces(self.flight, self.end_ms)
        limit = self.end_ms
        for spell in self.spells:
            end = spell.end if spell.end >= 0 else limit
            end = min(end, limit)
            if end <= spell.t_r:
                continue
            pos, _ = self._held(spell, np.arange(spell.t_r, end))
            self.ball[spell.t_r:end] = pos
            if spell.end < 0:
                self.ball[end:] = pos[-1]

    def truth(self, start_ps: int, duration_ps: int) -> GroundTruth:
        """The ground truth in ps; times are kept in half ms until here."""
        half = 500_000_000  # ps per half ms

        def ps(v):
            return np.where(np.asarray(v) >= 0, start_ps + np.asarray(v, np.int64) * half, -1)

        end = start_ps + duration_ps
        kicks = np.array(self.kicks, np.int64).reshape(-1, 4)
        k = np.zeros(len(kicks), KICK_DTYPE)
        k["ts"] = ps(kicks[:, 0])
        k["player"], k["team"], k["kind"] = kicks[:, 1], kicks[:, 2], kicks[:, 3]
        k = k[k["ts"] < end]

        rows = np.array(self.passes, np.int64).reshape(-1, 7)
        p = np.zeros(len(rows), PASS_DTYPE)
        for j, name in enumerate(PASS_DTYPE.names):
            p[name] = ps(rows[:, j]) if name.startswith("ts") else rows[:, j]
        p = p[p["ts_kick"] < end]

        rows = np.array(self.shots, np.int64).reshape(-1, 9)
        s = np.zeros(len(rows), SHOT_DTYPE)
        for j, name in enumerate(SHOT_DTYPE.names):
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
        return GroundTruth(kicks=k, passes=p, shots=s, out_of_play=o, bounces=b)


def _dribble_offset(s: np.ndarray, spell: _Spell):
    """Distance (m) of the carried ball in front of the body and its rate (m/s), ``s``
    seconds into a dribble period: a Hann touch pulse of ``spell.dv`` over
    ``spell.touch`` ms, against a constant pull-back ``spell.mu``; periodic by design."""
    T = spell.touch / 1000.0
    dv, mu, u = spell.dv, spell.mu, spell.u
    inside = s < T
    ph = 2 * np.pi * np.minimum(s, T) / T
    H = np.where(inside, (np.minimum(s, T) - T / (2 * np.pi) * np.sin(ph)) / T, 1.0)
    Gs = np.where(inside, s * s / (2 * T) - T * (1 - np.cos(ph)) / (4 * np.pi**2), s - T / 2)
    d = spell.d_min - u * s + dv * Gs - mu * s * s / 2
    dd = -u + dv * H - mu * s
    return d, dd


# ----------------------------------------------------------------------------- sampling

_LIMB_SIDE = {LEFT_LEG: _LEG_SIDE, RIGHT_LEG: -_LEG_SIDE, LEFT_ARM: _ARM_SIDE,
              RIGHT_ARM: -_ARM_SIDE}
_LIMB_Z = {LEFT_LEG: _FOOT_Z, RIGHT_LEG: _FOOT_Z, LEFT_ARM: _ARM_Z, RIGHT_ARM: _ARM_Z}


def _sample_times(rng: np.random.Generator, hz: float, duration_ps: int) -> np.ndarray:
    """Reading times (ps since the start) of one transmitter: its own period within 5 %
    of ``1/hz``, a random phase and a uniform jitter of +-1 % of the period."""
    period = 1e12 / hz * rng.uniform(0.95, 1.05)
    phase = rng.uniform(0.0, period)
    n = int((duration_ps - phase) // period) + 1
    t = phase + period * np.arange(n) + rng.uniform(-0.01, 0.01, n) * period
    t = np.round(t).astype(np.int64)
    return t[(t >= 0) & (t < duration_ps)]


def _finite_differences(t_s: np.ndarray, pos: np.ndarray):
    """Velocity and acceleration of one transmitter's readings by central differences
    on its own (non-uniform) time stamps; one-sided at the ends."""
    n = len(t_s)
    vel = np.zeros_like(pos)
    acc = np.zeros_like(pos)
    if n < 2:
        return vel, acc
    dt = np.diff(t_s)[:, None]
    slope = np.diff(pos, axis=0) / dt
    vel[1:-1] = (pos[2:] - pos[:-2]) / (t_s[2:] - t_s[:-2])[:, None]
    vel[0], vel[-1] = slope[0], slope[-1]
    if n >= 3:
        acc[1:-1] = 2 * (slope[1:] - slope[:-1]) / (t_s[2:] - t_s[:-2])[:, None]
        acc[0], acc[-1] = acc[1], acc[-2]
    return vel, acc


def _directions(vec: np.ndarray):
    """``|vec|`` and the direction scaled to length 10,000 (zero for a zero vector)."""
    norm = np.linalg.norm(vec, axis=1)
    scaled = np.divide(vec * 10_000.0, norm[:, None], out=np.zeros_like(vec),
                       where=norm[:, None] > 1e-9)
    return norm, np.round(scaled).astype(np.int32)


@njit(cache=True, nogil=True)
def _place(events, rows, ts, sid, type_id, mm, speed, accel, vdir, adir, player, team, limb,
           start_ps):  # pragma: no cover - compiled
    """Write one transmitter's readings (DEBS units) into ``events`` at ``rows``, a record
    at a time (far faster than strided writes of whole columns into a structured array)."""
    for j in range(rows.shape[0]):
        i = rows[j]
        r = events[i]
        r.ts = ts[j] + start_ps
        r.type = type_id
        r.key = sid
        r.seq = i
        r.ats = ts[j] + start_ps
        r.x = mm[j, 0]
        r.y = mm[j, 1]
        r.z = mm[j, 2]
        r.v = speed[j]
        r.a = accel[j]
        r.vx = vdir[j, 0]
        r.vy = vdir[j, 1]
        r.vz = vdir[j, 2]
        r.ax = adir[j, 0]
        r.ay = adir[j, 1]
        r.az = adir[j, 2]
        r.player = player
        r.team = team
        r.limb = limb


def _put(events: np.ndarray, rows: np.ndarray, ts: np.ndarray, sid: int, type_id: int,
         pos: np.ndarray, vel: np.ndarray, acc: np.ndarray, player: int, team: int, limb: int,
         start_ps: int) -> None:
    """Convert one transmitter's readings (m, m/s, m/s^2) to DEBS units and place them."""
    speed, vdir = _directions(vel)
    accel, adir = _directions(acc)
    _place(events, rows, ts, sid, type_id, np.round(pos * 1000.0).astype(np.int64),
           np.round(speed * 1e6).astype(np.int64), np.round(accel * 1e6).astype(np.int64),
           vdir, adir, player, team, limb, start_ps)


def _sample(cast: _Cast, sim: _Script, rng: np.random.Generator, start_ps: int,
            duration_ps: int) -> np.ndarray:
    """Sample every transmitter at its own times and return the stream sorted by ``ts``.

    All reading times are drawn first, so that each transmitter's readings can be written
    straight to their rows of the sorted stream.
    """
    registry = soccer_registry()
    prof = cast.profile
    ball_id = registry.id("ball")
    times = [_sample_times(rng, prof.ball_hz, duration_ps)
             for _ in range(1 + len(prof.spare_balls))]
    wearers = [(person, sid, limb) for person, sensors in enumerate(cast.sensors)
               for sid, limb in sensors]
    times += [_sample_times(rng, prof.wearer_hz, duration_ps) for _ in wearers]
    bounds = np.cumsum([0] + [len(t) for t in times])
    order = np.argsort(np.concatenate(times), kind="stable")
    row_of = np.empty_like(order)
    row_of[order] = np.arange(len(order))
    events = np.zeros(len(order), registry.dtype(["ball", "player", "referee"]))

    def rows(n: int) -> np.ndarray:
        return row_of[bounds[n]:bounds[n + 1]]

    # The ball in play: linear interpolation of position, velocity and acceleration on
    # the 1 ms grid (velocity and acceleration by central differences of the positions).
    n_grid = int(duration_ps // 10**9) + 3
    grid = sim.ball[:n_grid + 1]
    gvel = np.zeros_like(grid)
    gacc = np.zeros_like(grid)
    gvel[1:-1] = (grid[2:] - grid[:-2]) / 2e-3
    gacc[1:-1] = (grid[2:] - 2 * grid[1:-1] + grid[:-2]) / 1e-6
    gvel[0], gacc[0] = gvel[1], gacc[1]
    t = times[0]
    f = t / 1e9
    i = np.minimum(f.astype(np.int64), n_grid - 1)
    w = (f - i)[:, None]

    def lerp(a):
        return a[i] * (1 - w) + a[i + 1] * w

    _put(events, rows(0), t, prof.ball_in_play, ball_id, lerp(grid), lerp(gvel), lerp(gacc),
         0, 0, 0, start_ps)
    for j, sid in enumerate(prof.spare_balls):
        t = times[1 + j]
        spot = np.array([*_SPARE_SPOTS[j % len(_SPARE_SPOTS)], _R])
        zero = np.zeros((len(t), 3))
        _put(events, rows(1 + j), t, sid, ball_id, zero + spot, zero, zero, 0, 0, 0, start_ps)
    # Wearers: their limbs around the Hermite curve of the body, at their own times.
    first = 1 + len(prof.spare_balls)
    for n, (person, sid, limb) in enumerate(wearers, start=first):
        t = times[n]
        is_ref = person == cast.referee
        x, _, y, _, th, _ = sim.knots_at(np.full(len(t), person), t / 1e9)
        side = _LIMB_SIDE[limb]
        pos = np.stack([x - side * np.sin(th), y + side * np.cos(th),
                        np.full(len(t), _LIMB_Z[limb])], axis=1)
        vel, acc = _finite_differences(t / 1e12, pos)
        _put(events, rows(n), t, sid, registry.id(cast.type_name[person]), pos, vel, acc,
             -1 if is_ref else person, -1 if is_ref else int(cast.team[person]), limb,
             start_ps)
    return events
