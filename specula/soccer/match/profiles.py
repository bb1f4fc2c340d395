"""Who plays a simulated match: the sensor set-ups, the formations and the cast.

A profile says which transmitters there are and at which rates; :func:`build_cast` turns
it into the people of a match (every player in the metadata and the referee), as
arrays indexed by person, with each outfield player's slot in his team's formation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specula.soccer.debs2013 import (
    LEFT_ARM,
    LEFT_LEG,
    RIGHT_ARM,
    RIGHT_LEG,
    Metadata,
    Player,
)
from specula.soccer.match.truth import MatchProfile

#: Where the balls that are not in play lie beside the pitch (x, y in m), as in the real
#: game's sample.
SPARE_SPOTS = ((-7.164, -9.401), (-5.080, 15.892), (-4.0, 3.0))

#: Formation slots of outfield players: (across, depth) in the team's frame, depth 0 at
#: its own goal line and 1 at the opponent's.
FORMATIONS = {
    7: ((0.2, 0.22), (0.5, 0.18), (0.8, 0.22), (0.2, 0.48), (0.5, 0.42), (0.8, 0.48),
        (0.5, 0.68)),
    10: ((0.15, 0.22), (0.38, 0.18), (0.62, 0.18), (0.85, 0.22), (0.15, 0.48),
         (0.38, 0.44), (0.62, 0.44), (0.85, 0.48), (0.4, 0.68), (0.6, 0.68)),
}


@dataclass(frozen=True)
class ProfileSpec:
    """How many people a profile puts on the pitch and beside it, and the nominal rates."""

    players_on_pitch: int  # per team, goalkeeper included
    substitutes: int  # per team
    ball_hz: float  # nominal sampling rate of a ball, Hz
    wearer_hz: float  # nominal sampling rate of a sensor worn by a person, Hz


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
PROFILES: dict[str, ProfileSpec] = {
    "debs2013": ProfileSpec(8, 0, 2000.0, 200.0),
    "paper": ProfileSpec(11, 6, 2000.0, 200.0),
}


@dataclass
class Cast:
    """Everyone who wears a transmitter, as arrays indexed by person (players, referee)."""

    metadata: Metadata
    profile: MatchProfile
    team: np.ndarray  # (N,) 0/1, -1 referee
    goalkeeper: np.ndarray  # (N,) bool
    active: np.ndarray  # (N,) bool: on the pitch (players and referee)
    playing: np.ndarray  # (N,) bool: players on the pitch
    referee: int  # person index of the referee
    slot: np.ndarray  # (N, 2) formation slot (across, depth) of outfield players
    sensors: list[list[tuple[int, int]]]  # per person: (sensor id, limb)
    type_name: list[str]  # per person: the event type of his readings


#: The limbs that carry a transmitter in the ``paper`` profile.
_LIMBS = (LEFT_LEG, RIGHT_LEG, LEFT_ARM, RIGHT_ARM)


def _paper_metadata(spec: ProfileSpec) -> Metadata:
    """Invented sensors for the ``paper`` profile: see :data:`PROFILES`."""
    per_team = spec.players_on_pitch + spec.substitutes
    built = []
    for pid in range(2 * per_team):
        team, number = divmod(pid, per_team)
        sensors = {limb: 300 + 4 * pid + limb for limb in _LIMBS}
        built.append(Player(pid, f"{'AB'[team]}{number + 1:02d}", team, sensors,
                            number == 0))
    balls = (201, 202, 203)
    referee = {limb: 500 + limb for limb in _LIMBS}
    return Metadata(balls={1: balls, 2: balls}, players=tuple(built), referee=referee)


def build_cast(name: str) -> Cast:
    """The people of a match of profile ``name`` (a key of :data:`PROFILES`).

    Persons are the players in metadata order, then the referee. Per team, the first
    ``players_on_pitch`` players play and the others are substitutes; the first ball of
    the first half is the one in play.
    """
    spec = PROFILES[name]
    meta = Metadata.default() if name == "debs2013" else _paper_metadata(spec)
    balls = meta.balls[1]
    in_play, spares = balls[0], tuple(balls[1:])
    players = meta.players
    n_players = len(players)
    n_people = n_players + 1
    team = np.array([p.team for p in players] + [-1], np.int64)
    goalkeeper = np.array([p.goalkeeper for p in players] + [False])
    # Per team: the first ``players_on_pitch`` in metadata order play, the rest are subs.
    on_pitch, subs = [], []
    for t in (0, 1):
        ids = [p.id for p in players if p.team == t]
        on_pitch += ids[: spec.players_on_pitch]
        subs += ids[spec.players_on_pitch:]
    active = np.zeros(n_people, bool)
    active[on_pitch] = True
    active[n_players] = True
    playing = active.copy()
    playing[n_players] = False
    slot = np.zeros((n_people, 2))
    slots = FORMATIONS[spec.players_on_pitch - 1]
    for t in (0, 1):
        outfield = [i for i in on_pitch if team[i] == t and not goalkeeper[i]]
        for (across, depth), i in zip(slots, outfield, strict=True):
            slot[i] = (across if t == 0 else 1.0 - across, depth)
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
    type_name = ["player"] * n_players + ["referee"]
    return Cast(meta, profile, team, goalkeeper, active, playing, n_players, slot, sensors,
                type_name)
