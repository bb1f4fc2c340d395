"""Reading the DEBS 2013 Grand Challenge soccer data: positions, metadata, referee annotations.

The data set of the DEBS 2013 Grand Challenge was recorded by a real-time locating
system in a soccer game on a full-size pitch. It has three parts, and this module reads
all of them into the event model of :mod:`specula.events`:

* **Position readings** (``full-game.csv`` and samples of it): one line per sensor
  reading, 13 comma-separated integers ``sid, ts, x, y, z, |v|, |a|, vx, vy, vz, ax, ay,
  az`` (units in :mod:`specula.soccer.types`: picoseconds, millimetres,
  micrometres per second (squared), direction components scaled to length 10,000).
  :func:`read_positions` streams them as ``ball``, ``player`` and ``referee`` events in
  chunks of bounded size and sets aside malformed lines as :class:`Quarantined` records
  instead of failing the whole file, since one broken line among tens of millions
  should cost one reading, not the run. :func:`write_positions` writes events back in
  the same format, so that generated matches can be stored like the real one.
* **Metadata** (``metadata.txt``): which sensor ids are balls in which half, and which
  are worn by whom on which limb (:class:`Metadata`). The game's metadata is bundled
  (:meth:`Metadata.default`), so the reader works without the data directory.
* **Referee annotations** (``referee-events/``): game interruptions, shots on goal and
  ball possession per player, annotated by hand on the referee's clock
  (:func:`read_referee_events`).

Examples
--------
>>> import io
>>> data = io.BytesIO(b"4,10753295594424116,100,-200,0,0,0,0,0,0,0,0,0\\r\\n"
...                   b"4,oops,100,-200,0,0,0,0,0,0,0,0,0\\r\\n")
>>> events, quarantine = read_all(data)
>>> events["key"].tolist(), events["x"].tolist(), events["seq"].tolist()
([4], [100], [0])
>>> quarantine[0].line, quarantine[0].field, quarantine[0].reason
(2, 'ts', "not an integer ('oops')")
"""

from __future__ import annotations

import gzip
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import IO, Any

import numpy as np

from specula.events import InvalidEvent
from specula.soccer.types import soccer_registry

__all__ = [
    "DIRECTION_BOUND",
    "HALF_END_PS",
    "HALF_START_PS",
    "INTERRUPTION_DTYPE",
    "LEFT_ARM",
    "LEFT_LEG",
    "POSITION_COLUMNS",
    "POSSESSION_DTYPE",
    "RECORDING_PS",
    "RIGHT_ARM",
    "RIGHT_LEG",
    "SHOT_DTYPE",
    "X_BOUNDS",
    "Y_BOUNDS",
    "Z_BOUNDS",
    "Metadata",
    "Player",
    "PositionChunk",
    "Quarantined",
    "RefereeEvents",
    "position_dtype",
    "read_all",
    "read_metadata",
    "read_positions",
    "read_referee_events",
    "write_positions",
]

PathLike = str | os.PathLike[str]

#: Column names of a position line, in file order (``v`` is ``|v|``, ``a`` is ``|a|``).
POSITION_COLUMNS: tuple[str, ...] = (
    "sid", "ts", "x", "y", "z", "v", "a", "vx", "vy", "vz", "ax", "ay", "az",
)

_N_COLUMNS = len(POSITION_COLUMNS)

#: Limb codes of the ``limb`` payload field.
LEFT_LEG, RIGHT_LEG, LEFT_ARM, RIGHT_ARM = 0, 1, 2, 3

_LIMB_CODES = {"left leg": LEFT_LEG, "right leg": RIGHT_LEG, "left arm": LEFT_ARM,
               "right arm": RIGHT_ARM}

#: Loose sanity bounds of a position in mm. The DEBS pitch is x in [0, 52483],
#: y in [-33960, 33965]; the bounds leave room for readings beside the pitch (benches,
#: balls kicked out, sensors carried around) and only reject values that cannot be
#: a reading from this stadium at all.
X_BOUNDS = (-60_000, 110_000)
Y_BOUNDS = (-80_000, 80_000)
Z_BOUNDS = (-5_000, 40_000)

#: Largest absolute direction component: the vectors are scaled to length 10,000, and
#: rounding of the components can exceed that by one.
DIRECTION_BOUND = 10_001

#: Sensor time stamps (ps) of the start and end of each half, as published with the
#: DEBS 2013 Grand Challenge.
HALF_START_PS: Mapping[int, int] = MappingProxyType(
    {1: 10_753_295_594_424_116, 2: 13_086_639_146_403_495}
)
HALF_END_PS: Mapping[int, int] = MappingProxyType(
    {1: 12_557_295_594_424_116, 2: 14_879_639_146_403_495}
)

#: Sensor time stamps (ps) a reading of the game may carry: from 30 minutes before the
#: first half to 30 minutes after the second (the published sample is from before the
#: kick-off).
RECORDING_PS: tuple[int, int] = (HALF_START_PS[1] - 1_800 * 10**12,
                                 HALF_END_PS[2] + 1_800 * 10**12)

_PICOS_PER_MILLI = 10**9
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_READ_BYTES_PER_ROW = 100  # a little more than the ~85 bytes of a real line

_FILL_ROWS = 8192  # rows of events filled at a time, ~1 MB

_WRITE_ROWS = 100_000  # rows formatted at a time by write_positions


# --------------------------------------------------------------------------- metadata


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


# --------------------------------------------------------------------------- positions


def position_dtype() -> np.dtype:
    """Batch dtype of position events: core fields, position payload, wearer fields."""
    return soccer_registry().dtype(["ball", "player", "referee"])


@dataclass(frozen=True)
class Quarantined:
    """A line of a position file that was set aside instead of read.

    Attributes
    ----------
    line : int
        1-based line number in the file.
    text : str
        The line as read, without its line terminator (bytes that are not UTF-8 are
        kept as backslash escapes).
    field : str or None
        DEBS name of the offending field (one of :data:`POSITION_COLUMNS`), or None
        when the line as a whole is wrong (number of fields).
    reason : str
        What is wrong, e.g. ``"not an integer ('12a')"``.
    """

    line: int
    text: str
    field: str | None
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", field {self.field!r}" if self.field else "")
        return f"{where}: {self.reason}"


@dataclass(frozen=True, eq=False)
class PositionChunk:
    """A chunk of a position file: its valid readings and its quarantined lines.

    Attributes
    ----------
    events : numpy.ndarray
        Valid readings in file order, dtype :func:`position_dtype`.
    quarantine : list of Quarantined
        Rejected lines of the chunk, in file order.
    """

    events: np.ndarray
    quarantine: list[Quarantined]


def read_positions(
    path_or_file: PathLike | IO[bytes],
    metadata: Metadata | None = None,
    *,
    chunk_rows: int = 1_000_000,
) -> Iterator[PositionChunk]:
    """Stream the position readings of a DEBS 2013 file in chunks.

    Parameters
    ----------
    path_or_file : path or binary file object
        A ``.csv`` file, or a gzip-compressed ``.csv.gz`` (by the suffix), or an open
        binary stream of CSV text.
    metadata : Metadata, optional
        Sensor roles; the game's own metadata (:meth:`Metadata.default`) by default.
    chunk_rows : int, default 1,000,000
        Most lines per chunk. Memory use is bounded by the chunk, not the file:
        about 500 bytes per line while a chunk is parsed (~0.5 GB at the default).

    Yields
    ------
    PositionChunk
        One per block of at most ``chunk_rows`` lines. Each valid line becomes one
        event: type ``ball``, ``player`` or ``referee`` by the role of its sensor,
        ``key`` = sensor id, ``ts`` = ``ats`` = the time stamp, ``seq`` = 0-based row
        number in the file (empty lines are not rows, rejected lines are), payload in
        DEBS units, and ``player``, ``team``, ``limb`` from the metadata for player
        and referee readings (zero for balls). ``producer``, ``kplus``, ``flags`` and
        ``origin`` are 0.

    Notes
    -----
    A line is rejected (quarantined) when

    * it does not have exactly 13 comma-separated fields;
    * a field is not a decimal integer (``-?[0-9]+``, no spaces or ``+``) in int64
      range;
    * its sensor id (``sid``) is not in the metadata;
    * ``ts`` is not positive, or outside the recording (:data:`RECORDING_PS`);
    * the position is outside the loose sanity box :data:`X_BOUNDS`,
      :data:`Y_BOUNDS`, :data:`Z_BOUNDS`, which surrounds the pitch x in [0, 52483],
      y in [-33960, 33965] generously: it rejects impossible values, not readings
      beside the pitch;
    * ``|v|`` (``v``) or ``|a|`` (``a``) is negative;
    * a direction component is outside ``[-DIRECTION_BOUND, DIRECTION_BOUND]``.

    One record per rejected line names the first failing check, in this order. Lines
    that are empty or hold only whitespace are skipped silently. Lines may end in LF or
    CR LF.

    Lines are checked and converted with whole-array NumPy operations; only lines the
    vectorised checks cannot prove well-formed are parsed one by one, which also
    decides their verdict.
    """
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, got {chunk_rows}")
    roles = _RoleTable(metadata if metadata is not None else Metadata.default())
    return _read_positions(path_or_file, roles, chunk_rows)


def _read_positions(
    path_or_file: PathLike | IO[bytes], roles: _RoleTable, chunk_rows: int
) -> Iterator[PositionChunk]:
    first_line, first_row = 1, 0
    with _open_binary(path_or_file) as stream:
        for blob, newlines in _line_blocks(stream, chunk_rows):
            chunk, rows = _parse_block(blob, newlines, first_line, first_row, roles)
            first_line += len(newlines)
            first_row += rows
            yield chunk


def read_all(
    path_or_file: PathLike | IO[bytes], metadata: Metadata | None = None
) -> tuple[np.ndarray, list[Quarantined]]:
    """Read a whole position file: all valid events and all quarantined lines.

    See :func:`read_positions`; this concatenates its chunks.
    """
    batches: list[np.ndarray] = []
    quarantine: list[Quarantined] = []
    for chunk in read_positions(path_or_file, metadata):
        batches.append(chunk.events)
        quarantine.extend(chunk.quarantine)
    if not batches:
        return np.zeros(0, position_dtype()), quarantine
    return np.concatenate(batches), quarantine


def write_positions(path: PathLike, events: np.ndarray, *, newline: str = "\r\n") -> int:
    """Write position events as a DEBS 2013 CSV file (gzip-compressed if ``.gz``).

    Parameters
    ----------
    path : path
        Target file; a name ending in ``.gz`` is written gzip-compressed.
    events : numpy.ndarray
        Events with the fields ``key`` (written as the sensor id), ``ts`` and the
        position payload (:data:`POSITION_COLUMNS`), e.g. from :func:`read_positions`.
    newline : str, default ``"\\r\\n"``
        Line terminator; the original files use CR LF.

    Returns
    -------
    int
        Number of lines written.

    Raises
    ------
    InvalidEvent
        Naming the record and field, if a row would not pass the checks of
        :func:`read_positions` (apart from the sensor id being in some metadata),
        so that every written file reads back without quarantine.
    ValueError
        If ``events`` lacks one of these fields or has a non-integer one.
    """
    names = events.dtype.names or ()
    missing = [name for name in ("key", *POSITION_COLUMNS[1:]) if name not in names]
    if missing:
        raise ValueError(f"events lack the fields {missing}")
    for name in ("key", *POSITION_COLUMNS[1:]):
        if events.dtype[name].kind not in "iu":
            raise ValueError(f"field {name!r} must be an integer, got {events.dtype[name]}")
    values = np.empty((len(events), _N_COLUMNS), np.int64)
    values[:, 0] = events["key"]
    for column, name in enumerate(POSITION_COLUMNS[1:], start=1):
        values[:, column] = events[name]
    bad = _violations(values, known=np.ones(len(values), bool))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        field, reason = _first_violation(values[row], known=True)
        raise InvalidEvent(row, field, reason)
    name = os.fspath(path)
    with gzip.open(name, "wb", compresslevel=6) if name.endswith(".gz") else open(
        name, "wb"
    ) as stream:
        for start in range(0, len(values), _WRITE_ROWS):
            rows = values[start : start + _WRITE_ROWS].tolist()
            text = newline.join(",".join(map(str, row)) for row in rows) + newline
            stream.write(text.encode("ascii"))
    return len(values)


class _RoleTable:
    """Sensor roles as sorted arrays, for vectorised lookup by sensor id."""

    def __init__(self, metadata: Metadata) -> None:
        registry = soccer_registry()
        roles = metadata.sensor_roles()
        self.sids = np.array(sorted(roles), np.int64)
        entries = [roles[sid] for sid in self.sids.tolist()]
        self.type = np.array([registry.id(e[0]) for e in entries], np.int32)
        is_ball = np.array([e[0] == "ball" for e in entries], bool)
        # Ball events leave the wearer columns at zero, like any column of another type.
        self.player = np.where(is_ball, 0, [e[1] for e in entries]).astype(np.int32)
        self.team = np.where(is_ball, 0, [e[2] for e in entries]).astype(np.int8)
        self.limb = np.where(is_ball, 0, [e[3] for e in entries]).astype(np.int8)
        self.dtype = registry.dtype(["ball", "player", "referee"])

    def lookup(self, sid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Index into the table of each sensor id, and whether it is known."""
        index = np.searchsorted(self.sids, sid)
        clipped = np.minimum(index, len(self.sids) - 1)
        return clipped, self.sids[clipped] == sid


@contextmanager
def _open_binary(source: PathLike | IO[bytes]) -> Iterator[IO[bytes]]:
    """A binary stream of a path (gzip by the ``.gz`` suffix) or of a caller's file object.

    Streams the caller opened stay open; files opened here are closed.
    """
    if not isinstance(source, str | os.PathLike):
        yield source
        return
    name = os.fspath(source)
    with gzip.open(name, "rb") if name.endswith(".gz") else open(name, "rb") as stream:
        yield stream


def _line_blocks(stream: IO[Any], chunk_rows: int) -> Iterator[tuple[bytes, np.ndarray]]:
    """Split a stream into blocks of at most ``chunk_rows`` whole lines.

    Yields ``(blob, newlines)``: the bytes of the lines, each ending in a newline (one
    is added to an unterminated last line), and the offsets of the newlines in the blob.
    """
    read_size = max(chunk_rows * _READ_BYTES_PER_ROW, 1 << 16)
    pending = b""
    eof = False
    while not eof:
        data = stream.read(read_size)
        if isinstance(data, str):
            data = data.encode("utf-8")
        eof = not data
        buffer = pending + data if pending else data
        if eof and buffer and not buffer.endswith(b"\n"):
            buffer += b"\n"
        newlines = np.flatnonzero(np.frombuffer(buffer, np.uint8) == _NL)
        start, taken = 0, 0
        while len(newlines) - taken >= chunk_rows or (eof and taken < len(newlines)):
            count = min(chunk_rows, len(newlines) - taken)
            end = int(newlines[taken + count - 1]) + 1
            yield buffer[start:end], newlines[taken : taken + count] - start
            start, taken = end, taken + count
        pending = buffer[start:]


_NL, _CR, _COMMA, _MINUS = ord("\n"), ord("\r"), ord(","), ord("-")
_DIGITS = np.arange(ord("0"), ord("9") + 1)


def _pair_table() -> np.ndarray:
    """Which consecutive byte pairs a well-formed position line may contain.

    Indexed by the little-endian uint16 of the pair, ``first + 256 * second``. The pairs
    spell out the grammar of a line: fields ``-?[0-9]+`` separated by commas, an
    optional CR before the newline, and a field (not a newline) after each newline.
    """
    table = np.zeros((256, 256), bool)  # [second, first]
    for separator in (_COMMA, _NL):
        table[_DIGITS, separator] = True
        table[_MINUS, separator] = True
    table[_DIGITS, _MINUS] = True
    for second in (*_DIGITS.tolist(), _COMMA, _CR, _NL):
        table[second, _DIGITS] = True
    table[_NL, _CR] = True
    return table.ravel()


_PAIR_OK = _pair_table()

_INTEGER_RE = re.compile(rb"-?[0-9]+")
_NL_TO_COMMA = bytes.maketrans(b"\n", b",")


def _suspect_lines(blob: bytes, newlines: np.ndarray) -> np.ndarray:
    """Lines of a block that the vectorised checks cannot prove well-formed.

    A line passes when its byte pairs follow the grammar of :func:`_pair_table` and it
    has 12 commas, i.e. it is 13 fields ``-?[0-9]+``. Every other line (also empty
    ones) is marked, to be decided by the exact per-line parser.
    """
    suspect = np.zeros(len(newlines), bool)
    # Two uint16 views, at offsets 0 and 1, hold every pair of consecutive bytes.
    for offset in (0, 1):
        pairs = np.frombuffer(blob, "<u2", count=(len(blob) - offset) // 2, offset=offset)
        ok = _PAIR_OK[pairs]
        if not ok.all():
            second = 2 * np.flatnonzero(~ok) + offset + 1
            suspect[np.searchsorted(newlines, second)] = True
    if not (blob[0] == _MINUS or ord("0") <= blob[0] <= ord("9")):
        suspect[0] = True
    commas = np.flatnonzero(np.frombuffer(blob, np.uint8) == _COMMA)
    suspect |= np.diff(np.searchsorted(commas, newlines), prepend=0) != _N_COLUMNS - 1
    return suspect


def _parse_line(text: bytes) -> tuple[list[int] | None, str | None, str]:
    """Parse one line exactly: ``(values, None, "")`` or ``(None, field, reason)``."""
    parts = text.split(b",")
    if len(parts) != _N_COLUMNS:
        return None, None, f"expected {_N_COLUMNS} fields, got {len(parts)}"
    values = []
    for name, part in zip(POSITION_COLUMNS, parts, strict=True):
        shown = part.decode("utf-8", "backslashreplace")
        if _INTEGER_RE.fullmatch(part) is None:
            return None, name, f"not an integer ({shown!r})"
        value = int(part)
        if not _INT64_MIN <= value <= _INT64_MAX:
            return None, name, f"out of the int64 range ({shown})"
        values.append(value)
    return values, None, ""


def _violations(values: np.ndarray, known: np.ndarray) -> np.ndarray:
    """Rows of an (n, 13) value matrix that fail a check of :func:`read_positions`."""
    bad = ~known | (values[:, 1] <= 0) | (values[:, 5] < 0) | (values[:, 6] < 0)
    bad |= (values[:, 1] < RECORDING_PS[0]) | (values[:, 1] > RECORDING_PS[1])
    for column, (low, high) in zip((2, 3, 4), (X_BOUNDS, Y_BOUNDS, Z_BOUNDS), strict=True):
        bad |= (values[:, column] < low) | (values[:, column] > high)
    directions = values[:, 7:]
    bad |= (np.abs(directions) > DIRECTION_BOUND).any(axis=1)
    return bad


def _first_violation(row: np.ndarray, known: bool) -> tuple[str, str]:
    """Field and reason of the first failing check of one row, in column order."""
    sid, ts, x, y, z, v, a = (int(value) for value in row[:7])
    if not known:
        return "sid", f"unknown sensor id {sid}"
    if ts <= 0:
        return "ts", f"not positive ({ts})"
    low, high = RECORDING_PS
    if not low <= ts <= high:
        return "ts", f"outside the recording [{low}, {high}] ({ts})"
    for name, value, (low, high) in (
        ("x", x, X_BOUNDS), ("y", y, Y_BOUNDS), ("z", z, Z_BOUNDS)
    ):
        if not low <= value <= high:
            return name, f"outside the sanity bounds [{low}, {high}] mm ({value})"
    for name, value in (("v", v), ("a", a)):
        if value < 0:
            return name, f"negative ({value})"
    for name, value in zip(POSITION_COLUMNS[7:], row[7:].tolist(), strict=True):
        if abs(value) > DIRECTION_BOUND:
            return name, (
                f"direction component outside [{-DIRECTION_BOUND}, {DIRECTION_BOUND}] ({value})"
            )
    raise AssertionError("row has no violation")  # pragma: no cover - caller checked


def _parse_block(
    blob: bytes, newlines: np.ndarray, first_line: int, first_row: int, roles: _RoleTable
) -> tuple[PositionChunk, int]:
    """Parse a block of whole lines; return the chunk and the number of rows in it."""
    lines = _BlockLines(blob, newlines)
    suspect = _suspect_lines(blob, newlines)

    # Vectorised conversion of the proven lines: one int64 parse of their joined text.
    # It saturates on overflow, so lines holding an extreme value join the suspects.
    fast = np.flatnonzero(~suspect)
    values = _convert(blob if len(fast) == len(newlines) else lines.join(~suspect), len(fast))
    saturated = ((values == _INT64_MAX) | (values == _INT64_MIN)).any(axis=1)
    if saturated.any():
        suspect[fast[saturated]] = True
        fast, values = fast[~saturated], values[~saturated]

    # Exact per-line parsing of the suspects decides: empty, malformed, or fine after all.
    quarantine: list[tuple[int, str | None, str]] = []  # (line index, field, reason)
    empty: list[int] = []
    slow: list[int] = []
    slow_values: list[list[int]] = []
    for index in np.flatnonzero(suspect).tolist():
        text = lines.text(index)
        if not text.strip():
            empty.append(index)
            continue
        row_values, field, reason = _parse_line(text)
        if row_values is None:
            quarantine.append((index, field, reason))
        else:
            slow.append(index)
            slow_values.append(row_values)
    line_index = fast
    if slow:
        line_index = np.concatenate((fast, slow))
        values = np.concatenate((values, np.array(slow_values, np.int64)))
        order = np.argsort(line_index, kind="stable")
        line_index, values = line_index[order], values[order]

    # Checks of the values, vectorised; the first failing check names field and reason.
    role, known = roles.lookup(values[:, 0])
    bad = _violations(values, known)
    for row in np.flatnonzero(bad).tolist():
        quarantine.append((int(line_index[row]), *_first_violation(values[row], bool(known[row]))))
    good = ~bad
    empty_index = np.array(empty, np.int64)
    seq = first_row + line_index[good] - np.searchsorted(empty_index, line_index[good])
    events = _events(values[good], role[good], seq, roles)

    quarantine.sort(key=lambda entry: entry[0])
    records = [
        Quarantined(first_line + index, lines.text(index).decode("utf-8", "backslashreplace"),
                    field, reason)
        for index, field, reason in quarantine
    ]
    return PositionChunk(events, records), len(newlines) - len(empty)


class _BlockLines:
    """The lines of a block of text, by index."""

    def __init__(self, blob: bytes, newlines: np.ndarray) -> None:
        self.blob = blob
        self.newlines = newlines
        self.starts = np.concatenate(([0], newlines[:-1] + 1))

    def text(self, index: int) -> bytes:
        """Line ``index`` without its line terminator (LF or CR LF)."""
        text = self.blob[self.starts[index] : self.newlines[index]]
        return text[:-1] if text.endswith(b"\r") else text

    def join(self, selected: np.ndarray) -> bytes:
        """The selected lines with their terminators: one slice per run of selected lines."""
        edges = np.flatnonzero(np.diff(np.concatenate(([0], selected.view(np.int8), [0]))))
        return b"".join(
            self.blob[self.starts[first] : self.newlines[last - 1] + 1]
            for first, last in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True)
        )


def _events(values: np.ndarray, role: np.ndarray, seq: np.ndarray, roles: _RoleTable) -> np.ndarray:
    """Position events from an (n, 13) value matrix and the role index of each row.

    Filled in slices of :data:`_FILL_ROWS` rows, so that the ~20 passes over the record
    array stay in the CPU cache (about four times faster than whole columns).
    """
    events = np.zeros(len(values), roles.dtype)
    for start in range(0, len(values), _FILL_ROWS):
        part = slice(start, start + _FILL_ROWS)
        out, rows, who = events[part], values[part], role[part]
        out["ts"] = rows[:, 1]
        out["ats"] = rows[:, 1]
        out["key"] = rows[:, 0]
        out["type"] = roles.type[who]
        out["seq"] = seq[part]
        for column, name in enumerate(POSITION_COLUMNS[2:], start=2):
            out[name] = rows[:, column]
        out["player"] = roles.player[who]
        out["team"] = roles.team[who]
        out["limb"] = roles.limb[who]
    return events


def _convert(text: bytes, n_lines: int) -> np.ndarray:
    """The (n_lines, 13) int64 values of proven well-formed lines, in one NumPy parse."""
    if n_lines == 0:
        return np.zeros((0, _N_COLUMNS), np.int64)
    values = np.fromstring(text.translate(_NL_TO_COMMA, b"\r"), dtype=np.int64, sep=",")
    if len(values) != n_lines * _N_COLUMNS:  # cannot happen for lines the grammar passed
        raise RuntimeError(f"parsed {len(values)} values from {n_lines} checked lines")
    return values.reshape(n_lines, _N_COLUMNS)


# --------------------------------------------------------------------------- referee


#: Game interruptions: ``half``; ``begin_offset``/``end_offset`` in ps since the start
#: of the half on the referee's clock; ``begin_ts``/``end_ts`` the same on the sensor
#: clock (see :func:`read_referee_events`). An interruption still open when the half
#: ended has ``end_offset`` and ``end_ts`` -1.
INTERRUPTION_DTYPE = np.dtype(
    [("half", "i1"), ("begin_offset", "i8"), ("end_offset", "i8"),
     ("begin_ts", "i8"), ("end_ts", "i8")]
)

#: Shots on goal: ``half``, ``offset`` (referee clock, ps), ``ts`` (sensor clock),
#: ``player`` (id in the metadata), ``team``, and ``counter``, the file's running count
#: of that player's shots in the half.
SHOT_DTYPE = np.dtype(
    [("half", "i1"), ("offset", "i8"), ("ts", "i8"), ("player", "i4"), ("team", "i1"),
     ("counter", "i4")]
)

#: Ball possession intervals: ``half``, ``player``, ``team``, ``begin_offset`` and
#: ``end_offset`` (referee clock, ps), ``begin_ts`` and ``end_ts`` (sensor clock). Many
#: intervals have zero length: a touch annotated as begin and end at the same instant.
POSSESSION_DTYPE = np.dtype(
    [("half", "i1"), ("player", "i4"), ("team", "i1"), ("begin_offset", "i8"),
     ("end_offset", "i8"), ("begin_ts", "i8"), ("end_ts", "i8")]
)


@dataclass(frozen=True, eq=False)
class RefereeEvents:
    """The referee annotations of a game (see :func:`read_referee_events`).

    Attributes
    ----------
    interruptions : numpy.ndarray
        :data:`INTERRUPTION_DTYPE`, ordered by half and begin.
    shots : numpy.ndarray
        :data:`SHOT_DTYPE`, ordered by half and time.
    possession : numpy.ndarray
        :data:`POSSESSION_DTYPE`, ordered by half, begin and player.
    """

    interruptions: np.ndarray
    shots: np.ndarray
    possession: np.ndarray


#: Spellings of player names in the referee files that differ from ``metadata.txt``
#: (apart from umlauts, which are transcribed as ``ue`` etc. before the lookup).
_NAME_ALIASES = {
    "ben muller": "ben mueller",
    "niklas welzlein": "niklas waelzlein",
    "willi sommer": "wili sommer",
}

_REFEREE_HEADER = ["event_id", "event_name", "event_time_real", "event_counter", "comment"]
_TIME_RE = re.compile(r"(\d+):([0-5]\d):([0-5]\d)\.(\d{3})")
_HALF_FILES = {1: "1st-half", 2: "2nd-half"}


def read_referee_events(
    directory: PathLike,
    metadata: Metadata | None = None,
    *,
    half_starts: Mapping[int, int] = HALF_START_PS,
) -> RefereeEvents:
    """Read the referee annotations of the DEBS 2013 game.

    Parameters
    ----------
    directory : path
        The ``referee-events`` directory, holding ``game-interruption/<half>.csv``,
        ``shot-on-goal/<half>.csv`` and ``ball-possession/<half>/<player>.csv`` with
        ``<half>`` one of ``1st-half``, ``2nd-half``.
    metadata : Metadata, optional
        Players to resolve names against; :meth:`Metadata.default` by default.
    half_starts : mapping of int to int, default :data:`HALF_START_PS`
        Sensor time stamp (ps) that the referee clock's zero of each half maps to.

    Returns
    -------
    RefereeEvents

    Raises
    ------
    ValueError
        Naming file and line, if a file has another header, a row another shape,
        an unknown player or time format, or begin and end rows do not alternate.
    FileNotFoundError
        If an expected file is missing.

    Notes
    -----
    Every file is a semicolon-separated export of the annotation tool, in Latin-1 or
    UTF-8, with the columns ``event_id`` (the tool's code of the annotation; for shots
    one code per player), ``event_name`` (``Game Interruption Begin``/``End``,
    ``<player> Begin``/``End`` for possession, the player's name for shots),
    ``event_time_real``, ``event_counter`` (a running count per annotation; kept for
    shots, not reliable for interruptions, where begin and end counters sometimes
    differ) and ``comment`` (always ``empty``). The annotations end at the first blank
    row; the ``Statistic:`` summary after it is ignored. Begin and end rows are paired
    in file order.

    ``event_time_real`` is a time since the start of the half on the referee's clock,
    ``HH:MM:SS.mmm`` (the very first row of an interruption file reads ``0``). It is
    converted exactly to picoseconds (``*_offset`` fields) and mapped to the sensor
    clock by adding ``half_starts[half]`` (``ts``/``*_ts`` fields). The two clocks
    were not synchronised: the annotations start before the kick-off (the first
    interruption of the first half, the wait for the kick-off, ends at 3.092 s), so the
    sensor-clock times are estimates that can be off by a few seconds. Pass other
    ``half_starts`` to align them differently.
    """
    root = Path(directory)
    meta = metadata if metadata is not None else Metadata.default()
    interruptions: list[tuple[int, int, int, int, int]] = []
    shots: list[tuple[int, int, int, int, int, int]] = []
    possession: list[tuple[int, int, int, int, int, int, int]] = []
    for half, half_name in _HALF_FILES.items():
        zero = half_starts[half]
        path = root / "game-interruption" / f"{half_name}.csv"
        for begin, end in _intervals(path, _read_referee_rows(path), "Game Interruption"):
            interruptions.append((half, begin, end, zero + begin, -1 if end < 0 else zero + end))

        path = root / "shot-on-goal" / f"{half_name}.csv"
        for number, _code, name, offset, counter in _read_referee_rows(path):
            player = _find_player(meta, name, path, number)
            shots.append((half, offset, zero + offset, player.id, player.team, counter))

        folder = root / "ball-possession" / half_name
        files = sorted(folder.glob("*.csv"))
        if not files:
            raise FileNotFoundError(f"no ball possession files in {folder}")
        for path in files:
            rows = _read_referee_rows(path)
            if not rows:
                continue
            name = rows[0][2].rsplit(" ", 1)[0]
            player = _find_player(meta, name, path, rows[0][0])
            for begin, end in _intervals(path, rows, name):
                if end < 0:
                    raise ValueError(f"{path}: last possession of {name} has no end")
                possession.append(
                    (half, player.id, player.team, begin, end, zero + begin, zero + end)
                )

    possession.sort(key=lambda row: (row[0], row[3], row[1]))
    return RefereeEvents(
        interruptions=np.array(interruptions, INTERRUPTION_DTYPE),
        shots=np.array(sorted(shots, key=lambda row: (row[0], row[1])), SHOT_DTYPE),
        possession=np.array(possession, POSSESSION_DTYPE),
    )


def _read_referee_rows(path: Path) -> list[tuple[int, int, str, int, int]]:
    """Annotation rows of a referee file: ``(line, event_id, name, offset_ps, counter)``."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    lines = text.splitlines()
    if not lines or lines[0].split(";") != _REFEREE_HEADER:
        found = lines[0] if lines else ""
        raise ValueError(f"{path}, line 1: expected the header {';'.join(_REFEREE_HEADER)!r}, "
                         f"got {found!r}")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.replace(";", "").strip():
            break  # the annotations end here; a statistics summary may follow
        parts = line.split(";")
        if len(parts) != len(_REFEREE_HEADER):
            raise ValueError(f"{path}, line {number}: expected {len(_REFEREE_HEADER)} "
                             f"fields, got {len(parts)}")
        code, name, time, counter, _comment = parts
        try:
            rows.append((number, int(code), name.strip(), _parse_offset(time), int(counter)))
        except ValueError as exc:
            raise ValueError(f"{path}, line {number}: {exc}") from None
    return rows


def _parse_offset(text: str) -> int:
    """Picoseconds of a referee time ``HH:MM:SS.mmm`` (or ``0``), exactly."""
    if text.strip() == "0":
        return 0
    match = _TIME_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"event_time_real {text!r} is not HH:MM:SS.mmm")
    hours, minutes, seconds, millis = (int(group) for group in match.groups())
    return (((hours * 60 + minutes) * 60 + seconds) * 1000 + millis) * _PICOS_PER_MILLI


def _intervals(
    path: Path, rows: list[tuple[int, int, str, int, int]], subject: str
) -> list[tuple[int, int]]:
    """Pair ``<subject> Begin`` and ``<subject> End`` rows in file order.

    A begin left open by the last row gets end -1.
    """
    intervals: list[tuple[int, int]] = []
    begin: int | None = None
    for number, _code, name, offset, _counter in rows:
        if name == f"{subject} Begin" and begin is None:
            begin = offset
        elif name == f"{subject} End" and begin is not None:
            if offset < begin:
                raise ValueError(f"{path}, line {number}: end before its begin")
            intervals.append((begin, offset))
            begin = None
        else:
            expected = "End" if begin is not None else "Begin"
            raise ValueError(f"{path}, line {number}: expected '{subject} {expected}', "
                             f"got {name!r}")
    if begin is not None:
        intervals.append((begin, -1))
    return intervals


def _name_key(name: str) -> str:
    key = " ".join(name.casefold().split())
    for umlaut, spelled in (("ä", "ae"), ("ö", "oe"), ("ü", "ue"), ("ß", "ss")):
        key = key.replace(umlaut, spelled)
    return _NAME_ALIASES.get(key, key)


def _find_player(metadata: Metadata, name: str, path: Path, number: int) -> Player:
    key = _name_key(name)
    for player in metadata.players:
        if _name_key(player.name) == key:
            return player
    raise ValueError(f"{path}, line {number}: no player {name!r} in the metadata")
