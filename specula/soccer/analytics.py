"""What a coach reads after a run: per-team and per-player tables and heat maps, from
the net output of the soccer hierarchy with the DEBS 2013 queries.

The tables take each query's last report over the whole game (``window`` 0): possession
time and share (Q2), distance per intensity class (Q1), and the counts of hits, passes
and shots on goal the hierarchy detected. The heat maps are Q3's whole-game maps on the
16 x 25 grid, one panel per player, one figure per team.

>>> from specula.soccer.debs2013 import Metadata
>>> teams, players = tables({}, Metadata.default())  # a run without the queries
>>> [(t["team"], t["possession"]) for t in teams], players
([('A', 0.0), ('B', 0.0)], [])
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from specula.soccer.debs2013 import Metadata
from specula.soccer.geometry import HEAT_GRIDS, INTENSITY_NAMES, PITCH_X, PITCH_Y

#: The types the tables, the maps and the challenge's streams read, as in the soccer
#: registry.
TYPES = ("current_running", "running_stats", "possession_stats", "team_possession", "heat",
         "hit", "pass", "shot", "shot_ball")
#: The heat-map grid drawn (index in :data:`HEAT_GRIDS`): 16 x 25 cells of ~3 m.
HEAT_GRID = 1
TEAMS = ("A", "B")


def events_by_type(report, graph) -> dict[str, np.ndarray]:
    """The net events of :data:`TYPES` a run produced, over all nodes, by type name."""
    out: dict[str, np.ndarray] = {}
    for name, node in graph.nodes.items():
        wanted = [t for t in node.outputs if t in TYPES]
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


def write_heat_maps(heat: np.ndarray | None, metadata: Metadata, folder: Path
                    ) -> dict[str, str]:
    """One PNG per team: each player's whole-game heat map (seconds per cell) on the
    :data:`HEAT_GRID` grid, the pitch drawn to scale. Nothing without ``heat`` events."""
    if heat is None or not len(heat):
        return {}
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from specula.soccer.queries import heat_table

    paths = {}
    extent = (*PITCH_X, *PITCH_Y)
    for i, team in enumerate(TEAMS):
        ids = sorted({int(p) for p in heat["player"][heat["team"] == i]})
        if not ids:
            continue
        names = {p.id: p.name for p in metadata.players}
        cols = min(len(ids), 6)
        rows = -(-len(ids) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(2.2 * cols, 3.0 * rows), squeeze=False)
        for ax in axes.flat:
            ax.set_axis_off()
        for ax, pid in zip(axes.flat, ids, strict=False):
            table = heat_table(heat, pid, 0, HEAT_GRID) / 1e6
            ax.imshow(table, origin="lower", extent=extent, cmap="hot", aspect="equal")
            ax.set_title(names.get(pid, f"player {pid}")[:18], fontsize=8)
        fig.suptitle(f"team {team}: time per {HEAT_GRIDS[HEAT_GRID][0]} x "
                     f"{HEAT_GRIDS[HEAT_GRID][1]} cell, whole game")
        fig.tight_layout()
        path = folder / f"heat_team_{team}.png"
        folder.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=90)
        plt.close(fig)
        paths[f"heat_team_{team}"] = str(path)
    return paths


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
        write_heat_maps(events.get("heat"), metadata, out / "plots")
