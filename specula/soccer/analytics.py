"""What a coach reads after a run: per-team and per-player tables and heat maps, from
the net output of the soccer hierarchy with the DEBS 2013 queries.

The tables take each query's last report over the whole game (``window`` 0): possession
time and share (Q2), distance per intensity class (Q1), and the counts of hits, passes
and shots on goal the hierarchy detected. The heat maps are Q3's whole-game maps on the
16 x 25 grid, one panel per player on the pitch drawn to scale, one figure per team.

>>> from specula.soccer.debs2013 import Metadata
>>> teams, players = tables({}, Metadata.default())  # a run without the queries
>>> [(t["team"], t["possession"]) for t in teams], players
([('A', 0.0), ('B', 0.0)], [])
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from specula.soccer.debs2013 import Metadata
from specula.soccer.geometry import HEAT_GRIDS, INTENSITY_NAMES, PITCH_X, PITCH_Y

#: The types the tables, the maps and the challenge's streams read, as in the soccer
#: registry.
TYPES = ("current_running", "running_stats", "possession_stats", "team_possession", "heat",
         "hit", "pass", "shot", "shot_ball", "side")
#: The heat-map grid drawn (index in :data:`HEAT_GRIDS`): 16 x 25 cells of ~3 m.
HEAT_GRID = 1
TEAMS = ("A", "B")


def events_by_type(report, graph, types: Iterable[str] = TYPES) -> dict[str, np.ndarray]:
    """The net events of ``types`` a run produced, over all nodes, by type name."""
    out: dict[str, np.ndarray] = {}
    chosen = set(types)
    for name, node in graph.nodes.items():
        wanted = [t for t in node.outputs if t in chosen]
        if not wanted:
            continue
        net = report.net(name)
        for t in wanted:
            rows = net[net["type"] == graph.registry.id(t)]
            if len(rows):
                out[t] = rows if t not in out else np.concatenate([out[t], rows])
    return out


def _final(rows: np.ndarray, key: str) -> np.ndarray:
    """The last whole-game report per ``key`` (player or team)."""
    rows = rows[rows["window"] == 0]
    rows = rows[np.lexsort((rows["seq"], rows["ts"]))][::-1]
    _, first = np.unique(rows[key], return_index=True)
    return rows[first]


def tables(events: Mapping[str, np.ndarray], metadata: Metadata
           ) -> tuple[list[dict], list[dict]]:
    """Rows of the team table and of the player table (players who were seen)."""
    players = {p.id: p for p in metadata.players}
    seen: set[int] = set()
    per_player: dict[int, dict] = {}

    def row(pid: int) -> dict:
        if pid not in per_player:
            p = players.get(pid)
            per_player[pid] = {
                "player": p.name if p else f"player {pid}", "team": TEAMS[p.team] if p else "?",
                "possession_s": 0.0, "share": 0.0, "hits": 0, "passes": 0, "shots": 0,
                "distance_m": 0.0, **{f"{c}_m": 0.0 for c in INTENSITY_NAMES}}
        return per_player[pid]

    if "running_stats" in events:
        for r in _final(events["running_stats"], "player"):
            d = row(int(r["player"]))
            seen.add(int(r["player"]))
            for c in INTENSITY_NAMES:
                d[f"{c}_m"] = r[f"{c}_mm"] / 1e3
            d["distance_m"] = sum(d[f"{c}_m"] for c in INTENSITY_NAMES)
    if "possession_stats" in events:
        for r in _final(events["possession_stats"], "player"):
            d = row(int(r["player"]))
            d["possession_s"], d["share"] = r["us"] / 1e6, float(r["share"])
    for t, column in (("hit", "hits"), ("pass", "passes"), ("shot", "shots")):
        for pid in events.get(t, np.zeros(0, [("player", "i4")]))["player"].tolist():
            row(int(pid))[column] += 1
    team_rows = []
    final_team = _final(events["team_possession"], "team") \
        if "team_possession" in events else np.zeros(0, [("team", "i1")])
    for i, name in enumerate(TEAMS):
        mine = [d for d in per_player.values() if d["team"] == name]
        t = final_team[final_team["team"] == i]
        team_rows.append({
            "team": name, "possession": float(t["share"][0]) if len(t) else 0.0,
            "possession_s": t["us"][0] / 1e6 if len(t) else 0.0,
            **{c: sum(d[c] for d in mine) for c in ("hits", "passes", "shots")},
            "distance_km": sum(d["distance_m"] for d in mine) / 1e3})
    player_rows = sorted(per_player.values(), key=lambda d: (d["team"], d["player"]))
    return team_rows, player_rows


def format_tables(teams: list[dict], players: list[dict]) -> str:
    """The two tables as text, for the terminal."""
    lines = [f"{'team':<8} {'possession':>10} {'time (s)':>9} {'hits':>5} {'passes':>6} "
             f"{'shots':>5} {'distance (km)':>13}"]
    for t in teams:
        lines.append(f"{t['team']:<8} {t['possession']:>10.0%} {t['possession_s']:>9.1f} "
                     f"{t['hits']:>5} {t['passes']:>6} {t['shots']:>5} "
                     f"{t['distance_km']:>13.2f}")
    classes = " ".join(f"{c:>8}" for c in INTENSITY_NAMES)
    lines += ["", f"{'player':<20} {'team':>4} {'poss. (s)':>9} {'share':>6} {'hits':>5} "
              f"{'passes':>6} {'dist. (m)':>9}  {classes}  (m per intensity)"]
    for p in players:
        per_class = " ".join(f"{p[f'{c}_m']:>8.0f}" for c in INTENSITY_NAMES)
        lines.append(f"{p['player'][:20]:<20} {p['team']:>4} {p['possession_s']:>9.1f} "
                     f"{p['share']:>6.0%} {p['hits']:>5} {p['passes']:>6} "
                     f"{p['distance_m']:>9.0f}  {per_class}")
    if not players:
        lines.append("(no player reports: the graph ran without the DEBS 2013 queries)")
    return "\n".join(lines)


def write_tables(teams: list[dict], players: list[dict], folder: Path) -> dict[str, str]:
    """``teams.csv`` and ``players.csv`` under ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, rows in (("teams", teams), ("players", players)):
        path = folder / f"{name}.csv"
        with path.open("w", newline="") as f:
            if rows:
                writer = csv.DictWriter(f, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
        paths[f"table_{name}"] = str(path)
    return paths


def write_heat_maps(heat: np.ndarray | None, metadata: Metadata, folder: Path,
                    sides: np.ndarray | None = None) -> dict[str, str]:
    """One PNG per team (:func:`heat_map_figure`) under ``folder``. Nothing without
    ``heat`` events."""
    if heat is None or not len(heat):
        return {}
    import matplotlib.pyplot as plt

    paths = {}
    for i, team in enumerate(TEAMS):
        fig = heat_map_figure(heat, metadata, i, sides)
        if fig is None:
            continue
        path = folder / f"heat_team_{team}.png"
        folder.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths[f"heat_team_{team}"] = str(path)
    return paths


def heat_map_figure(heat: np.ndarray, metadata: Metadata, team: int,
                    sides: np.ndarray | None = None):
    """Each player's whole-game heat map (seconds per cell of the :data:`HEAT_GRID`
    grid) of team ``team``, one panel per player on the pitch drawn to scale, one colour
    scale for the team (so panels compare), an arrow towards the goal the team attacks
    from its ``side`` events (one per spell: the teams change ends). None if no player
    of the team has a map."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    from specula.soccer.queries import heat_table

    ids = sorted({int(p) for p in heat["player"][heat["team"] == team]})
    if not ids:
        return None
    maps = {pid: heat_table(heat, pid, 0, HEAT_GRID) / 1e6 for pid in ids}
    top = max(float(m.max()) for m in maps.values()) or 1.0
    players = {p.id: p for p in metadata.players}
    attacked = attacked_goals(sides, team)
    cols = min(len(ids), 4)
    rows = -(-len(ids) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.3 * cols + 1.0, 2.9 * rows + 0.4),
                             squeeze=False, layout="constrained")
    for ax in axes.flat:
        ax.set_axis_off()
    images = [_heat_panel(ax, maps[pid], top, attacked,
                          _player_title(players.get(pid), pid))
              for ax, pid in zip(axes.flat, ids, strict=False)]
    fig.colorbar(images[0], ax=axes, shrink=0.6, label="seconds in the cell (square-root scale)")
    cells = f"{HEAT_GRIDS[HEAT_GRID][0]} x {HEAT_GRIDS[HEAT_GRID][1]}"
    fig.suptitle(f"team {TEAMS[team]}: time per cell ({cells} grid), whole game; "
                 + _direction_caption(attacked), fontsize=10)
    return fig


def _heat_panel(ax, seconds: np.ndarray, top: float, attacked: list[int], title: str):
    """One player's map on the pitch: cells he never was in left out (the grass shows),
    the colour scale the team's (square root, so short stays show beside the keeper's
    long ones), the direction of play beside it. Returns the image."""
    from matplotlib.colors import PowerNorm

    from specula.soccer.pitch_plot import draw_direction, draw_pitch

    ax.set_axis_on()
    draw_pitch(ax)
    image = ax.imshow(np.ma.masked_equal(seconds, 0.0), origin="lower",
                      extent=(*PITCH_X, *PITCH_Y), cmap="YlOrRd",
                      norm=PowerNorm(0.5, vmin=0.0, vmax=top), zorder=2,
                      interpolation="nearest")
    draw_direction(ax, attacked)
    ax.set_title(title, fontsize=8)
    return image


def attacked_goals(sides: np.ndarray | None, team: int) -> list[int]:
    """The goals (index in :data:`~specula.soccer.geometry.GOALS`) ``team`` attacked,
    one per spell in time order, from the ``side`` events (the goal each team
    defends); empty without them."""
    if sides is None or not len(sides):
        return []
    own = sides[sides["team"] == team]
    own = own[np.lexsort((own["seq"], own["ts"]))]
    spells: list[int] = []
    for defended in own["goal"]:
        if not spells or spells[-1] != 1 - int(defended):
            spells.append(1 - int(defended))
    return spells


def _direction_caption(attacked: list[int]) -> str:
    """Words for the arrows: where the team attacked, spell by spell."""
    if not attacked:
        return "direction of play unknown"
    ways = ["up" if g == 0 else "down" for g in attacked]
    return "attacks " + ", then ".join(ways)


def _player_title(player, pid: int) -> str:
    """A panel's title: the player's name on at most two lines, (GK) for a keeper."""
    if player is None:
        return f"player {pid}"
    name = player.name + (" (GK)" if player.goalkeeper else "")
    if len(name) > 20 and " " in name:
        first, rest = name.split(" ", 1)
        name = f"{first}\n{rest}"
    return name


def coach_tables(result: Any, out: Path, plots: bool) -> None:
    """Print the team and player tables of a replay (a
    :class:`~specula.pipelines.replay.ReplayResult`) with the DEBS 2013 queries, write
    them as CSV under ``out/tables`` and, with ``plots``, the heat maps under
    ``out/plots``."""
    events = events_by_type(result.report, result.graph)
    if not {"running_stats", "team_possession"} & set(events):
        return
    metadata = result.truth.metadata if result.truth is not None else Metadata.default()
    teams, players = tables(events, metadata)
    print(format_tables(teams, players))
    write_tables(teams, players, out / "tables")
    if plots:
        write_heat_maps(events.get("heat"), metadata, out / "plots", events.get("side"))
