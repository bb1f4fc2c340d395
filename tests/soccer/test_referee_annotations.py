"""The referee's annotations gate play but never feed K: they enter a replay's stream
where the log reaches them (:class:`specula.pipelines.replay.Annotations`) and clock the
unit that takes them, so neither a stop stamped before the log (``--referee`` sends the
time before the first half as a stop from 0) nor an annotation that arrives late is
measured as delayed."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from specula import InProcessRuntime
from specula.actors.report import RunReport
from specula.pipelines.delays import DelayModel
from specula.pipelines.replay import Annotations
from specula.soccer.debs2013 import read_positions
from specula.soccer.geometry import INTENSITY_NAMES
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


def _replay(raw: np.ndarray, notes: np.ndarray, metadata=None, k0_ms: float = 400.0,
            alpha: float | str = "adaptive") -> RunReport:
    """``raw`` (arrival order) with ``notes`` merged as a replay merges them, in-process
    (pure K-slack with ``alpha`` 1.0: K then does not depend on how fast the run went,
    as the adaptive alpha does through the busy factor)."""
    graph = soccer_graph(alpha, k0_ms=k0_ms, queries=True, metadata=metadata)
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
    start added: every K as without it (it was 10,629 s at ``ball_in_play``), the same
    hits and passes."""
    match = generate_match(20, profile="debs2013", seed=1)
    raw = DelayModel(seed=1).arrival(match.events)
    own = match.truth.interruptions
    runs = [_replay(raw, interruption_events(stops, raw.dtype, first_seq=ANNOTATION_SEQ),
                    match.metadata, alpha=1.0)
            for stops in (own, np.concatenate([_stops((0, match.start_ps)), own]))]
    assert _k_s(runs[1]) == _k_s(runs[0])
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
    annotation arriving up to 5 s late: the units that take them keep the K the readings
    give them, or the readings' own disorder where a stop stamped at the stream's newest
    reading puts their clock there. With the default initial K (400 ms, above the
    network's delays) nothing is late that is not late without them; from K = 0 a
    stop's clock, the newest reading of any sensor, can leave a ball reading that lags
    the players by more than K late (one of 82,000 readings in one case)."""
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
        without, with_notes = (_replay(raw, n, match.metadata, k0_ms, alpha=1.0)
                               for n in (notes[:0], notes))
        for name in ("ball_in_play", "running_analysis", "heat_map"):  # they take them
            k_plain, k_notes = (_k_s(r)[name] for r in (without, with_notes))
            assert k_notes <= max(k_plain, _disorder_s(raw)), (name, k0_ms, k_notes, k_plain)
            if k0_ms:  # from K = 0 a stop can put the clock past a ball that lags
                assert len(with_notes.late(name)) <= len(without.late(name)), name


def test_queries_1_and_3_count_nothing_of_the_real_sample_s_pre_game():
    """The sample is all pre-game: with the referee's annotations (the time before the
    first half is a stop) neither running statistics nor heat maps are reported; without
    them the same rows are play and both are."""
    kind = PositionLog().with_referee(DEBS / "referee-events")
    readings = np.concatenate([c.events for c in read_positions(DEBS / "sample-pregame-2000.csv")])
    raw = DelayModel(seed=0).arrival(readings)
    for notes, reported in ((kind.annotations(), False), (kind.annotations()[:0], True)):
        report = _replay(raw, notes)
        for name in ("running_analysis", "heat_map"):
            assert (len(report.net(name)) > 0) == reported, name


def _whole_game(stats: np.ndarray) -> dict[int, dict[int, int]]:
    """Whole-game running time (us, all classes) per report time, per player."""
    out: dict[int, dict[int, int]] = {}
    game = stats[stats["window"] == 0]
    total = sum(game[f"{c}_us"] for c in INTENSITY_NAMES)
    for ts, player, us in zip(game["ts"].tolist(), game["player"].tolist(), total.tolist(),
                              strict=True):
        out.setdefault(ts, {})[player] = us
    return out


def test_queries_1_and_3_count_no_time_inside_a_stop():
    """A generated match with a stop (play stopped from 10.1 s to 15.4 s): the
    whole-game running time and heat maps do not grow over a second inside the stop;
    they grow over every whole second of play; a player's whole-game time is the play
    time he was read in (to the 250 ms a path is carried past a leg's last reading)."""
    match = generate_match(20, profile="debs2013", seed=2)
    stops = match.truth.interruptions
    assert len(stops) == 1
    begin, end = int(stops["begin_ts"][0]), int(stops["end_ts"][0])
    raw = DelayModel(seed=1).arrival(match.events)
    notes = interruption_events(stops, raw.dtype, first_seq=ANNOTATION_SEQ)
    report = _replay(raw, notes, match.metadata)
    totals = _whole_game(report.net("running_analysis"))
    heat = report.net("heat_map")
    heat_times = set(heat["ts"][heat["window"] == 0].tolist())
    times = sorted(t for t in totals if t % PICOS_PER_SECOND == 0)
    for before, after in itertools.pairwise(times):
        grew = any(totals[after][p] > totals[before].get(p, 0) for p in totals[after])
        inside = begin <= before and after <= end
        played = end <= before or after <= begin
        if inside:
            assert not grew and after not in heat_times, (before, after)
        elif played:
            assert grew and after in heat_times, (before, after)
    last = totals[max(totals)]
    play_s = (match.end_ps - match.start_ps - (end - begin)) / PICOS_PER_SECOND
    assert all(abs(us / 1e6 - play_s) < 0.3 for us in last.values()), (play_s, last)
