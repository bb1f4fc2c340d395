"""A newcomer's stoppage detector on ``ball_out`` / ``ball_in`` finds exactly the
truth's stoppages: the ball goes out when it crosses a line and comes back into play
with the restart kick, not when the dead ball is carried back onto the pitch, and the
spare balls beside the pitch count for nothing."""

from __future__ import annotations

import numpy as np
import pytest

from specula import Detector, Graph
from specula.soccer import soccer_registry
from specula.soccer.ball import BallInPlay
from specula.soccer.match import Match, generate_match
from specula.testing import feed

PS = 10**12
MS = 10**9
LONG = 3 * PS

REG = soccer_registry()
REG.register("stoppage", since="i8")


class LongStoppage(Detector):
    """The ball was out of play for more than 3 s: one ``stoppage`` when play
    restarts, with ``since``, when the ball in play went out (as in
    ``docs/writing-a-detector.md``)."""

    inputs = ("ball_out", "ball_in")
    outputs = ("stoppage",)

    def __init__(self) -> None:
        self.out_since: int | None = None

    def on_event(self, event, emit) -> None:
        if event.type == "ball_out":
            self.out_since = event.ts
        elif self.out_since is not None:
            if event.ts - self.out_since > LONG:
                emit("stoppage", event.ts, key=event.key, since=self.out_since)
            self.out_since = None


GRAPH = (Graph(REG, sources=BallInPlay.inputs)
         .add("ball_in_play", BallInPlay())
         .add("stoppages", LongStoppage()))


@pytest.fixture(scope="module")
def match() -> Match:
    return generate_match(60.0, profile="debs2013", seed=7)  # three stoppages


def stoppages(events: np.ndarray) -> list[dict]:
    """What the detector finds on ``events`` (in time order)."""
    ids = [REG.id(t) for t in GRAPH.sources]
    return feed(GRAPH, events[np.isin(events["type"], ids)])["stoppages"].net


@pytest.mark.parametrize("with_referee", [False, True])
def test_the_stoppage_detector_finds_exactly_the_truths_stoppages(match, with_referee):
    """Every time the ball went out and play restarted more than 3 s later, one
    stoppage: from the crossing (within two ball readings, 1 ms: one may lie on the line
    to the mm) to the restart kick
    (its first reading above 55 m/s^2, within the kick's pulse of at most 20 ms); with
    the referee's annotations as without them."""
    outs = match.truth.out_of_play
    truth = outs[(outs["ts_restart"] >= 0) & (outs["ts_restart"] - outs["ts"] > LONG)]
    assert len(truth) >= 2 and len(truth) == len(outs[outs["ts_restart"] >= 0])
    found = stoppages(match.stream() if with_referee else match.events)
    assert len(found) == len(truth), (found, truth)
    for got, want in zip(found, truth, strict=True):
        assert 0 <= got["since"] - want["ts"] <= MS
        assert 0 <= want["ts_restart"] - got["ts"] <= 10 * MS


def test_a_dead_ball_carried_back_onto_the_pitch_is_not_in_play(match):
    """Between each ball out and its restart kick the dead ball is carried back inside
    the pitch and lies at the restart spot; ``ball_in_play`` says nothing until the kick.
    The spare balls lying beside the pitch never come into it."""
    ids = [REG.id(t) for t in GRAPH.sources]
    net = feed(GRAPH, match.events[np.isin(match.events["type"], ids)])["ball_in_play"].net
    ball_in = np.array([e["ts"] for e in net if e["type"] == "ball_in"])
    assert {e["key"] for e in net} == {match.profile.ball_in_play}
    ev = match.events
    ball = ev[ev["key"] == match.profile.ball_in_play]
    for o in match.truth.out_of_play[match.truth.out_of_play["ts_restart"] >= 0]:
        dead = ball[(ball["ts"] > o["ts"]) & (ball["ts"] < o["ts_restart"] - 20 * MS)]
        inside = (dead["x"] > 0) & (dead["x"] < 52_483) & (np.abs(dead["y"]) < 33_960)
        assert inside.any()  # carried back: inside the lines while play is stopped
        assert not ((ball_in > o["ts"]) & (ball_in < o["ts_restart"] - 10 * MS)).any()
