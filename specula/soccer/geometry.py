"""The DEBS 2013 pitch, goals and thresholds, in millimetres, picoseconds and um/s^2."""

from __future__ import annotations

PITCH_X = (0, 52_483)
PITCH_Y = (-33_960, 33_965)

#: Goal areas (x range, y line, maximum height z). Goal 0 is on the positive-y side.
GOALS = (
    {"x": (22_578, 29_898), "y": 33_941, "z": 2_440},
    {"x": (22_560, 29_880), "y": -33_968, "z": 2_440},
)

#: A kick: the ball's acceleration exceeds 55 m/s^2 (DEBS 2013 query 2).
KICK_ACCELERATION = 55_000_000  # um/s^2
#: The ball is near a foot within 1 m.
NEAR_FOOT_MM = 1_000
#: A sensor's last position counts for this long, then it is stale (the sensor dropped
#: out or was switched off). Players' sensors report about every 5 ms; the real sample
#: holds a dropout of 113 ms, which this bound tolerates with room to spare, while a
#: player moving at 4 m/s has gone 1 m (the near-foot radius) by the time it expires.
SENSOR_STALE_PS = 250_000_000_000
#: A shot on goal: the projected path reaches the goal within 1.5 s (DEBS 2013 query 4).
SHOT_HORIZON_PS = 1_500_000_000_000
PS = 1_000_000_000_000  # picoseconds per second


def in_pitch(x, y):
    """Inside the touch and goal lines (works on scalars and arrays)."""
    return (x >= PITCH_X[0]) & (x <= PITCH_X[1]) & (y >= PITCH_Y[0]) & (y <= PITCH_Y[1])
