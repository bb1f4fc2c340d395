"""``specula score``: a replay of the real game against the referee's annotations (the
bundled ``referee-events``), over the span its log covered."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from specula import cli
from specula.soccer.debs2013 import HALF_START_PS, kickoff_aligned, read_referee_events
from specula.soccer.referee_score import RunDetections, possessor_changes, score_against_referee

REFEREE = Path(__file__).resolve().parents[1] / "data" / "debs2013" / "referee-events"
PS = 10**12
#: The first ten minutes of the first half, on the sensor clock.
SPAN = (HALF_START_PS[1], HALF_START_PS[1] + 600 * PS)
DTYPE = np.dtype([("ts", "i8"), ("player", "i4")])


def _records(ts, player) -> np.ndarray:
    out = np.zeros(len(ts), DTYPE)
    out["ts"], out["player"] = ts, player
    return out


def _annotated() -> tuple[np.ndarray, np.ndarray]:
    """The annotated shots and possession changes that count in SPAN, on the sensor
    clock as ``specula score`` aligns it (the kick-off whistles at the halves' starts):
    those at least the tolerance (2 s) inside it."""
    referee = kickoff_aligned(read_referee_events(REFEREE))
    lo, hi = SPAN[0] + 2 * PS, SPAN[1] - 2 * PS
    shots = referee.shots[(referee.shots["ts"] >= lo) & (referee.shots["ts"] <= hi)]
    ts, player = possessor_changes(referee.possession["begin_ts"], referee.possession["player"])
    inside = (ts >= lo) & (ts <= hi)
    return _records(shots["ts"], shots["player"]), _records(ts[inside], player[inside])


def test_possession_touches_fold_into_changes_of_possessor():
    ts, player = possessor_changes(np.array([30, 10, 20, 40, 50]), np.array([1, 1, 1, 2, 1]))
    assert ts.tolist() == [10, 40, 50] and player.tolist() == [1, 2, 1]


def test_detections_near_the_annotations_score_as_matched_and_the_rest_do_not():
    shots, changes = _annotated()
    assert len(shots) >= 3 and len(changes) >= 50
    false_shot = _records([SPAN[0] + 5 * PS], [shots["player"][0]])
    detected_shots = np.concatenate([_records(shots["ts"] + PS, shots["player"]), false_shot])
    detected_changes = _records(changes["ts"][1:] - PS // 2, changes["player"][1:])
    run = RunDetections(detected_shots, detected_changes, *SPAN)
    referee = kickoff_aligned(read_referee_events(REFEREE))
    scores = score_against_referee(run, referee)
    assert scores["shots"].as_dict() == {
        "detected": len(shots) + 1, "truth": len(shots), "matched": len(shots),
        "found": len(shots), "precision": round(len(shots) / (len(shots) + 1), 4),
        "recall": 1.0}
    possession = scores["possession"]
    assert (possession.found, possession.truth) == (len(changes) - 1, len(changes))
    assert possession.precision == 1.0
    too_far = RunDetections(_records(shots["ts"] + 3 * PS, shots["player"]),
                            detected_changes, *SPAN)
    assert score_against_referee(too_far, referee)["shots"].matched == 0


def test_the_command_scores_a_replay_folder(tmp_path, capsys):
    shots, changes = _annotated()
    _write_run(tmp_path, shots, changes, SPAN)
    assert cli.main(["score", str(tmp_path), "--referee", str(REFEREE)]) == 0
    assert "possession" in capsys.readouterr().out
    written = json.loads((tmp_path / "referee_score.json").read_text())
    assert written["shots"]["recall"] == written["possession"]["precision"] == 1.0
    assert written["tolerance_s"] == 2.0


def _write_run(folder: Path, shots: np.ndarray, changes: np.ndarray, span: tuple[int, int]
               ) -> None:
    """A replay's output folder as ``specula score`` reads it: ``complex/`` and
    ``summary.json``."""
    rows = np.concatenate([shots, changes])
    kinds = ["shot"] * len(shots) + ["possession"] * len(changes)
    table = pa.table({"detector": ["x"] * len(rows), "ts": rows["ts"],
                      "player": rows["player"], "event_type": kinds})
    pq.write_to_dataset(table, folder / "complex", partition_cols=["event_type"])
    (folder / "summary.json").write_text(json.dumps({"first_ts": span[0],
                                                     "last_ts": span[1]}))


def test_nothing_to_score_gives_no_precision_or_recall(tmp_path, capsys):
    """0 detected of 0 annotated (a pre-game log, its possessions outside the annotated
    halves) is no score: None, "n/a" in the table, null in the JSON, not 1.000."""
    pre_game = (HALF_START_PS[1] - 100 * PS, HALF_START_PS[1] - 10 * PS)
    held = _records([pre_game[0] + 50 * PS], [3])
    run = RunDetections(_records([], []), held, *pre_game)
    referee = kickoff_aligned(read_referee_events(REFEREE))
    for s in score_against_referee(run, referee).values():
        assert (s.detected, s.truth, s.precision, s.recall) == (0, 0, None, None)
    _write_run(tmp_path, _records([], []), held, pre_game)
    assert cli.main(["score", str(tmp_path), "--referee", str(REFEREE)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-2:] == ["n/a", "n/a"]
    written = json.loads((tmp_path / "referee_score.json").read_text())
    assert written["shots"]["precision"] is None and written["possession"]["recall"] is None


def test_a_log_that_ends_right_after_the_kick_off_scores_nothing_against_the_run(tmp_path,
                                                                                  capsys):
    """A log from the pre-game to 1 s after the kick-off: the kick-off possession it holds
    lies within the tolerance of the log's end, where its annotation may fall after the
    end, and a pre-game possession lies outside the annotated halves: neither counts, so
    there is nothing to score (it was precision 0.000)."""
    span = (HALF_START_PS[1] - 60 * PS, HALF_START_PS[1] + PS)
    referee = kickoff_aligned(read_referee_events(REFEREE))
    first = referee.possession[np.argmin(referee.possession["begin_ts"])]
    detected = _records([HALF_START_PS[1] - 30 * PS, HALF_START_PS[1] + PS // 10],
                        [int(first["player"])] * 2)
    scores = score_against_referee(RunDetections(_records([], []), detected, *span), referee)
    assert scores["possession"].as_dict() == {"detected": 0, "truth": 0, "matched": 0,
                                              "found": 0, "precision": None, "recall": None}
    _write_run(tmp_path, _records([], []), detected, span)
    assert cli.main(["score", str(tmp_path), "--referee", str(REFEREE)]) == 0
    assert capsys.readouterr().out.splitlines()[2].split()[-2:] == ["n/a", "n/a"]
    # a log that goes on a minute counts the changes well inside it: one detected there
    # is matched
    longer = (span[0], HALF_START_PS[1] + 60 * PS)
    changes = possessor_changes(referee.possession["begin_ts"], referee.possession["player"])
    inside = np.flatnonzero(changes[0] >= HALF_START_PS[1] + 2 * PS)[0]
    detected = _records([changes[0][inside] + PS // 2], [changes[1][inside]])
    possession = score_against_referee(RunDetections(_records([], []), detected, *longer),
                                       referee)["possession"]
    assert (possession.detected, possession.matched, possession.precision) == (1, 1, 1.0)
    assert possession.truth > 1 and possession.recall == 1 / possession.truth


def test_the_command_names_what_is_missing(tmp_path, capsys):
    assert cli.main(["score", str(tmp_path), "--referee", str(REFEREE)]) == 2
    assert f"{tmp_path / 'complex'} does not exist" in capsys.readouterr().err


def test_kickoff_alignment_moves_every_annotation_of_a_half_by_its_kickoff_whistle():
    raw = read_referee_events(REFEREE)
    aligned = kickoff_aligned(raw)
    for half, whistle_ps in ((1, 3_092 * 10**9), (2, 455 * 10**9)):
        stops = aligned.interruptions[aligned.interruptions["half"] == half]
        assert stops["end_ts"][0] == HALF_START_PS[half]  # the kick-off is whistled then
        for table, fields in ((raw.shots, ("ts",)), (raw.possession, ("begin_ts", "end_ts")),
                              (raw.interruptions, ("begin_ts",))):
            mine = table["half"] == half
            moved = {id(raw.shots): aligned.shots, id(raw.possession): aligned.possession,
                     id(raw.interruptions): aligned.interruptions}[id(table)][mine]
            for field in fields:
                assert (table[field][mine] - moved[field] == whistle_ps).all(), (half, field)
    assert (aligned.shots["offset"] == raw.shots["offset"]).all()  # referee clock as read
