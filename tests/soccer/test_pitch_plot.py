"""The pitch under the heat maps: drawn to scale from the game's geometry, each team's
direction of play, one panel per player with his own map (figure objects, no pixels)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.lines import Line2D
from matplotlib.patches import Arc, Circle, FancyArrowPatch, Rectangle

from specula.soccer import analytics, soccer_registry
from specula.soccer.debs2013 import Metadata
from specula.soccer.geometry import GOALS, HEAT_GRIDS, PITCH_X, PITCH_Y
from specula.soccer.pitch_plot import (
    CENTRE_CIRCLE_R,
    GOAL_AREA,
    PENALTY_AREA,
    draw_direction,
    draw_pitch,
)
from specula.soccer.queries import heat_table

REG = soccer_registry()


def _pitch_artists(ax, kind):
    return [a for a in [*ax.patches, *ax.lines, *ax.texts]
            if a.get_gid() == "pitch" and isinstance(a, kind)]


def test_the_pitch_is_drawn_to_the_games_scale():
    fig, ax = plt.subplots()
    draw_pitch(ax)
    rects = _pitch_artists(ax, Rectangle)
    bounds = [r for r in rects if not r.get_fill()]
    # touch and goal lines: the pitch's bounds
    assert any(r.get_xy() == (PITCH_X[0], PITCH_Y[0])
               and r.get_width() == PITCH_X[1] - PITCH_X[0]
               and r.get_height() == PITCH_Y[1] - PITCH_Y[0] for r in bounds)
    for goal in GOALS:  # penalty and goal areas centred on each goal, the goal itself
        centre = sum(goal["x"]) / 2
        for width, depth in (PENALTY_AREA, GOAL_AREA):
            area = [r for r in bounds if r.get_width() == width
                    and r.get_x() + width / 2 == pytest.approx(centre)
                    and abs(r.get_height()) == depth]
            assert len(area) == 1
            line = area[0].get_y()
            assert line in PITCH_Y and np.sign(area[0].get_height()) == -np.sign(line)
        posts = [r for r in rects if r.get_fill() and r.get_x() == goal["x"][0]
                 and r.get_width() == goal["x"][1] - goal["x"][0]]
        assert len(posts) == 1 and np.sign(posts[0].get_height()) == np.sign(goal["y"])
    centre = ((PITCH_X[0] + PITCH_X[1]) / 2, (PITCH_Y[0] + PITCH_Y[1]) / 2)
    assert any(c.get_radius() == CENTRE_CIRCLE_R and c.center == pytest.approx(centre)
               for c in _pitch_artists(ax, Circle))
    halfway = [ln for ln in _pitch_artists(ax, Line2D) if list(ln.get_xdata()) == list(PITCH_X)]
    assert len(halfway) == 1 and set(halfway[0].get_ydata()) == {centre[1]}
    assert len(_pitch_artists(ax, Arc)) == 2  # the penalty arcs
    assert ax.get_xlim()[0] < PITCH_X[0] and ax.get_ylim()[1] > GOALS[0]["y"]
    plt.close(fig)


@pytest.mark.parametrize("attacked", [[0], [1], [1, 0]])
def test_the_arrows_point_at_the_attacked_goal(attacked):
    fig, ax = plt.subplots()
    draw_direction(ax, attacked)
    arrows = _pitch_artists(ax, FancyArrowPatch)
    assert len(arrows) == len(attacked)
    for arrow, goal in zip(arrows, attacked, strict=True):
        tail, _, tip = arrow.get_path().vertices[:3]  # the path runs from tail to tip
        assert np.sign(tip[1] - tail[1]) == (1 if goal == 0 else -1)  # goal 0: +y side
    labels = [t.get_text() for t in ax.texts]
    assert labels == (["attack"] if len(attacked) == 1 else ["1st", "2nd"])
    plt.close(fig)


def _sides(rows):
    return REG.from_records([{"type": "side", "key": team, "ts": ts, "team": team,
                              "goal": goal} for ts, team, goal in rows],
                            dtype=REG.dtype(["side"]))


def test_attacked_goals_follow_the_side_events_in_time_order():
    sides = _sides([(5, 0, 0), (1, 0, 1), (1, 1, 0), (9, 0, 0), (12, 1, 1)])
    assert analytics.attacked_goals(sides, 0) == [0, 1]  # defended 1, then 0
    assert analytics.attacked_goals(sides, 1) == [1, 0]
    assert analytics.attacked_goals(None, 0) == []


def test_each_player_gets_a_panel_on_the_pitch_with_his_own_map():
    meta = Metadata.default()
    team_a = [p for p in meta.players if p.team == 0][:3]
    cols, rows = HEAT_GRIDS[analytics.HEAT_GRID]
    rng = np.random.default_rng(3)
    records = [{"type": "heat", "key": p.id, "ts": 10**12, "player": p.id, "team": 0,
                "window": 0, "grid": analytics.HEAT_GRID, "col": c, "row": r,
                "us": int(rng.integers(1, 10**7))}
               for p in team_a for c, r in {(int(rng.integers(cols)), int(rng.integers(rows)))
                                            for _ in range(6)}]
    heat = REG.from_records(records, dtype=REG.dtype(["heat"]))
    fig = analytics.heat_map_figure(heat, meta, 0, _sides([(0, 0, 1)]))
    panels = [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    titles = [ax.get_title() for ax in panels]
    assert all(p.name.split()[-1] in t for p, t in zip(team_a, titles, strict=True))
    assert "(GK)" in titles[0] and "(GK)" not in "".join(titles[1:])  # the keeper first
    for ax, p in zip(panels, team_a, strict=True):
        shown = ax.images[0].get_array()
        assert np.array_equal(shown.filled(0), heat_table(heat, p.id, 0, 1) / 1e6)
        assert _pitch_artists(ax, Rectangle) and _pitch_artists(ax, FancyArrowPatch)
    assert "attacks up" in fig.get_suptitle()
    assert analytics.heat_map_figure(heat, meta, 1) is None  # no player of team B
    plt.close(fig)
