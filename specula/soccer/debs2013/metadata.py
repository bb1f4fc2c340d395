"""Sensor metadata of the DEBS 2013 game: the balls, the players and the referee.

``metadata.txt`` says which sensor ids are balls in which half, and which are worn by
whom on which limb (:class:`Metadata`). The game's metadata is bundled
(:meth:`Metadata.default`), so the reader works without the data directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from specula.soccer.debs2013._common import PathLike

__all__ = ["LEFT_ARM", "LEFT_LEG", "RIGHT_ARM", "RIGHT_LEG", "Metadata", "Player",
           "read_metadata"]

#: Limb codes of the ``limb`` payload field.
LEFT_LEG, RIGHT_LEG, LEFT_ARM, RIGHT_ARM = 0, 1, 2, 3

_LIMB_CODES = {"left leg": LEFT_LEG, "right leg": RIGHT_LEG, "left arm": LEFT_ARM,
               "right arm": RIGHT_ARM}


@dataclass(frozen=True)
class Player:
    """A player and the sensors they wear.

    Attributes
    ----------
    id : int
        Index of the player in :attr:`Metadata.players` (team A first, in file order);
        the ``player`` payload field of their readings.
    name : str
        Name as written in the metadata.
    team : int
        0 for team A, 1 for team B.
    sensors : dict of int to int
        Limb code (:data:`LEFT_LEG` ... :data:`RIGHT_ARM`) to sensor id.
    goalkeeper : bool
        Whether the player wears arm sensors, which only the goalkeepers do.
    """

    id: int
    name: str
    team: int
    sensors: dict[int, int]
    goalkeeper: bool


@dataclass(frozen=True)
class Metadata:
    """Who and what the sensors of a game are attached to.

    Attributes
    ----------
    balls : dict of int to tuple of int
        Half (1, 2) to the sensor ids of the balls in play in that half.
    players : tuple of Player
        All players; ``players[i].id == i``.
    referee : dict of int to int
        Limb code to sensor id of the referee.
    """

    balls: dict[int, tuple[int, ...]]
    players: tuple[Player, ...]
    referee: dict[int, int]

    @classmethod
    def default(cls) -> Metadata:
        """The metadata of the DEBS 2013 game (bundled copy of its ``metadata.txt``)."""
        return cls.parse(_DEFAULT_METADATA)

    @classmethod
    def parse(cls, text: str) -> Metadata:
        """Parse the text of a DEBS 2013 ``metadata.txt``.

        Raises
        ------
        ValueError
            Naming the line, if a line is not understood, a sensor id is used twice, or
            a part (balls of both halves, two teams, the referee) is missing.
        """
        return _parse_metadata(text)

    @property
    def ball_sids(self) -> tuple[int, ...]:
        """Sensor ids of all balls, over both halves, ascending."""
        return tuple(sorted({sid for sids in self.balls.values() for sid in sids}))

    def sensor_roles(self) -> dict[int, tuple[str, int, int, int]]:
        """Map every sensor id to ``(type_name, player_id, team, limb)``.

        ``type_name`` is ``"ball"``, ``"player"`` or ``"referee"``. The referee has
        player id -1 and team -1; balls have -1 for player, team and limb.
        """
        roles: dict[int, tuple[str, int, int, int]] = {}
        for sid in self.ball_sids:
            roles[sid] = ("ball", -1, -1, -1)
        for player in self.players:
            for limb, sid in player.sensors.items():
                roles[sid] = ("player", player.id, player.team, limb)
        for limb, sid in self.referee.items():
            roles[sid] = ("referee", -1, -1, limb)
        return roles


def read_metadata(path: PathLike) -> Metadata:
    """Read a DEBS 2013 ``metadata.txt`` (see :meth:`Metadata.parse`)."""
    return Metadata.parse(Path(path).read_text(encoding="utf-8"))


_DEFAULT_METADATA = """\
Balls:
- 1st Half: 4, 8, 10
- 2nd Half: 4, 8, 10, 12


Team A:


Nick Gertje (Left Leg: 13, Right Leg: 14, Left Arm: 97, Right Arm: 98)
Dennis Dotterweich (Left Leg: 47, Right Leg: 16)
Niklas Waelzlein (Left Leg: 49, Right Leg: 88)
Wili Sommer (Left Leg: 19, Right Leg: 52)
Philipp Harlass (Left Leg: 53, Right Leg: 54)
Roman Hartleb (Left Leg: 23, Right Leg: 24)
Erik Engelhardt (Left Leg: 57, Right Leg: 58)
Sandro Schneider (Left Leg: 59, Right Leg: 28)



Team B:


Leon Krapf (Left Leg: 61, Right Leg: 62, Left Arm: 99, Right Arm: 100)
Kevin Baer (Left Leg: 63, Right Leg: 64)
Luca Ziegler (Left Leg: 65, Right Leg: 66)
Ben Mueller (Left Leg: 67, Right Leg: 68)
Vale Reitstetter (Left Leg: 69, Right Leg: 38)
Christopher Lee (Left Leg: 71, Right Leg: 40)
Leon Heinze (Left Leg: 73, Right Leg: 74)
Leo Langhans (Left Leg: 75, Right Leg: 44)


Referee (Left Leg: 105, Right Leg: 106)
"""

_HALF_NAMES = {"1st": 1, "2nd": 2}
_BALLS_RE = re.compile(r"-\s*(1st|2nd)\s+half\s*:\s*(\d+(?:\s*,\s*\d+)*)", re.IGNORECASE)
_TEAM_RE = re.compile(r"team\s+([ab])\s*:", re.IGNORECASE)
_WEARER_RE = re.compile(r"(\S.*?)\s*\((.*)\)")
_SENSOR_RE = re.compile(r"((?:left|right)\s+(?:leg|arm))\s*:\s*(\d+)", re.IGNORECASE)


def _parse_metadata(text: str) -> Metadata:
    balls: dict[int, tuple[int, ...]] = {}
    players: list[Player] = []
    referee: dict[int, int] | None = None
    section: str | None = None  # "balls", "team"
    team = -1
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.casefold() == "balls:":
            section = "balls"
            continue
        if section == "balls" and (match := _BALLS_RE.fullmatch(line)):
            half = _HALF_NAMES[match.group(1).lower()]
            if half in balls:
                raise ValueError(f"metadata line {number}: balls of half {half} given twice")
            balls[half] = tuple(int(sid) for sid in match.group(2).split(","))
            continue
        if match := _TEAM_RE.fullmatch(line):
            section, team = "team", "ab".index(match.group(1).lower())
            continue
        match = _WEARER_RE.fullmatch(line)
        if match is None:
            raise ValueError(f"metadata line {number}: cannot parse {line!r}")
        name, sensors = match.group(1), _parse_sensors(match.group(2), number)
        if name.casefold() == "referee":
            if referee is not None:
                raise ValueError(f"metadata line {number}: second referee")
            referee = sensors
        elif section == "team":
            goalkeeper = LEFT_ARM in sensors or RIGHT_ARM in sensors
            players.append(Player(len(players), name, team, sensors, goalkeeper))
        else:
            raise ValueError(f"metadata line {number}: player {name!r} outside a team section")

    if sorted(balls) != [1, 2]:
        raise ValueError(f"metadata: balls of both halves needed, got halves {sorted(balls)}")
    if sorted({p.team for p in players}) != [0, 1]:
        raise ValueError("metadata: players of two teams (Team A, Team B) needed")
    if referee is None:
        raise ValueError("metadata: no referee line")
    metadata = Metadata(balls=balls, players=tuple(players), referee=referee)
    _check_unique_sensors(metadata)
    return metadata


def _parse_sensors(text: str, number: int) -> dict[int, int]:
    sensors: dict[int, int] = {}
    for part in text.split(","):
        match = _SENSOR_RE.fullmatch(part.strip())
        if match is None:
            raise ValueError(f"metadata line {number}: cannot parse sensor {part.strip()!r}")
        limb = _LIMB_CODES[" ".join(match.group(1).lower().split())]
        if limb in sensors:
            raise ValueError(f"metadata line {number}: limb {match.group(1)!r} given twice")
        sensors[limb] = int(match.group(2))
    return sensors


def _check_unique_sensors(metadata: Metadata) -> None:
    owners: dict[int, str] = {}
    wearers = [(p.name, p.sensors) for p in metadata.players] + [("referee", metadata.referee)]
    for name, sensors in wearers:
        for sid in sensors.values():
            if sid in owners or sid in metadata.ball_sids:
                other = owners.get(sid, "a ball")
                raise ValueError(f"metadata: sensor {sid} of {name} is also used by {other}")
            owners[sid] = name
