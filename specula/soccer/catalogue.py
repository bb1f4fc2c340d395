"""The catalogue of the soccer domain's event types and of a generated match's truth, as
``docs/soccer.md`` prints it.

Everything a detector writer looks up is read from the code: the types and their
fields' dtypes from :func:`~specula.soccer.types.soccer_registry`, who emits and who
reads each type from the whole hierarchy (:func:`~specula.soccer.graph.soccer_graph`
with the queries), the truth's records from their dtypes
(:class:`~specula.soccer.match.GroundTruth`). Only what a type, field or record means
is written here, and :func:`catalogue` refuses one without a meaning, so a new type
cannot reach the docs unexplained. The doc holds the generated text between markers
(:func:`update`); ``tests/soccer/test_catalogue.py`` fails when it is stale::

    python -m specula.soccer.catalogue                          # print it
    python -m specula.soccer.catalogue --write docs/soccer.md   # update the doc

Examples
--------
>>> events = catalogue()["events"]
>>> "| `ball_out` | `ball_in_play` (`BallInPlay`, level 1) |" in events
True
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from specula.detectors.graph import Graph
from specula.events import fields_of
from specula.soccer.geometry import INTENSITY_NAMES
from specula.soccer.graph import soccer_graph
from specula.soccer.match.truth import (
    BOUNCE_DTYPE,
    KICK_DTYPE,
    OUT_DTYPE,
    PASS_DTYPE,
    SHOT_DTYPE,
    SUBSTITUTION_DTYPE,
)
from specula.soccer.types import PLAY_STOP_DTYPE, SOURCES

__all__ = ["MARKERS", "catalogue", "update"]

#: What each type is, and what its key names.
TYPES: dict[str, tuple[str, str]] = {
    "ball": ("a ball's sensor", "a reading of a ball, ~2,000 a second per ball; every ball "
             "transmits: the one in play and the spares lying beside the pitch"),
    "player": ("the sensor", "a reading of a sensor a player wears (one per leg, and per "
               "arm for goalkeepers), ~200 a second"),
    "referee": ("the sensor", "a reading of a sensor the referee wears (`player` and `team` "
                "-1)"),
    "interruption_begin": ("0", "the referee stops play (no payload)"),
    "interruption_end": ("0", "play goes on after an interruption (no payload)"),
    "ball_in": ("the ball", "play restarts with this ball: it was kicked inside the pitch (a "
                "dead ball carried back is not in play), or, after the referee's "
                "`interruption_end`, thrown in; where it was read"),
    "ball_out": ("the ball", "the ball in play crossed a touch or goal line, or the referee "
                 "stopped play (`interruption_begin`); where it was last read"),
    "peak": ("the ball", "a ball's acceleration rose above 55 m/s² (a kick or a bounce): the "
             "strongest reading of the excursion, generated when it falls again"),
    "intensity": ("the player", "a player's running intensity class changed, by the speed of "
                  "his left leg"),
    "near": ("the player", "the ball in play came within 1 m of one of the player's feet; "
             "`closest`: his foot is the nearest of those within 1 m (a player already near "
             "gets another `near` when he becomes the closest)"),
    "not_near": ("the player", "the ball in play left the 1 m around all of the player's feet, "
                 "or stopped being the ball in play (`dist` -1)"),
    "hit": ("the player", "the player hit the ball in play: a `peak` of that ball while he was "
            "near it (the closest foot's player); the peak's acceleration and position"),
    "possession": ("the player (-1: nobody)", "who has the ball changed: from a player's hit "
                   "until another player's hit, or until the ball goes out"),
    "pass": ("the passer", "a hit, then the next hit by a teammate within 10 s, no "
             "`ball_out` between: `ts` the first hit's, `receiver` the teammate, `received` "
             "his hit's time"),
    "interception": ("the passer", "a hit, then the next hit by an opponent within 10 s, no "
                     "`ball_out` between: `ts` the first hit's, `receiver` the interceptor, "
                     "`received` his hit's time"),
    "double_pass": ("the first passer", "a pass from A to B, then B's pass back to A within "
                    "5 s: `ts` the first pass's, `receiver` B, `received` when A got the ball "
                    "back"),
    "shot": ("the shooter", "DEBS 2013 query 4: after a hit, the ball's projected path reaches "
             "the goal the hitter's team attacks within 1.5 s: `ts` the hit's, `goal` the "
             "goal aimed at, `eta` the expected arrival"),
    "shot_ball": ("the ball", "each reading of a hit's ball while it heads for goal (DEBS 2013 "
                  "query 4's output: from the first whose straight line enters the goal "
                  "within 1.5 s of the hit until one whose line no longer does within 1.5 s, "
                  "the next hit, or the ball leaving the pitch): the hitter and the "
                  "reading's fields"),
    "side": ("the team", "which goal a team defends, from where its goalkeeper stands; again "
             "after the change of ends"),
    "blocked_shot": ("the shooter", "a shot, then a hit by an opponent before the ball "
                     "reaches the goal: `ts` the shot's, `receiver` the blocker, `received` "
                     "his hit's time"),
    "combination_shot": ("the first passer", "a double pass, then a shot of the same team "
                         "within 10 s: `ts` the double pass's, `receiver` the shooter, "
                         "`received` the shot's time"),
    "running_stats": ("the player", "DEBS 2013 query 1, every second and at the end: per "
                      "player and window, time and distance in each intensity class"),
    "current_running": ("the player", "DEBS 2013 query 1's current running statistics: a "
                        "run of one intensity class (the one-second rule decided) from "
                        "`since` to `until` without a gap, the distance run in it; at the "
                        "first report after it ends"),
    "possession_stats": ("the player", "DEBS 2013 query 2, every second and at the end: per "
                         "player and window, possession time, hits and share"),
    "team_possession": ("the team", "DEBS 2013 query 2, every second and at the end: per team "
                        "and window, possession time and share"),
    "heat": ("the player", "DEBS 2013 query 3, every second and at the end: per player, "
             "window, grid and cell whose time changed, its new time (`heat_table` turns "
             "them into a map)"),
}

#: What each payload field means, in the units of DEBS 2013. A field name has one dtype
#: in a registry; where its meaning depends on the type, the type's row says how.
FIELDS: dict[str, str] = {
    "x": "position across the pitch, mm (the pitch: x in [0, 52,483])",
    "y": "position along the pitch, mm (y in [-33,960, 33,965]; goal 0 on the +y side)",
    "z": "height, mm",
    "v": "speed, µm/s (1 m/s = 1,000,000)",
    "a": "acceleration, µm/s² (a kick: above 55,000,000)",
    "vx": "direction of `v`, scaled to length 10,000",
    "vy": "direction of `v`, scaled to length 10,000",
    "vz": "direction of `v`, scaled to length 10,000",
    "ax": "direction of `a`, scaled to length 10,000",
    "ay": "direction of `a`, scaled to length 10,000",
    "az": "direction of `a`, scaled to length 10,000 (a bounce on the ground points up)",
    "player": "player id: index in the metadata; -1 the referee, or nobody",
    "team": "0 team A, 1 team B; -1 the referee, or nobody",
    "limb": "0 left leg, 1 right leg, 2 left arm, 3 right arm",
    "speed": "speed, mm/s",
    "level": "intensity class: 0 standing, 1 trot, 2 low, 3 medium, 4 high, 5 sprint",
    "ball": "the ball's sensor id",
    "dist": "distance from the ball to the nearest foot, mm (-1: the ball left play)",
    "closest": "this player's foot is the nearest to the ball of those within 1 m",
    "since": "time stamp (ps) from which it holds",
    "receiver": "player id of the one who touched the ball next (see the type)",
    "received": "time stamp (ps) of that touch (see the type)",
    "goal": "goal index: 0 on the +y side, 1 on the -y side (`geometry.GOALS`)",
    "eta": "time stamp (ps) the ball is expected at the goal line",
    "window": "the window's length in s; 0 the whole game (all play so far)",
    "us": "time, µs",
    "hits": "number of hits",
    "until": "time stamp (ps) up to which it holds",
    "mm": "distance, mm",
    "share": "share of the window's possession time, 0 to 1",
    "grid": "heat-map grid: 0 8 x 13, 1 16 x 25, 2 32 x 50, 3 64 x 100 cells",
    "col": "cell column, across x",
    "row": "cell row, along y",
    **{f"{c}_us": f"time in class {c}, µs" for c in INTENSITY_NAMES},
    **{f"{c}_mm": f"distance in class {c}, mm" for c in INTENSITY_NAMES},
}

#: The truth's records (:class:`~specula.soccer.match.GroundTruth` attributes): their
#: dtype, what a row is, and what each field means. Times are sensor picoseconds.
TRUTH: dict[str, tuple[np.dtype, str, dict[str, str]]] = {
    "kicks": (KICK_DTYPE, "a contact that gives the ball a velocity pulse, or a reception "
              "that peaks above 55 m/s² (most are softer, and none)", {
                  "ts": "the pulse's centre, where the ball's acceleration peaks",
                  "player": "the kicker", "team": "his team",
                  "kind": "0 pass, 1 shot, 2 dribble touch, 3 clearance or out, 4 a hard "
                          "reception"}),
    "passes": (PASS_DTYPE, "a kick of kind 0 (passes never leave the pitch)", {
        "ts_kick": "the kick's `ts`", "ts_receive": "when the player who gets it meets it",
        "from_player": "the passer", "to_player": "the teammate it reached, or was aimed at",
        "team": "the passer's team", "successful": "1 a teammate got it, 0 an opponent",
        "interceptor": "the opponent who got it, or -1"}),
    "shots": (SHOT_DTYPE, "a kick of kind 1, at the goal the kicker's team attacks", {
        "ts": "the kick", "player": "the shooter", "team": "his team",
        "goal": "the goal attacked", "on_target": "1: its free path crosses the goal line "
        "between the posts and under the bar", "blocked": "1: a player of the other team "
        "stopped it first", "blocker": "that player, or -1", "scored": "1: it went in",
        "ts_end": "the block, or the ball crossing the goal line; -1 neither",
        "ts_line": "when the free path crosses the goal line, -1 never (a shot on goal of "
        "DEBS query 4: on target, and within 1.5 s of the kick)"}),
    "out_of_play": (OUT_DTYPE, "the ball in play's centre leaving the pitch, goals included",
                    {"ts": "when it crosses the line (every reading before is inside)",
                     "x": "where, mm", "y": "where, mm", "z": "where, mm",
                     "line": "0 touch line, 1 goal line",
                     "goal": "the goal it went into, or -1",
                     "ts_restart": "the restart kick, or -1 if after the simulated time"}),
    "bounces": (BOUNCE_DTYPE, "an impact of the ball: on the ground in play, on the ground "
                "or the boards out of play until picked up (a peak, but no kick)", {
        "ts": "the impact's 1 ms step", "x": "where, mm", "y": "where, mm"}),
    "substitutions": (SUBSTITUTION_DTYPE, "a player going off and a substitute coming on "
                      "(`paper` profile)", {
                          "ts": "when the ball went out", "team": "the team",
                          "off": "who went off", "on": "who came on (he plays from when he "
                          "is on the pitch)"}),
    "interruptions": (PLAY_STOP_DTYPE, "the referee's interruptions: from each ball out to "
                      "0.5 s before the restart kick", {
                          "begin_ts": "the ball went out (`interruption_begin`)",
                          "end_ts": "the whistle (`interruption_end`); -1 if play had not "
                          "restarted by the end"}),
}

#: The marker lines around each generated block of the doc.
MARKERS = ("<!-- generated: {name} (python -m specula.soccer.catalogue --write docs/soccer.md)"
           " -->", "<!-- end generated: {name} -->")


def catalogue() -> dict[str, str]:
    """The generated blocks of the doc, by name: ``events`` (the types, who emits and who
    reads them, their fields) and ``truth`` (a generated match's truth records).

    Raises
    ------
    KeyError
        For a registered type, field or truth record that has no meaning here.
    """
    return {"events": _events(soccer_graph(queries=True)), "truth": _truth()}


def update(text: str, blocks: Mapping[str, str] | None = None) -> str:
    """``text`` with each generated block (default: :func:`catalogue`) put between its
    markers; a ValueError names a block whose markers are missing."""
    for name, body in (catalogue() if blocks is None else blocks).items():
        begin, end = (m.format(name=name) for m in MARKERS)
        pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise ValueError(f"the doc lacks the markers of block {name!r}: a line {begin} "
                             f"and, after it, a line {end}")
        block = f"{begin}\n{body}{end}"

        def literal(_: re.Match[str], block: str = block) -> str:  # block is no pattern
            return block

        text = pattern.sub(literal, text)
    return text


def _events(graph: Graph) -> str:
    reg, levels = graph.registry, graph.levels()
    missing = [t.name for t in reg.types() if t.name not in TYPES]
    missing += [f for t in reg.types() for f in t.field_names if f not in FIELDS]
    if missing:
        raise KeyError(f"no meaning in specula/soccer/catalogue.py for {sorted(set(missing))}")

    def nodes(names: Sequence[str]) -> str:
        return ", ".join(f"`{n}` (`{type(graph.nodes[n].detector).__name__}`, level "
                         f"{levels[n]})" for n in names) or "—"

    def readers(t: str) -> list[str]:
        return [n.name for n in graph.nodes.values() if t in n.inputs]

    raw = [t for t in reg.types() if t.name in SOURCES]
    made = [t for t in reg.types() if t.name not in SOURCES]
    lines = ["Raw types: what enters a graph (`soccer_registry()`, `types.SOURCES`).", "",
             "| type | key | what it is | fields | read by |", "|---|---|---|---|---|"]
    for t in raw:
        key, what = TYPES[t.name]
        lines.append(f"| `{t.name}` | {key} | {what} | {_names(t.field_names)} | "
                     f"{nodes(readers(t.name))} |")
    lines += ["", "Generated types: what the detectors of `soccer_graph(queries=True)` emit.",
              "", "| type | emitted by | key | what it is | fields | read by |",
              "|---|---|---|---|---|---|"]
    for t in made:
        key, what = TYPES[t.name]
        lines.append(f"| `{t.name}` | {nodes([n.name for n in graph.producers_of(t.name)])} "
                     f"| {key} | {what} | {_names(t.field_names)} | "
                     f"{nodes(readers(t.name))} |")
    used = {f: d for t in reg.types() for f, d in t.fields}
    lines += ["", "Fields: a name has one dtype in the registry; `ts` is in picoseconds "
              "(`ticks_per_second = 10**12`).", "", "| field | dtype | meaning |",
              "|---|---|---|"]
    lines += [f"| `{f}` | {d.name} | {FIELDS[f]} |" for f, d in used.items()]
    return "\n".join(lines) + "\n"


def _truth() -> str:
    lines = ["| record | one row per | field | dtype | meaning |", "|---|---|---|---|---|"]
    for record, (dtype, row, meanings) in TRUTH.items():
        names = fields_of(dtype)
        if set(meanings) != set(names):
            raise KeyError(f"the meanings of truth record {record!r} in "
                           f"specula/soccer/catalogue.py are for {sorted(meanings)}, its "
                           f"fields are {sorted(names)}")
        for i, name in enumerate(names):
            head = f"`{record}` | {row}" if i == 0 else " | "
            lines.append(f"| {head} | `{name}` | {dtype[name].name} | {meanings[name]} |")
    return "\n".join(lines) + "\n"


def _names(fields: Sequence[str]) -> str:
    return ", ".join(f"`{f}`" for f in fields) or "—"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the catalogue, or ``--write`` it into a doc between its markers."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", type=Path, metavar="DOC",
                   help="update the generated blocks of DOC (docs/soccer.md) in place")
    args = p.parse_args(argv)
    if args.write is None:
        print("\n".join(catalogue().values()), end="")
        return 0
    args.write.write_text(update(args.write.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
