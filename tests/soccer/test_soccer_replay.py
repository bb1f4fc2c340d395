"""A generated match with network delays through the whole soccer hierarchy, the DEBS
2013 queries included."""

from __future__ import annotations

import numpy as np
import pytest
from naive import canonical

from specula import CostModel, InProcessRuntime
from specula.pipelines.delays import DelayModel
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match
from specula.soccer.scoring import Score, score_match

pytestmark = pytest.mark.slow  # a generated match through the whole hierarchy


@pytest.fixture(scope="module")
def replays():
    match = generate_match(12, profile="debs2013", seed=4)
    raw = DelayModel(seed=1).arrival(match.events)
    # steps of 20 ms of arrival time: the answers of 5 ms steps (nothing is late), a few
    # ms more latency for both, in a third of the time
    runs = {alpha: InProcessRuntime(soccer_graph(alpha, k0_ms=400, queries=True),
                                    cost_model=CostModel(per_event=50e-6))
            .run(raw, step_ticks=20 * 10**9) for alpha in (1.0, "adaptive")}
    return match, runs


def _at_least(s: Score, share: float) -> bool:
    """Precision and recall both at least ``share``, where there is something to score
    (a short match may hold no shot: 0 detected of 0 has none)."""
    return all(v is None or v >= share for v in (s.precision, s.recall))


def test_hits_passes_and_shots_match_the_ground_truth(replays):
    match, runs = replays
    for report in runs.values():
        scores = score_match(report, match)
        assert scores["hits"].truth >= 8 and scores["passes"].truth >= 2
        for s in scores.values():
            assert _at_least(s, 0.95), s.as_dict()
        assert sum(len(report.late(n)) for n in report.detectors) == 0


def test_adaptive_speculation_cuts_pass_latency_with_identical_answers(replays):
    _, runs = replays
    pure, adaptive = runs[1.0], runs["adaptive"]
    for name in pure.detectors:
        assert np.array_equal(pure.net(name), canonical(adaptive.net(name))), name
    assert adaptive.latencies("passes").mean() <= 0.6 * pure.latencies("passes").mean()


def test_shots_on_goal_of_a_minute_of_play_match_the_physics():
    """Query 4 through the whole hierarchy on a minute of generated play with shots: each
    shot whose simulated free path goes in within 1.5 s is detected, and nothing else
    (the sides come from the goalkeepers of the match's metadata)."""
    match = generate_match(60, profile="debs2013", seed=9)  # a shot on goal, one wide
    report = InProcessRuntime(soccer_graph(1.0, metadata=match.metadata)).run(
        match.events, step_ticks=100 * 10**9)
    shots = score_match(report, match)["shots"]
    assert shots.truth == 1 and shots.precision == shots.recall == 1.0, shots.as_dict()
    assert len(report.net("sides")) == 2


def test_no_hit_while_the_referee_stops_play_and_the_same_hits_in_play():
    """A generated match with the referee's interruptions (from each ball out to the
    whistle before the restart): no hit falls inside one, and play gives the hits and
    passes it gives without them."""
    match = generate_match(20, profile="debs2013", seed=2)
    stops = match.truth.interruptions  # 10.1 s to 15.4 s into the match
    assert len(stops) == 1 and (stops["end_ts"] > stops["begin_ts"]).all()
    runs = [InProcessRuntime(soccer_graph(1.0)).run(raw, step_ticks=100 * 10**9)
            for raw in (match.events, match.stream())]
    hits = runs[1].net("hits")["ts"]
    inside = (hits[:, None] > stops["begin_ts"]) & \
        ((hits[:, None] < stops["end_ts"]) | (stops["end_ts"] < 0))
    assert not inside.any()
    for name in ("hits", "passes"):
        assert np.array_equal(runs[0].net(name), runs[1].net(name)), name
    # play stops at the interruption's begin, the ball's crossing of the line, a reading
    # (under 1 ms) before the first reading outside the pitch that ends it without one
    plain, stopped = runs[0].net("possession"), runs[1].net("possession")
    assert plain["player"].tolist() == stopped["player"].tolist()
    assert np.abs(plain["ts"] - stopped["ts"]).max() < 10**9
    for s in score_match(runs[1], match).values():
        assert _at_least(s, 0.95), s.as_dict()
