"""The soccer hierarchy on what real logs hold and generated matches so far lack."""

from __future__ import annotations

import numpy as np

from specula import InProcessRuntime
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match

MS = 10**9  # picoseconds per millisecond


# ---------------------------------------------------------------- several balls


def test_a_spare_ball_inside_the_pitch_leaves_a_generated_match_unchanged():
    match = generate_match(10, profile="debs2013", seed=1)
    moved = match.events.copy()
    spare = match.profile.spare_balls[0]  # the other one rests beside the pitch
    moved["x"][moved["key"] == spare] = 2_000  # 2 m inside the touch line, at rest
    reports = [InProcessRuntime(soccer_graph(alpha=1.0)).run(e, batch_ticks=100 * MS)
               for e in (match.events, moved)]
    assert len(reports[0].net("near_foot")) >= 10 and len(reports[0].net("hits")) >= 5
    for node in reports[0].detectors:  # was 17 -> 26,444 near-foot events, 7 -> 0 hits
        assert np.array_equal(reports[0].net(node), reports[1].net(node)), node
