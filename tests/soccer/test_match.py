"""The synthetic match generator and the delay model: format, rates, and that the ground
truth is what the readings show."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import pytest

from specula.pipelines.delays import DelayModel, out_of_order_fraction
from specula.soccer.debs2013 import Metadata
from specula.soccer.geometry import GOALS, KICK_ACCELERATION, PITCH_X, PITCH_Y
from specula.soccer.match import DRIBBLE, PASS, SHOT, Match, generate_match
from specula.soccer.match.sampling import (
    DROPOUT_EVERY_S,
    DROPOUT_MS,
    measured_periods,
    period_errors_pct,
    sensor_period_ps,
)
from specula.soccer.types import soccer_registry

MS = 10**9  # ps
PS = 10**12
SAMPLE = Path(__file__).resolve().parents[1] / "data/debs2013/sample-pregame-2000.csv"
REGISTRY = soccer_registry()
BALL, PLAYER, REFEREE = (REGISTRY.id(name) for name in ("ball", "player", "referee"))


@pytest.fixture(scope="module")
def debs() -> Match:
    # Seed 7 has a goal, interceptions and both kinds of out of play.
    return generate_match(65.0, profile="debs2013", seed=7)


@pytest.fixture(scope="module")
def paper() -> Match:
    # Seed 24 has a shot off target, a blocked one and a substitution at 10 s.
    return generate_match(40.0, profile="paper", seed=24)


@pytest.fixture(scope="module", params=["debs", "paper"])
def match(request) -> Match:
    return request.getfixturevalue(request.param)


class Readings:
    """The ball in play and every player's leg sensors of a match, for lookups by time."""

    def __init__(self, m: Match) -> None:
        ev = m.events
        self.ball = ev[ev["key"] == m.profile.ball_in_play]
        legs = ev[(ev["type"] == PLAYER) & (ev["limb"] <= 1)]
        self.legs = {p: legs[legs["player"] == p] for p in np.unique(legs["player"]).tolist()}

    def ball_at(self, ts: int) -> np.void:
        j = np.searchsorted(self.ball["ts"], ts)
        j = min(max(j, 1), len(self.ball) - 1)
        return self.ball[j] if self.ball["ts"][j] - ts < ts - self.ball["ts"][j - 1] \
            else self.ball[j - 1]

    def ball_near(self, ts: int, window: int) -> np.ndarray:
        a, b = np.searchsorted(self.ball["ts"], [ts - window, ts + window + 1])
        return self.ball[a:b]

    def legs_near(self, player: int, ts: int, window: int = 5 * MS) -> np.ndarray:
        r = self.legs[player]
        a, b = np.searchsorted(r["ts"], [ts - window, ts + window + 1])
        return r[a:b]

    def foot_distance(self, player: int, ts: int) -> float:
        """Distance (mm) from the ball to the nearer leg sensor of ``player`` at ``ts``."""
        return float(distance_mm(self.legs_near(player, ts), self.ball_at(ts)).min())


@functools.cache
def readings(m: Match) -> Readings:
    return Readings(m)


def ball_of(m: Match) -> np.ndarray:
    return readings(m).ball


def distance_mm(a: np.ndarray, b: np.void) -> np.ndarray:
    return np.sqrt(sum((a[c].astype(float) - float(b[c])) ** 2 for c in "xyz"))


def out_intervals(m: Match, readings: np.ndarray) -> np.ndarray:
    """Readings taken while the ball was out of play."""
    dead = np.zeros(len(readings), bool)
    for o in m.truth.out_of_play:
        end = o["ts_restart"] if o["ts_restart"] >= 0 else m.end_ps
        dead |= (readings["ts"] >= o["ts"]) & (readings["ts"] < end)
    return dead


# ----------------------------------------------------------------------------- format


def test_same_seed_same_match_other_seed_other_match():
    a = generate_match(4.0, seed=5)
    b = generate_match(4.0, seed=5)
    c = generate_match(4.0, seed=6)
    assert np.array_equal(a.events, b.events)
    for name in ("kicks", "passes", "shots", "out_of_play", "bounces"):
        assert np.array_equal(getattr(a.truth, name), getattr(b.truth, name))
    assert len(a.events) != len(c.events) or not np.array_equal(a.events, c.events)


def test_sorted_by_ts_with_row_numbers_and_arrival_equal_to_ts(match):
    ev = match.events
    assert ev.dtype == REGISTRY.dtype(["ball", "player", "referee"])
    assert np.all(np.diff(ev["ts"]) >= 0)
    assert np.array_equal(ev["seq"], np.arange(len(ev)))
    assert np.array_equal(ev["ats"], ev["ts"])
    for name in ("producer", "kplus", "flags", "origin"):
        assert not ev[name].any()
    assert ev["ts"][0] >= match.start_ps and ev["ts"][-1] < match.end_ps


@pytest.mark.parametrize(("name", "target", "transmitters", "per_person"),
                         [("debs", 13_600, 41, None), ("paper", 34_000, 143, 4)])
def test_event_rates_of_the_profiles(request, name, target, transmitters, per_person):
    m = request.getfixturevalue(name)
    ev = m.events
    first_10s = ev[ev["ts"] < m.start_ps + 10_000 * MS]
    assert abs(len(first_10s) / 10.0 - target) <= 0.1 * target
    assert m.profile.events_per_second == target
    sids, counts = np.unique(first_10s["key"], return_counts=True)
    assert len(sids) == m.profile.transmitters == transmitters
    is_ball = np.isin(sids, [m.profile.ball_in_play, *m.profile.spare_balls])
    assert np.all(np.abs(counts[is_ball] / 10.0 - 2000) <= 0.06 * 2000)
    assert np.all(np.abs(counts[~is_ball] / 10.0 - 200) <= 0.1 * 200)
    for sid, count, ball in zip(sids.tolist(), counts.tolist(), is_ball.tolist(), strict=True):
        period = sensor_period_ps(sid, ball, 2000 if ball else 200, name == "debs")
        step = np.diff(first_10s["ts"][first_10s["key"] == sid])
        dropped = int(np.rint(step[step > 1.5 * period] / period).sum()) - \
            int(np.count_nonzero(step > 1.5 * period))  # readings a dropout took
        assert abs(count + dropped - 10 * PS / period) <= 1, (sid, count, dropped, period)
    if per_person:
        wearers = first_10s[first_10s["type"] != BALL]
        sensors_of = np.unique(wearers["key"] * 1000 + wearers["player"] + 1) % 1000
        assert np.all(np.unique(sensors_of, return_counts=True)[1] == per_person)


def test_generated_sensors_read_at_the_real_periods_with_real_direction_lengths(debs):
    """The realism check against the real rows: each sensor's period is the real one
    (measured on the bundled sample, or the law fitted to it for sensors the sample
    lacks), and every direction vector has length 10,000, as real ones have."""
    real_rows = np.loadtxt(SAMPLE, delimiter=",", dtype=np.int64)
    real = np.zeros(len(real_rows), [("key", "i8"), ("ts", "i8")])
    real["key"], real["ts"] = real_rows[:, 0], real_rows[:, 1]
    measured = measured_periods(real)
    measured.pop(99)  # its one dropout (113 ms) is in the median's reach: too few rows
    balls = {debs.profile.ball_in_play, *debs.profile.spare_balls}
    errors = period_errors_pct(debs.events, measured, balls)
    assert len(set(errors) & set(measured)) >= 30
    assert max(errors.values()) <= 0.1, max(errors.items(), key=lambda e: e[1])
    for columns in (("vx", "vy", "vz"), ("ax", "ay", "az")):
        norm = np.sqrt(sum(debs.events[c].astype(float) ** 2 for c in columns))
        assert np.all(np.abs(norm - 10_000) <= 2), columns


def test_worn_sensors_drop_out_now_and_then_and_balls_do_not(debs):
    """Gaps of 20-120 ms in worn sensors' readings, about one per sensor every 200 s (the
    real sample's rate); the balls read without a gap."""
    balls = {debs.profile.ball_in_play, *debs.profile.spare_balls}
    gaps, worn = [], 0
    for sid in np.unique(debs.events["key"]).tolist():
        ts = debs.events["ts"][debs.events["key"] == sid]
        step = np.diff(ts)
        period = np.median(step)
        long = step[step > 1.5 * period]
        if sid in balls:
            assert not len(long), sid
        else:
            worn += 1
            gaps += (long / MS).tolist()
    expected = worn * 65.0 / DROPOUT_EVERY_S
    assert expected / 3 <= len(gaps) <= expected * 3, (len(gaps), expected)
    assert all(DROPOUT_MS[0] < g < DROPOUT_MS[1] + 6 for g in gaps), gaps


def test_sensor_ids_types_and_wearers_follow_the_metadata(match):
    roles = match.metadata.sensor_roles()
    ev = match.events
    assert set(np.unique(ev["key"]).tolist()) <= set(roles)
    sids = np.array(sorted(roles))
    table = np.array([(REGISTRY.id(kind), *((0, 0, 0) if kind == "ball" else (p, t, limb)))
                      for kind, p, t, limb in (roles[sid] for sid in sids.tolist())])
    expect = table[np.searchsorted(sids, ev["key"])]
    for column, name in enumerate(("type", "player", "team", "limb")):
        assert np.array_equal(ev[name], expect[:, column]), name


def test_debs2013_profile_uses_the_real_sensors_and_paper_invents_disjoint_ones(debs, paper):
    real = Metadata.default().sensor_roles()
    assert debs.metadata.sensor_roles() == real
    assert debs.profile.ball_in_play == 4 and debs.profile.spare_balls == (8, 10)
    assert not set(paper.metadata.sensor_roles()) & set(real)
    assert len(paper.profile.on_pitch) == 22 and len(paper.profile.substitutes) == 12


# ----------------------------------------------------------------------------- motion


def inside(r: np.ndarray) -> np.ndarray:
    return (r["x"] >= PITCH_X[0]) & (r["x"] <= PITCH_X[1]) & (r["y"] >= PITCH_Y[0]) & \
        (r["y"] <= PITCH_Y[1])


def strictly_inside(r: np.ndarray) -> np.ndarray:
    return (r["x"] > PITCH_X[0]) & (r["x"] < PITCH_X[1]) & (r["y"] > PITCH_Y[0]) & \
        (r["y"] < PITCH_Y[1])


def test_positions_stay_on_the_pitch_except_out_of_play(match):
    """Players on the pitch stay inside it until they are substituted, substitutes
    beside it until they come on (then they walk off or run on), the referee always."""
    ev = match.events
    changed = {}  # player -> when he went off or was sent on
    for row in match.truth.substitutions:
        changed[int(row["off"])] = changed[int(row["on"])] = int(row["ts"])
    until = np.array([changed.get(int(p), 2**62) for p in ev["player"].tolist()])
    before = ev["ts"] < until
    on_pitch = (ev["type"] == REFEREE) | ((ev["type"] == PLAYER) & before &
                                          np.isin(ev["player"], match.profile.on_pitch))
    assert inside(ev[on_pitch]).all()
    ball = ball_of(match)
    assert inside(ball[~out_intervals(match, ball)]).all()
    spares = ev[np.isin(ev["key"], match.profile.spare_balls)]
    # they lie still beside the pitch, reading only a resting sensor's noise
    assert not inside(spares).any() and spares["v"].max() < 1_000_000
    subs = ev[(ev["type"] == PLAYER) & before &
              np.isin(ev["player"], match.profile.substitutes)]
    assert not inside(subs).any()


def test_substitutes_come_on_at_a_stoppage_and_the_players_they_replace_go_off(paper):
    """In the paper profile (6 substitutes a side) a substitution happens while the ball
    is out: the player who goes off makes no kick after it and walks towards the
    warm-up area beside the pitch, the one who comes on runs onto the pitch."""
    subs = paper.truth.substitutions
    assert len(subs) >= 1
    ev, kicks = paper.events, paper.truth.kicks
    for row in subs:
        assert (np.abs(paper.truth.out_of_play["ts"] - row["ts"]) < MS).any()
        assert not ((kicks["player"] == row["off"]) & (kicks["ts"] > row["ts"])).any()
        assert not ((kicks["player"] == row["on"]) & (kicks["ts"] < row["ts"])).any()
    went = ev[(ev["player"] == subs["off"][0]) & (ev["ts"] > subs["ts"][0])]
    came = ev[(ev["player"] == subs["on"][0]) & (ev["ts"] > subs["ts"][0])]
    spot = ev[ev["player"] == subs["on"][0]][0]  # where the substitute warmed up
    to_spot = np.hypot(went["x"] - spot["x"], went["y"] - spot["y"])
    assert to_spot[-1] < to_spot[0] - 5_000  # 5 m nearer the warm-up spot
    assert inside(came).any()


def test_bodies_move_plausibly(match):
    ev = match.events
    wearers = ev[ev["type"] != BALL]
    legs = wearers[wearers["limb"] <= 1]
    arms = wearers[wearers["limb"] >= 2]
    assert legs["v"].max() <= 8_000_000  # um/s
    assert legs["v"].max() >= 3_000_000  # people do run
    assert np.all((legs["z"] >= 0) & (legs["z"] <= 200))
    assert np.all(np.abs(arms["z"] - 1300) <= 100)
    # The two legs of a player are about 0.2 m apart (the right leg interpolated to the
    # left leg's reading times: each sensor reads at its own phase).
    first = wearers[wearers["ts"] < match.start_ps + 5_000 * MS]
    for player in np.unique(first["player"]).tolist():
        mine = first[first["player"] == player]
        a, b = mine[mine["limb"] == 0], mine[mine["limb"] == 1]
        inside = (a["ts"] >= b["ts"][0]) & (a["ts"] <= b["ts"][-1])
        t = a["ts"][inside].astype(float)
        gap = np.hypot(a["x"][inside] - np.interp(t, b["ts"].astype(float), b["x"]),
                       a["y"][inside] - np.interp(t, b["ts"].astype(float), b["y"]))
        assert np.median(gap) == pytest.approx(200, abs=15)


def test_reported_speed_matches_the_positions(match):
    # Over 20 readings (~10 ms), so that the 1 mm rounding of positions does not matter.
    ball = ball_of(match)
    live = ~out_intervals(match, ball)
    k = 20
    dt = (ball["ts"][k:] - ball["ts"][:-k]) / 1e12
    step = np.sqrt(sum((ball[c][k:] - ball[c][:-k]).astype(float) ** 2 for c in "xyz"))
    speed = step / 1000.0 / dt  # m/s
    reported = ball["v"][k // 2:-k // 2] / 1e6
    ok = live[k:] & live[:-k]
    assert np.median(np.abs(speed[ok] - reported[ok])) < 0.05
    assert np.percentile(np.abs(speed[ok] - reported[ok]), 90) < 0.3
    assert speed[ok].max() > 10.0  # the ball is kicked
    legs = match.events[(match.events["type"] == PLAYER) & (match.events["limb"] == 0)]
    one = legs[legs["player"] == legs["player"][0]]
    dt = (one["ts"][2:] - one["ts"][:-2]) / 1e12
    speed = np.hypot(one["x"][2:] - one["x"][:-2], one["y"][2:] - one["y"][:-2]) / 1000.0 / dt
    assert np.median(np.abs(speed - one["v"][1:-1] / 1e6)) < 0.1


# ----------------------------------------------------------------------------- truth


def test_every_kick_is_an_acceleration_peak_at_the_kickers_foot(match):
    kicks = match.truth.kicks
    assert len(kicks) >= 20 and {PASS, DRIBBLE} <= set(kicks["kind"].tolist())
    r = readings(match)
    team = {p.id: p.team for p in match.metadata.players}
    for kick in kicks:
        ts, player = int(kick["ts"]), int(kick["player"])
        assert r.ball_near(ts, 5 * MS)["a"].max() > KICK_ACCELERATION, kick
        assert team[player] == kick["team"]
        assert r.foot_distance(player, ts) <= 1000, kick


def test_the_ball_in_play_only_peaks_at_kicks_and_ground_impacts(match):
    ball = ball_of(match)
    explained = out_intervals(match, ball)
    for kick in match.truth.kicks:
        explained |= np.abs(ball["ts"] - kick["ts"]) <= 12 * MS
    for impact in match.truth.bounces:
        explained |= np.abs(ball["ts"] - impact["ts"]) <= 3 * MS
    assert ball["a"][~explained].max() < KICK_ACCELERATION


def test_passes_end_at_the_receivers_foot(match):
    t = match.truth
    assert np.array_equal(t.passes["ts_kick"], t.kicks["ts"][t.kicks["kind"] == PASS])
    r = readings(match)
    team = {p.id: p.team for p in match.metadata.players}
    received = t.passes[t.passes["ts_receive"] < match.end_ps]
    assert len(received) >= 5
    for p in received:
        assert p["ts_kick"] < p["ts_receive"] <= p["ts_kick"] + 10_000 * MS
        assert team[int(p["from_player"])] == p["team"] == team[int(p["to_player"])]
        who = int(p["to_player"] if p["successful"] else p["interceptor"])
        if p["successful"]:
            assert p["interceptor"] == -1
        else:
            assert team[who] != p["team"]
        assert r.ball_at(int(p["ts_receive"]))["v"] <= 9_500_000
        assert r.foot_distance(who, int(p["ts_receive"])) <= 1000
        # The receiver is the next to kick the ball.
        later = t.kicks[t.kicks["ts"] > p["ts_receive"]]
        if len(later):
            assert later["player"][0] == who


def test_some_passes_are_intercepted(debs):
    ok = debs.truth.passes["successful"]
    assert 0 < (ok == 0).sum() < (ok == 1).sum()


def straight_goal_line_x(reading: np.void, goal: int) -> float:
    """Where the ball's horizontal path from ``reading`` meets the goal line."""
    return float(reading["x"] + reading["vx"] / reading["vy"] * (GOALS[goal]["y"] - reading["y"]))


def test_shots_go_towards_the_attacked_goal(debs, paper):
    shots = np.concatenate([debs.truth.shots, paper.truth.shots])
    assert set(shots["on_target"].tolist()) == {0, 1}
    assert shots["scored"].any() and shots["blocked"].any()
    for m in (debs, paper):
        ball = ball_of(m)
        kicks = m.truth.kicks
        for s in m.truth.shots:
            assert s["goal"] == s["team"]  # team t attacks GOALS[t]
            assert kicks["kind"][kicks["ts"] == s["ts"]].tolist() == [SHOT]
            after = ball[(ball["ts"] > s["ts"] + 20 * MS) & (ball["ts"] < s["ts"] + 60 * MS)]
            assert np.all(np.sign(after["vy"]) == (1 if s["goal"] == 0 else -1))
            x = straight_goal_line_x(after[0], int(s["goal"]))
            posts = GOALS[s["goal"]]["x"]
            if s["on_target"]:
                assert posts[0] - 20 <= x <= posts[1] + 20
            if not posts[0] - 20 <= x <= posts[1] + 20:
                assert not s["on_target"]
            if s["blocked"]:
                deflection = kicks[(kicks["ts"] > s["ts"]) & (kicks["player"] == s["blocker"])]
                assert deflection["kind"][0] == 3 and deflection["team"][0] != s["team"]
                assert s["ts_end"] <= deflection["ts"][0] <= s["ts_end"] + 10 * MS
                assert not s["scored"]
            if s["scored"]:
                outs = m.truth.out_of_play
                assert (outs["goal"][outs["ts"] > s["ts"]][:1] == s["goal"]).all()
                assert s["on_target"]


def test_out_of_play_is_where_the_ball_crosses_a_line(match):
    outs = match.truth.out_of_play
    assert len(outs)
    ball = ball_of(match)
    kicks = match.truth.kicks
    for o in outs:
        before = ball[ball["ts"] < o["ts"]][-1]
        after = ball[ball["ts"] >= o["ts"]][0]
        # the first reading after the crossing is on the line (to the mm) or beyond it
        assert inside(np.array([before]))[0] and not strictly_inside(np.array([after]))[0]
        if o["line"] == 0:
            assert min(abs(o["x"] - PITCH_X[0]), abs(o["x"] - PITCH_X[1])) <= 1
        else:
            assert min(abs(o["y"] - PITCH_Y[0]), abs(o["y"] - PITCH_Y[1])) <= 1
        if o["goal"] >= 0:
            assert o["line"] == 1
            assert GOALS[o["goal"]]["x"][0] <= o["x"] <= GOALS[o["goal"]]["x"][1]
        if o["ts_restart"] >= 0:
            assert o["ts_restart"] - o["ts"] >= 3_000 * MS
            assert o["ts_restart"] in kicks["ts"]


def test_both_kinds_of_out_of_play_happen(debs, paper):
    lines = np.concatenate([debs.truth.out_of_play["line"], paper.truth.out_of_play["line"]])
    assert set(lines.tolist()) == {0, 1}


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="profile"):
        generate_match(1.0, profile="nope")
    with pytest.raises(ValueError, match="seconds"):
        generate_match(0.0)


def test_a_truth_without_bodies_says_running_and_heat_need_them(debs):
    bare = dataclasses.replace(debs.truth, bodies=None)
    for aggregate in ("running", "heat"):
        with pytest.raises(ValueError, match="computed from the simulated bodies"):
            getattr(bare, aggregate)


# ----------------------------------------------------------------------------- delays


def test_arrival_is_a_stable_deterministic_reordering(debs):
    ev = debs.events[debs.events["ts"] < debs.start_ps + 10_000 * MS]
    a = DelayModel(seed=3).arrival(ev)
    b = DelayModel(seed=3).arrival(ev)
    c = DelayModel(seed=4).arrival(ev)
    assert np.array_equal(a, b) and not np.array_equal(a["ats"], c["ats"])
    assert np.all(a["ats"] >= a["ts"])
    assert np.all(np.diff(a["ats"]) >= 0)
    ties = np.diff(a["ats"]) == 0
    assert ties.any() and np.all(np.diff(a["seq"])[ties] > 0)  # input order kept
    assert np.array_equal(np.sort(a["seq"]), ev["seq"])
    back = a[np.argsort(a["seq"])]
    for name in ev.dtype.names:
        if name != "ats":
            assert np.array_equal(back[name], ev[name])
    assert np.array_equal(ev["ats"], ev["ts"])  # the input is left alone


def test_out_of_order_fraction_is_as_documented(debs):
    ev = debs.events[debs.events["ts"] < debs.start_ps + 10_000 * MS]
    assert out_of_order_fraction(ev) == 0.0
    assert 0.75 <= out_of_order_fraction(DelayModel(seed=1).arrival(ev)) <= 0.92
    calm = DelayModel(seed=1, jitter_ms=(2.0, 2.0), reading_ms=0.0, burst_rate=0.0)
    assert out_of_order_fraction(calm.arrival(ev)) == 0.0


def test_bursts_hold_readings_and_release_them_together(debs):
    ev = debs.events[debs.events["ts"] < debs.start_ps + 10_000 * MS]
    model = DelayModel(seed=2, jitter_ms=(1.0, 5.0), reading_ms=0.0, burst_rate=1.0,
                       burst_ms=(300.0, 300.0), burst_sensors=(1, 1))
    delay = model.delays(ev)
    assert delay.max() <= 305 * MS
    assert delay.max() >= 250 * MS
    arrived = model.arrival(ev)
    _, together = np.unique(arrived["ats"], return_counts=True)
    assert together.max() >= 50  # a held sensor's readings arrive at once
    no_burst = DelayModel(seed=2, jitter_ms=(1.0, 5.0), reading_ms=0.0, burst_rate=0.0)
    assert no_burst.delays(ev).max() <= 5 * MS


def test_out_of_order_fraction_counts_events_behind_a_later_one():
    ev = np.zeros(5, [("ts", "i8")])
    ev["ts"] = [1, 3, 2, 4, 0]
    assert out_of_order_fraction(ev) == pytest.approx(2 / 5)
    assert out_of_order_fraction(ev[:1]) == 0.0


def test_delay_model_rejects_bad_parameters():
    with pytest.raises(ValueError):
        DelayModel(jitter_ms=(5.0, 1.0))
    with pytest.raises(ValueError):
        DelayModel(burst_rate=-1.0)
    with pytest.raises(ValueError):
        DelayModel(burst_sensors=(0, 3))
