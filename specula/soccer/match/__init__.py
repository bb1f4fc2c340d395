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
   that follows the play (the ball smoothed over 2 s), press the ball carrier, keep
   clear of the ball unless they play it, and are steered by exact cubic plans when
   they must meet the ball (receive a pass, intercept, block) or take a restart. Near
   their spot they let it come to them (1.5 m of slack, so they walk, jog and stand),
   further away they run at up to 5 m/s, the one pressing the carrier at up to 6 m/s;
   now and then (0.7 times a minute each) an outfield player sprints 15-25 m, forward
   when his team has the ball and back when it has not, at up to 7.6 m/s. The plans are
   checked against 7.5 m/s (to meet the ball) and 7 m/s (to a restart). What that gives
   against published match physiology: ``docs/soccer.md``.
2. The ball lives on a 1 ms grid. Carried, it stays 0.25-0.5 m in front of the
   carrier's body, pushed on by small touches; kicked, it gets a short acceleration
   pulse (a Hann window of 6-20 ms whose integral is the kick's velocity change, so its
   peak is ``2 |dv| / duration``: about 170-560 m/s^2 for a dribble touch, 0.8-3 km/s^2
   for a pass, 3-5 km/s^2 for a shot), then flies with gravity, quadratic air drag,
   bounces and rolling friction (integrated at 0.25 ms). Passes are received softly:
   the ball is brought to the receiver's foot with a planned acceleration relative to
   him of at most 28 m/s^2, so receptions are mostly no kicks (one that still peaks
   above 55 m/s^2, as the receiver turns, is one in the truth). After the ball leaves the
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
    a misplaced one, or a restart kick with no teammate in reach), 4 a reception whose
    ball peaks above 55 m/s^2 anyway (``ts`` its strongest ms; most receptions stay
    below and are no kick).
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
    goal line; -1 if neither happened (a weak shot that was picked up). ``ts_line`` is
    when the free path (had nobody touched it) crosses the goal line, -1 if it never
    does: a shot on goal in the sense of DEBS 2013 query 4 is on target and crosses the
    line within 1.5 s of the kick.
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
    Impacts of the ball: its ground impacts in play (bounces, and the landing after
    which it rolls) and, after it left the pitch, those until it is picked up (on the
    ground and off the boards): they produce acceleration peaks as well but are no
    kicks; ``ts`` and position (mm) of the 1 ms step of the impact. Apart from kicks and
    impacts the ball accelerates by less than 55 m/s^2 (by design; at most ~35 m/s^2 in
    our checks), and a ball lying still reads sensor noise like the real sample's
    resting balls (|a| median ~7 m/s^2, at most 27).

Records are kept when their own ``ts`` (``ts_kick`` for passes) lies in the simulated
interval; outcomes (receptions, restarts) can lie up to a few seconds after its end.

Typical content, per minute of a ``debs2013`` match (10 matches of 65 s): 35 kicks
(19 dribble touches), 14 passes of which 17 % are intercepted (about 8 per team and
minute of play, as in the professional game), 0.8 shots, 1.5 times out of play. More
shots than a real game has, on purpose: detectors need events to be scored against.

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

import numpy as np

from specula.soccer.match.profiles import PROFILES, build_cast
from specula.soccer.match.sampling import sample
from specula.soccer.match.script import Script
from specula.soccer.match.truth import (
    BOUNCE_DTYPE,
    CLEARANCE,
    DRIBBLE,
    KICK_DTYPE,
    OUT_DTYPE,
    PASS,
    PASS_DTYPE,
    RECEPTION,
    SHOT,
    SHOT_DTYPE,
    GroundTruth,
    Match,
    MatchProfile,
)

__all__ = [
    "BOUNCE_DTYPE",
    "CLEARANCE",
    "DRIBBLE",
    "KICK_DTYPE",
    "OUT_DTYPE",
    "PASS",
    "PASS_DTYPE",
    "PROFILES",
    "RECEPTION",
    "SHOT",
    "SHOT_DTYPE",
    "GroundTruth",
    "Match",
    "MatchProfile",
    "generate_match",
]


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
    cast = build_cast(profile)
    script = Script(cast, seconds, rng)
    script.run()
    duration_ps = round(seconds * 1e12)
    events = sample(cast, script.bodies, script.ball, rng, start_ps, duration_ps)
    truth = script.truth(start_ps, duration_ps)
    return Match(events=events, metadata=cast.metadata, truth=truth, profile=cast.profile,
                 start_ps=start_ps, end_ps=start_ps + duration_ps)
