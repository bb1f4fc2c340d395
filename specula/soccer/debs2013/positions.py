"""Position readings of the DEBS 2013 game (``full-game.csv`` and samples of it).

One line per sensor reading, 13 comma-separated integers ``sid, ts, x, y, z, |v|, |a|,
vx, vy, vz, ax, ay, az`` (units in :mod:`specula.soccer.types`). :func:`read_positions`
streams them as ``ball``, ``player`` and ``referee`` events in chunks of bounded size
and sets aside malformed lines as :class:`Quarantined` records instead of failing the
whole file. :func:`write_positions` writes events back in the same format.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from specula.events import InvalidEvent
from specula.pipelines.log_files import GzipReader
from specula.soccer.debs2013._common import PathLike
from specula.soccer.debs2013._position_lines import (
    _CR,
    _INT64_MAX,
    _INT64_MIN,
    _N_COLUMNS,
    _NL,
    ACCELERATION_BOUND,
    DIRECTION_BOUND,
    MOTION_BOUNDS,
    POSITION_COLUMNS,
    RECORDING_PS,
    SPEED_BOUND,
    X_BOUNDS,
    Y_BOUNDS,
    Z_BOUNDS,
    _BlockLines,
    _convert,
    _duplicate_rows,
    _events,
    _first_violation,
    _parse_line,
    _suspect_lines,
    _violations,
)
from specula.soccer.debs2013.metadata import Metadata
from specula.soccer.types import soccer_registry

__all__ = [
    "ACCELERATION_BOUND",
    "DIRECTION_BOUND",
    "MOTION_BOUNDS",
    "POSITION_COLUMNS",
    "RECORDING_PS",
    "SPEED_BOUND",
    "X_BOUNDS",
    "Y_BOUNDS",
    "Z_BOUNDS",
    "PositionChunk",
    "Quarantined",
    "position_dtype",
    "read_all",
    "read_batches",
    "read_positions",
    "write_positions",
]

_READ_BYTES_PER_ROW = 100  # a little more than the ~85 bytes of a real line

_WRITE_ROWS = 100_000  # rows formatted at a time by write_positions

_BOM = b"\xef\xbb\xbf"  # UTF-8 byte order mark


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
    * ``|v|`` (``v``) or ``|a|`` (``a``) is negative, or above the physical bound
      :data:`SPEED_BOUND` (150 m/s) or :data:`ACCELERATION_BOUND` (100,000 m/s^2);
    * a direction component is outside ``[-DIRECTION_BOUND, DIRECTION_BOUND]``.

    A valid line that repeats an earlier line of its chunk exactly is rejected too
    (``"exact duplicate of line N"``; Spark ingestion finds duplicates across the whole
    log). One record per rejected line names the first failing check, in this order.
    Lines that are empty or hold only whitespace are skipped silently. Lines may end in
    LF, CR LF or CR; a UTF-8 byte order mark at the start is skipped.

    A ``.gz`` file that is truncated or damaged is read up to the damage: its complete
    lines before it are read, and one record at the first lost line (field None) says
    what went wrong, instead of an ``EOFError``.

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
        damage = getattr(stream, "damage", None)
    if damage is not None:  # the lines before it were read; the file ends there
        reason = (f"{damage}; the {first_line - 1:,} complete lines before it were read, "
                  "the rest of the file is lost")
        yield PositionChunk(np.zeros(0, roles.dtype), [Quarantined(first_line, "", None, reason)])


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


def read_batches(
    path_or_file: PathLike | IO[bytes], batch_size: int, metadata: Metadata | None = None,
    *, tell: Callable[[str], None] | None = None, chunk_rows: int = 1_000_000,
) -> Iterator[np.ndarray]:
    """A position file as raw events for a runtime, read a chunk at a time so that a
    whole game need not fit in memory: the valid readings in file order (the arrival
    order of a recorded log) in batches of at most ``batch_size``, each with its origin
    set to its arrival.

    ``tell`` gets the first five quarantined lines as they come, then (if any) how many
    there were. A file without a valid line gives one empty batch.
    """
    bad = 0
    yield np.zeros(0, position_dtype())
    for chunk in read_positions(path_or_file, metadata, chunk_rows=chunk_rows):
        if tell is not None:
            for q in chunk.quarantine[:max(0, 5 - bad)]:
                tell(f"quarantined: {q}")
        bad += len(chunk.quarantine)
        events = chunk.events
        events["origin"] = events["ats"]
        for i in range(0, len(events), batch_size):
            yield events[i:i + batch_size]
    if bad and tell is not None:
        tell(f"{bad} bad records quarantined")


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

    A gzip file is decoded by :class:`~specula.pipelines.log_files.GzipReader`: a damaged
    one reads up to the damage and then ends, with the stream's ``damage`` set. Streams
    the caller opened stay open; files opened here are closed.
    """
    if not isinstance(source, str | os.PathLike):
        yield source
        return
    name = os.fspath(source)
    with open(name, "rb") as stream:
        yield GzipReader(stream) if name.endswith(".gz") else stream  # type: ignore[misc]


def _line_blocks(stream: IO[Any], chunk_rows: int) -> Iterator[tuple[bytes, np.ndarray]]:
    """Split a stream into blocks of at most ``chunk_rows`` whole lines.

    Yields ``(blob, newlines)``: the bytes of the lines, each ending in a newline (one
    is added to an unterminated last line, unless the stream ends at damage: then that
    partial line is lost with the rest), and the offsets of the newlines in the blob.
    A UTF-8 byte order mark at the start is skipped, and a lone CR ends a line like LF
    (as Spark's text source splits lines).
    """
    read_size = max(chunk_rows * _READ_BYTES_PER_ROW, 1 << 16)
    pending = b""
    eof, first = False, True
    while not eof:
        data = stream.read(read_size)
        if isinstance(data, str):
            data = data.encode("utf-8")
        if first and data.startswith(_BOM):
            data = data[len(_BOM):]
        first = False
        eof = not data
        buffer = _lone_cr_to_lf(pending + data if pending else data, eof)
        if eof and buffer and not buffer.endswith(b"\n"):
            damaged = getattr(stream, "damage", None) is not None
            buffer = buffer[: buffer.rfind(b"\n") + 1] if damaged else buffer + b"\n"
        newlines = np.flatnonzero(np.frombuffer(buffer, np.uint8) == _NL)
        start, taken = 0, 0
        while len(newlines) - taken >= chunk_rows or (eof and taken < len(newlines)):
            count = min(chunk_rows, len(newlines) - taken)
            end = int(newlines[taken + count - 1]) + 1
            yield buffer[start:end], newlines[taken : taken + count] - start
            start, taken = end, taken + count
        pending = buffer[start:]


def _lone_cr_to_lf(buffer: bytes, eof: bool) -> bytes:
    """``buffer`` with each CR that no LF follows made an LF (a CR at the very end only
    at ``eof``: its LF may come with the next read)."""
    if buffer.count(b"\r") == buffer.count(b"\r\n"):
        return buffer
    data = np.frombuffer(buffer, np.uint8)
    cr = np.flatnonzero(data == _CR)
    following = np.append(data, 0 if eof else _NL)[cr + 1]
    lone = cr[following != _NL]
    out = data.copy()
    out[lone] = _NL
    return out.tobytes()


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
    good_rows = np.flatnonzero(good)
    duplicates = _duplicate_rows(values[good_rows],
                                 lambda row: lines.text(int(line_index[good_rows[row]])))
    for row, original in duplicates.items():
        quarantine.append((int(line_index[good_rows[row]]), None, "exact duplicate of line "
                           f"{first_line + int(line_index[good_rows[original]])}"))
        good[good_rows[row]] = False
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
