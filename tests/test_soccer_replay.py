"""A generated match with network delays through the whole soccer hierarchy."""

from __future__ import annotations

import numpy as np
import pytest

from specula.detectors.soccer.graph import soccer_graph
from specula.pipelines import CostModel, InProcessRuntime
from specula.pipelines.delays import DelayModel
from specula.pipelines.match import generate_match
from specula.pipelines.scoring import score


@pytest.fixture(scope="module")
def replays():
    match = generate_match(15, profile="debs2013", seed=1)
    raw = DelayModel(seed=1).arrival(match.events)
    runs = {alpha: InProcessRuntime(soccer_graph(alpha, k0_ms=400),
                                    cost_model=CostModel(per_event=50e-6))
            .run(raw, batch_ticks=5 * 10**9) for alpha in (1.0, "adaptive")}
    return match, runs


def test_hits_passes_and_shots_match_the_ground_truth(replays):
    match, runs = replays
    truth, tol = match.truth, 30 * 10**9
    for report in runs.values():
        hits = report.net("hits")
        s = score(hits["ts"], hits["player"], truth.kicks["ts"], truth.kicks["player"], tol)
        assert s.truth >= 8 and s.precision >= 0.95 and s.recall >= 0.95
        good = truth.passes[truth.passes["successful"] == 1]
        passes = report.net("passes")
        s = score(passes["ts"], passes["player"] * 1000 + passes["receiver"], good["ts_kick"],
                  good["from_player"] * 1000 + good["to_player"], tol)
        assert s.truth >= 2 and s.precision >= 0.95 and s.recall >= 0.95
        shots = report.net("shots")
        s = score(shots["ts"], shots["player"], truth.shots["ts"], truth.shots["player"], tol)
        assert s.precision >= 0.95 and s.recall >= 0.95
        assert sum(len(report.late(n)) for n in report.detectors) == 0


def test_adaptive_speculation_cuts_pass_latency_with_identical_answers(replays):
    _, runs = replays
    pure, adaptive = runs[1.0], runs["adaptive"]
    for name in pure.detectors:
        assert np.array_equal(pure.net(name), adaptive.net(name)), name
    assert adaptive.latencies("passes").mean() <= 0.6 * pure.latencies("passes").mean()
