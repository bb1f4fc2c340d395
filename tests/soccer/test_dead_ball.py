"""The ball out of play: carried back to the restart spot on or above the ground."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specula.soccer.match import generate_match
from specula.soccer.match.physics import (
    BALL_RADIUS,
    BOARDS,
    WIDTH,
    Y_MAX,
    Y_MIN,
    simulate,
)
from specula.soccer.match.restarts import _carry_back
from specula.soccer.types import soccer_registry

BALL = soccer_registry().id("ball")


@settings(max_examples=150, deadline=None)
@given(x=st.floats(1.0, WIDTH - 1.0), y=st.floats(Y_MIN + 1.0, Y_MAX - 1.0),
       angle=st.floats(0.0, 2 * np.pi), speed=st.floats(5.0, 35.0),
       lift=st.floats(0.0, 1.2), pulse_ms=st.sampled_from([8, 12, 20]))
def test_a_ball_kicked_out_is_carried_back_on_or_above_the_ground(x, y, angle, speed, lift,
                                                                 pulse_ms):
    """Whatever the kick that sent it out (along the ground or high, hard or soft), it
    rebounds off the boards around the pitch, and the way back leaves the ball where it
    was when the carry starts, never takes it below the ground and ends at rest at the
    spot."""
    dv = speed * np.array([np.cos(angle), np.sin(angle), lift])
    flight = simulate(0, np.array([x, y, BALL_RADIUS]), np.zeros(3), dv, pulse_ms)
    reach = BOARDS + 0.05  # a rebound within the step that crossed the boards
    assert (flight.pos[:, 0] >= -reach).all() and (flight.pos[:, 0] <= WIDTH + reach).all()
    assert (flight.pos[:, 1] >= Y_MIN - reach).all() and (flight.pos[:, 1] <= Y_MAX + reach).all()
    if flight.out == len(flight.pos):
        return  # it stayed on the pitch
    ball = np.full((60_000, 3), np.nan)
    spot = np.array([WIDTH / 2, 0.0])
    t_set = _carry_back(flight, spot, ball)
    carried = ball[:t_set][~np.isnan(ball[:t_set, 0])]
    start = np.flatnonzero(~np.isnan(ball[:, 0]))[0]
    assert np.allclose(ball[start], flight.pos[start], atol=1e-9)
    assert carried[:, 2].min() >= BALL_RADIUS - 1e-9
    assert np.allclose(ball[t_set:], [spot[0], spot[1], BALL_RADIUS])


def test_the_ball_of_a_generated_match_stays_above_the_ground_and_near_the_pitch():
    """Two minutes of the debs2013 profile, seed 3: a high kick over the touch line at
    113 s used to be carried back from the air along its fall, 6 m below the ground
    (z -6,267 mm, beyond the position files' sanity bound of -5,000 mm), and balls out
    of play flew and rolled up to 35 m beyond the lines."""
    match = generate_match(120.0, profile="debs2013", seed=3)
    ball = match.events[match.events["type"] == BALL]
    assert ball["z"].min() >= 0
    assert np.abs(ball["y"]).max() <= (Y_MAX + BOARDS) * 1000 + 50
