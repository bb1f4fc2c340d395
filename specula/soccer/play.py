"""Levels 3-5: who hits the ball, who has it, passes, interceptions, double passes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specula.detectors import Detector, Emitter, EventView, type_ids
from specula.ordering.emitter import Columns
from specula.soccer.geometry import PS


class PlayerHitsBall(Detector):
    """The paper's A!BC: the ball came near a player's foot (A), then an acceleration
    peak (C) of that ball, with no ``not_near`` of that player (B) in between: the player
    hit the ball.

    If several players are near at the peak, the one whose foot is the closest hit it
    (the last ``near`` marked ``closest``); without one, the one the ball reached last. A
    peak of another ball than the one the player is near (a spare kicked beside the
    pitch) is no hit of his. A peak whose acceleration points more up or down than
    sideways (``|az|`` above ``max_vertical``, i.e. beyond 45 degrees) is the ball
    bouncing on the ground, not a kick.
    Raw ``ball`` readings only drive the clock: near, not_near and peak events are sparse,
    and a clock that advanced only with them would hold a hit until the next one came.

    Examples
    --------
    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> MS = 10**9  # picoseconds
    >>> events = [{"type": "near", "ts": 1 * MS, "key": 3, "player": 3, "team": 0, "ball": 4,
    ...            "dist": 300, "closest": True},
    ...           {"type": "peak", "ts": 3 * MS, "key": 4, "a": 90_000_000, "az": 1_000},
    ...           *({"type": "ball", "ts": t * MS, "key": 4} for t in (2, 4))]
    >>> [(e["type"], e["ts"] // MS, e["player"], e["ball"])
    ...  for e in feed(PlayerHitsBall(), events, registry=soccer_registry()).net]
    [('hit', 3, 3, 4)]
    """

    inputs = ("near", "not_near", "peak", "ball")
    outputs = ("hit",)
    clock = ("ball",)

    def __init__(self, max_vertical: int = 7_071) -> None:
        self.max_vertical = max_vertical
        self.near: dict[int, tuple[int, int, int]] = {}  # player -> (since, team, ball)
        self.closest: int | None = None  # the near player whose foot is the closest

    def on_batch(self, events: np.ndarray, type_names: Sequence[str], emit: Emitter) -> None:
        columns = Columns(events)
        (ball,) = type_ids(type_names, "ball")
        for i in np.flatnonzero(events["type"] != ball).tolist():
            emit.at(i)
            self.on_event(EventView(columns, type_names[columns["type"][i]], i), emit)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event.type == "near":
            self.near[event["player"]] = (event.ts, event["team"], event["ball"])
            if event["closest"]:
                self.closest = event["player"]
        elif event.type == "not_near":
            self.near.pop(event["player"], None)
            if self.closest == event["player"]:
                self.closest = None
        elif abs(event["az"]) <= self.max_vertical:
            near = [p for p, (_, _, ball) in self.near.items() if ball == event.key]
            if near:
                player = (self.closest if self.closest in near
                          else max(near, key=lambda p: (self.near[p][0], p)))
                emit("hit", event.ts, player, player=player, team=self.near[player][1],
                     ball=event.key, a=event["a"], x=event["x"], y=event["y"],
                     z=event["z"])


class BallPossession(Detector):
    """DEBS 2013 query 2: a player has the ball from his hit until another player hits it
    or the ball leaves the pitch; ``possession`` at every change (player -1: nobody).

    Examples
    --------
    Player 3 (team 0) hits the ball, then his teammate 5, then opponent 9; it goes out:

    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> PS = 10**12
    >>> hits = [{"type": "hit", "ts": t * PS, "key": p, "player": p, "team": team}
    ...         for t, p, team in [(1, 3, 0), (3, 5, 0), (4, 9, 1)]]
    >>> hits.append({"type": "ball_out", "ts": 6 * PS, "key": 4})
    >>> [(e["ts"] // PS, e["player"]) for e in feed(BallPossession(), hits,
    ...                                              registry=soccer_registry()).net]
    [(1, 3), (3, 5), (4, 9), (6, -1)]
    """

    inputs = ("hit", "ball_out")
    outputs = ("possession",)

    def __init__(self) -> None:
        self.holder = -1

    def on_event(self, event: EventView, emit: Emitter) -> None:
        player, team = (event["player"], event["team"]) if event.type == "hit" else (-1, -1)
        if player != self.holder:
            self.holder = player
            emit("possession", event.ts, player, player=player, team=team, since=event.ts)


class _NextTouch(Detector):
    """A hit followed by the next hit of another player within ``window_s``, with the
    ball staying in play; subclasses say which pairs count. The generated event carries
    the first hit's time stamp (when the ball was played), so it is generated after the
    time it describes."""

    inputs = ("hit", "ball_out")
    output = ""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self.last: tuple[int, int, int] | None = None  # (ts, player, team)

    def counts(self, team: int, next_team: int) -> bool:
        raise NotImplementedError

    def on_event(self, event: EventView, emit: Emitter) -> None:
        if event.type == "ball_out":
            self.last = None
            return
        ts, player, team = event.ts, event["player"], event["team"]
        last = self.last
        if last is not None and player != last[1] and ts - last[0] <= self.window_s * PS \
                and self.counts(last[2], team):
            emit(self.output, last[0], last[1], player=last[1], team=last[2],
                 receiver=player, received=ts)
        self.last = (ts, player, team)


class Pass(_NextTouch):
    """A hit by one player and the next hit by a teammate: a pass (``received`` is the
    teammate's touch).

    Examples
    --------
    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> PS = 10**12
    >>> hits = [{"type": "hit", "ts": t * PS, "key": p, "player": p, "team": team}
    ...         for t, p, team in [(1, 3, 0), (3, 5, 0), (4, 9, 1)]]
    >>> hits.append({"type": "ball_out", "ts": 6 * PS, "key": 4})
    >>> [(e["ts"] // PS, e["player"], e["receiver"], e["received"] // PS)
    ...  for e in feed(Pass(), hits, registry=soccer_registry()).net]
    [(1, 3, 5, 3)]
    """

    outputs = ("pass",)
    output = "pass"

    def counts(self, team: int, next_team: int) -> bool:
        return team == next_team


class Interception(_NextTouch):
    """A hit by one player and the next hit by an opponent: an unsuccessful pass,
    intercepted (``receiver`` is the interceptor).

    Examples
    --------
    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> PS = 10**12
    >>> hits = [{"type": "hit", "ts": t * PS, "key": p, "player": p, "team": team}
    ...         for t, p, team in [(1, 3, 0), (3, 5, 0), (4, 9, 1)]]
    >>> hits.append({"type": "ball_out", "ts": 6 * PS, "key": 4})
    >>> [(e["ts"] // PS, e["player"], e["receiver"], e["received"] // PS)
    ...  for e in feed(Interception(), hits, registry=soccer_registry()).net]
    [(3, 5, 9, 4)]
    """

    outputs = ("interception",)
    output = "interception"

    def counts(self, team: int, next_team: int) -> bool:
        return team != next_team


class DoublePass(Detector):
    """A pass from A to B, then from B back to A within ``window_s``: a double pass (one
    two). Carries the first pass's time stamp; ``received`` is when A got the ball back.

    Examples
    --------
    >>> from specula.soccer import soccer_registry
    >>> from specula.testing import feed
    >>> PS = 10**12
    >>> passes = [{"type": "pass", "ts": 1 * PS, "key": 3, "player": 3, "team": 0,
    ...            "receiver": 5, "received": 2 * PS},
    ...           {"type": "pass", "ts": 3 * PS, "key": 5, "player": 5, "team": 0,
    ...            "receiver": 3, "received": 4 * PS}]
    >>> [(e["ts"] // PS, e["player"], e["receiver"], e["received"] // PS)
    ...  for e in feed(DoublePass(), passes, registry=soccer_registry()).net]
    [(1, 3, 5, 4)]
    """

    inputs = ("pass",)
    outputs = ("double_pass",)

    def __init__(self, window_s: float = 5.0) -> None:
        self.window_s = window_s
        self.last: tuple[int, int, int] | None = None  # (ts, passer, receiver)

    def on_event(self, event: EventView, emit: Emitter) -> None:
        last = self.last
        if last is not None and event["player"] == last[2] and event["receiver"] == last[1] \
                and event["received"] - last[0] <= self.window_s * PS:
            emit("double_pass", last[0], last[1], player=last[1], team=event["team"],
                 receiver=last[2], received=event["received"])
            self.last = None
        else:
            self.last = (event.ts, event["player"], event["receiver"])
