"""Reading the DEBS 2013 data: positions (clean, corrupted, chunked, gzip), metadata,
referee annotations, and writing positions back."""

from __future__ import annotations

import csv
import gzip
import io
import shutil
import zlib
from pathlib import Path

import numpy as np
import pytest

from specula.events import InvalidEvent
from specula.soccer.debs2013 import (
    ACCELERATION_BOUND,
    HALF_START_PS,
    POSITION_COLUMNS,
    RECORDING_PS,
    Metadata,
    Quarantined,
    RefereeEvents,
    read_all,
    read_batches,
    read_metadata,
    read_positions,
    read_referee_events,
    write_positions,
)
from specula.soccer.types import soccer_registry

DATA = Path(__file__).resolve().parents[1] / "data" / "debs2013"
SAMPLE = DATA / "sample-pregame-2000.csv"
REFEREE = DATA / "referee-events"

REGISTRY = soccer_registry()
BALL, PLAYER, REFEREE_TYPE = (REGISTRY.id(name) for name in ("ball", "player", "referee"))

PS = 10**12


@pytest.fixture(scope="module")
def sample_lines() -> list[bytes]:
    return SAMPLE.read_bytes().splitlines(keepends=True)


@pytest.fixture(scope="module")
def clean(sample_lines: list[bytes]) -> np.ndarray:
    events, quarantine = read_all(SAMPLE)
    assert quarantine == []
    return events


# ------------------------------------------------------------------------ clean sample


def test_sample_parses_clean_with_exact_first_row(clean: np.ndarray) -> None:
    assert len(clean) == 2000
    first = clean[0]
    expected = {
        "key": 98, "ts": 10629342490369879, "x": 26406, "y": -6869, "z": 1070,
        "v": 1166235, "a": 7161971, "vx": -5706, "vy": 3485, "vz": -7435,
        "ax": -2410, "ay": -8454, "az": -4765,
    }
    assert {name: int(first[name]) for name in expected} == expected
    # Sensor 98 is the right arm of Nick Gertje, goalkeeper of team A, player 0.
    assert (int(first["type"]), int(first["player"]), int(first["team"]), int(first["limb"])) == (
        PLAYER, 0, 0, 3,
    )
    assert clean["seq"].tolist() == list(range(2000))
    assert np.array_equal(clean["ats"], clean["ts"])
    for name in ("producer", "kplus", "flags", "origin"):
        assert not clean[name].any(), name


def test_sample_values_match_an_independent_parse(clean: np.ndarray) -> None:
    with SAMPLE.open(newline="") as f:
        rows = np.array([[int(v) for v in row] for row in csv.reader(f)], np.int64)
    assert rows.shape == (2000, 13)
    assert np.array_equal(clean["key"], rows[:, 0])
    for column, name in enumerate(POSITION_COLUMNS[1:], start=1):
        assert np.array_equal(clean[name], rows[:, column]), name


def test_sample_types_follow_the_metadata(clean: np.ndarray) -> None:
    def role(sid: int) -> set[tuple[int, int, int, int]]:
        rows = clean[clean["key"] == sid]
        assert len(rows) > 0, sid
        return set(zip(rows["type"].tolist(), rows["player"].tolist(), rows["team"].tolist(),
                       rows["limb"].tolist(), strict=True))

    # From metadata.txt, by hand: balls 4, 8, 10; Leon Krapf (team B, 9th player) wears
    # 61 on the left leg; Leo Langhans (team B, last) 44 on the right leg; the referee
    # 105 and 106 on the legs; Sandro Schneider (team A, 8th) 28 on the right leg.
    assert role(4) == {(BALL, 0, 0, 0)}
    assert role(10) == {(BALL, 0, 0, 0)}
    assert role(61) == {(PLAYER, 8, 1, 0)}
    assert role(44) == {(PLAYER, 15, 1, 1)}
    assert role(105) == {(REFEREE_TYPE, -1, -1, 0)}
    assert role(106) == {(REFEREE_TYPE, -1, -1, 1)}
    assert role(28) == {(PLAYER, 7, 0, 1)}
    # Row counts per type, from the sensor ids of the file.
    balls = np.isin(clean["key"], [4, 8, 10, 12])
    referee = np.isin(clean["key"], [105, 106])
    assert (clean["type"] == BALL).sum() == balls.sum() == 661
    assert (clean["type"] == REFEREE_TYPE).sum() == referee.sum() == 77
    assert (clean["type"] == PLAYER).sum() == 2000 - 661 - 77


def test_chunked_reading_equals_one_chunk(clean: np.ndarray) -> None:
    chunks = list(read_positions(SAMPLE, chunk_rows=97))
    assert len(chunks) == 21  # ceil(2000 / 97)
    assert all(len(chunk.events) <= 97 for chunk in chunks)
    assert np.array_equal(np.concatenate([chunk.events for chunk in chunks]), clean)
    assert all(chunk.quarantine == [] for chunk in chunks)


@pytest.mark.parametrize(("batch", "chunk"), [(300, 500), (7, 1_000_000), (5_000, 97)])
def test_batches_for_a_run_split_the_chunks_and_set_the_origin(clean: np.ndarray, batch: int,
                                                               chunk: int) -> None:
    """``read_batches`` (what ``specula run`` feeds a log by): batches of at most
    ``batch`` within chunks of ``chunk`` rows (a run holds one chunk, not the game),
    the readings in file order with their origin at their arrival, after one empty
    batch (a log without a valid line is an empty stream)."""
    batches = list(read_batches(SAMPLE, batch, chunk_rows=chunk))
    assert len(batches[0]) == 0 and all(0 < len(b) <= min(batch, chunk) for b in batches[1:])
    per_chunk = [min(batch, chunk - i) for i in range(0, min(chunk, 2000), batch)]
    if chunk < 2000 and batch < chunk:
        assert [len(b) for b in batches[1:1 + len(per_chunk)]] == per_chunk
    got = np.concatenate(batches)
    want = clean.copy()
    want["origin"] = want["ats"]
    assert np.array_equal(got, want)


def test_batches_tell_the_first_five_quarantined_lines_then_their_count(
        sample_lines: list[bytes], tmp_path: Path) -> None:
    bad = [_field(line, 1, b"oops") for line in sample_lines[:8]]
    path = tmp_path / "bad.csv"
    path.write_bytes(b"".join(bad + sample_lines[8:]))
    told: list[str] = []
    events = np.concatenate(list(read_batches(path, 500, tell=told.append, chunk_rows=3)))
    assert len(events) == 1992 and len(told) == 6
    assert all(t.startswith("quarantined: ") and "ts" in t for t in told[:5])
    assert told[5] == "8 bad records quarantined"
    empty = tmp_path / "empty.csv"
    empty.write_bytes(b"")
    assert [len(b) for b in read_batches(empty, 500, tell=told.append)] == [0]


def test_file_objects_are_read(clean: np.ndarray) -> None:
    events, quarantine = read_all(io.BytesIO(SAMPLE.read_bytes()))
    assert quarantine == []
    assert np.array_equal(events, clean)


# ------------------------------------------------------------------- corrupted copies


def _field(line: bytes, index: int, value: bytes) -> bytes:
    fields = line.rstrip(b"\r\n").split(b",")
    fields[index] = value
    return b",".join(fields) + b"\r\n"


Expected = list[tuple[int, str | None, str]]  # (line, field, reason) of each quarantined line


def _corrupt(lines: list[bytes]) -> tuple[list[bytes], Expected, list[int]]:
    """A corrupted copy of the sample: the lines, the expected quarantine
    ``(line, field, reason)``, and the rows (0-based seq) that must be missing."""
    out = list(lines)
    bad: dict[int, tuple[str | None, str]] = {}  # row -> (field, reason)
    out[2] = b",".join(lines[2].rstrip(b"\r\n").split(b",")[:12]) + b"\r\n"
    bad[2] = (None, "expected 13 fields, got 12")
    out[9] = _field(lines[9], 2, b"26a06")
    bad[9] = ("x", "not an integer ('26a06')")
    out[19] = _field(lines[19], 0, b"999")
    bad[19] = ("sid", "unknown sensor id 999")
    ts = int(lines[29].split(b",")[1])
    out[29] = _field(lines[29], 1, b"-%d" % ts)
    bad[29] = ("ts", f"not positive (-{ts})")
    out[39] = _field(lines[39], 8, b"12000")
    bad[39] = ("vy", "direction component outside [-10001, 10001] (12000)")
    out[59] = _field(lines[59], 6, b"-5")
    bad[59] = ("a", "negative (-5)")
    out[69] = _field(lines[69], 4, b"99999")
    bad[69] = ("z", "outside the sanity bounds [-5000, 40000] mm (99999)")
    out[79] = _field(lines[79], 1, b"99999999999999999999")
    bad[79] = ("ts", "out of the int64 range (99999999999999999999)")
    out[89] = _field(lines[89], 3, b"+5")
    bad[89] = ("y", "not an integer ('+5')")
    # An empty line after row 49 shifts the line numbers of all later rows by one.
    out.insert(50, b"\r\n")
    expected = [(row + 1 + (row >= 50), field, reason) for row, (field, reason) in bad.items()]
    return out, expected, sorted(bad)


@pytest.mark.parametrize("name", ["corrupt.csv", "corrupt.csv.gz"])
@pytest.mark.parametrize("chunk_rows", [1_000_000, 97, 1])
def test_exactly_the_bad_rows_are_quarantined(
    tmp_path: Path, sample_lines: list[bytes], clean: np.ndarray, name: str, chunk_rows: int
) -> None:
    lines, expected, missing = _corrupt(sample_lines)
    data = b"".join(lines)
    path = tmp_path / name
    if name.endswith(".gz"):
        # The gzip copy also uses LF line ends and lacks the final line end.
        path.write_bytes(gzip.compress(data.replace(b"\r\n", b"\n").rstrip(b"\n")))
    else:
        path.write_bytes(data)

    chunks = list(read_positions(path, chunk_rows=chunk_rows))
    quarantine = [q for chunk in chunks for q in chunk.quarantine]
    events = np.concatenate([chunk.events for chunk in chunks])

    assert [(q.line, q.field, q.reason) for q in quarantine] == expected
    for q in quarantine:
        assert q.text == lines[q.line - 1].rstrip(b"\r\n").decode()
    keep = np.ones(len(clean), bool)
    keep[missing] = False
    assert len(events) == 2000 - len(missing)
    assert np.array_equal(events, clean[keep])


def test_quarantine_record_reads_as_a_message() -> None:
    record = Quarantined(7, "4,x", "ts", "not an integer ('x')")
    assert str(record) == "line 7, field 'ts': not an integer ('x')"
    assert str(Quarantined(3, "4", None, "expected 13 fields, got 1")) == (
        "line 3: expected 13 fields, got 1"
    )


def test_odd_lines_without_the_data_set() -> None:
    good = b"4,10753295594424116,100,-200,0,0,0,0,0,0,0,0,0"
    lines = [
        b"   ",  # whitespace only: skipped like an empty line, not a row
        good.replace(b",100,", b",00100,"),  # leading zeros: still an integer
        good.replace(b",100,", b",-,"),  # a lone minus: not an integer
        good + b",",  # a trailing comma: 14 fields
        good.replace(b"10753295594424116", b"9223372036854775807"),  # largest int64
        good.replace(b"10753295594424116", b"10753295594424117"),
    ]
    events, quarantine = read_all(io.BytesIO(b"\n".join(lines)))  # no final line end
    low, high = RECORDING_PS
    assert [(q.line, q.field, q.reason) for q in quarantine] == [
        (3, "x", "not an integer ('-')"),
        (4, None, "expected 13 fields, got 14"),
        (5, "ts", f"outside the recording [{low}, {high}] (9223372036854775807)"),
    ]
    assert events["x"].tolist() == [100, 100]
    assert events["ts"].tolist() == [10753295594424116, 10753295594424117]
    assert events["seq"].tolist() == [0, 4]


def test_chunk_rows_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_rows"):
        read_positions(io.BytesIO(b""), chunk_rows=0)
    events, quarantine = read_all(io.BytesIO(b""))
    assert len(events) == 0 and quarantine == []


def test_a_truncated_gzip_file_keeps_its_readable_rows(
    tmp_path: Path, sample_lines: list[bytes], clean: np.ndarray
) -> None:
    data = gzip.compress(b"".join(sample_lines))
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(data[: len(data) // 2])
    whole = zlib.decompressobj(31).decompress(data[: len(data) // 2]).count(b"\n")
    events, quarantine = read_all(path)
    assert np.array_equal(events, clean[:whole]) and whole > 100
    assert [str(q) for q in quarantine] == [
        f"line {whole + 1}: truncated gzip file: the compressed data ends early; the "
        f"{whole:,} complete lines before it were read, the rest of the file is lost"]
    path.write_bytes(b"not gzip at all\n")
    events, quarantine = read_all(path)
    assert len(events) == 0
    assert str(quarantine[0]).startswith("line 1: damaged gzip data (Error -3 ")


def test_a_byte_order_mark_and_cr_line_ends_cost_no_row(
    sample_lines: list[bytes], clean: np.ndarray
) -> None:
    lines = [line.rstrip(b"\r\n") for line in sample_lines]
    for data in (b"\xef\xbb\xbf" + b"\r\n".join(lines), b"\r".join(lines) + b"\r"):
        for chunk_rows in (1_000_000, 7):
            chunks = list(read_positions(io.BytesIO(data), chunk_rows=chunk_rows))
            assert [q for c in chunks for q in c.quarantine] == []
            assert np.array_equal(np.concatenate([c.events for c in chunks]), clean)


def test_exact_duplicate_lines_are_quarantined(sample_lines: list[bytes]) -> None:
    lines = [line.rstrip(b"\r\n") for line in sample_lines[:10]]
    data = b"\n".join([*lines, lines[3], lines[0], lines[3]])
    events, quarantine = read_all(io.BytesIO(data))
    assert len(events) == 10
    assert [str(q) for q in quarantine] == [
        "line 11: exact duplicate of line 4", "line 12: exact duplicate of line 1",
        "line 13: exact duplicate of line 4"]


def test_physically_impossible_speed_and_acceleration_are_rejected() -> None:
    good = b"4,10753295594424116,100,-200,0,0,0,0,0,0,0,0,0"
    lines = [_field(good, 6, b"9223372036854775807").rstrip(b"\r\n"),
             _field(good, 5, b"150000001").rstrip(b"\r\n"),
             _field(good, 6, b"100000000000").rstrip(b"\r\n")]
    events, quarantine = read_all(io.BytesIO(b"\n".join(lines)))
    assert [str(q) for q in quarantine] == [
        "line 1, field 'a': above 100000000000 um/s^2 (100,000 m/s^2), not physically "
        "possible (9223372036854775807)",
        "line 2, field 'v': above 150000000 um/s (150 m/s), not physically possible "
        "(150000001)"]
    assert events["a"].tolist() == [ACCELERATION_BOUND]


# ---------------------------------------------------------------------------- writing


def test_write_round_trips_byte_for_byte(tmp_path: Path, clean: np.ndarray) -> None:
    assert write_positions(tmp_path / "copy.csv", clean) == 2000
    assert (tmp_path / "copy.csv").read_bytes() == SAMPLE.read_bytes()
    write_positions(tmp_path / "copy.csv.gz", clean, newline="\n")
    assert gzip.decompress((tmp_path / "copy.csv.gz").read_bytes()) == (
        SAMPLE.read_bytes().replace(b"\r\n", b"\n")
    )
    events, quarantine = read_all(tmp_path / "copy.csv.gz")
    assert quarantine == [] and np.array_equal(events, clean)


def test_write_refuses_rows_the_reader_would_quarantine(tmp_path: Path) -> None:
    ts = HALF_START_PS[1]
    events = REGISTRY.batch("ball", ts=[ts, ts + 1], key=4, dtype=REGISTRY.dtype())
    events["vy"][1] = -20000
    with pytest.raises(InvalidEvent) as info:
        write_positions(tmp_path / "bad.csv", events)
    assert (info.value.record, info.value.field) == (1, "vy")
    assert not (tmp_path / "bad.csv").exists()
    with pytest.raises(ValueError, match="lack the fields"):
        write_positions(tmp_path / "bad.csv", events[["ts", "key"]])


# --------------------------------------------------------------------------- metadata


def test_metadata_file_equals_the_bundled_default(sample_lines: list[bytes]) -> None:
    assert read_metadata(DATA / "metadata.txt") == Metadata.default()


def test_metadata_content_and_roles() -> None:
    meta = Metadata.default()
    assert meta.balls == {1: (4, 8, 10), 2: (4, 8, 10, 12)}
    assert meta.ball_sids == (4, 8, 10, 12)
    assert len(meta.players) == 16
    assert [p.id for p in meta.players] == list(range(16))
    assert [p.name for p in meta.players if p.goalkeeper] == ["Nick Gertje", "Leon Krapf"]
    assert meta.players[0].sensors == {0: 13, 1: 14, 2: 97, 3: 98}
    assert meta.players[8].team == 1 and meta.players[7].team == 0
    assert meta.referee == {0: 105, 1: 106}
    roles = meta.sensor_roles()
    assert len(roles) == 4 + 2 * 16 + 2 * 2 + 2
    assert roles[12] == ("ball", -1, -1, -1)
    assert roles[97] == ("player", 0, 0, 2)
    assert roles[100] == ("player", 8, 1, 3)
    assert roles[88] == ("player", 2, 0, 1)
    assert roles[106] == ("referee", -1, -1, 1)


def test_metadata_errors_name_the_line() -> None:
    text = "Balls:\n- 1st Half: 4\n- 2nd Half: 4\nTeam A:\nAnna (Left Leg: 1)\nTeam B:\n"
    with pytest.raises(ValueError, match="line 7: cannot parse 'Bob Left Leg 2'"):
        Metadata.parse(text + "Bob Left Leg 2\nReferee (Left Leg: 3)\n")
    with pytest.raises(ValueError, match="sensor 1 of Bob is also used by Anna"):
        Metadata.parse(text + "Bob (Left Leg: 1)\nReferee (Left Leg: 3)\n")
    with pytest.raises(ValueError, match="no referee"):
        Metadata.parse(text + "Bob (Left Leg: 2)\n")
    parsed = Metadata.parse(text + "Bob (Right Arm: 2)\nReferee (Left Leg: 3)\n")
    assert parsed.players[1].goalkeeper and parsed.players[1].sensors == {3: 2}


# ------------------------------------------------------------------------- referee


def _rows(path: Path) -> list[list[str]]:
    """Annotation rows of a referee file, up to the first blank row."""
    rows = []
    for line in path.read_bytes().decode("latin-1").splitlines()[1:]:
        if not line.strip(";").strip():
            break
        rows.append(line.split(";"))
    return rows


@pytest.fixture(scope="module")
def referee(sample_lines: list[bytes]) -> RefereeEvents:
    return read_referee_events(REFEREE)


def test_interruptions(referee: RefereeEvents) -> None:
    gaps = referee.interruptions
    assert len(gaps) == 34 + 38
    assert gaps["half"].tolist() == [1] * 34 + [2] * 38
    # 1st-half.csv, lines 2-5: "0" to 00:00:03.092, then 00:00:38.397 to 00:00:45.564.
    start = HALF_START_PS[1]
    assert gaps[0].tolist() == (1, 0, 3_092 * 10**9, start, start + 3_092 * 10**9)
    assert (int(gaps[1]["begin_offset"]), int(gaps[1]["end_offset"])) == (
        38_397 * 10**9, 45_564 * 10**9,
    )
    # The last begin of the second half (00:29:36.577) has no end.
    last = gaps[-1]
    assert int(last["begin_offset"]) == (29 * 60 + 36) * PS + 577 * 10**9
    assert int(last["begin_ts"]) == HALF_START_PS[2] + int(last["begin_offset"])
    assert (int(last["end_offset"]), int(last["end_ts"])) == (-1, -1)
    closed = gaps[:-1]
    assert (closed["end_offset"] >= closed["begin_offset"]).all()
    assert np.array_equal(closed["end_ts"] - closed["begin_ts"],
                          closed["end_offset"] - closed["begin_offset"])


def test_shots_on_goal(referee: RefereeEvents) -> None:
    shots = referee.shots
    assert len(shots) == len(_rows(REFEREE / "shot-on-goal" / "1st-half.csv")) + len(
        _rows(REFEREE / "shot-on-goal" / "2nd-half.csv")
    ) == 19 + 24
    # "6014;Leo Langhans;00:03:12.025;1;empty": Leo Langhans is player 15 (team B).
    first = shots[0]
    assert first.tolist() == (1, 192_025 * 10**9, HALF_START_PS[1] + 192_025 * 10**9, 15, 1, 1)
    # "Ben M\xfcller" (Latin-1) is Ben Mueller, player 11: three shots, all in the 1st half.
    ben = shots[shots["player"] == 11]
    assert ben["half"].tolist() == [1, 1, 1]
    assert ben["offset"].tolist() == [
        (6 * 60 + 40) * PS + 570 * 10**9, (22 * 60 + 12) * PS + 159 * 10**9,
        (27 * 60 + 25) * PS + 464 * 10**9,
    ]
    assert ben["counter"].tolist() == [1, 2, 3]
    # "16025;Willi Sommer" is the metadata's "Wili Sommer", player 3 (team A).
    assert shots[shots["player"] == 3]["half"].tolist() == [2, 2]


def test_ball_possession(referee: RefereeEvents) -> None:
    possession = referee.possession
    files = sorted((REFEREE / "ball-possession").glob("*/*.csv"))
    assert len(files) == 32
    assert len(possession) == sum(len(_rows(path)) for path in files) // 2
    # nick-gertje.csv of the 1st half: 16 intervals, the first 00:01:20.365-00:01:21.807.
    nick = possession[(possession["player"] == 0) & (possession["half"] == 1)]
    assert len(nick) == 16
    assert (int(nick[0]["begin_offset"]), int(nick[0]["end_offset"])) == (
        80_365 * 10**9, 81_807 * 10**9,
    )
    # Every player has intervals in both halves; the team follows the player.
    meta = Metadata.default()
    for player in meta.players:
        mine = possession[possession["player"] == player.id]
        assert set(mine["half"].tolist()) == {1, 2}, player.name
        assert set(mine["team"].tolist()) == {player.team}, player.name
    assert (possession["end_offset"] >= possession["begin_offset"]).all()
    zero = np.where(possession["half"] == 1, HALF_START_PS[1], HALF_START_PS[2])
    assert np.array_equal(possession["begin_ts"], zero + possession["begin_offset"])
    assert np.array_equal(possession["end_ts"], zero + possession["end_offset"])
    keys = list(zip(possession["half"].tolist(), possession["begin_offset"].tolist(), strict=True))
    assert keys == sorted(keys)


def test_referee_errors_name_file_and_line(tmp_path: Path, sample_lines: list[bytes]) -> None:
    copy = tmp_path / "referee-events"
    shutil.copytree(REFEREE, copy)
    path = copy / "ball-possession" / "1st-half" / "kevin-baer.csv"
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines[2].startswith(b"6015;Kevin Baer End;")
    lines[2] = b"6014;Kevin Baer Begin;00:01:00.000;1;empty\r\n"  # two begins in a row
    path.write_bytes(b"".join(lines))
    with pytest.raises(ValueError, match=r"kevin-baer\.csv, line 3: expected 'Kevin Baer End'"):
        read_referee_events(copy)
    lines[2] = b"6015;Kevin Baer End;1:00 pm;1;empty\r\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(ValueError, match=r"kevin-baer\.csv, line 3: event_time_real '1:00 pm'"):
        read_referee_events(copy)


def test_referee_clock_alignment_is_a_parameter(referee: RefereeEvents) -> None:
    unshifted = read_referee_events(REFEREE, half_starts={1: 0, 2: 0})
    assert np.array_equal(unshifted.shots["ts"], referee.shots["offset"])
    assert np.array_equal(unshifted.possession["end_ts"], referee.possession["end_offset"])
    assert np.array_equal(unshifted.interruptions["begin_ts"],
                          referee.interruptions["begin_offset"])
