"""Scoring detections against ground truth: one-to-one matching within a time tolerance."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specula.soccer.geometry import SHOT_HORIZON_PS
from specula.soccer.types import soccer_registry


@dataclass(frozen=True)
class Score:
    """Counts of one detector against its ground truth."""

    detected: int
    truth: int
    matched: int

    @property
    def precision(self) -> float:
        return self.matched / self.detected if self.detected else 1.0

    @property
    def recall(self) -> float:
        return self.matched / self.truth if self.truth else 1.0

    def as_dict(self) -> dict[str, float]:
        return {"detected": self.detected, "truth": self.truth, "matched": self.matched,
                "precision": round(self.precision, 4), "recall": round(self.recall, 4)}


def score(detected_ts: np.ndarray, detected_id: np.ndarray, truth_ts: np.ndarray,
          truth_id: np.ndarray, tolerance: int) -> Score:
    """Match each detection to at most one true event with the same id (e.g. the player,
    or a packed (passer, receiver) pair) whose time differs by at most ``tolerance``;
    greedily in time order, nearest first. Unmatched detections are false positives,
    unmatched true events misses."""
    matched = 0
    for ident in np.union1d(detected_id, truth_id).tolist():
        d = np.sort(detected_ts[detected_id == ident])
        t = np.sort(truth_ts[truth_id == ident])
        used = np.zeros(len(t), bool)
        for ts in d.tolist():
            lo = np.searchsorted(t, ts - tolerance, side="left")
            hi = np.searchsorted(t, ts + tolerance, side="right")
            free = [j for j in range(lo, hi) if not used[j]]
            if free:
                j = min(free, key=lambda j: abs(int(t[j]) - ts))
                used[j] = True
                matched += 1
    return Score(len(detected_ts), len(truth_ts), matched)


def format_scores(scores: dict[str, Score]) -> str:
    """A small table: detector, detected, true, matched, precision, recall."""
    lines = [f"{'detector':<14} {'detected':>8} {'true':>6} {'matched':>7} {'precision':>9} "
             f"{'recall':>7}"]
    for name, s in scores.items():
        lines.append(f"{name:<14} {s.detected:>8} {s.truth:>6} {s.matched:>7} "
                     f"{s.precision:>9.3f} {s.recall:>7.3f}")
    return "\n".join(lines)


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
