"""Scoring detections against ground truth: one-to-one matching within a time tolerance."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specula.soccer.geometry import SHOT_HORIZON_PS
from specula.soccer.types import soccer_registry


@dataclass(frozen=True)
class Score:
    """Counts of one detector against its ground truth. Precision and recall are None
    where there is nothing to score (no detection, no true event): 0/0 is no score."""

    detected: int
    truth: int
    #: detections matched to a true event
    matched: int
    #: true events matched to a detection; None: ``matched`` (one set of pairs, all
    #: counted). It differs where some pairs have one end left uncounted (an event
    #: near the edge of what was scored, see :mod:`~specula.soccer.referee_score`).
    found: int | None = None

    @property
    def precision(self) -> float | None:
        return self.matched / self.detected if self.detected else None

    @property
    def recall(self) -> float | None:
        found = self.matched if self.found is None else self.found
        return found / self.truth if self.truth else None

    def as_dict(self) -> dict[str, float | None]:
        """The counts, precision and recall (rounded to 4 places; None, JSON null, where
        there is nothing to score)."""
        return {"detected": self.detected, "truth": self.truth, "matched": self.matched,
                **({} if self.found is None else {"found": self.found}),
                "precision": _rounded(self.precision), "recall": _rounded(self.recall)}


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def match(detected_ts: np.ndarray, detected_id: np.ndarray, truth_ts: np.ndarray,
          truth_id: np.ndarray, tolerance: int) -> tuple[np.ndarray, np.ndarray]:
    """Match each detection to at most one true event with the same id (e.g. the player,
    or a packed (passer, receiver) pair) whose time differs by at most ``tolerance``;
    greedily in time order, nearest first. Returns which detections and which true
    events are matched (boolean masks, in the order given)."""
    found = np.zeros(len(detected_ts), bool)
    used = np.zeros(len(truth_ts), bool)
    for ident in np.union1d(detected_id, truth_id).tolist():
        d = np.flatnonzero(detected_id == ident)
        d = d[np.argsort(detected_ts[d], kind="stable")]
        t = np.flatnonzero(truth_id == ident)
        t = t[np.argsort(truth_ts[t], kind="stable")]
        times = truth_ts[t]
        for i in d.tolist():
            ts = int(detected_ts[i])
            lo = np.searchsorted(times, ts - tolerance, side="left")
            hi = np.searchsorted(times, ts + tolerance, side="right")
            free = [j for j in range(lo, hi) if not used[t[j]]]
            if free:
                j = min(free, key=lambda j: abs(int(times[j]) - ts))
                used[t[j]] = found[i] = True
    return found, used


def score(detected_ts: np.ndarray, detected_id: np.ndarray, truth_ts: np.ndarray,
          truth_id: np.ndarray, tolerance: int) -> Score:
    """:func:`match`, counted: unmatched detections are false positives, unmatched true
    events misses."""
    found, _ = match(detected_ts, detected_id, truth_ts, truth_id, tolerance)
    return Score(len(detected_ts), len(truth_ts), int(found.sum()))


def format_scores(scores: dict[str, Score]) -> str:
    """A small table: detector, detected, true, matched, precision, recall ("n/a" where
    there is nothing to score)."""
    lines = [f"{'detector':<14} {'detected':>8} {'true':>6} {'matched':>7} {'precision':>9} "
             f"{'recall':>7}"]
    for name, s in scores.items():
        lines.append(f"{name:<14} {s.detected:>8} {s.truth:>6} {s.matched:>7} "
                     f"{_shown(s.precision):>9} {_shown(s.recall):>7}")
    return "\n".join(lines)


def _shown(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def score_match(report, match, tolerance_ps: int = 30 * 10**9) -> dict[str, Score]:
    """Hits, passes and shots on goal of a soccer run against a generated match's truth.

    A hit matches a kick by the same player; a pass a successful pass with the same passer
    and receiver (by the kick's time); a shot a shot by the same player whose free path
    went in within 1.5 s of the kick (DEBS 2013 query 4: a shot on goal reaches the
    goal within 1.5 s).
    """
    truth = match.truth
    hits, passes, shots = report.net("hits"), report.net("passes"), report.net("shots")
    # the soccer registry's ids: not the ball's path during a shot
    shots = shots[shots["type"] == soccer_registry().id("shot")]
    good = truth.passes[truth.passes["successful"] == 1]
    shots_ = truth.shots
    on_target = shots_[(shots_["on_target"] == 1) & (shots_["ts_line"] >= 0)
                       & (shots_["ts_line"] - shots_["ts"] <= SHOT_HORIZON_PS)]
    return {
        "hits": score(hits["ts"], hits["player"], truth.kicks["ts"], truth.kicks["player"],
                      tolerance_ps),
        "passes": score(passes["ts"], passes["player"] * 1000 + passes["receiver"],
                        good["ts_kick"], good["from_player"] * 1000 + good["to_player"],
                        tolerance_ps),
        "shots": score(shots["ts"], shots["player"], on_target["ts"], on_target["player"],
                       tolerance_ps),
    }
