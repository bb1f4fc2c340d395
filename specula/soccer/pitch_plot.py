"""The DEBS 2013 pitch drawn to scale on a matplotlib axes, for maps of play.

The touch and goal lines are the pitch's bounds (:data:`~specula.soccer.geometry.PITCH_X`,
:data:`~specula.soccer.geometry.PITCH_Y`, mm) and the goals' posts are the game's
(:data:`~specula.soccer.geometry.GOALS`). The markings the sensors do not give (centre
circle, penalty and goal areas, penalty spots) take the Laws of the Game's sizes,
centred on each goal. The goals lie on the y ends, so a map is drawn upright: x across,
y up, goal 0 (positive y) at the top. Every artist drawn carries the gid ``"pitch"``,
so a test can find them on the figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from matplotlib.axes import Axes
from matplotlib.patches import Arc, Circle, FancyArrowPatch, Rectangle

from specula.soccer.geometry import GOALS, PITCH_X, PITCH_Y

#: Laws of the Game, law 1 (mm): the markings not in the game's metadata.
CENTRE_CIRCLE_R = 9_150
PENALTY_AREA = (40_320, 16_500)  # width along the goal line, depth into the pitch
GOAL_AREA = (18_320, 5_500)
PENALTY_SPOT = 11_000  # from the goal line
#: How deep the goals are drawn behind the goal line (mm; not measured, for the eye).
GOAL_DEPTH = 2_000
#: Free space drawn around the pitch (mm): room for the goals and the direction arrows.
MARGIN = 6_000

GRASS = "#3a7d44"
LINE: dict[str, Any] = dict(color="white", linewidth=1.0, zorder=3, gid="pitch")


def draw_pitch(ax: Axes) -> None:
    """Draw the pitch on ``ax``: grass, touch and goal lines, halfway line, centre
    circle and spot, penalty and goal areas, penalty spots and arcs, and the goals; set
    the limits to the pitch and its margin, an equal aspect and no axis ticks."""
    x0, x1 = PITCH_X
    y0, y1 = PITCH_Y
    ax.add_patch(Rectangle((x0 - MARGIN, y0 - MARGIN), x1 - x0 + 2 * MARGIN,
                           y1 - y0 + 2 * MARGIN, facecolor=GRASS, zorder=0, gid="pitch"))
    ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, **LINE))
    mid_x, mid_y = (x0 + x1) / 2, (y0 + y1) / 2
    ax.plot([x0, x1], [mid_y, mid_y], **LINE)
    ax.add_patch(Circle((mid_x, mid_y), CENTRE_CIRCLE_R, fill=False, **LINE))
    ax.add_patch(Circle((mid_x, mid_y), 300, color="white", zorder=3, gid="pitch"))
    for goal in (0, 1):
        _draw_end(ax, goal)
    ax.set_xlim(x0 - MARGIN, x1 + MARGIN)
    ax.set_ylim(y0 - MARGIN, y1 + MARGIN)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_visible(False)


def _draw_end(ax: Axes, goal: int) -> None:
    """One end of the pitch: the goal ``goal`` with its areas, spot and arc."""
    posts = GOALS[goal]["x"]
    centre = (posts[0] + posts[1]) / 2
    line = PITCH_Y[1] if goal == 0 else PITCH_Y[0]
    inward = -1 if goal == 0 else 1  # from the goal line into the pitch
    for width, depth in (PENALTY_AREA, GOAL_AREA):
        ax.add_patch(Rectangle((centre - width / 2, line), width, inward * depth,
                               fill=False, **LINE))
    spot = line + inward * PENALTY_SPOT
    ax.add_patch(Circle((centre, spot), 250, color="white", zorder=3, gid="pitch"))
    # the arc: the part of a 9.15 m circle round the spot outside the penalty area
    outside = PENALTY_AREA[1] - PENALTY_SPOT
    half = math.degrees(math.acos(outside / CENTRE_CIRCLE_R))
    facing = 270 if goal == 0 else 90
    ax.add_patch(Arc((centre, spot), 2 * CENTRE_CIRCLE_R, 2 * CENTRE_CIRCLE_R,
                     theta1=facing - half, theta2=facing + half, **LINE))
    ax.add_patch(Rectangle((posts[0], line), posts[1] - posts[0], -inward * GOAL_DEPTH,
                           facecolor="white", alpha=0.6, edgecolor="white", zorder=3,
                           linewidth=1.5, gid="pitch"))


def draw_direction(ax: Axes, attacked: Sequence[int]) -> None:
    """Arrows beside the right touch line towards the goal a team attacks, one per
    spell in ``attacked`` (goal indices in time order; teams change ends at half time),
    labelled 1st, 2nd, ... when the team changed ends, else "attack"."""
    x = PITCH_X[1] + MARGIN * 0.3
    length = (PITCH_Y[1] - PITCH_Y[0]) / 4
    centre = (PITCH_Y[0] + PITCH_Y[1]) / 2
    n = len(attacked)
    for i, goal in enumerate(attacked):
        mid = centre - (i - (n - 1) / 2) * 1.3 * length  # the first spell on top
        up = 1 if goal == 0 else -1
        ax.add_patch(FancyArrowPatch((x, mid - up * length / 2), (x, mid + up * length / 2),
                                     arrowstyle="-|>", mutation_scale=10, color="white",
                                     linewidth=1.5, zorder=4, clip_on=False, gid="pitch"))
        label = "attack" if n == 1 else _ordinal(i + 1)
        ax.text(x + MARGIN * 0.25, mid, label, rotation=90, ha="left", va="center",
                fontsize=6, color="white", clip_on=False, gid="pitch")


def _ordinal(n: int) -> str:
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n if n < 20 else n % 10, 'th')}"
