"""Query 4's projection of a kicked ball against the simulated physics: random kicks at
and around a goal, judged on one reading after the kick, as ``ShotOnGoal`` judges."""

from __future__ import annotations

import numpy as np

from specula.soccer.geometry import GOALS, PS, SHOT_HORIZON_PS
from specula.soccer.match.physics import simulate
from specula.soccer.shots import goal_reached

JUDGED_MS = 30  # the reading judged: after the 10 ms kick, as ShotOnGoal's 20-150 ms


def _truth(pos: np.ndarray, bounce: np.ndarray) -> tuple[bool, float]:
    """Does the simulated path cross goal 0's line between the posts and under the bar
    within 1.5 s, and by how much (m) it clears the nearest bound (time counted at 10 m/s;
    0 for a ball that bounced or rolled before the line, where the projection's "rolls
    on" leaves out the ground's friction)."""
    goal = GOALS[0]
    line = goal["y"] / 1e3
    cross = np.flatnonzero(pos[:, 1] >= line)
    if not len(cross):
        return False, np.inf
    i = int(cross[0])
    if bounce[:i].any():
        return pos[i, 2] <= goal["z"] / 1e3 and goal["x"][0] / 1e3 <= pos[i, 0] <= \
            goal["x"][1] / 1e3 and i <= SHOT_HORIZON_PS / PS * 1e3, 0.0
    x, z = pos[i, 0], pos[i, 2]
    margins = (x - goal["x"][0] / 1e3, goal["x"][1] / 1e3 - x, goal["z"] / 1e3 - z,
               (SHOT_HORIZON_PS / PS - i / 1e3) * 10.0)
    return min(margins) >= 0, abs(min(margins))


def test_projection_agrees_with_the_physics_on_random_kicks():
    """No clear disagreement (beyond 0.3 m of a post, the bar, or 30 ms of the 1.5 s) on a
    ball in flight, and at least 95 % agreement over all kicks, bouncing ones included."""
    rng = np.random.default_rng(7)
    agree, clear_disagreements, n = 0, [], 400
    for _ in range(n):
        p0 = np.array([rng.uniform(10, 42), rng.uniform(0, 30), 0.11])
        aim = np.array([rng.uniform(20, 32), GOALS[0]["y"] / 1e3, rng.uniform(0, 4)])
        d = aim - p0
        horiz = float(np.hypot(d[0], d[1]))
        speed = rng.uniform(8, 32)
        vz = (d[2] + 4.9 * (horiz / speed) ** 2) / (horiz / speed) * rng.uniform(0.5, 1.2)
        launch = np.array([d[0] / horiz * speed, d[1] / horiz * speed, vz])
        flight = simulate(0, p0, np.zeros(3), launch, 10, horizon_ms=2_500)
        on_goal, margin = _truth(flight.pos, flight.bounce)
        p, v = flight.pos[JUDGED_MS] * 1e3, flight.vel[JUDGED_MS]
        speed_mm = float(np.linalg.norm(v)) * 1e3
        u = v / np.linalg.norm(v) * 1e4
        left = SHOT_HORIZON_PS / PS - JUDGED_MS / 1e3
        got = goal_reached(p[:1], p[1:2], p[2:3], u[:1], u[1:2], u[2:3], np.array([speed_mm]),
                           left, (0,))[0] == 0
        agree += got == on_goal
        if got != on_goal and margin > 0.3:
            clear_disagreements.append((p0.round(1), aim.round(1), round(speed, 1), margin))
    assert not clear_disagreements, clear_disagreements
    assert agree >= 0.95 * n, agree
