"""The DEBS 2013 pitch, goals and thresholds, in millimetres, picoseconds and um/s^2."""

from __future__ import annotations

from typing import TypedDict

PITCH_X = (0, 52_483)
PITCH_Y = (-33_960, 33_965)

class Goal(TypedDict):
    """A goal in pitch coordinates (mm): its posts' x, its goal line's y, its bar's z."""

    x: tuple[int, int]
    y: int
    z: int


#: Goal areas (x range, y line, maximum height z). Goal 0 is on the positive-y side.
GOALS: tuple[Goal, ...] = (
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
#: Acceleration of a ball in flight, down (mm/s^2).
GRAVITY_MM_S2 = 9_810
#: Quadratic air drag of a football, per metre: a = -k |v| v (a size 5 ball of 0.43 kg,
#: drag coefficient about 0.2, 0.038 m^2 of cross-section, in air of 1.2 kg/m^3).
BALL_DRAG_PER_M = 0.010
PS = 1_000_000_000_000  # picoseconds per second

#: DEBS 2013 query 1 speed classes, upper bounds in km/h: standing, trot, low, medium, high;
#: above the last one: sprint.
INTENSITY_KMH = (1.0, 11.0, 14.0, 17.0, 24.0)
#: Names of the six intensity classes, slowest first.
INTENSITY_NAMES = ("standing", "trot", "low", "medium", "high", "sprint")
#: A run of one intensity class shorter than this is counted with the next class that
#: lasts at least this long (DEBS 2013 query 1).
MIN_INTENSITY_PS = PS
#: Time constant of the exponential smoothing of a player's velocity before his
#: intensity class is taken (query 1): brief excursions across a class bound, sensor
#: noise on real rows or a speed that grazes a bound, do not cut a run in two.
INTENSITY_SMOOTHING_PS = 250 * 10**9
#: Window lengths of queries 1 and 2 and of query 3, in seconds; 0 is the whole game.
RUNNING_WINDOWS_S = (60, 300, 1200, 0)
HEAT_WINDOWS_S = (60, 300, 600, 0)
#: Query 3's grids, (columns across x, rows along y), coarsest first.
HEAT_GRIDS = ((8, 13), (16, 25), (32, 50), (64, 100))


def in_pitch(x, y):
    """Inside the touch and goal lines (works on scalars and arrays)."""
    return (x >= PITCH_X[0]) & (x <= PITCH_X[1]) & (y >= PITCH_Y[0]) & (y <= PITCH_Y[1])
#: A goalkeeper counts as standing in a half when he is this far beyond the halfway line
#: (mm); his team is taken to defend the goal of that half (DEBS 2013 query 4 judges
#: shots towards the opponent's goal, and the teams change ends at half time).
SIDE_MARGIN_MM = 5_000
#: A team changes ends when its goalkeeper has stayed in the other half this long: a
#: keeper who runs out past the halfway line for a moment changes nothing.
SIDE_SWITCH_PS = 10 * PS
