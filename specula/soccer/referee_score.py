"""Scoring a replay of the real game against the referee's annotations.

The DEBS 2013 game comes with hand annotations of shots on goal and ball possession
(:func:`~specula.soccer.debs2013.read_referee_events`, which also maps the referee's
clock onto the sensor clock). :func:`score_run` compares a run's persisted detections
with them, over the stretch of the game the run's log covered:

* **Shots**: a detected ``shot`` matches an annotated shot of the same player within
  the tolerance (one to one, nearest first, as :func:`~specula.soccer.scoring.score`).
* **Possession**: annotations list every touch (many are begin and end at one instant),
  the detector reports who has the ball from when. Both are compared as *changes of
  possessor*: consecutive annotations of one player fold into the first, and a detected
  ``possession`` matches an annotated change to the same player within the tolerance.

What is scored. The annotations cover the halves only, and only the part of them the
run's log covered can be compared: the *scored span* is the log's span within each half.
Annotations and detections are matched wherever they may have a partner (annotations
up to the tolerance beyond the span), but counted only well inside it, at least the
tolerance from its edges: an event nearer an edge may have its partner beyond it (a
log that ends right after the kick-off holds the kick-off possession, while its
annotation, on a clock a second or two off, falls after the log's end), so it is
neither counted nor held against the run. Detections outside the halves (the pre-game)
are left out as the annotations there are. Where nothing is counted there is no
precision or recall (None, "n/a" in the table, null in the JSON).

The annotations were made by hand on a clock that was not synchronised with the
sensors. ``specula score`` puts each half's kick-off whistle at the half's start
(:func:`~specula.soccer.debs2013.kickoff_aligned`, as ``specula replay --referee``
does), but within a half the clocks drift apart by a few seconds, so the default
tolerance is two seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specula.soccer.debs2013 import HALF_END_PS, HALF_START_PS, RefereeEvents
from specula.soccer.scoring import Score, match

__all__ = ["DEFAULT_TOLERANCE_S", "RunDetections", "possessor_changes", "read_run",
           "score_against_referee", "score_run", "scored_spans"]

DEFAULT_TOLERANCE_S = 2.0
_PS = 10**12


@dataclass(frozen=True)
class RunDetections:
    """What :func:`score_against_referee` reads of a run: detected shots and possession
    changes (``ts`` and ``player`` each), and the sensor time span its log covered."""

    shots: np.ndarray
    possession: np.ndarray
    first_ts: int
    last_ts: int


def possessor_changes(ts: np.ndarray, player: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The times and players where the possessor changes, from possession records in
    any order (consecutive records of one player fold into the first)."""
    order = np.lexsort((player, ts))
    ts, player = ts[order], player[order]
    change = np.ones(len(ts), bool)
    change[1:] = player[1:] != player[:-1]
    return ts[change], player[change]


def scored_spans(first_ts: int, last_ts: int) -> list[tuple[int, int]]:
    """The parts of ``[first_ts, last_ts]`` (a log's span) within the game's halves,
    the time the referee annotated."""
    halves = [(HALF_START_PS[h], HALF_END_PS[h]) for h in sorted(HALF_START_PS)]
    return [(max(first_ts, lo), min(last_ts, hi)) for lo, hi in halves
            if max(first_ts, lo) <= min(last_ts, hi)]


def _within(ts: np.ndarray, spans: list[tuple[int, int]], margin: int) -> np.ndarray:
    """Which of ``ts`` lie in one of ``spans`` grown by ``margin`` (shrunk where it is
    negative)."""
    inside = np.zeros(len(ts), bool)
    for lo, hi in spans:
        inside |= (ts >= lo - margin) & (ts <= hi + margin)
    return inside


def _scored(detected: np.ndarray, annotated: np.ndarray, spans: list[tuple[int, int]],
            tolerance: int) -> Score:
    """``detected`` against ``annotated`` (``ts`` and ``player`` each): matched wherever
    a partner may be, counted at least ``tolerance`` inside ``spans``."""
    near = annotated[_within(annotated["ts"], spans, tolerance)]
    found, used = match(detected["ts"], detected["player"], near["ts"], near["player"],
                        tolerance)
    counted_d = _within(detected["ts"], spans, -tolerance)
    counted_t = _within(near["ts"], spans, -tolerance)
    return Score(int(counted_d.sum()), int(counted_t.sum()), int((found & counted_d).sum()),
                 int((used & counted_t).sum()))


def score_against_referee(run: RunDetections, referee: RefereeEvents,
                          tolerance_s: float = DEFAULT_TOLERANCE_S) -> dict[str, Score]:
    """Shots and possession changes of ``run`` against the annotations, over the time
    its log covered within the halves (see the module's "what is scored")."""
    tolerance = int(tolerance_s * _PS)
    spans = scored_spans(run.first_ts, run.last_ts)
    begin_ts, begin_player = possessor_changes(referee.possession["begin_ts"],
                                               referee.possession["player"])
    changes = np.zeros(len(begin_ts), run.possession.dtype)
    changes["ts"], changes["player"] = begin_ts, begin_player
    shots = np.zeros(len(referee.shots), run.shots.dtype)
    shots["ts"], shots["player"] = referee.shots["ts"], referee.shots["player"]
    return {"shots": _scored(run.shots, shots, spans, tolerance),
            "possession": _scored(run.possession, changes, spans, tolerance)}


def read_run(out: str | Path) -> RunDetections:
    """The detections of a replay's output folder (``complex/`` as ``specula replay``
    persisted it) and the span of its log (``summary.json``).

    Raises
    ------
    FileNotFoundError
        If ``out`` has no ``complex`` table or no ``summary.json``.
    """
    import pyarrow.parquet as pq

    out = Path(out)
    table, summary = out / "complex", out / "summary.json"
    for path in (table, summary):
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: score the --out folder of a "
                                    "finished 'specula replay'")
    facts = json.loads(summary.read_text())
    rows = pq.read_table(table, columns=["event_type", "ts", "player"]).to_pandas()
    of = {kind: rows[rows["event_type"] == kind] for kind in ("shot", "possession")}
    dtype = np.dtype([("ts", "i8"), ("player", "i4")])

    def records(frame) -> np.ndarray:
        found = np.zeros(len(frame), dtype)
        found["ts"], found["player"] = frame["ts"].to_numpy(), frame["player"].to_numpy()
        return found

    return RunDetections(records(of["shot"]), records(of["possession"]),
                         int(facts["first_ts"]), int(facts["last_ts"]))


def score_run(out: str | Path, referee: RefereeEvents,
              tolerance_s: float = DEFAULT_TOLERANCE_S) -> dict[str, Score]:
    """Score the replay in ``out`` against ``referee`` and write ``referee_score.json``
    there."""
    scores = score_against_referee(read_run(out), referee, tolerance_s)
    Path(out, "referee_score.json").write_text(json.dumps(
        {"tolerance_s": tolerance_s, **{k: s.as_dict() for k, s in scores.items()}},
        indent=2) + "\n")
    return scores
