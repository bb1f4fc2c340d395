"""Each soccer detector on small hand-made streams."""

from __future__ import annotations

import numpy as np
import pytest

from specula.ordering.emitter import Emitter
from specula.soccer.ball import AccelerationPeak, BallInPlay
from specula.soccer.geometry import PITCH_Y, PS, SIDE_SWITCH_PS
from specula.soccer.play import (
    BallPossession,
    DoublePass,
    Interception,
    Pass,
    PlayerHitsBall,
)
from specula.soccer.players import BallNearFoot, RunningIntensity
from specula.soccer.shots import BlockedShot, CombinationShot, ShotOnGoal
from specula.soccer.sides import TeamSides
from specula.soccer.types import soccer_registry

REG = soccer_registry()
NAMES = ["?"] * (len(REG) + 1)
for _t in REG.types():
    NAMES[_t.id] = _t.name
MS = 10**9  # picoseconds per millisecond


def feed(det, rows: list[dict], cut: int | None = None) -> list[tuple]:
    """Rows (dicts with 'type', 'ts', ...) in time order -> (type, ts, key, payload)."""
    batch = REG.from_records(rows, dtype=REG.dtype(det.inputs))
    out = []
    pieces = [batch] if cut is None else [batch[i:i + cut] for i in range(0, len(batch), cut)]
    for piece in pieces:
        emit = Emitter()
        det.on_batch(piece, NAMES, emit)
        out += [(n, ts, k, p) for n, ts, k, p in emit.rows]
        for name, cols, _ in emit.column_batches:
            for i in range(len(cols["ts"])):
                out.append((name, int(cols["ts"][i]), int(cols["key"][i]),
                            {f: np.asarray(v)[i].item() for f, v in cols.items()
                             if f not in ("ts", "key")}))
    return sorted(out, key=lambda r: (r[1], r[0]))


def ball(ts, x, y, z=110, a=0, sid=4, v=0, vx=0, vy=0, vz=0):
    return {"type": "ball", "ts": ts, "key": sid, "x": x, "y": y, "z": z, "a": a, "v": v,
            "vx": vx, "vy": vy, "vz": vz}


@pytest.mark.parametrize("cut", [None, 2])
def test_a_referee_interruption_takes_the_ball_out_of_play_until_it_ends(cut):
    """The ball in play leaves play at the interruption's begin, where it was last read;
    neither a kick nor a ball coming in puts one into play while it lasts; after its
    end the restart kick does."""
    rows = [ball(1, 100, 0, a=60_000_000), ball(2, 200, 0),
            {"type": "interruption_begin", "ts": 3, "key": 0},
            ball(4, 300, 0, a=60_000_000),                 # kicked while play is stopped
            ball(5, -500, 0, sid=8), ball(6, 100, 0, sid=8),  # carried in from outside
            {"type": "interruption_end", "ts": 7, "key": 0},
            ball(8, 300, 0), ball(9, 300, 0, a=60_000_000)]  # the restart kick
    got = feed(BallInPlay(), rows, cut)
    assert [(n, ts, k, p["x"]) for n, ts, k, p in got] == [
        ("ball_in", 1, 4, 100), ("ball_out", 3, 4, 200), ("ball_in", 9, 4, 300)]


@pytest.mark.parametrize("cut", [None, 2])
def test_after_the_referee_restarts_play_a_ball_thrown_in_takes_it(cut):
    """After the interruption's end the first ball to come onto the pitch (a throw-in)
    takes play; a spare lying inside does not."""
    rows = [ball(1, 100, 0, a=60_000_000), ball(2, -300, 0),  # out over the touch line
            {"type": "interruption_begin", "ts": 3, "key": 0},
            ball(4, 9_000, 0, sid=8),                       # a spare lying inside
            {"type": "interruption_end", "ts": 5, "key": 0},
            ball(6, -300, 0), ball(7, 9_000, 0, sid=8), ball(8, 200, 0)]  # thrown in
    got = feed(BallInPlay(), rows, cut)
    assert [(n, ts, k) for n, ts, k, _ in got] == [
        ("ball_in", 1, 4), ("ball_out", 2, 4), ("ball_in", 8, 4)]


def foot(ts, x, y, sid=13, player=0, team=0, limb=0, v=0):
    return {"type": "player", "ts": ts, "key": sid, "x": x, "y": y, "z": 100,
            "player": player, "team": team, "limb": limb, "v": v}


def test_ball_in_play_flags_kicked_into_play_and_leaving_the_pitch():
    rows = [ball(1, -500, 0), ball(2, 100, 0), ball(3, 200, 0, a=60_000_000),
            ball(4, 200, 34_000), ball(5, 900, -40_000, sid=8)]
    got = feed(BallInPlay(), rows)
    assert [(n, ts, k) for n, ts, k, _ in got] == [("ball_in", 3, 4), ("ball_out", 4, 4)]


@pytest.mark.parametrize("cut", [None, 1, 3])
def test_one_ball_is_in_play_taken_by_a_kick_inside_the_pitch(cut):
    """Without the referee's annotations only a kick inside the pitch puts a ball into
    play: a ball carried in from outside does not (a dead ball carried back to its
    restart spot is still out of play), nor does a spare carried on."""
    kick = 60 * 10**6
    rows = [ball(1, 9_000, 0),  # first seen inside, at rest: not in play
            ball(2, -500, 0, sid=8), ball(3, 500, 0, sid=8),  # carried in: not in play
            ball(4, 9_000, 0, a=kick),  # kicked inside: takes play
            ball(5, -500, 9, sid=10), ball(6, 500, 9, sid=10),  # comes in: 4 is in play
            ball(7, 9_000, 40_000),  # 4 leaves the pitch
            ball(8, -500, 9), ball(9, 500, 9),  # 4 carried back: still out of play
            ball(10, 500, 9, sid=10), ball(11, 500, 9, sid=10, a=kick)]  # 10 is kicked
    got = feed(BallInPlay(), rows, cut)
    assert [(n, ts, k) for n, ts, k, _ in got] == [
        ("ball_in", 4, 4), ("ball_out", 7, 4), ("ball_in", 11, 10)]


@pytest.mark.parametrize("cut", [None, 1, 2])
def test_acceleration_peak_reports_the_strongest_reading_of_each_excursion(cut):
    a = [10, 60, 80, 70, 20, 90, 10]
    rows = [ball(i * MS, 1000 + i, 0, a=v * 10**6) for i, v in enumerate(a)]
    got = feed(AccelerationPeak(), rows, cut)
    assert [(ts // MS, p["a"] // 10**6, p["x"]) for _, ts, _, p in got] == [(2, 80, 1002),
                                                                          (5, 90, 1005)]


def test_ball_near_foot_needs_the_active_ball():
    rows = [foot(0, 10_000, 0), ball(1, 10_500, 0),  # not active yet
            {"type": "ball_in", "ts": 2, "key": 4, "x": 10_500, "y": 0},
            ball(3, 10_500, 0), ball(4, 10_900, 0), ball(5, 11_500, 0),
            foot(6, 11_200, 0), ball(7, 11_500, 0)]
    got = feed(BallNearFoot(), rows)
    assert [(n, ts, p["player"]) for n, ts, _, p in got] == [
        ("near", 3, 0), ("not_near", 5, 0), ("near", 7, 0)]


def test_the_closest_near_player_is_marked_and_marked_again_when_he_changes():
    ball_in = {"type": "ball_in", "ts": 1, "key": 4, "x": 10_000, "y": 0}
    rows = [foot(0, 10_000, 300), foot(0, 10_000, -900, sid=61, player=9, team=1), ball_in,
            ball(2, 10_000, 0),  # the dribbler at 30 cm, the opponent at 90 cm: both near
            foot(3, 10_000, -100, sid=61, player=9, team=1), ball(4, 10_000, 0),  # 10 cm
            ball(5, 10_000, 250)]  # back at the dribbler's foot
    got = feed(BallNearFoot(), rows)
    assert [(ts, p["player"], p["closest"]) for n, ts, _, p in got if n == "near"] == [
        (2, 0, True), (2, 9, False), (4, 9, True), (5, 0, True)]


def test_a_hit_is_the_closest_near_players_even_when_an_opponent_came_near_later():
    """An opponent within 1 m of a dribbler when he kicks (the generated match's
    tackles): the kick is the dribbler's, whose foot is at the ball, not the one the ball
    reached last."""
    near = {"type": "near", "team": 0, "ball": 4}
    rows = [{**near, "ts": 1, "key": 3, "player": 3, "dist": 200, "closest": True},
            {**near, "ts": 2, "key": 8, "player": 8, "team": 1, "dist": 990,
             "closest": False},
            {"type": "peak", "ts": 3, "key": 4, "a": 9 * 10**7},
            {**near, "ts": 4, "key": 8, "player": 8, "team": 1, "dist": 150,
             "closest": True},  # the opponent steals it
            {"type": "peak", "ts": 5, "key": 4, "a": 9 * 10**7},
            {"type": "not_near", "ts": 6, "key": 8, "player": 8, "team": 1},
            {"type": "peak", "ts": 7, "key": 4, "a": 9 * 10**7}]  # closest gone: latest
    got = feed(PlayerHitsBall(), rows)
    assert [(ts, p["player"]) for _, ts, _, p in got] == [(3, 3), (5, 8), (7, 3)]


def test_player_hits_ball_is_near_then_peak_without_not_near():
    near = {"type": "near", "player": 7, "team": 1, "ball": 4, "dist": 300, "key": 7}
    rows = [{**near, "ts": 1}, {"type": "peak", "ts": 2, "key": 4, "a": 9 * 10**7},
            {"type": "not_near", "ts": 3, "key": 7, "player": 7, "team": 1},
            {"type": "peak", "ts": 4, "key": 4, "a": 9 * 10**7}]
    got = feed(PlayerHitsBall(), rows)
    assert [(n, ts, p["player"], p["team"], p["ball"]) for n, ts, _, p in got] == [
        ("hit", 2, 7, 1, 4)]


def test_a_bounce_near_a_player_is_no_hit():
    near = {"type": "near", "ts": 1, "key": 7, "player": 7, "team": 1, "ball": 4, "dist": 300}
    bounce = {"type": "peak", "ts": 2, "key": 4, "a": 9 * 10**7, "az": 9_700}
    kick = {"type": "peak", "ts": 3, "key": 4, "a": 9 * 10**7, "az": 1_000}
    got = feed(PlayerHitsBall(), [near, bounce, kick])
    assert [(n, ts) for n, ts, _, _ in got] == [("hit", 3)]


def hit(ts, player, team):
    return {"type": "hit", "ts": ts * MS, "key": player, "player": player, "team": team}


def test_passes_interceptions_and_possession_from_consecutive_hits():
    rows = [hit(1, 1, 0), hit(2, 1, 0), hit(3, 2, 0), hit(4, 5, 1),
            {"type": "ball_out", "ts": 5 * MS, "key": 4}, hit(6, 6, 1), hit(7, 6, 1)]
    passes = feed(Pass(), rows)
    assert [(ts // MS, p["player"], p["receiver"], p["received"] // MS)
            for _, ts, _, p in passes] == [(2, 1, 2, 3)]
    inter = feed(Interception(), rows)
    assert [(ts // MS, p["player"], p["receiver"]) for _, ts, _, p in inter] == [(3, 2, 5)]
    owners = feed(BallPossession(), rows)
    assert [p["player"] for _, _, _, p in owners] == [1, 2, 5, -1, 6]


def test_double_pass_is_a_pass_back_within_the_window():
    def pas(ts, a, b, rec):
        return {"type": "pass", "ts": ts * MS, "key": a, "player": a, "team": 0,
                "receiver": b, "received": rec * MS}
    rows = [pas(1, 1, 2, 2), pas(3, 2, 1, 4), pas(10, 3, 4, 11), pas(6_000, 4, 3, 6_100)]
    got = feed(DoublePass(), rows)
    assert [(ts // MS, p["player"], p["receiver"], p["received"] // MS)
            for _, ts, _, p in got] == [(1, 1, 2, 4)]


def test_shot_on_goal_projects_the_kicked_ball_into_the_goal():
    # kicked at y = 20 m towards goal 0 (y = 33.9 m) at 25 m/s: arrives in ~0.55 s
    rows = [hit(0, 3, 0) | {"ball": 4}]
    rows += [ball(t * MS, 26_000, 20_000 + 25 * t, z=300, v=25_000_000, vy=10_000, sid=4)
             for t in range(1, 200, 10)]
    got = [r for r in feed(ShotOnGoal(), rows) if r[0] == "shot"]
    assert [(n, ts, p["player"], p["goal"]) for n, ts, _, p in got] == [("shot", 0, 3, 0)]
    assert 0.5 * PS < got[0][3]["eta"] < 0.6 * PS
    wide = [hit(0, 3, 0) | {"ball": 4}]
    wide += [ball(t * MS, 40_000, 20_000 + 25 * t, v=25_000_000, vy=10_000, sid=4)
             for t in range(1, 200, 10)]
    assert feed(ShotOnGoal(), wide) == []


def side(ts, team, goal):
    return {"type": "side", "ts": ts * MS, "key": team, "team": team, "goal": goal}


def shot_towards_goal_0(player, team, start=0, until=1_000):
    """A hit at ``start`` ms, then the ball flying at 25 m/s from y = 20 m to goal 0 and
    over its line (y = 33.9 m) after about 560 ms."""
    rows = [hit(start, player, team) | {"ball": 4}]
    return rows + [ball((start + t) * MS, 26_000, 20_000 + 25 * t, z=300, v=25_000_000,
                        vy=10_000, sid=4) for t in range(1, until, 10)]


@pytest.mark.parametrize("cut", [None, 7])
def test_shot_on_goal_counts_only_the_goal_the_team_attacks(cut):
    """Team 0 defends goal 0: its kick towards goal 0 is a back-pass, not a shot; team 1,
    whose side is not known yet, attacks the goal team 0 defends."""
    back_pass = [side(0, 0, 0), *shot_towards_goal_0(3, 0, start=1)]
    assert [r for r in feed(ShotOnGoal(), back_pass, cut) if r[0] == "shot"] == []
    shot = [side(0, 0, 0), *shot_towards_goal_0(12, 1, start=1)]
    got = [(n, p["player"], p["goal"]) for n, _, _, p in feed(ShotOnGoal(), shot, cut)
           if n == "shot"]
    assert got == [("shot", 12, 0)]
    swapped = [side(0, 0, 1), *shot_towards_goal_0(3, 0, start=1)]  # the second half
    assert [n for n, *_ in feed(ShotOnGoal(), swapped, cut)].count("shot") == 1


@pytest.mark.parametrize("cut", [None, 5])
def test_shot_on_goal_streams_the_ball_while_the_shot_lasts(cut):
    """Every reading of the shot's ball from the one that showed the shot until the ball
    leaves the pitch over the goal line, and none after the next hit."""
    rows = shot_towards_goal_0(3, 0)
    got = feed(ShotOnGoal(), rows, cut)
    path = [(ts, p["y"]) for n, ts, _, p in got if n == "shot_ball"]
    shown = min(ts for ts, _ in path)
    assert 20 * MS <= shown <= 40 * MS  # the first reading judged, 20 ms after the hit
    expected = [(r["ts"], r["y"]) for r in rows[1:]
                if shown <= r["ts"] and r["y"] <= PITCH_Y[1]]
    assert path == expected and path[-1][1] > 33_000
    # the keeper of team 1 (which attacks goal 1) saves at 390 ms
    saved = [side(0, 0, 1), *rows[:40], hit(390, 0, 1) | {"ball": 4}, *rows[40:]]
    got = feed(ShotOnGoal(), saved, cut)
    assert max(ts for n, ts, *_ in got if n == "shot_ball") < 390 * MS


@pytest.mark.parametrize("cut", [None, 3])
def test_team_sides_follow_the_goalkeepers_and_the_change_of_ends(cut):
    """A team defends the goal of the half its keeper stands in: set by his first reading
    beyond the margin, kept through a run upfield, changed after 10 s in the other half;
    other players' readings change nothing."""
    s = SIDE_SWITCH_PS // MS  # ms
    rows = [foot(0, 26_000, 2_000, player=0),            # near the halfway line: no side
            foot(1, 26_000, -30_000, player=0),          # defends goal 1 (negative y)
            foot(2, 26_000, 30_000, player=5),           # a field player: ignored
            foot(3, 26_000, 25_000, player=8, team=1),   # team 1 defends goal 0
            foot(4, 26_000, 10_000, player=0),           # a run upfield ...
            foot(4 + s // 2, 26_000, -28_000, player=0),  # ... back before 10 s
            foot(s, 26_000, 28_000, player=0),           # the change of ends: from here
            foot(s + s // 2, 26_000, 30_000, player=0),
            foot(2 * s - 1, 26_000, 30_000, player=0),   # 10 s minus 1 ms in goal 0's half
            foot(2 * s, 26_000, 31_000, player=0)]       # 10 s: now defends goal 0
    rows = [r | {"ts": r["ts"] * MS} for r in rows]
    got = feed(TeamSides({0: 0, 1: 8}), rows, cut)
    assert [(ts // MS, k, p["goal"]) for n, ts, k, p in got] == [
        (1, 0, 1), (3, 1, 0), (2 * s, 0, 0)]


def test_blocked_and_combination_shots():
    shot = {"type": "shot", "ts": 10 * MS, "key": 3, "player": 3, "team": 0, "goal": 0,
            "eta": 600 * MS}
    rows = [shot, hit(200, 9, 1)]
    got = feed(BlockedShot(), rows)
    assert [(ts // MS, p["player"], p["receiver"]) for _, ts, _, p in got] == [(10, 3, 9)]
    assert feed(BlockedShot(), [shot, hit(700, 9, 1)]) == []
    dp = {"type": "double_pass", "ts": 1 * MS, "key": 1, "player": 1, "team": 0,
          "receiver": 2, "received": 5 * MS}
    got = feed(CombinationShot(), [dp, shot])
    assert [(ts // MS, p["receiver"]) for _, ts, _, p in got] == [(1, 3)]


def test_running_intensity_changes_class_with_speed():
    kmh = [0.5, 5, 5, 12, 30]
    rows = [foot(i, 0, 0, v=int(k / 3.6 * 1e6)) for i, k in enumerate(kmh)]
    got = feed(RunningIntensity(), rows)
    assert [(ts, p["level"]) for _, ts, _, p in got] == [(0, 0), (1, 1), (3, 2), (4, 5)]
