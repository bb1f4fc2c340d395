"""Referee annotations of the DEBS 2013 game (``referee-events/``).

Game interruptions, shots on goal and ball possession per player, annotated by hand on
the referee's clock (:func:`read_referee_events`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specula.events import distinct
from specula.soccer.debs2013._common import HALF_START_PS, PathLike
from specula.soccer.debs2013.metadata import Metadata, Player

__all__ = ["INTERRUPTION_DTYPE", "POSSESSION_DTYPE", "SHOT_DTYPE", "RefereeEvents",
           "kickoff_aligned", "read_referee_events"]

_PICOS_PER_MILLI = 10**9


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
                if end < 0:  # the begin left open is the last row: any other row raises
                    raise ValueError(f"{path}, line {rows[-1][0]}: last possession of "
                                     f"{name} has no end")
                possession.append(
                    (half, player.id, player.team, begin, end, zero + begin, zero + end)
                )

    possession.sort(key=lambda row: (row[0], row[3], row[1]))
    return RefereeEvents(
        interruptions=np.array(interruptions, INTERRUPTION_DTYPE),
        shots=np.array(sorted(shots, key=lambda row: (row[0], row[1])), SHOT_DTYPE),
        possession=np.array(possession, POSSESSION_DTYPE),
    )


def kickoff_aligned(events: RefereeEvents) -> RefereeEvents:
    """``events`` with each half's sensor-clock times moved so that its kick-off whistle
    falls on the half's start (:data:`HALF_START_PS`, where the sensors show the
    kick-off): every annotation of the half earlier by the end of its opening
    interruption, the wait for the kick-off (3.092 s into the first half's files, 0.455 s
    into the second's). A half whose interruptions do not open at 0 stays as it is. The
    referee offsets are kept; within a half the two clocks still drift apart by a few
    seconds."""
    stops = events.interruptions.copy()
    shots, possession = events.shots.copy(), events.possession.copy()
    for half in distinct(stops["half"]).tolist():
        mine = stops["half"] == half
        opening = stops[mine & (stops["begin_offset"] == 0)]
        if not len(opening) or opening["end_offset"][0] <= 0:
            continue
        shift = int(opening["end_offset"][0])
        stops["begin_ts"][mine] -= shift
        stops["end_ts"][mine & (stops["end_ts"] >= 0)] -= shift
        shots["ts"][shots["half"] == half] -= shift
        held = possession["half"] == half
        possession["begin_ts"][held] -= shift
        possession["end_ts"][held] -= shift
    return RefereeEvents(stops, shots, possession)


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
