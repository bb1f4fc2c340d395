"""DEBS 2013 queries 1-3 (running analysis, possession, heat maps): on hand-made streams,
and against the generator's physics-defined truth."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from specula.ordering.emitter import Emitter
from specula.soccer.geometry import HEAT_GRIDS, INTENSITY_NAMES, PITCH_X, PITCH_Y, PS
from specula.soccer.match import generate_match
from specula.soccer.match.aggregates import one_second_rule, window
from specula.soccer.queries import HeatMap, PossessionStats, RunningAnalysis, heat_table
from specula.soccer.types import soccer_registry

REG = soccer_registry()
NAMES = ["?"] * (len(REG) + 1)
for _t in REG.types():
    NAMES[_t.id] = _t.name
MS = 10**9
T0 = 1_000 * PS  # a whole second of the sensor clock
#: Short sliding windows, so that a short match slides them
WINDOWS = (5, 10, 0)


def run(det, batch: np.ndarray, step: int = 20_000) -> np.ndarray:
    """Feed ``batch`` (time-ordered) in pieces, then end the stream; all emissions as one
    array of the registry's dtype for the detector's outputs."""
    out = []
    for i in range(0, len(batch), step):
        emit = Emitter()
        det.on_batch(batch[i:i + step], NAMES, emit)
        out += _rows(emit)
    emit = Emitter()
    det.on_end(emit)
    out += _rows(emit)
    return REG.from_records(out, dtype=REG.dtype(det.outputs))


def _rows(emit: Emitter) -> list[dict]:
    rows = [{"type": n, "ts": ts, "key": k, **p} for n, ts, k, p in emit.rows]
    for name, cols, _ in emit.column_batches:
        for i in range(len(cols["ts"])):
            rows.append({"type": name, **{f: np.asarray(v)[i].item() for f, v in cols.items()}})
    return rows


def legs(ts_ms, x, y, speed_mm_s=0.0, vx=10_000, vy=0, player=0, team=0):
    """Both legs of a player at (x, y) at the times ``ts_ms`` (ms after ``T0``), the
    left leg 2.5 ms before the right, moving along (vx, vy) at ``speed_mm_s``."""
    rows = []
    for t in ts_ms:
        for limb, dt in ((0, 0.0), (1, 2.5)):
            rows.append({"type": "player", "ts": T0 + int((t + dt) * MS), "key": 10 + limb,
                         "x": int(x), "y": int(y), "z": 100, "v": int(speed_mm_s * 1000),
                         "vx": vx, "vy": vy, "player": player, "team": team, "limb": limb})
    return rows


# ---------------------------------------------------------------------- hand-made


def test_one_second_rule_gives_a_short_run_to_the_next_long_one():
    cls = np.array([0] * 5 + [1] * 3 + [2] * 12 + [1] * 2)  # steps of 0.1 s
    assert one_second_rule(cls, PS // 10).tolist() == [2] * 20 + [1] * 2


def test_running_analysis_times_distances_and_the_one_second_rule():
    # 2 s at 3 m/s (trot), 0.5 s at 4 m/s (medium speed run), 3 s at 5 m/s (high speed)
    rows, x = [], 0.0
    for t in np.arange(0, 5500, 5.0):
        speed = 3_000 if t < 2000 else 4_000 if t < 2500 else 5_000
        rows += legs([t], x, 0, speed)
        x += speed * 0.005
    batch = REG.from_records(sorted(rows, key=lambda r: r["ts"]), dtype=REG.dtype(["player"]))
    out = run(RunningAnalysis(windows_s=WINDOWS, smoothing_ps=1), batch)
    assert set(np.unique(out["ts"] // PS).tolist()) <= set(range(1000, 1007))
    # the current runs: the trot, then the high speed run with the 0.5 s before it, to
    # the last (right leg's) reading
    runs = out[out["type"] == REG.id("current_running")]
    assert [(int(r["level"]), (r["since"] - T0) / PS, (r["until"] - T0) / PS)
            for r in runs] == [(1, 0.0, 2.0), (4, 2.0, 5.4975)]
    assert runs["mm"][1] == pytest.approx(0.5 * 4_000 + 2.9975 * 5_000, rel=0.01)
    out = out[out["type"] == REG.id("running_stats")]
    final = out[(out["ts"] == out["ts"].max()) & (out["window"] == 0)][0]
    us = {c: final[f"{c}_us"] / 1e6 for c in INTENSITY_NAMES}
    assert us["trot"] == pytest.approx(2.0, abs=0.01)
    assert us["medium"] == us["low"] == 0  # 0.5 s: counted with the next class
    assert us["high"] == pytest.approx(3.5, abs=0.01)
    assert final["high_mm"] == pytest.approx(0.5 * 4_000 + 3 * 5_000, rel=0.01)
    # every second's report: the five-second window holds at most five seconds
    five = out[out["window"] == 5]
    total = sum(five[f"{c}_us"] for c in INTENSITY_NAMES)
    assert total.max() <= 5 * 10**6 + 1


def test_running_analysis_smooths_a_standing_players_noise():
    # standing, but each leg's speed jumps around 1 km/h in random directions
    rng = np.random.default_rng(0)
    rows = []
    for t in np.arange(0, 4000, 5.0):
        for limb, dt in ((0, 0.0), (1, 2.5)):
            ang = rng.uniform(0, 2 * np.pi)
            rows.append({"type": "player", "ts": T0 + int((t + dt) * MS), "key": 10 + limb,
                         "x": 1000, "y": 0, "z": 100, "v": int(rng.uniform(0, 700_000)),
                         "vx": int(10_000 * np.cos(ang)), "vy": int(10_000 * np.sin(ang)),
                         "player": 0, "team": 0, "limb": limb})
    batch = REG.from_records(rows, dtype=REG.dtype(["player"]))
    final = run(RunningAnalysis(windows_s=WINDOWS), batch)
    final = final[final["type"] == REG.id("running_stats")]
    final = final[(final["ts"] == final["ts"].max()) & (final["window"] == 0)][0]
    assert final["standing_us"] / 1e6 == pytest.approx(4.0, abs=0.01)


def test_heat_map_layout_and_table():
    # standing at the centre of cell (col 2, row 7) of the 8 x 13 grid for 3 s
    w = (PITCH_X[1] - PITCH_X[0]) / 8
    h = (PITCH_Y[1] - PITCH_Y[0]) / 13
    x, y = PITCH_X[0] + 2.5 * w, PITCH_Y[0] + 7.5 * h
    batch = REG.from_records(legs(np.arange(0, 3000, 5.0), x, y),
                             dtype=REG.dtype(["player"]))
    heat = run(HeatMap(windows_s=WINDOWS), batch)
    table = heat_table(heat, player=0, window=0, grid=0)
    assert table.shape == (13, 8)
    assert table[7, 2] / 1e6 == pytest.approx(3.0, abs=0.01)
    assert table.sum() == table[7, 2]
    for g, (cols, rows) in enumerate(HEAT_GRIDS):  # the same spot on every grid
        t = heat_table(heat, 0, 0, g)
        assert t.shape == (rows, cols) and t.sum() == pytest.approx(table.sum(), abs=2)
    # halfway through, the map reported then
    assert heat_table(heat, 0, 0, 0, at=T0 + 2 * PS)[7, 2] / 1e6 == pytest.approx(2.0,
                                                                                abs=0.01)


def test_heat_map_snapshot_shares_its_history():
    batch = REG.from_records(legs(np.arange(0, 8000, 5.0), 1000, 0),
                             dtype=REG.dtype(["player"]))
    det = HeatMap(windows_s=WINDOWS)
    run(det, batch[:-10])
    small, frozen = det.snapshot()
    again = det.snapshot()
    assert frozen[3] and all(a is b for a, b in zip(frozen[3], again[1][3], strict=True))
    assert len(pickle.dumps(small)) < 20_000 and again == (small, frozen)


def _possession_stream(hits: list[tuple[float, int, int]], outs: list[float],
                       end_ms: float) -> np.ndarray:
    rows = [{"type": "ball", "ts": T0 + int(t * MS), "key": 4} for t in np.arange(0, end_ms, 50)]
    rows += [{"type": "hit", "ts": T0 + int(t * MS), "key": p, "player": p, "team": team}
             for t, p, team in hits]
    rows += [{"type": "ball_out", "ts": T0 + int(t * MS), "key": 4} for t in outs]
    rows.sort(key=lambda r: r["ts"])
    return REG.from_records(rows, dtype=REG.dtype(PossessionStats.inputs))


def test_possession_is_the_time_between_a_players_hits_until_play_stops():
    hits = [(100, 1, 0), (600, 1, 0), (1100, 1, 0),  # 1.0 s for player 1
            (1500, 7, 1),  # one touch: no time
            (2000, 2, 0), (2300, 2, 0),  # 0.3 s, then the ball goes out
            (2600, 2, 0), (2700, 2, 0)]  # 0.1 s after the restart
    out = run(PossessionStats(windows_s=WINDOWS),
              _possession_stream(hits, outs=[2400], end_ms=3000))
    stats = out[out["type"] == REG.id("possession_stats")]
    final = stats[(stats["ts"] == stats["ts"].max()) & (stats["window"] == 0)]
    us = dict(zip(final["player"].tolist(), (final["us"] / 1e6).tolist(), strict=True))
    assert us == pytest.approx({1: 1.0, 2: 0.4, 7: 0.0})
    assert dict(zip(final["player"].tolist(), final["hits"].tolist(), strict=True)) == \
        {1: 3, 2: 4, 7: 1}
    assert final["share"].sum() == pytest.approx(1.0)
    teams = out[(out["type"] == REG.id("team_possession")) & (out["ts"] == out["ts"].max())
                & (out["window"] == 0)]
    assert teams["share"].tolist() == pytest.approx([1.0, 0.0])


# ---------------------------------------------------------------------- generated match


@pytest.fixture(scope="module")
def match():
    return generate_match(25.0, profile="debs2013", seed=6)


def _players(match) -> np.ndarray:
    ev = match.events
    return ev[ev["type"] == REG.id("player")]


@pytest.mark.parametrize("windows", [WINDOWS, (60, 300, 1200, 0)])
def test_running_analysis_matches_the_physics_within_one_percent(match, windows):
    out = run(RunningAnalysis(windows_s=windows), _players(match))
    end = out["ts"].max()
    end_s = int(end // PS) + 1
    for w in windows:
        det = out[(out["ts"] == end) & (out["window"] == w)]
        true = window(match.truth.running, end_s, w)
        for unit in ("us", "mm"):
            d = np.zeros((16, 6))
            for i, c in enumerate(INTENSITY_NAMES):
                d[det["player"], i] = det[f"{c}_{unit}"]
            t = np.zeros((16, 6))
            np.add.at(t, (true["player"], true["cls"]), true[unit])
            assert np.abs(d - t).sum() <= 0.01 * t.sum(), (w, unit)
            big = t.sum(axis=0) > 0.05 * t.sum()  # every class with 5 % of the total
            assert np.allclose(d.sum(axis=0)[big], t.sum(axis=0)[big], rtol=0.01), (w, unit)


def test_heat_map_matches_the_physics(match):
    heat = run(HeatMap(windows_s=WINDOWS), _players(match))
    end = heat["ts"].max()
    middle = int(match.start_ps // PS) + 15  # the report at the start of second 15
    for at, end_s in ((middle * PS, middle), (end, int(end // PS) + 1)):
        for w in WINDOWS:
            true_w = window(match.truth.heat, end_s, w)
            for g, (cols, rows) in enumerate(HEAT_GRIDS):
                tg = true_w[true_w["grid"] == g]
                err = total = 0.0
                for p in range(16):
                    t = np.zeros((rows, cols))
                    tp = tg[tg["player"] == p]
                    np.add.at(t, (tp["row"], tp["col"]), tp["us"])
                    err += np.abs(heat_table(heat, p, w, g, at=at) - t).sum()
                    total += t.sum()
                # the legs' sensors are not the body's centre: on the finest grid (cells
                # of about 1 m) a player standing on a cell's edge puts his time in
                # either cell, so that grid is held to 2 %
                bound = 0.02 if g == len(HEAT_GRIDS) - 1 else 0.01
                assert err <= bound * total, (at, w, g, err / total)


def test_possession_logic_matches_the_truth_given_its_touches(match):
    # the truth's kicks as hits, its outs as ball_out: the detector's bookkeeping only
    truth = match.truth
    ev = match.events
    balls = ev[ev["type"] == REG.id("ball")]
    hits = np.zeros(len(truth.kicks), REG.dtype(PossessionStats.inputs))
    hits["type"], hits["ts"], hits["key"] = REG.id("hit"), truth.kicks["ts"], 0
    hits["player"], hits["team"] = truth.kicks["player"], truth.kicks["team"]
    outs = np.zeros(len(truth.out_of_play), hits.dtype)
    outs["type"], outs["ts"] = REG.id("ball_out"), truth.out_of_play["ts"]
    clock = np.zeros(len(balls), hits.dtype)
    for f in ("type", "ts", "key", "x", "y"):
        clock[f] = balls[f]
    stream = np.concatenate([hits, outs, clock])
    stream = stream[np.argsort(stream["ts"], kind="stable")]
    out = run(PossessionStats(windows_s=WINDOWS), stream)
    stats = out[out["type"] == REG.id("possession_stats")]
    end = stats["ts"].max()
    for w in WINDOWS:
        det = stats[(stats["ts"] == end) & (stats["window"] == w)]
        true = window(truth.possession, int(end // PS) + 1, w)
        d = np.bincount(det["player"], weights=det["us"], minlength=16)
        t = np.bincount(true["player"], weights=true["us"], minlength=16)
        assert t.sum() > 0 and np.abs(d - t).sum() <= 0.01 * t.sum(), w
        assert det["hits"].sum() == true["hits"].sum()


def test_a_player_who_turns_up_later_is_reported_from_the_next_second_whatever_the_cuts():
    rows = legs(np.arange(0, 3000, 5.0), 1000, 0) + legs(np.arange(1500, 3000, 5.0), 2000, 0,
                                                          player=1)
    for r in rows[len(rows) // 2:]:
        r["key"] += 2  # player 1's own sensors
    batch = REG.from_records(sorted(rows, key=lambda r: r["ts"]), dtype=REG.dtype(["player"]))
    whole = run(RunningAnalysis(windows_s=WINDOWS), batch)
    for step in (1, 7):
        assert np.array_equal(run(RunningAnalysis(windows_s=WINDOWS), batch, step), whole)
    first = whole[whole["player"] == 1]["ts"].min()
    assert first == T0 + 2 * PS
