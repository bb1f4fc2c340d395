"""The lines of a position file: their format, sanity bounds, checks and conversion.

The vectorised checks that prove lines of a block well-formed, the exact parser of a
single line that decides the others, the checks of the values of a reading, and the
filling of position events from the parsed values. :mod:`.positions` reads and writes
files with them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from specula.soccer.debs2013._common import HALF_END_PS, HALF_START_PS

if TYPE_CHECKING:
    from specula.soccer.debs2013.positions import _RoleTable

#: Column names of a position line, in file order (``v`` is ``|v|``, ``a`` is ``|a|``).
POSITION_COLUMNS: tuple[str, ...] = (
    "sid", "ts", "x", "y", "z", "v", "a", "vx", "vy", "vz", "ax", "ay", "az",
)

_N_COLUMNS = len(POSITION_COLUMNS)

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

#: Largest ``|v|`` (um/s) a reading may have: 150 m/s. The fastest shots measured reach
#: about 60 m/s (211 km/h), sprinters 12 m/s; a sensor moving faster than 150 m/s is not
#: on a player or a ball in play.
SPEED_BOUND = 150_000_000

#: Largest ``|a|`` (um/s^2) a reading may have: 100,000 m/s^2 (about 10,000 g). A hard
#: kick takes a ball from rest to 30-60 m/s in 8-12 ms of contact (a few thousand
#: m/s^2 on average, peaks perhaps twice that); the detectors see a kick above 55 m/s^2,
#: so a reading above the bound would be a false peak, not a harder kick.
ACCELERATION_BOUND = 100_000_000_000

#: The upper bound of ``v`` and ``a`` and how a reason names it.
MOTION_BOUNDS: dict[str, tuple[int, str]] = {
    "v": (SPEED_BOUND, "um/s (150 m/s)"),
    "a": (ACCELERATION_BOUND, "um/s^2 (100,000 m/s^2)"),
}

#: Sensor time stamps (ps) a reading of the game may carry: from 30 minutes before the
#: first half to 30 minutes after the second (the published sample is from before the
#: kick-off).
RECORDING_PS: tuple[int, int] = (HALF_START_PS[1] - 1_800 * 10**12,
                                 HALF_END_PS[2] + 1_800 * 10**12)

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

_FILL_ROWS = 8192  # rows of events filled at a time, ~1 MB


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
    bad |= (values[:, 5] > SPEED_BOUND) | (values[:, 6] > ACCELERATION_BOUND)
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
    for name, value in (("v", v), ("a", a)):
        bound, what = MOTION_BOUNDS[name]
        if value > bound:
            return name, f"above {bound} {what}, not physically possible ({value})"
    for name, value in zip(POSITION_COLUMNS[7:], row[7:].tolist(), strict=True):
        if abs(value) > DIRECTION_BOUND:
            return name, (
                f"direction component outside [{-DIRECTION_BOUND}, {DIRECTION_BOUND}] ({value})"
            )
    raise AssertionError("row has no violation")  # pragma: no cover - caller checked


def _duplicate_rows(values: np.ndarray, text: Callable[[int], bytes]) -> dict[int, int]:
    """Rows of an (n, 13) value matrix whose line repeats an earlier row's exactly, each
    mapped to the first row with that line.

    Rows of equal values are found by a hash of the values (one sort of n hashes); only
    those are compared by their text (``text(row)``), which is what Spark ingestion
    compares too.
    """
    if len(values) < 2:
        return {}
    hashes = np.full(len(values), 0xCBF29CE484222325, np.uint64)  # FNV-1a over the values
    for column in np.ascontiguousarray(values).view(np.uint64).T:
        hashes = (hashes ^ column) * np.uint64(0x100000001B3)
    order = np.argsort(hashes, kind="stable")
    same = hashes[order][1:] == hashes[order][:-1]
    if not same.any():
        return {}
    candidate = np.zeros(len(values), bool)
    candidate[order[1:][same]] = True
    candidate[order[:-1][same]] = True
    first: dict[bytes, int] = {}
    found = {}
    for row in np.flatnonzero(candidate).tolist():
        original = first.setdefault(text(row), row)
        if original != row:
            found[row] = original
    return found


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
