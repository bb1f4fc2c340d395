"""The replay page: one self-contained HTML file that shows a run as a coach would watch it.

The page holds, drawn with Plotly (plotly.js is embedded, so it opens offline):

* the pitch to scale with the players, the referee and the ball in play moving over the
  played time (a play button and a slider), and under it the detections as a timeline
  (hits, passes, shots on goal, possession changes, the ball going out and coming back
  into play) with a cursor that follows the animation;
* beside them, each team's share of possession over the game (DEBS 2013 query 2), a
  table of the players' distance (query 1), possession time (query 2) and detections,
  and their distance per intensity class (query 1);
* each player's whole-game heat map (query 3) drawn on the pitch, one player at a time.

The pitch lies across the page: its length (the sensors' y, goal 0 on the right) runs
left to right, its width (x) bottom to top, in metres.

Positions are sampled, not drawn reading by reading: a frame every :data:`FRAME_STEP_S`
seconds of play (at most :data:`MAX_FRAMES` frames; a longer log gets longer steps), each
sensor at its last reading in the frame, a player at the mean of his leg sensors. So a
page of a 20 s run is a few MB, nearly all of it plotly.js.

>>> import numpy as np
>>> rows = np.array([(4, 0, 1_000, 2_000), (4, 150 * 10**9, 3_000, 4_000)],
...                 [("key", "i8"), ("ts", "i8"), ("x", "i8"), ("y", "i8")])
>>> frames = sample_positions([rows], first_ts=0, last_ts=150 * 10**9)
>>> frames.times_s.tolist(), frames.x.tolist(), frames.y.tolist()
([0.0], [[3.0]], [[4.0]])
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specula.events import distinct
from specula.soccer.analytics import HEAT_GRID, TEAMS, attacked_goals, tables
from specula.soccer.debs2013 import Metadata, Player
from specula.soccer.debs2013.metadata import LEFT_LEG, RIGHT_LEG
from specula.soccer.geometry import GOALS, HEAT_GRIDS, INTENSITY_NAMES, PITCH_X, PITCH_Y
from specula.soccer.pitch_plot import (
    CENTRE_CIRCLE_R,
    GOAL_AREA,
    GOAL_DEPTH,
    GRASS,
    MARGIN,
    PENALTY_AREA,
    PENALTY_SPOT,
)
from specula.soccer.types import PICOS_PER_SECOND

#: Seconds of play between two frames of the animation (5 frames a second).
FRAME_STEP_S = 0.2
#: Frames at most: a longer log is sampled at longer steps, so the page stays small.
MAX_FRAMES = 2_000
#: The types the page reads from a run's net output.
PAGE_TYPES = ("hit", "pass", "shot", "possession", "ball_in", "ball_out",
              "team_possession", "running_stats", "possession_stats", "heat", "side")
#: Team colours (A, B), the referee's and the ball's.
TEAM_COLOURS = ("#1f5fd6", "#e8412c")
REFEREE_COLOUR = "#111111"
BALL_COLOUR = "#ffffff"
#: The timeline's rows, top to bottom: label and the event types drawn on it.
TIMELINE_ROWS = (("hits", ("hit",)), ("passes", ("pass",)), ("shots on goal", ("shot",)),
                 ("possession changes", ("possession",)),
                 ("ball out / in", ("ball_out", "ball_in")))
#: Colours of the intensity classes, standing to sprint.
_INTENSITY_COLOURS = ("#d9d9d9", "#a6d96a", "#66bd63", "#fdae61", "#f46d43", "#a50026")
_TEAM_FILL = {"A": "#dde7fb", "B": "#fbe0dc"}
#: Pixels per row of the players' table and bars.
_ROWS_PX = 26


@dataclass(frozen=True)
class Frames:
    """Sensor positions sampled at the frames of the animation.

    Attributes
    ----------
    times_s : numpy.ndarray
        ``(F,)`` each frame's start, seconds after the log's first reading.
    step_s : float
        Seconds between frames.
    sids : numpy.ndarray
        ``(S,)`` sensor ids, ascending.
    x, y : numpy.ndarray
        ``(F, S)`` metres: each sensor's last reading in the frame, NaN where it gave
        none.
    """

    times_s: np.ndarray
    step_s: float
    sids: np.ndarray
    x: np.ndarray
    y: np.ndarray

    @property
    def span_s(self) -> float:
        """Seconds the frames cover, the last one's included."""
        return float(self.times_s[-1]) + self.step_s if len(self.times_s) else self.step_s

    def of(self, sids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """``(F,)`` x and y of the mean of the sensors ``sids`` that read in each frame
        (NaN where none did)."""
        cols = np.flatnonzero(np.isin(self.sids, list(sids)))
        if not len(cols):
            nan = np.full(len(self.times_s), np.nan)
            return nan, nan.copy()
        x, y = self.x[:, cols], self.y[:, cols]
        seen = (~np.isnan(x)).sum(axis=1)
        with np.errstate(invalid="ignore"):
            return (np.where(seen > 0, np.nansum(x, axis=1) / np.maximum(seen, 1), np.nan),
                    np.where(seen > 0, np.nansum(y, axis=1) / np.maximum(seen, 1), np.nan))


def frame_step_ps(first_ts: int, last_ts: int) -> int:
    """Picoseconds between frames: :data:`FRAME_STEP_S`, or longer so that the log
    from ``first_ts`` to ``last_ts`` takes at most :data:`MAX_FRAMES` frames."""
    step = int(FRAME_STEP_S * PICOS_PER_SECOND)
    return max(step, -(-(last_ts - first_ts + 1) // MAX_FRAMES))


def sample_positions(batches: Iterable[np.ndarray], first_ts: int, last_ts: int) -> Frames:
    """The frames of readings ``batches`` (fields ``key``, ``ts``, ``x``, ``y``; in any
    order, e.g. as they arrived) from ``first_ts`` to ``last_ts`` (ps): a frame every
    :func:`frame_step_ps`, each sensor at its latest reading in the frame. Reads the
    batches once and keeps one reading per sensor and frame."""
    step = frame_step_ps(first_ts, last_ts)
    n = (last_ts - first_ts) // step + 1
    kept = np.zeros(0, _KEPT)
    for batch in batches:
        inside = batch[(batch["ts"] >= first_ts) & (batch["ts"] <= last_ts)]
        bins = (inside["ts"] - first_ts) // step
        latest = _latest_per_bin(inside["key"], bins, inside["ts"])
        rows = np.zeros(len(latest), _KEPT)
        for name in ("key", "ts", "x", "y"):
            rows[name] = inside[name][latest]
        rows["bin"] = bins[latest]
        both = np.concatenate([kept, rows])
        kept = both[_latest_per_bin(both["key"], both["bin"], both["ts"])]
    sids = distinct(kept["key"])
    x = np.full((n, len(sids)), np.nan)
    y = x.copy()
    col = np.searchsorted(sids, kept["key"])
    x[kept["bin"], col], y[kept["bin"], col] = kept["x"] / 1e3, kept["y"] / 1e3
    return Frames(np.arange(n) * step / PICOS_PER_SECOND, step / PICOS_PER_SECOND, sids, x, y)


#: One reading kept per sensor and frame (``bin``).
_KEPT = np.dtype([("key", "i8"), ("bin", "i8"), ("ts", "i8"), ("x", "i8"), ("y", "i8")])


def _latest_per_bin(key: np.ndarray, bins: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Indices of the latest reading (greatest ``ts``) of each ``(key, bin)``."""
    order = np.lexsort((ts, bins, key))
    key, bins = key[order], bins[order]
    last = np.ones(len(order), bool)
    last[:-1] = (key[1:] != key[:-1]) | (bins[1:] != bins[:-1])
    return order[last]


def ball_in_play(frames: Frames, ball_sids: Iterable[int], ball_in: np.ndarray | None,
                 first_ts: int) -> tuple[np.ndarray, np.ndarray]:
    """``(F,)`` x and y of the ball in play in each frame: the ball of the latest
    ``ball_in`` event at or before the frame (the hierarchy's choice among the balls);
    before any, or without the events, the first ball inside the pitch. NaN where that
    ball gave no reading in the frame."""
    sids = [s for s in ball_sids if s in set(frames.sids.tolist())]
    xs = np.full(len(frames.times_s), np.nan)
    ys = xs.copy()
    if not sids:
        return xs, ys
    pos = {s: frames.of([s]) for s in sids}
    chosen = _first_inside(pos, sids)
    if ball_in is not None and len(ball_in):
        ball_in = ball_in[np.lexsort((ball_in["seq"], ball_in["ts"]))]
        at = np.round(frames.times_s * PICOS_PER_SECOND).astype(np.int64) + first_ts
        latest = np.searchsorted(ball_in["ts"], at, side="right") - 1
        announced = ball_in["key"][np.maximum(latest, 0)]
        chosen = np.where(latest >= 0, announced, chosen)
    for s in sids:
        mine = chosen == s
        xs[mine], ys[mine] = pos[s][0][mine], pos[s][1][mine]
    return xs, ys


def _first_inside(pos: Mapping[int, tuple[np.ndarray, np.ndarray]], sids: list[int]
                  ) -> np.ndarray:
    """Per frame, the first of ``sids`` whose position is inside the pitch (-1: none)."""
    chosen = np.full(len(next(iter(pos.values()))[0]), -1, np.int64)
    for s in reversed(sids):
        x, y = pos[s]
        with np.errstate(invalid="ignore"):
            inside = (x >= PITCH_X[0] / 1e3) & (x <= PITCH_X[1] / 1e3) & \
                (y >= PITCH_Y[0] / 1e3) & (y <= PITCH_Y[1] / 1e3)
        chosen[inside] = s
    return chosen


# --- the pitch -------------------------------------------------------------------------

def pitch_shapes() -> list[dict[str, Any]]:
    """Plotly shapes of the pitch across the page (metres; horizontal: the sensors' y,
    vertical: x): grass, lines, centre circle, penalty and goal areas, spots, arcs and
    goals, the sizes of :mod:`specula.soccer.pitch_plot`."""
    x0, x1 = (v / 1e3 for v in PITCH_X)
    y0, y1 = (v / 1e3 for v in PITCH_Y)
    m = MARGIN / 1e3
    line = {"color": "white", "width": 1.5}
    shapes: list[dict[str, Any]] = [
        _rect(y0 - m, x0 - m, y1 + m, x1 + m, fillcolor=GRASS, line={"width": 0}),
        _rect(y0, x0, y1, x1, line=line),
        {"type": "line", "x0": (y0 + y1) / 2, "x1": (y0 + y1) / 2, "y0": x0, "y1": x1,
         "line": line},
        _circle((y0 + y1) / 2, (x0 + x1) / 2, CENTRE_CIRCLE_R / 1e3, line=line),
        _circle((y0 + y1) / 2, (x0 + x1) / 2, 0.3, fillcolor="white", line={"width": 0}),
    ]
    for goal in (0, 1):
        shapes += _end(goal, line)
    for s in shapes:
        s.setdefault("layer", "below")
        s.setdefault("xref", "x")
        s.setdefault("yref", "y")
    return shapes


def _rect(h0: float, v0: float, h1: float, v1: float, **style: Any) -> dict[str, Any]:
    return {"type": "rect", "x0": h0, "y0": v0, "x1": h1, "y1": v1, **style}


def _circle(h: float, v: float, r: float, **style: Any) -> dict[str, Any]:
    return {"type": "circle", "x0": h - r, "y0": v - r, "x1": h + r, "y1": v + r, **style}


def _end(goal: int, line: dict[str, Any]) -> list[dict[str, Any]]:
    """One end of the pitch: goal ``goal`` with its areas, spot, arc and the goal."""
    posts = [p / 1e3 for p in GOALS[goal]["x"]]
    centre = sum(posts) / 2
    goal_line = (PITCH_Y[1] if goal == 0 else PITCH_Y[0]) / 1e3
    inward = -1 if goal == 0 else 1
    shapes = [_rect(goal_line, centre - w / 2e3, goal_line + inward * d / 1e3,
                    centre + w / 2e3, line=line) for w, d in (PENALTY_AREA, GOAL_AREA)]
    spot = goal_line + inward * PENALTY_SPOT / 1e3
    shapes.append(_circle(spot, centre, 0.25, fillcolor="white", line={"width": 0}))
    r = CENTRE_CIRCLE_R / 1e3
    outside = (PENALTY_AREA[1] - PENALTY_SPOT) / 1e3
    half = math.acos(outside / r)
    points = [(spot + inward * r * math.cos(a), centre + r * math.sin(a))
              for a in np.linspace(-half, half, 24)]
    path = "M " + " L ".join(f"{h:.2f},{v:.2f}" for h, v in points)
    shapes.append({"type": "path", "path": path, "line": line})
    shapes.append(_rect(goal_line, posts[0], goal_line - inward * GOAL_DEPTH / 1e3, posts[1],
                        fillcolor="rgba(255,255,255,0.6)", line={"color": "white",
                                                                 "width": 1.5}))
    return shapes


def _pitch_axes(fig: Any, row: int | None = None) -> None:
    """The pitch's axes on ``fig`` (its subplot ``row``): to scale, no ticks."""
    m = MARGIN / 1e3
    kw = {"row": row, "col": 1} if row else {}
    fig.update_xaxes(range=[PITCH_Y[0] / 1e3 - m, PITCH_Y[1] / 1e3 + m], visible=False,
                     **kw)
    fig.update_yaxes(range=[PITCH_X[0] / 1e3 - m, PITCH_X[1] / 1e3 + m], visible=False,
                     scaleanchor="x", scaleratio=1, **kw)


# --- the figures -----------------------------------------------------------------------

def match_figure(frames: Frames, events: Mapping[str, np.ndarray], metadata: Metadata,
                 first_ts: int) -> Any:
    """The animated pitch over the timeline of detections (one figure, so the slider
    moves the timeline's cursor too)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1, row_heights=[0.76, 0.24], vertical_spacing=0.05)
    movers = _movers(frames, events, metadata, first_ts)
    for name, (x, y, style) in movers.items():
        fig.add_trace(go.Scatter(x=_round(y[0]), y=_round(x[0]), name=name, **style),
                      row=1, col=1)
    rows = _timeline(fig, events, metadata, first_ts)
    fig.add_trace(go.Scatter(x=[0.0, 0.0], y=[-0.5, rows - 0.5], mode="lines",
                             line={"color": "#444", "width": 1}, showlegend=False,
                             hoverinfo="skip", name="now"), row=2, col=1)
    moving = [*range(len(movers)), len(fig.data) - 1]
    fig.frames = [go.Frame(name=f"{t:.1f}", traces=moving, data=[
        *(go.Scatter(x=_round(y[i]), y=_round(x[i])) for x, y, _ in movers.values()),
        go.Scatter(x=[t, t])]) for i, t in enumerate(frames.times_s.tolist())]
    fig.update_layout(shapes=pitch_shapes(), height=1000,
                      margin={"l": 10, "r": 10, "t": 60, "b": 110},
                      title="the match as the detectors saw it", plot_bgcolor="white",
                      legend={"orientation": "h", "y": 1.02, "x": 0.0},
                      updatemenus=[_play_buttons()], sliders=[_slider(frames.times_s)])
    _pitch_axes(fig, row=1)
    fig.update_xaxes(title="seconds of play", range=[0, frames.span_s], row=2, col=1)
    fig.update_yaxes(tickvals=list(range(rows)), ticktext=[r for r, _ in TIMELINE_ROWS],
                     range=[rows - 0.5, -0.5], row=2, col=1)
    return fig


def _round(values: np.ndarray) -> list[float | None]:
    """Metres to 0.1 m, NaN as None (JSON null: Plotly leaves the point out)."""
    return [None if math.isnan(v) else round(v, 1) for v in values.tolist()]


def _movers(frames: Frames, events: Mapping[str, np.ndarray], metadata: Metadata,
            first_ts: int) -> dict[str, tuple[np.ndarray, np.ndarray, dict[str, Any]]]:
    """The animated traces: per name, ``(F, k)`` x and y and the trace's style."""
    movers = {}
    for team, colour in enumerate(TEAM_COLOURS):
        players = [p for p in metadata.players if p.team == team]
        xy = [frames.of([p.sensors[limb] for limb in (LEFT_LEG, RIGHT_LEG)
                         if limb in p.sensors]) for p in players]
        names = [_name(p, p.id) for p in players]
        movers[f"team {TEAMS[team]}{_attack(events.get('side'), team)}"] = (
            np.stack([x for x, _ in xy], axis=1), np.stack([y for _, y in xy], axis=1),
            {"mode": "markers", "text": names, "hoverinfo": "text",
             "marker": {"size": 13, "color": colour, "line": {"color": "white", "width": 1}}})
    ref = frames.of(metadata.referee.get(limb, -1) for limb in (LEFT_LEG, RIGHT_LEG))
    movers["referee"] = (ref[0][:, None], ref[1][:, None],
                         {"mode": "markers", "text": ["referee"], "hoverinfo": "text",
                          "marker": {"size": 10, "color": REFEREE_COLOUR,
                                     "symbol": "diamond"}})
    ball = ball_in_play(frames, metadata.ball_sids, events.get("ball_in"), first_ts)
    movers["ball"] = (ball[0][:, None], ball[1][:, None],
                      {"mode": "markers", "text": ["ball"], "hoverinfo": "text",
                       "marker": {"size": 9, "color": BALL_COLOUR,
                                  "line": {"color": "black", "width": 1.5}}})
    return movers


def _timeline(fig: Any, events: Mapping[str, np.ndarray], metadata: Metadata,
              first_ts: int) -> int:
    """The detections as markers on the timeline (row 2 of ``fig``), one row of the
    timeline per :data:`TIMELINE_ROWS` entry, coloured by team; returns the rows."""
    import plotly.graph_objects as go

    names = {p.id: p.name for p in metadata.players}
    for row, (_, types) in enumerate(TIMELINE_ROWS):
        for t in types:
            rows = _changes(events[t]) if t == "possession" and t in events \
                else events.get(t)
            if rows is None or not len(rows):
                continue
            teams = rows["team"].tolist() if "team" in (rows.dtype.names or ()) \
                else [-1] * len(rows)
            colours = [TEAM_COLOURS[k] if k in (0, 1) else "#777" for k in teams]
            fig.add_trace(go.Scatter(
                x=((rows["ts"] - first_ts) / PICOS_PER_SECOND).tolist(),
                y=[row] * len(rows), mode="markers", showlegend=False, name=t,
                text=[_describe(t, r, names) for r in rows], hoverinfo="text+x",
                marker={"size": 11, "color": colours,
                        "symbol": "triangle-up" if t == "ball_in" else "circle"}),
                row=2, col=1)
    return len(TIMELINE_ROWS)


def _changes(possession: np.ndarray) -> np.ndarray:
    """The possession events whose player is not the one before (in time order)."""
    rows = possession[np.lexsort((possession["seq"], possession["ts"]))]
    new = np.ones(len(rows), bool)
    new[1:] = rows["player"][1:] != rows["player"][:-1]
    return rows[new]


def _describe(t: str, row: np.void, names: Mapping[int, str]) -> str:
    """Hover text of one detection."""
    who = names.get(int(row["player"]), "?") if "player" in (row.dtype.names or ()) else ""
    if t == "pass":
        return f"pass {who} to {names.get(int(row['receiver']), '?')}"
    if t == "shot":
        return f"shot on goal {int(row['goal'])} by {who}"
    if t == "possession":
        return f"{who} has the ball" if int(row["player"]) >= 0 else "nobody has the ball"
    if t in ("ball_in", "ball_out"):
        return f"{t.replace('_', ' ')} (ball {int(row['key'])})"
    return f"{t} by {who}"


def _play_buttons() -> dict[str, Any]:
    step_ms = int(FRAME_STEP_S * 1000)
    return {"type": "buttons", "direction": "left", "x": 0.0, "y": -0.08, "xanchor": "left",
            "yanchor": "top", "pad": {"t": 4, "r": 8}, "showactive": False, "buttons": [
                {"label": "play", "method": "animate", "args": [None, {
                    "frame": {"duration": step_ms, "redraw": False}, "fromcurrent": True,
                    "transition": {"duration": 0}}]},
                {"label": "pause", "method": "animate", "args": [[None], {
                    "frame": {"duration": 0, "redraw": False}, "mode": "immediate",
                    "transition": {"duration": 0}}]}]}


def _slider(times_s: np.ndarray) -> dict[str, Any]:
    # the steps' own labels hidden (hundreds of them would overlap): the current one shows
    return {"x": 0.16, "y": -0.06, "len": 0.84, "yanchor": "top", "pad": {"t": 4},
            "ticklen": 0, "minorticklen": 0, "font": {"color": "rgba(0,0,0,0)"},
            "currentvalue": {"prefix": "t = ", "suffix": " s", "font": {"color": "#333"}},
            "steps": [
                {"label": f"{t:.1f}", "method": "animate", "args": [[f"{t:.1f}"], {
                    "frame": {"duration": 0, "redraw": False}, "mode": "immediate",
                    "transition": {"duration": 0}}]} for t in times_s.tolist()]}


def possession_figure(events: Mapping[str, np.ndarray], first_ts: int, span_s: float
                      ) -> Any:
    """Each team's share of possession over the whole game so far (query 2's whole-game
    window), as reported over the run (``span_s`` seconds of log)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    rows = events.get("team_possession")
    if rows is not None and len(rows):
        rows = rows[rows["window"] == 0]
        rows = rows[np.lexsort((rows["seq"], rows["ts"]))]
        for team, colour in enumerate(TEAM_COLOURS):
            mine = rows[rows["team"] == team]
            if len(mine):
                fig.add_trace(go.Scatter(
                    x=((mine["ts"] - first_ts) / PICOS_PER_SECOND).tolist(),
                    y=(100 * mine["share"]).tolist(), mode="lines",
                    name=f"team {TEAMS[team]} {100 * float(mine['share'][-1]):.0f} %",
                    line={"color": colour, "width": 2.5, "shape": "hv"}))
    fig.update_layout(title="possession share (whole game so far)", height=300,
                      margin={"l": 50, "r": 10, "t": 40, "b": 40},
                      xaxis={"title": "seconds of play", "range": [0, span_s]},
                      yaxis={"title": "%", "range": [0, 100]},
                      legend={"orientation": "h", "y": -0.25})
    return fig


def players_figure(events: Mapping[str, np.ndarray], metadata: Metadata) -> Any:
    """The per-player table: whole-game distance (query 1), possession time (query 2)
    and the hits, passes and shots detected."""
    import plotly.graph_objects as go

    _, players = tables(events, metadata)
    head = ["player", "team", "distance (m)", "possession (s)", "hits", "passes", "shots"]
    cells = [[p["player"] for p in players], [p["team"] for p in players],
             [f"{p['distance_m']:.0f}" for p in players],
             [f"{p['possession_s']:.1f}" for p in players],
             *([p[k] for p in players] for k in ("hits", "passes", "shots"))]
    fill = [[_TEAM_FILL.get(p["team"], "white") for p in players]]
    fig = go.Figure(go.Table(
        columnwidth=[3.4, 1, 1.8, 2, 1, 1.2, 1.1],
        header={"values": head, "fill_color": "#333", "font": {"color": "white", "size": 12}},
        cells={"values": cells, "fill_color": fill * len(head), "font": {"size": 12},
               "height": 24}))
    fig.update_layout(title="players, whole game", height=_ROWS_PX * (len(players) + 1) + 70,
                      margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def running_figure(events: Mapping[str, np.ndarray], metadata: Metadata) -> Any:
    """Each player's whole-game distance per intensity class (query 1's running
    statistics), stacked bars, slowest class first."""
    import plotly.graph_objects as go

    _, players = tables(events, metadata)

    def fig_height(players: list[dict]) -> int:
        return _ROWS_PX * len(players) + 150

    names = [f"{p['player']} ({p['team']})" for p in players]
    fig = go.Figure([go.Bar(y=names, x=[round(p[f"{c}_m"], 1) for p in players], name=c,
                            orientation="h", marker={"color": colour})
                     for c, colour in zip(INTENSITY_NAMES, _INTENSITY_COLOURS, strict=True)])
    fig.update_layout(barmode="stack", title="distance per intensity class, whole game",
                      height=fig_height(players), xaxis_title="m",
                      yaxis={"autorange": "reversed"},
                      margin={"l": 10, "r": 10, "t": 40, "b": 40},
                      legend={"orientation": "h", "y": -0.04 - 60 / fig_height(players),
                              "yanchor": "top", "x": 0.0, "traceorder": "normal"})
    return fig


def heat_figure(events: Mapping[str, np.ndarray], metadata: Metadata) -> Any | None:
    """Each player's whole-game heat map (query 3, the :data:`HEAT_GRID` grid) on the
    pitch, seconds per cell, one player at a time (a menu picks him); None without
    heat maps."""
    import plotly.graph_objects as go

    from specula.soccer.queries import heat_table

    heat = events.get("heat")
    if heat is None or not len(heat):
        return None
    players = {p.id: p for p in metadata.players}
    ids = sorted({int(p) for p in heat["player"]})
    titles = [_heat_title(players.get(pid), pid, events.get("side")) for pid in ids]
    cols, rows = HEAT_GRIDS[HEAT_GRID]
    across = np.linspace(PITCH_Y[0], PITCH_Y[1], rows + 1) / 1e3
    up = np.linspace(PITCH_X[0], PITCH_X[1], cols + 1) / 1e3
    fig = go.Figure()
    for i, pid in enumerate(ids):
        seconds = heat_table(heat, pid, 0, HEAT_GRID) / 1e6  # (rows along y, cols along x)
        z = np.where(seconds.T > 0, seconds.T, np.nan)  # the pitch across: y horizontal
        fig.add_trace(go.Heatmap(
            z=[[None if math.isnan(v) else round(v, 2) for v in r] for r in z.tolist()],
            x=((across[:-1] + across[1:]) / 2).tolist(), y=((up[:-1] + up[1:]) / 2).tolist(),
            # zmin alone is ignored: both bounds, so the scale starts at 0 s
            colorscale="YlOrRd", zmin=0, zmax=max(float(seconds.max()), 0.1), opacity=0.85,
            visible=i == 0,
            colorbar={"title": "s"}, hovertemplate="%{z:.1f} s<extra></extra>"))
    buttons = [{"label": _name(players.get(pid), pid), "method": "update",
                "args": [{"visible": [j == i for j in range(len(ids))]}, {"title.text": title}]}
               for i, (pid, title) in enumerate(zip(ids, titles, strict=True))]
    fig.update_layout(shapes=[{**s, "layer": "below"} for s in pitch_shapes()], height=500,
                      title={"text": titles[0], "y": 0.98, "yanchor": "top"},
                      plot_bgcolor="white",
                      margin={"l": 10, "r": 10, "t": 110, "b": 10},
                      updatemenus=[{"buttons": buttons, "x": 0.0, "xanchor": "left",
                                    "y": 1.0, "yanchor": "bottom", "pad": {"b": 8}}])
    _pitch_axes(fig)
    return fig


def _name(player: Player | None, pid: int) -> str:
    """A player's name, (GK) for a keeper."""
    if player is None:
        return f"player {pid}"
    return player.name + (" (GK)" if player.goalkeeper else "")


def _heat_title(player: Player | None, pid: int, sides: np.ndarray | None) -> str:
    """A heat map's title: whose, the grid, and where his team attacked (the pitch lies
    across: goal 0 on the right) from the ``side`` events."""
    cells = "{} x {}".format(*HEAT_GRIDS[HEAT_GRID])
    attack = _attack(sides, player.team) if player is not None else ""
    return (f"heat map, whole game: {_name(player, pid)}<br><sub>seconds per cell, "
            f"{cells} grid{attack}</sub>")


def _attack(sides: np.ndarray | None, team: int) -> str:
    """Where ``team`` attacked, spell by spell, on the pitch across (goal 0 on the
    right), from the ``side`` events: ", attacks >", ", attacks > then <"; "" without."""
    ways = [">" if g == 0 else "<" for g in attacked_goals(sides, team)]
    return f", attacks {' then '.join(ways)}" if ways else ""


# --- the page --------------------------------------------------------------------------

def page(frames: Frames, events: Mapping[str, np.ndarray], metadata: Metadata,
         first_ts: int, heading: str = "") -> str:
    """The HTML of the page (plotly.js embedded): the animated pitch and timeline on the
    left, possession, the players' table and the heat maps on the right."""
    import plotly.offline

    left = [match_figure(frames, events, metadata, first_ts)]
    right = [possession_figure(events, first_ts, frames.span_s), players_figure(events, metadata),
             running_figure(events, metadata)]
    heat = heat_figure(events, metadata)
    if heat is not None:
        right.append(heat)
    config = {"displaylogo": False, "responsive": True}

    def divs(figures: list[Any], side: str) -> Iterator[str]:
        for i, f in enumerate(figures):
            yield f.to_html(full_html=False, include_plotlyjs=False, config=config,
                            div_id=f"{side}-{i}", auto_play=False, default_width="100%",
                            default_height=f"{f.layout.height}px")

    return _PAGE.format(title=html.escape(heading or "Specula replay"),
                        heading=html.escape(heading),
                        plotlyjs=plotly.offline.get_plotlyjs(),
                        left="\n".join(divs(left, "left")),
                        right="\n".join(divs(right, "right")))


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 12px; background: #fafafa; }}
h1 {{ font-size: 18px; margin: 4px 0 10px; }}
.grid {{ display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 12px; }}
.grid > div > div {{ margin-bottom: 12px; }}
</style>
<script type="text/javascript">{plotlyjs}</script>
</head>
<body>
<h1>{heading}</h1>
<div class="grid">
<div class="left">
{left}
</div>
<div class="right">
{right}
</div>
</div>
</body>
</html>
"""


def write_page(path: Path, frames: Frames, events: Mapping[str, np.ndarray],
               metadata: Metadata, first_ts: int, heading: str = "") -> Path:
    """Write :func:`page` to ``path``; returns it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page(frames, events, metadata, first_ts, heading), encoding="utf-8")
    return path


def write_run_page(result: Any, out: Path) -> Path | None:
    """Write ``out/report.html`` for a replay (a
    :class:`~specula.pipelines.replay.ReplayResult`): the positions from its arrival
    table (the stream the detectors saw, Parquet under ``out``), the detections from its
    net output. None, and nothing written, for a run without an arrival table (a watch
    reads its log as it lands)."""
    from specula.pipelines.arrival import arrival_columns
    from specula.soccer.analytics import events_by_type

    arrival = result.paths.get("arrival")
    summary = result.summary
    if not arrival or summary.get("first_ts") is None:
        return None
    metadata = result.truth.metadata if result.truth is not None else Metadata.default()
    frames = sample_positions(arrival_columns(arrival, ["key", "ts", "x", "y"]),
                              int(summary["first_ts"]), int(summary["last_ts"]))
    events = events_by_type(result.report, result.graph, PAGE_TYPES)
    heading = (f"{summary['log']}: {summary.get('played_seconds', 0):.0f} s of play, "
               f"{summary['events_in']:,} readings")
    return write_page(out / "report.html", frames, events, metadata,
                      int(summary["first_ts"]), heading)
