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
    """The annotated shots and possession changes inside SPAN, on the sensor clock as
    ``specula score`` aligns it (the kick-off whistles at the halves' starts)."""
    referee = kickoff_aligned(read_referee_events(REFEREE))
    shots = referee.shots[(referee.shots["ts"] >= SPAN[0]) & (referee.shots["ts"] <= SPAN[1])]
    ts, player = possessor_changes(referee.possession["begin_ts"], referee.possession["player"])
    inside = (ts >= SPAN[0]) & (ts <= SPAN[1])
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
        "precision": round(len(shots) / (len(shots) + 1), 4), "recall": 1.0}
    assert (scores["possession"].matched, scores["possession"].truth) == (
        len(changes) - 1, len(changes))
    too_far = RunDetections(_records(shots["ts"] + 3 * PS, shots["player"]),
                            detected_changes, *SPAN)
    assert score_against_referee(too_far, referee)["shots"].matched == 0


def test_the_command_scores_a_replay_folder(tmp_path, capsys):
    shots, changes = _annotated()
    rows = np.concatenate([shots, changes])
    kinds = ["shot"] * len(shots) + ["possession"] * len(changes)
    table = pa.table({"detector": ["x"] * len(rows), "ts": rows["ts"],
                      "player": rows["player"], "event_type": kinds})
    pq.write_to_dataset(table, tmp_path / "complex", partition_cols=["event_type"])
    (tmp_path / "summary.json").write_text(json.dumps({"first_ts": SPAN[0],
                                                       "last_ts": SPAN[1]}))
    assert cli.main(["score", str(tmp_path), "--referee", str(REFEREE)]) == 0
    assert "possession" in capsys.readouterr().out
    written = json.loads((tmp_path / "referee_score.json").read_text())
    assert written["shots"]["recall"] == written["possession"]["precision"] == 1.0
    assert written["tolerance_s"] == 2.0


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
