"""The referee's annotations gate play but never feed K: they enter a replay's stream
where the log reaches them (:class:`specula.pipelines.replay.Annotations`) and clock the
unit that takes them, so neither a stop stamped before the log (``--referee`` sends the
time before the first half as a stop from 0) nor an annotation that arrives late is
measured as delayed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from specula import InProcessRuntime
from specula.actors.report import RunReport
from specula.pipelines.delays import DelayModel
from specula.pipelines.replay import Annotations
from specula.soccer.debs2013 import read_positions
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match
from specula.soccer.scoring import score_match
from specula.soccer.spark_log import ANNOTATION_SEQ, PositionLog
from specula.soccer.types import PICOS_PER_SECOND, PLAY_STOP_DTYPE, interruption_events

pytestmark = pytest.mark.slow  # the whole hierarchy, several times

DEBS = Path(__file__).resolve().parent.parent / "data" / "debs2013"


def _batches(raw: np.ndarray, rows: int = 1_000) -> Iterator[np.ndarray]:
    """The arrival-ordered stream in batches as a replay reads its arrival table."""
    for i in range(0, len(raw), rows):
        yield raw[i:i + rows]


def _replay(raw: np.ndarray, notes: np.ndarray, metadata=None, k0_ms: float = 400.0
            ) -> RunReport:
    """``raw`` (arrival order) with ``notes`` merged as a replay merges them, in-process."""
    graph = soccer_graph("adaptive", k0_ms=k0_ms, queries=True, metadata=metadata)
    return InProcessRuntime(graph).run(Annotations(notes).into(_batches(raw)))


def _k_s(report: RunReport) -> dict[str, float]:
    return {name: d.k_s for name, d in report.detectors.items()}


def _stops(*rows: tuple[int, int]) -> np.ndarray:
    return np.array(list(rows), PLAY_STOP_DTYPE)


def test_the_real_sample_with_the_referee_keeps_every_k_under_a_second():
    """The pre-game sample with ``--referee``'s annotations (a stop from 0 to the
    kick-off, which the sample never reaches): every detector's K stays at its initial
    400 ms (it was 10,634,849 ms at ``ball_in_play``), nothing is late."""
    kind = PositionLog().with_referee(DEBS / "referee-events")
    readings = np.concatenate([c.events for c in read_positions(DEBS / "sample-pregame-2000.csv")])
    raw = DelayModel(seed=0).arrival(readings)
    notes = kind.annotations()
    assert notes["ts"][0] == 0  # the time before the first half
    report = _replay(raw, notes)
    assert max(_k_s(report).values()) < 1.0, _k_s(report)
    assert sum(len(report.late(n)) for n in report.detectors) == 0


def test_a_stop_from_zero_before_a_generated_match_changes_no_k_and_no_detection():
    """A generated match with its own stops, and with a stop from ts = 0 to the match's
    start added: every K as without it (a few ms of level-5 noise aside), the same hits
    and passes."""
    match = generate_match(20, profile="debs2013", seed=1)
    raw = DelayModel(seed=1).arrival(match.events)
    own = match.truth.interruptions
    runs = [_replay(raw, interruption_events(stops, raw.dtype, first_seq=ANNOTATION_SEQ),
                    match.metadata)
            for stops in (own, np.concatenate([_stops((0, match.start_ps)), own]))]
    plain, stopped = (_k_s(r) for r in runs)
    for name, k in stopped.items():
        assert k <= plain[name] + 0.05, (name, k, plain[name])
    assert stopped["ball_in_play"] <= plain["ball_in_play"]
    for name in ("hits", "passes"):
        assert np.array_equal(runs[0].net(name), runs[1].net(name)), name
    scores = [score_match(r, match) for r in runs]
    assert scores[0]["hits"].recall == scores[1]["hits"].recall >= 0.95
    assert scores[0]["passes"].recall == scores[1]["passes"].recall >= 0.95


def _disorder_s(raw: np.ndarray) -> float:
    """The readings' own disorder: how far, at most, a reading's time stamp lies behind
    the newest one that arrived before it (seconds)."""
    newest = np.maximum.accumulate(raw["ts"])
    return float(max(0, (newest[:-1] - raw["ts"][1:]).max())) / PICOS_PER_SECOND


@pytest.mark.parametrize("seed", range(4))
def test_annotations_at_random_times_with_random_delays_never_raise_k(seed):
    """Stops at random times (before the match, inside it, open at its end), each
    annotation arriving up to 5 s late: the unit that takes them keeps the K the
    readings give it, or the readings' own disorder where a stop stamped at the stream's
    newest reading puts its clock there; nothing is late that is not late without them."""
    rng = np.random.default_rng(seed)
    match = generate_match(6, profile="debs2013", seed=seed)
    raw = DelayModel(seed=seed).arrival(match.events)
    span = match.end_ps - match.start_ps
    edges = np.sort(rng.integers(-span // 2, span + span // 2, 2 * int(rng.integers(1, 5))))
    edges += match.start_ps
    stops = _stops(*((max(int(b), 0), int(e)) for b, e in zip(edges[::2], edges[1::2],
                                                               strict=True)))
    if rng.random() < 0.5:
        stops["end_ts"][-1] = -1  # still open when the log ends
    notes = interruption_events(stops, raw.dtype, first_seq=ANNOTATION_SEQ)
    notes["ats"] = np.sort(notes["ts"] + rng.integers(0, 5 * PICOS_PER_SECOND, len(notes)))
    for k0_ms in (0.0, 400.0):
        without = _replay(raw, notes[:0], match.metadata, k0_ms)
        with_notes = _replay(raw, notes, match.metadata, k0_ms)
        k_plain, k_notes = (_k_s(r)["ball_in_play"] for r in (without, with_notes))
        assert k_notes <= max(k_plain, _disorder_s(raw)) + 1e-12, (k0_ms, k_notes, k_plain)
        assert len(with_notes.late("ball_in_play")) <= len(without.late("ball_in_play"))
