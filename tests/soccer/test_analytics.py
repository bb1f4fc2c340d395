"""The coach's tables and heat maps, from a generated match through the hierarchy with
the DEBS 2013 queries."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from specula import InProcessRuntime
from specula.soccer import analytics
from specula.soccer.geometry import INTENSITY_NAMES
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match
from specula.soccer.queries import heat_table

pytestmark = pytest.mark.slow  # a generated match through the whole hierarchy

SECONDS = 12


@pytest.fixture(scope="module")
def run():
    match = generate_match(SECONDS, profile="debs2013", seed=2)
    graph = soccer_graph(alpha=1.0, queries=True)
    report = InProcessRuntime(graph).run(match.events, step_ticks=100 * 10**9)
    return match, analytics.events_by_type(report, graph)


def test_the_tables_are_the_queries_last_whole_game_reports(run):
    match, events = run
    teams, players = analytics.tables(events, match.metadata)
    names = {p.name: p for p in match.metadata.players}
    assert {p["player"] for p in players} <= set(names)
    assert len(players) == len({int(p) for p in events["running_stats"]["player"]})
    for p in players:
        assert p["distance_m"] == pytest.approx(sum(p[f"{c}_m"] for c in INTENSITY_NAMES))
        assert 0 < p["distance_m"] < 12 * SECONDS  # nobody runs faster than 12 m/s
        pid = names[p["player"]].id
        assert p["hits"] == int(np.count_nonzero(events["hit"]["player"] == pid))
        assert 0.0 <= p["share"] <= 1.0
    possessed = sum(t["possession_s"] for t in teams)
    assert possessed > 0
    assert sum(t["possession"] for t in teams) == pytest.approx(1.0)
    for t in teams:  # a team's time is its players' time
        assert t["possession_s"] == pytest.approx(
            sum(p["possession_s"] for p in players if p["team"] == t["team"]), abs=1e-3)
        assert t["passes"] == sum(p["passes"] for p in players if p["team"] == t["team"])
    text = analytics.format_tables(teams, players)
    assert all(p["player"][:20] in text for p in players)


def test_heat_maps_are_written_per_team_and_hold_each_players_time(run, tmp_path):
    match, events = run
    paths = analytics.write_heat_maps(events["heat"], match.metadata, tmp_path)
    assert sorted(paths) == ["heat_team_A", "heat_team_B"]
    for path in paths.values():
        assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        pixels = plt.imread(path)[..., :3].reshape(-1, 3)
        assert len(np.unique(pixels, axis=0)) > 20  # grass, lines, heat: not blank
    # each player's whole-game map holds the time he was on the pitch: the match
    for pid in sorted({int(p) for p in events["heat"]["player"]})[:4]:
        seconds = heat_table(events["heat"], pid, 0, analytics.HEAT_GRID).sum() / 1e6
        assert SECONDS - 0.5 < seconds <= SECONDS + 1e-3, (pid, seconds)
    # the teams attack opposite goals, and no title runs into another title or panel
    attacked = [analytics.attacked_goals(events["side"], team) for team in (0, 1)]
    assert len(attacked[0]) == 1 and attacked[0] != attacked[1]
    fig = analytics.heat_map_figure(events["heat"], match.metadata, 0, events["side"])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.get_title()]
    boxes = [ax.title.get_window_extent(renderer) for ax in panels]
    for i, box in enumerate(boxes):
        assert not any(box.overlaps(other) for other in boxes[i + 1:])
        assert not any(box.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)
    plt.close(fig)
    csvs = analytics.write_tables(*analytics.tables(events, match.metadata), tmp_path)
    header = Path(csvs["table_players"]).read_text().splitlines()[0].split(",")
    assert header[:3] == ["player", "team", "possession_s"]
