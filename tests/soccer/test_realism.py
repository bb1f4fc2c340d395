"""A generated match against published match physiology and the real sample's rows.

Five minutes of the ``debs2013`` profile, generated once for the module, measured from
the readings as a detector sees them (numpy only). The ranges are the targets stated,
with their sources, in ``docs/soccer.md`` ("How realistic a generated match is").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specula.soccer.geometry import INTENSITY_KMH, INTENSITY_NAMES, KICK_ACCELERATION
from specula.soccer.match import Match, generate_match
from specula.soccer.types import soccer_registry

PS = 10**12
MS = 10**9
SECONDS = 300.0
SAMPLE = Path(__file__).resolve().parents[1] / "data/debs2013/sample-pregame-2000.csv"
PLAYER = soccer_registry().id("player")

#: Targets (docs/soccer.md): metres per outfield player and minute, the share of time
#: in each of the Grand Challenge's intensity classes, sprints (runs above 24 km/h
#: for at least 0.5 s) per outfield player and minute, passes per team and minute of
#: play.
DISTANCE_PER_MINUTE = (95.0, 130.0)
SHARES = {"standing": (0.05, 0.30), "trot": (0.50, 0.80), "low": (0.02, 0.12),
          "medium": (0.01, 0.08), "high": (0.01, 0.08), "sprint": (0.002, 0.025)}
SPRINTS_PER_MINUTE = (0.3, 1.5)
SPRINT_MIN_PS = 500 * MS
PASSES_PER_TEAM_MINUTE = (7.0, 11.0)


@pytest.fixture(scope="module")
def match() -> Match:
    return generate_match(SECONDS, profile="debs2013", seed=0)


def outfield_left_legs(m: Match) -> dict[int, np.ndarray]:
    """Each outfield player's left-leg readings (the sensor query 1 reads), by player."""
    ev = m.events
    keepers = {p.id for p in m.metadata.players if p.goalkeeper}
    legs = ev[(ev["type"] == PLAYER) & (ev["limb"] == 0)]
    return {p: legs[legs["player"] == p] for p in m.profile.on_pitch if p not in keepers}


def test_players_cover_the_published_distance_per_minute(match):
    """9-14 km a match: 95-130 m per minute on average over the outfield players."""
    minutes = SECONDS / 60
    per_minute = [np.hypot(np.diff(r["x"]), np.diff(r["y"])).sum() / 1000 / minutes
                  for r in outfield_left_legs(match).values()]
    assert DISTANCE_PER_MINUTE[0] <= np.mean(per_minute) <= DISTANCE_PER_MINUTE[1], per_minute


def test_every_intensity_class_takes_its_published_share_of_time(match):
    """By the Grand Challenge's speed bounds (km/h 1, 11, 14, 17, 24), over all outfield
    players' left-leg readings (equally spaced in time)."""
    speed_kmh = np.concatenate([r["v"] for r in outfield_left_legs(match).values()]) * 3.6e-6
    level = np.searchsorted(np.array(INTENSITY_KMH), speed_kmh, side="right")
    shares = np.bincount(level, minlength=len(INTENSITY_NAMES)) / len(level)
    got = dict(zip(INTENSITY_NAMES, shares.round(4).tolist(), strict=True))
    for name, share in got.items():
        lo, hi = SHARES[name]
        assert lo <= share <= hi, (name, got)


def test_players_sprint_as_often_as_published(match):
    """About 60 sprints a match: runs above 24 km/h of at least half a second."""
    count = 0
    for r in outfield_left_legs(match).values():
        fast = np.concatenate([[False], r["v"] * 3.6e-6 > INTENSITY_KMH[-1], [False]])
        edges = np.flatnonzero(np.diff(fast.astype(np.int8)))
        starts, ends = edges[::2], edges[1::2] - 1
        count += int((r["ts"][ends] - r["ts"][starts] >= SPRINT_MIN_PS).sum())
    per_minute = count / len(outfield_left_legs(match)) / (SECONDS / 60)
    assert SPRINTS_PER_MINUTE[0] <= per_minute <= SPRINTS_PER_MINUTE[1], per_minute


def test_each_team_passes_as_often_as_in_the_professional_game(match):
    """Passes per team and minute of play: the time from the kick-off to the end, less
    the time the ball was out of play."""
    truth = match.truth
    outs = truth.out_of_play
    restart = np.where(outs["ts_restart"] >= 0, outs["ts_restart"], match.end_ps)
    play_ps = match.end_ps - truth.kicks["ts"][0] - (restart - outs["ts"]).sum()
    per_minute = len(truth.passes) / 2 / (play_ps / PS / 60)
    assert PASSES_PER_TEAM_MINUTE[0] <= per_minute <= PASSES_PER_TEAM_MINUTE[1], per_minute


def test_the_ball_between_kicks_accelerates_within_real_noise(match):
    """Away from kicks (their pulses, 12 ms either side of the centre) and impacts (3 ms),
    the ball's |a| stays below the kick threshold: p99.9 under 55 m/s^2."""
    ev = match.events
    ball = ev[ev["key"] == match.profile.ball_in_play]
    kicked = np.zeros(len(ball), bool)
    for times, window in ((match.truth.kicks["ts"], 12 * MS), (match.truth.bounces["ts"], 3 * MS)):
        lo = np.searchsorted(ball["ts"], times - window)
        hi = np.searchsorted(ball["ts"], times + window, side="right")
        for a, b in zip(lo.tolist(), hi.tolist(), strict=True):
            kicked[a:b] = True
    between = ball["a"][~kicked]
    assert np.percentile(between, 99.9) < KICK_ACCELERATION
    assert np.median(between) > 0  # it is never still without noise


def real_resting_ball_medians() -> list[float]:
    """Median |a| of each ball of the real sample (they all lie still or are held)."""
    rows = np.loadtxt(SAMPLE, delimiter=",", dtype=np.int64)
    balls = [4, 8, 10, 12]
    return [float(np.median(rows[rows[:, 0] == sid, 6])) for sid in balls
            if (rows[:, 0] == sid).any()]


def test_resting_balls_read_sensor_noise_like_the_real_ones(match):
    """The spare balls beside the pitch: |a| median within the range of the real
    sample's balls' medians (6.8-8.2 m/s^2), never a kick, and lying where they lie."""
    lo, hi = min(real_resting_ball_medians()), max(real_resting_ball_medians())
    ev = match.events
    for sid in match.profile.spare_balls:
        rows = ev[ev["key"] == sid]
        assert lo <= np.median(rows["a"]) <= hi, (sid, np.median(rows["a"]), lo, hi)
        assert rows["a"].max() < KICK_ACCELERATION
        assert np.ptp(rows["x"]) < 30 and np.ptp(rows["y"]) < 30  # mm


def test_a_reception_that_peaks_like_a_kick_is_a_kick_in_the_truth():
    """Receptions are planned below a kick's 55 m/s^2 (relative to the receiver as he
    was); one whose ball still peaks above it is a kick of kind RECEPTION by the
    receiver, at its strongest ms, and the soft ones are none."""
    from specula.soccer.match import RECEPTION
    from specula.soccer.match.profiles import build_cast
    from specula.soccer.match.script import Script

    script = Script(build_cast("debs2013"), 20.0, np.random.default_rng(3))
    script.run()
    spells = [s for s in script.spells if s.t_cycle - s.t_receive >= 50]
    assert spells and not any(k[3] == RECEPTION for k in script.log.kicks)
    spell = spells[0]
    at = spell.t_receive + 20
    script.ball[at, 0] += 0.001  # a 1 mm kink: |a| ~ 2,000 m/s^2 on the 1 ms grid
    before = len(script.log.kicks)
    script.hard_reception(spell)
    assert script.log.kicks[before:] == [(2 * at, spell.carrier,
                                          int(script.cast.team[spell.carrier]), RECEPTION)]
    truth = script.truth(0, 20 * PS)
    assert np.all(np.diff(truth.kicks["ts"]) >= 0)  # in time order, receptions included
