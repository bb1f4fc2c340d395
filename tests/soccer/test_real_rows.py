"""The soccer hierarchy on real rows: the bundled pre-game sample, extended by
real-looking kick-off rows built from it.

The first kick-off of the DEBS 2013 game is 118 s after the sample's last row. The rows
built here are what the real file holds at that moment: each sensor reads at its own
period in the sample, repeating its sample rows' noise (position jitter, ``|v|``,
``|a|`` and directions), only moved to where the scene needs it. The scene is written
as DEBS 2013 CSV lines after the sample's and read back with the real reader:

* ball 4 rests on the centre spot and is kicked at the kick-off (a 10 ms pulse of
  800 m/s^2 towards +y, 4 m/s, like a pass), then rolls on;
* spare ball 8 lies where it lay in the pre-game, beside the touch line, and spare
  ball 10 either there too, or 2 m inside the touch line (since the pre-game, or
  carried there between the pre-game and the kick-off);
* the kicker (Vale Reitstetter, team B) stands 0.3 m behind the ball; his right-leg
  sensor reads at its own period (with a dropout where a case wants one), his
  left-leg sensor has been silent since early in the pre-game (as in the sample).
"""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path

import numpy as np
import pytest
from naive import canonical

from specula import CostModel, InProcessRuntime
from specula.actors.report import RunReport
from specula.ordering.emitter import Emitter
from specula.pipelines.delays import DelayModel
from specula.soccer.ball import AccelerationPeak
from specula.soccer.debs2013 import HALF_END_PS, HALF_START_PS, Metadata, read_all
from specula.soccer.geometry import SENSOR_STALE_PS
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match
from specula.soccer.players import BallNearFoot
from specula.soccer.spark_log import PositionLog
from specula.soccer.types import PLAY_STOP_DTYPE, interruption_events, soccer_registry

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "debs2013" / "sample-pregame-2000.csv"
ROWS = np.loadtxt(SAMPLE, delimiter=",", dtype=np.int64)
REG = soccer_registry()
MS = 10**9  # picoseconds per millisecond
KICK = HALF_START_PS[1]  # the first kick-off
CENTRE = (26_241, 2, 110)  # the centre spot, ball on the ground
RIGHT_LEG = 38  # the kicker's right leg; his left (69) fell silent in the pre-game
KICKER = next(p for p in Metadata.default().players if RIGHT_LEG in p.sensors.values())


def longest_gap() -> int:
    """The sample's longest dropout of one sensor (ps): sensor 99, 112.7 ms."""
    return max(int(np.diff(ROWS[ROWS[:, 0] == sid, 1]).max(initial=0))
               for sid in np.unique(ROWS[:, 0]).tolist())


def readings(sid: int, start: int, end: int,
             at: tuple[int, int, int] | None = None) -> np.ndarray:
    """Rows of sensor ``sid`` from ``start`` to ``end`` (ps) at its period in the sample,
    repeating its sample rows; moved so that its first sample row lies at ``at``."""
    mine = ROWS[ROWS[:, 0] == sid]
    ts = np.arange(start, end, int(np.median(np.diff(mine[:, 1]))))
    rows = mine[np.arange(len(ts)) % len(mine)].copy()
    rows[:, 1] = ts
    if at is not None:
        rows[:, 2:5] += np.asarray(at) - mine[0, 2:5]
    return rows


def kick(rows: np.ndarray, at: int, peak: float = 800.0, ms: float = 10.0) -> np.ndarray:
    """The ball of ``rows`` kicked towards +y at ``at``: an acceleration pulse
    ``peak sin^2`` (m/s^2) of ``ms`` milliseconds, then rolling at the speed it gave."""
    rows = rows.copy()
    t = (rows[:, 1] - at) / 1e12
    d = ms / 1e3
    on, after = (t >= 0) & (t <= d), t > d
    tt = np.minimum(t, d)
    speed = peak * (tt / 2 - d / (4 * np.pi) * np.sin(2 * np.pi * tt / d))
    way = peak * (tt ** 2 / 4 + d ** 2 / (8 * np.pi ** 2) * (np.cos(2 * np.pi * tt / d) - 1))
    way = np.where(after, way + speed * (t - d), way)
    moving = t >= 0
    rows[moving, 3] += np.round(way[moving] * 1e3).astype(np.int64)
    rows[moving, 5] = np.round(speed[moving] * 1e6).astype(np.int64)
    rows[moving, 7:10] = (0, 10_000, 0)
    rows[on, 6] = np.round(peak * np.sin(np.pi * t[on] / d) ** 2 * 1e6).astype(np.int64)
    rows[on, 10:13] = (0, 10_000, 0)
    return rows


def scene(*, spare: str = "beside", kicker_gap: tuple[int, int] | None = None,
          kicker: bool = True, end: int = KICK + 400 * MS) -> np.ndarray:
    """The pre-game sample and the kick-off rows up to ``end``, read as events.
    ``spare``: where ball 10 lies ("beside", "inside", "carried_in"); ``kicker_gap`` =
    (start, end) of a dropout of the kicker's right leg."""
    start = KICK - 300 * MS
    pregame, first = ROWS.copy(), ROWS[ROWS[:, 0] == 10][0, 2:5]
    shift = np.array([2_000 - first[0], 0, 0])  # to 2 m inside the touch line
    if spare == "inside":
        pregame[pregame[:, 0] == 10, 2:5] += shift
    at = None if spare == "beside" else tuple((first + shift).tolist())
    parts = [pregame, kick(readings(4, start, end, CENTRE), KICK), readings(8, start, end),
             readings(10, start, end, at)]
    if kicker:
        foot = readings(RIGHT_LEG, start, end, (CENTRE[0] + 100, CENTRE[1] - 300, 100))
        if kicker_gap is not None:
            foot = foot[(foot[:, 1] < kicker_gap[0]) | (foot[:, 1] >= kicker_gap[1])]
        parts.append(foot)
    rows = np.concatenate(parts)
    rows = rows[np.argsort(rows[:, 1], kind="stable")]
    text = "\n".join(",".join(map(str, r)) for r in rows.tolist()) + "\n"
    events, quarantine = read_all(io.BytesIO(text.encode()))
    assert not quarantine and len(events) == len(rows)
    return events


def run(events: np.ndarray, alpha: float | str = 1.0, **near_options) -> RunReport:
    """The whole hierarchy on ``events`` (``near_options`` for its BallNearFoot)."""
    graph = soccer_graph(alpha=alpha)
    if near_options:
        node = graph.nodes["near_foot"]
        graph.nodes["near_foot"] = dataclasses.replace(node,
                                                       detector=BallNearFoot(**near_options))
    return InProcessRuntime(graph, cost_model=CostModel()).run(events, step_ticks=50 * MS)


def named(report: RunReport, node: str) -> list[tuple[str, float, int]]:
    """(type, ts relative to the kick-off in ms, key) of what ``node`` produced."""
    return [(REG.name(int(e["type"])), round((int(e["ts"]) - KICK) / MS, 1), int(e["key"]))
            for e in report.net(node)]


# ---------------------------------------------------------------- several balls


def test_kickoff_with_spare_balls_beside_and_inside_the_pitch():
    beside = run(scene())
    in_play = named(beside, "ball_in_play")
    assert [(kind, key) for kind, _, key in in_play] == [("ball_in", 4)]
    assert 0 < in_play[0][1] < 5  # the kick-off kick puts the resting ball in play
    hits = beside.net("hits")
    assert hits["player"].tolist() == [KICKER.id] and hits["ball"].tolist() == [4]
    inside = run(scene(spare="inside"))
    for node in beside.detectors:
        assert np.array_equal(beside.net(node), inside.net(node)), node
    # brought onto the pitch while no ball is in play, it does not take play: only a kick
    # does (it used to, as a ball "coming in", until the kick-off)
    carried = run(scene(spare="carried_in"))
    assert named(carried, "ball_in_play") == [in_play[0]]
    for node in ("near_foot", "hits"):
        assert np.array_equal(beside.net(node), carried.net(node)), node


def test_a_spare_ball_inside_the_pitch_leaves_a_generated_match_unchanged():
    match = generate_match(10, profile="debs2013", seed=10)  # 9 kicks
    moved = match.events.copy()
    spare = match.profile.spare_balls[0]  # the other one rests beside the pitch
    moved["x"][moved["key"] == spare] = 2_000  # 2 m inside the touch line, at rest
    reports = [InProcessRuntime(soccer_graph(alpha=1.0)).run(e, step_ticks=100 * MS)
               for e in (match.events, moved)]
    assert len(reports[0].net("near_foot")) >= 5 and len(reports[0].net("hits")) >= 5
    for node in reports[0].detectors:  # was 17 -> 26,444 near-foot events, 7 -> 0 hits
        assert np.array_equal(reports[0].net(node), reports[1].net(node)), node


# ---------------------------------------------------------- stale foot positions


def test_kickoff_ignores_foot_positions_from_the_pregame():
    events = scene(kicker=False)
    assert len(run(events).net("near_foot")) == 0
    never_stale = run(events, stale_ps=10**15).net("near_foot")
    assert len(np.unique(never_stale["player"])) == 3  # as it was: 118 s old positions


@pytest.mark.parametrize("stale", [False, True])
def test_a_dropout_like_the_samples_keeps_the_kicker_and_a_longer_one_does_not(stale):
    gap = 2 * SENSOR_STALE_PS if stale else longest_gap()
    assert 112 * MS < longest_gap() < 113 * MS
    back = KICK + 52 * MS  # his right leg is silent through the kick, until then
    report = run(scene(kicker_gap=(back - gap, back)))
    got = named(report, "near_foot")
    assert got[0][0] == "near" and got[0][2] == KICKER.id
    if stale:  # his last position is too old at the kick: near only once he is read again
        assert got[0][1] >= 52 and len(report.net("hits")) == 0
    else:  # near from the kick (the ball comes into play) on, through the dropout
        assert 0 < got[0][1] < 5 and all(t > 52 for kind, t, _ in got if kind == "not_near")
        assert report.net("hits")["player"].tolist() == [KICKER.id]


# ---------------------------------------------------------------- end of the log


def test_an_excursion_open_at_the_end_of_the_log_is_reported():
    cut = KICK + 6 * MS  # the log ends during the kick, |a| still above 55 m/s^2
    events = scene(end=cut)
    ball = events[events["key"] == 4]
    assert ball["a"][-1] > 55 * 10**6
    strongest = ball[np.argmax(ball["a"])]
    detector = AccelerationPeak()
    names = ["?"] * (len(REG) + 1)
    for t in REG.types():
        names[t.id] = t.name
    emit = Emitter()
    detector.on_batch(ball, names, emit)
    assert len(emit) == 0  # still open
    detector.on_end(emit)
    assert [(r[0], r[1], r[2], r[3]["a"]) for r in emit.rows] == [
        ("peak", int(strongest["ts"]), 4, int(strongest["a"]))]
    report = run(events)
    assert report.net("acceleration_peak")["ts"].tolist() == [int(strongest["ts"])]
    assert report.net("hits")["player"].tolist() == [KICKER.id]


# ------------------------------------------------------------------- speculation


def test_speculation_gives_the_in_order_answer_on_the_kickoff_rows():
    """Ball in play, foot times and the excursion open at the end are restored from
    snapshots: a fully speculative run (alpha 0) nets the in-order answer."""
    events = scene(spare="carried_in", kicker_gap=(KICK - 60 * MS, KICK + 53 * MS),
                   end=KICK + 6 * MS)
    raw = DelayModel(seed=3).arrival(events)
    ordered, speculative = run(raw), run(raw, alpha=0.0)
    for node in ("ball_in_play", "near_foot", "acceleration_peak"):  # their new state
        assert speculative.stats(node).restores > 0, node
    for node in ordered.detectors:
        assert np.array_equal(canonical(ordered.net(node)),
                              canonical(speculative.net(node))), node


# ------------------------------------------------------ referee interruptions

REFEREE = SAMPLE.parent / "referee-events"


def _with(events: np.ndarray, annotations: np.ndarray) -> np.ndarray:
    both = np.concatenate([events, annotations.astype(events.dtype)])
    return both[np.argsort(both["ts"], kind="stable")]


def test_the_referees_interruptions_stop_play_and_the_kick_off_starts_it():
    """With the referee's annotations (their clock put so that the wait for the kick-off
    ends at the kick-off), the pre-game is no play and the kick-off kick is the hit it
    is without them; an interruption that lasts past the kick leaves no ball in play."""
    events = scene()
    plain = run(events)
    referee = PositionLog().with_referee(REFEREE).annotations()
    assert REG.name(int(referee["type"][0])) == "interruption_begin" and referee["ts"][0] == 0
    annotated = run(_with(events, referee))
    assert annotated.net("hits")["player"].tolist() == [KICKER.id]
    for node in ("near_foot", "hits"):
        assert np.array_equal(plain.net(node), annotated.net(node)), node
    stop = np.array([(KICK - 300 * MS, KICK + 100 * MS)], PLAY_STOP_DTYPE)
    stopped = run(_with(events, interruption_events(stop, events.dtype, first_seq=1 << 40)))
    assert len(stopped.net("hits")) == 0 and len(stopped.net("ball_in_play")) == 0


def test_the_game_interruptions_are_the_annotated_ones_and_the_time_outside_the_halves():
    stops = PositionLog().with_referee(REFEREE).interruptions
    assert (stops["begin_ts"][1:] > stops["end_ts"][:-1]).all()  # joined where they overlap
    assert stops["end_ts"][-1] == -1 and stops["begin_ts"][-1] <= HALF_END_PS[2]
    assert stops["end_ts"][0] == HALF_START_PS[1]  # up to the kick-off of the first half
    second = stops[(stops["begin_ts"] < HALF_START_PS[2]) & (stops["end_ts"] >= HALF_START_PS[2])]
    assert len(second) == 1 and second["end_ts"][0] == HALF_START_PS[2]
