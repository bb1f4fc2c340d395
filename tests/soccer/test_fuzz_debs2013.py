"""Fuzzing the DEBS 2013 readers with damaged files.

Position files are built from real sample lines, some damaged byte by byte, some
replaced by noise, with any line ending, a byte order mark or not, plain or gzip (whole
or truncated). The reader reads them in vectorised blocks; the oracle is the same reader
on each line alone: every line gets the same verdict in the whole file (the same event,
or a quarantine record with the same field and reason at its own line number), except
that a repeated valid line is quarantined as a duplicate. Nothing is silently lost: the
events and the quarantine together account for every line that is not blank.

Referee files: whatever a CSV holds, :func:`read_referee_events` returns the annotations
or raises ValueError naming the file and the line.
"""

from __future__ import annotations

import gzip
import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from fuzzing import SAMPLE_LINES as SAMPLE
from fuzzing import budget, debs_lines, no_hang
from hypothesis import given
from hypothesis import strategies as st

from specula.soccer.debs2013 import read_all, read_referee_events

pytestmark = pytest.mark.fuzz

DATA = Path(__file__).resolve().parents[1] / "data" / "debs2013"
def _without_seq(events: np.ndarray) -> np.ndarray:
    events = events.copy()
    events["seq"] = 0
    return events


def alone(line: bytes) -> tuple[list, list]:
    """The verdict on ``line`` read as a file of its own."""
    events, quarantine = read_all(io.BytesIO(line + b"\n"))
    return [(q.field, q.reason) for q in quarantine], [r.tobytes() for r in
                                                       _without_seq(events)]


@budget(100)
@given(st.lists(debs_lines(), min_size=1, max_size=25), st.sampled_from([b"\n", b"\r\n", b"\r"]),
       st.booleans(), st.booleans())
def test_fuzz_position_lines(items, newline, bom, last_newline):
    blob = (b"\xef\xbb\xbf" if bom else b"") + newline.join(items) + (
        newline if last_newline else b"")
    with no_hang():
        events, quarantine = read_all(io.BytesIO(blob))
    assert len(events) + len(quarantine) == sum(bool(line.strip()) for line in items)
    assert events["seq"].tolist() == sorted(set(events["seq"].tolist()))
    by_line = {q.line: q for q in quarantine}
    rows = iter(_without_seq(events))
    seen: dict[bytes, int] = {}
    for number, line in enumerate(items, start=1):
        if not line.strip():
            assert number not in by_line
            continue
        reasons, rows_alone = alone(line)
        if rows_alone:  # a valid line: its event, or a duplicate of an earlier one
            if line in seen:
                assert by_line[number].reason == f"exact duplicate of line {seen[line]}"
            else:
                seen[line] = number
                assert next(rows).tobytes() == rows_alone[0], number
        else:
            assert (by_line[number].field, by_line[number].reason) == reasons[0], number
            assert by_line[number].text  # the line itself, to find it again


@budget(25)
@given(st.lists(st.sampled_from(SAMPLE), min_size=1, max_size=40, unique=True),
       st.integers(0, 10_000))
def test_fuzz_truncated_gzip(tmp_path_factory, items, cut):
    """A damaged .gz keeps the complete lines before the damage and says where the
    rest was lost: one record with field None after them."""
    path = tmp_path_factory.mktemp("gz") / "positions.csv.gz"
    whole = gzip.compress(b"\r\n".join(items) + b"\r\n")
    path.write_bytes(whole[:cut])
    with no_hang():
        events, quarantine = read_all(path)
    complete, _ = read_all(io.BytesIO(b"\r\n".join(items) + b"\r\n"))
    assert events.tobytes() == complete[:len(events)].tobytes()
    if cut >= len(whole):
        assert not quarantine and len(events) == len(items)
    elif cut == 0:  # an empty file, as gzip (and Hadoop's codec) read it: no lines
        assert not quarantine and not len(events)
    else:
        assert len(quarantine) == 1 and quarantine[0].field is None
        assert quarantine[0].line == len(events) + 1


REFEREE_FILES = sorted(p.relative_to(DATA / "referee-events")
                       for p in (DATA / "referee-events").rglob("*.csv"))


@budget(40)
@given(st.sampled_from(REFEREE_FILES), st.lists(st.tuples(st.integers(0, 4000),
                                                          st.binary(max_size=6)),
                                                min_size=1, max_size=4))
def test_fuzz_referee_files(tmp_path_factory, name, edits):
    directory = tmp_path_factory.mktemp("referee") / "referee-events"
    shutil.copytree(DATA / "referee-events", directory)
    path = directory / name
    text = bytearray(path.read_bytes())
    for at, new in edits:
        at = min(at, len(text))
        text[at:at + len(new)] = new
    path.write_bytes(bytes(text))
    with no_hang():
        try:
            read_referee_events(directory)
        except ValueError as exc:
            assert str(path) in str(exc) or path.name in str(exc), exc
            assert "line" in str(exc), exc


# ------------------------------------------------------------------ found by fuzzing


def test_an_open_possession_at_the_end_names_its_line(tmp_path):
    """A blank line inserted after a 'Begin' ended the annotations there; the error named
    the file but not the line."""
    directory = tmp_path / "referee-events"
    shutil.copytree(DATA / "referee-events", directory)
    path = directory / "ball-possession" / "1st-half" / "christopher-lee.csv"
    rows = path.read_bytes().splitlines(keepends=True)
    begin = next(i for i, row in enumerate(rows) if b"Begin" in row)
    path.write_bytes(b"".join([*rows[:begin + 1], b"\n", *rows[begin + 1:]]))
    with pytest.raises(ValueError, match=rf"christopher-lee\.csv, line {begin + 1}: last "
                                         "possession of Christopher Lee has no end$"):
        read_referee_events(directory)
