"""The DEBS 2013 Grand Challenge's output streams, in its schemas, from the net events of
the soccer hierarchy with the queries (``soccer_graph(queries=True)``).

The hierarchy keeps compact events that serve the detectors above them (µs, mm, grid
indices, changed cells only); this module turns a run's events into the challenge's
result streams, one table per stream, with the columns the challenge lists:

=========================  ==============================================================
stream                     columns
=========================  ==============================================================
``q1_current_running``     ``ts_start, ts_stop, player_id, intensity, distance, speed``
``q1_running_<w>``         ``ts, player_id, standing_time, standing_distance, trot_time,
                           trot_distance, low_time, low_distance, medium_time,
                           medium_distance, high_time, high_distance, sprint_time,
                           sprint_distance``
``q2_player_<w>``          ``ts, player_id, time, percent``
``q2_team_<w>``            ``ts, team_id, time, percent``
``q3_heat_<w>_<c>x<r>``    ``ts, player_id, cell_x1, cell_y1, cell_x2, cell_y2,
                           percent_time_in_cell``
``q4_shots``               ``ts, player_id, x, y, z, |v|, vx, vy, vz, |a|, ax, ay, az``
=========================  ==============================================================

``<w>`` is the window: ``1min``, ``5min``, ``10min``, ``20min`` or ``game`` (the whole
game: all play so far). Units, the challenge's where it gives them: ``ts`` in ps (the
sensor clock), positions and cell corners in mm, ``|v|`` in µm/s, ``|a|`` in µm/s²,
directions scaled to length 10,000 (Q4 repeats the ball's readings as they came). Where
it names a quantity without a unit we chose: times in s, distances in m, percent 0-100.
Q1's current running statistics: one row per decided run (the one-second rule
applied: a stretch of a player's play in one intensity class, see
:class:`~specula.soccer.queries.RunningAnalysis`), ``intensity`` the class's name
(``standing`` ... ``sprint``, as in the aggregate stream's columns), ``distance`` in m,
``speed`` the run's mean speed (its distance over its duration, the player's speed being
that of his two legs averaged) in km/h, the unit of the challenge's class bounds.
The aggregate Q1 stream, Q2 and Q3 report once a second of the sensor clock and at the
end of the stream (the hierarchy's reports); Q3 lists every cell a player has spent time
in, with its share of his time in the window; Q4 lists each reading of a hit's ball
while it heads for goal: from the first whose straight line enters the goal within
1.5 s of the hit until the first whose line no longer enters it within 1.5 s, the next
hit, or the ball leaving the pitch (:func:`shot_stream`).

>>> from specula.soccer.types import soccer_registry
>>> reg = soccer_registry()
>>> heat = reg.from_records([{"type": "heat", "ts": 10**12, "key": 3, "player": 3,
...                           "window": 0, "grid": 0, "col": 1, "row": 6, "us": 750_000},
...                          {"type": "heat", "ts": 10**12, "key": 3, "player": 3,
...                           "window": 0, "grid": 0, "col": 2, "row": 6, "us": 250_000}],
...                         dtype=reg.dtype(["heat"]))
>>> t = heat_streams(heat)["q3_heat_game_8x13"]
>>> [(int(r["cell_x1"]), int(r["cell_y1"]), float(r["percent_time_in_cell"])) for r in t]
[(6560, -2610, 75.0), (13121, -2610, 25.0)]
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from specula.events import distinct
from specula.soccer.geometry import (
    HEAT_GRIDS,
    HEAT_WINDOWS_S,
    INTENSITY_NAMES,
    PITCH_X,
    PITCH_Y,
    PS,
    RUNNING_WINDOWS_S,
)
from specula.soccer.types import soccer_registry

#: The columns of each kind of stream, as the challenge lists them.
Q1_CURRENT_COLUMNS = ("ts_start", "ts_stop", "player_id", "intensity", "distance", "speed")
Q1_COLUMNS = ("ts", "player_id",
              *(f"{c}_{q}" for c in INTENSITY_NAMES for q in ("time", "distance")))
Q2_PLAYER_COLUMNS = ("ts", "player_id", "time", "percent")
Q2_TEAM_COLUMNS = ("ts", "team_id", "time", "percent")
Q3_COLUMNS = ("ts", "player_id", "cell_x1", "cell_y1", "cell_x2", "cell_y2",
              "percent_time_in_cell")
Q4_COLUMNS = ("ts", "player_id", "x", "y", "z", "|v|", "vx", "vy", "vz", "|a|", "ax", "ay",
              "az")
_Q4_FIELDS = ("ts", "player", "x", "y", "z", "v", "vx", "vy", "vz", "a", "ax", "ay", "az")


def window_name(seconds: int) -> str:
    """``1min`` ... for a window of ``seconds`` (whole minutes), ``game`` for 0."""
    if seconds == 0:
        return "game"
    return f"{seconds // 60}min" if seconds % 60 == 0 else f"{seconds}s"


def _table(columns: tuple[str, ...], formats: str, data: list) -> np.ndarray:
    dtype = np.dtype([(c, f) for c, f in zip(columns, formats.split(","), strict=True)])
    table = np.zeros(len(data[0]) if data else 0, dtype)
    for c, values in zip(columns, data, strict=False):  # no data: an empty table
        table[c] = values
    return table


def _ordered(rows: np.ndarray, *keys: str) -> np.ndarray:
    """``rows`` by time stamp, then by ``keys``."""
    return rows[np.lexsort(tuple(rows[k] for k in reversed(("ts", *keys))))]


def running_streams(running_stats: np.ndarray,
                    windows: tuple[int, ...] = RUNNING_WINDOWS_S) -> dict[str, np.ndarray]:
    """Q1's aggregate running statistics, one table per window, from ``running_stats``."""
    out = {}
    for w in windows:
        r = _ordered(running_stats[running_stats["window"] == w], "player")
        data = [r["ts"], r["player"]]
        for c in INTENSITY_NAMES:
            data += [r[f"{c}_us"] / 1e6, r[f"{c}_mm"] / 1e3]
        out[f"q1_running_{window_name(w)}"] = _table(Q1_COLUMNS, "i8,i4" + ",f8" * 12, data)
    return out


def current_running_stream(current_running: np.ndarray) -> dict[str, np.ndarray]:
    """Q1's current running statistics from ``current_running``: one row per run, by its
    end, then player."""
    r = current_running[np.lexsort((current_running["player"], current_running["until"]))]
    seconds = (r["until"] - r["since"]) / PS
    metres = r["mm"] / 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        kmh = np.where(seconds > 0, metres / seconds * 3.6, 0.0)
    names = np.array(INTENSITY_NAMES)[r["level"].astype(np.int64)]
    return {"q1_current_running": _table(Q1_CURRENT_COLUMNS, "i8,i8,i4,U8,f8,f8",
                                         [r["since"], r["until"], r["player"], names,
                                          metres, kmh])}


def possession_streams(possession_stats: np.ndarray, team_possession: np.ndarray,
                       windows: tuple[int, ...] = RUNNING_WINDOWS_S) -> dict[str, np.ndarray]:
    """Q2 per player and per team, one table per window: time in s and percent of the
    window's possession time."""
    out = {}
    for w in windows:
        r = _ordered(possession_stats[possession_stats["window"] == w], "player")
        out[f"q2_player_{window_name(w)}"] = _table(
            Q2_PLAYER_COLUMNS, "i8,i4,f8,f8", [r["ts"], r["player"], r["us"] / 1e6,
                                               r["share"] * 100])
        r = _ordered(team_possession[team_possession["window"] == w], "team")
        out[f"q2_team_{window_name(w)}"] = _table(
            Q2_TEAM_COLUMNS, "i8,i4,f8,f8", [r["ts"], r["team"], r["us"] / 1e6,
                                             r["share"] * 100])
    return out


def heat_streams(heat: np.ndarray, windows: tuple[int, ...] = HEAT_WINDOWS_S,
                 grids: tuple[tuple[int, int], ...] = HEAT_GRIDS) -> dict[str, np.ndarray]:
    """Q3, one table per window and grid: at each report, every cell a player has spent
    time in within the window, its corners and its percent of his time there. The
    ``heat`` events carry only the cells that changed; the maps are rebuilt report by
    report."""
    out = {}
    for w in windows:
        for g, (cols, rows) in enumerate(grids):
            sel = heat[(heat["window"] == w) & (heat["grid"] == g)]
            out[f"q3_heat_{window_name(w)}_{cols}x{rows}"] = _heat_grid(sel, cols, rows)
    return out


def _heat_grid(heat: np.ndarray, cols: int, rows: int) -> np.ndarray:
    if not len(heat):
        return _table(Q3_COLUMNS, "i8,i4,i8,i8,i8,i8,f8", [])
    players = distinct(heat["player"])
    us = np.zeros((len(players), rows * cols))
    who = np.searchsorted(players, heat["player"])
    cell = heat["row"].astype(np.int64) * cols + heat["col"]
    order = np.lexsort((heat["seq"], heat["ts"]))
    parts = []
    reports, starts = np.unique(heat["ts"][order], return_index=True)
    for ts, a, b in zip(reports.tolist(), starts.tolist(), [*starts[1:].tolist(), len(order)],
                        strict=True):
        i = order[a:b]
        us[who[i], cell[i]] = heat["us"][i]
        p, c = np.nonzero(us)
        total = us.sum(axis=1)
        parts.append((np.full(len(p), ts), players[p], c, 100.0 * us[p, c] / total[p]))
    ts_, player, c, percent = (np.concatenate(x) for x in zip(*parts, strict=True))
    row, col = np.divmod(c, cols)
    width = (PITCH_X[1] - PITCH_X[0]) / cols
    length = (PITCH_Y[1] - PITCH_Y[0]) / rows
    x1, y1 = PITCH_X[0] + col * width, PITCH_Y[0] + row * length
    return _table(Q3_COLUMNS, "i8,i4,i8,i8,i8,i8,f8",
                  [ts_, player, np.rint(x1), np.rint(y1), np.rint(x1 + width),
                   np.rint(y1 + length), percent])


def shot_stream(shot_ball: np.ndarray) -> dict[str, np.ndarray]:
    """Q4: each reading of a ball while it heads for goal after a hit, with the hitter:
    the ``shot_ball`` events, which follow the challenge's definition
    (:class:`~specula.soccer.shots.ShotOnGoal`), by time stamp."""
    r = _ordered(shot_ball)
    return {"q4_shots": _table(Q4_COLUMNS, "i8,i4,i8,i8,i8,i8,i4,i4,i4,i8,i4,i4,i4",
                               [r[f] for f in _Q4_FIELDS])}


def challenge_streams(events: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every stream of the challenge, from the events of a run (by type name, as
    :func:`specula.soccer.analytics.events_by_type`, which leaves out a type none was
    emitted of): a stream whose query found nothing is an empty table."""
    reg = soccer_registry()

    def rows(name: str) -> np.ndarray:
        return events[name] if name in events else np.zeros(0, reg.dtype([name]))

    return {**current_running_stream(rows("current_running")),
            **running_streams(rows("running_stats")),
            **possession_streams(rows("possession_stats"), rows("team_possession")),
            **heat_streams(rows("heat")), **shot_stream(rows("shot_ball"))}


def write_csv(streams: Mapping[str, np.ndarray], folder: Path) -> dict[str, str]:
    """Each stream as ``<name>.csv`` under ``folder``: a header of the challenge's
    column names, then one row per result."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, table in streams.items():
        path = folder / f"{name}.csv"
        with path.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(table.dtype.names or ())
            writer.writerows(table.tolist())
        paths[f"debs_{name}"] = str(path)
    return paths


def write_run(result: Any, folder: Path) -> dict[str, str]:
    """The challenge's streams of a replay (a
    :class:`~specula.pipelines.replay.ReplayResult`), as CSV files under ``folder``."""
    from specula.soccer.analytics import events_by_type

    return write_csv(challenge_streams(events_by_type(result.report, result.graph)), folder)
