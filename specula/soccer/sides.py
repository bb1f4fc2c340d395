"""Level 1: which goal each team defends, from where its goalkeeper stands."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from specula.detectors import Detector, Emitter
from specula.soccer.debs2013.metadata import Metadata
from specula.soccer.geometry import SIDE_MARGIN_MM, SIDE_SWITCH_PS


class TeamSides(Detector):
    """One ``side`` event (key: the team) each time a team's defended goal is known
    anew: ``goal`` is the index of the goal it defends (0 on the positive-y side, as in
    :data:`~specula.soccer.geometry.GOALS`).

    A goalkeeper keeps to his own goal, so his half is his team's side. The first
    reading of a team's keeper more than ``margin_mm`` beyond the halfway line sets the
    side; it changes when the keeper has stayed beyond the line on the other side for
    ``switch_ps`` (the teams change ends at half time; a keeper who runs upfield for a
    moment changes nothing). ``goalkeepers`` maps each team (0, 1) to its goalkeeper's
    player id, from the game's metadata (default: the DEBS 2013 game's); readings of
    other players are ignored.

    Examples
    --------
    Team 0's goalkeeper (player 1) stands 20 m into the -y half: team 0 defends goal 1.

    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> keeper = [{"type": "player", "ts": t * 10**12, "key": 97, "player": 1, "team": 0,
    ...            "limb": 0, "y": y} for t, y in [(0, -20_000), (5, -25_000)]]
    >>> feed(TeamSides({0: 1, 1: 2}), keeper, registry=soccer_registry()).net
    [{'type': 'side', 'ts': 0, 'key': 0, 'team': 0, 'goal': 1}]
    """

    inputs = ("player",)
    outputs = ("side",)

    def __init__(self, goalkeepers: Mapping[int, int] | None = None,
                 margin_mm: int = SIDE_MARGIN_MM, switch_ps: int = SIDE_SWITCH_PS) -> None:
        if goalkeepers is None:
            goalkeepers = goalkeepers_of(Metadata.default())
        self.goalkeepers = {int(t): int(p) for t, p in goalkeepers.items()}
        self.margin_mm = margin_mm
        self.switch_ps = switch_ps
        self.defends: dict[int, int] = {}  # team -> goal defended
        self.away_since: dict[int, int] = {}  # team -> first reading in the other half

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        for team, keeper in self.goalkeepers.items():
            rows = np.flatnonzero((events["player"] == keeper) & (events["team"] == team))
            if len(rows):
                self._follow(team, rows, events, emit)

    def _follow(self, team: int, rows: np.ndarray, events: np.ndarray, emit: Emitter) -> None:
        """Walk the runs of one keeper's readings that lie in one half."""
        y = events["y"][rows]
        half = np.where(y > self.margin_mm, 0, np.where(y < -self.margin_mm, 1, -1))
        starts = np.flatnonzero(np.diff(half, prepend=-2))
        for s, e in zip(starts.tolist(), [*starts[1:].tolist(), len(rows)], strict=True):
            goal = int(half[s])
            current = self.defends.get(team)
            if goal < 0 or goal == current:
                self.away_since.pop(team, None)
                continue
            first = int(events["ts"][rows[s]])
            since = first if current is None else self.away_since.setdefault(team, first)
            last = events["ts"][rows[s:e]]
            due = np.flatnonzero(last - since >= (0 if current is None else self.switch_ps))
            if len(due):
                at = int(rows[s + int(due[0])])
                self.defends[team] = goal
                self.away_since.pop(team, None)
                emit.at(at)
                emit("side", int(events["ts"][at]), team, team=team, goal=goal)


def goalkeepers_of(metadata: Metadata) -> dict[int, int]:
    """Team -> its goalkeeper's player id, from a game's metadata."""
    return {p.team: p.id for p in metadata.players if p.goalkeeper}
