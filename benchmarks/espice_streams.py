"""The generated streams of ``benchmarks/shedding.py``: eSPICE's soccer Q1 and stock Q2-Q4.

Each stream is a time-ordered batch of a registry of its own (one type per (object,
role): what eSPICE's UT has a row for) with ``ts``, ``type``, ``key`` and ``seq`` set;
``ats`` is left to the benchmark, which replays it at a chosen rate.

- **Soccer (Q1)**, from the match generator (:func:`specula.soccer.match.generate_match`,
  the DEBS 2013 set-up: 16 players, the referee, the ball in play). The paper keeps one
  reading per object per second; we keep ``hz`` per second (2 by default). Each team has
  one striker (the outfield player of his team who kicks most; the paper's "two players
  as strikers, one from each team"). Per reading: ``STR<t>`` when it starts a possession
  of team ``t``'s striker (the ball within ``possess_m``, 3 m, of him, and not at his
  previous reading): one window per possession; ``DF<p>`` when player ``p`` is within
  ``defend_m`` (15 m) of the other team's striker (the defend event of the paper's Q1;
  only a player of the team *opposing* the window's striker counts there, which Q1's
  pattern says per opener type: :func:`q1_opponents`); else ``P<p>``; and ``BALL``,
  ``REF``. Whether a reading defends is the operator's business (a distance it computes
  while matching): :func:`soccer_sources` gives the shedders the player only (``O<p>``).
- **Stock (Q2-Q4)**, an intraday quote stream of 500 symbols, one quote per symbol per
  minute in symbol order (a feed sorted by ticker), as in the paper's NYSE data set. A
  minute's moves follow one market factor: symbol ``s`` rises (``RE<s>``) when
  ``beta * m + sqrt(1 - beta^2) * e_s > 0``, else falls (``FE<s>``), with ``m`` and
  ``e_s`` standard normal. Symbols 0-4 are the leading ones (MLE).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specula.events import TypeRegistry
from specula.shedding import WindowDetector

PS = 10**12  # soccer ticks per second
SYMBOLS = 500
LEADERS = 5


@dataclass(frozen=True)
class SoccerStream:
    """Q1's stream: its registry, events and input type names; the defend types of each
    team's players (``defenders[t]``: team ``t``'s)."""

    registry: TypeRegistry
    events: np.ndarray
    names: list[str]
    defenders: tuple[tuple[str, ...], tuple[str, ...]]


def soccer_stream(seconds: float, seed: int, *, hz: float = 2.0,
                  defend_m: float = 15.0, possess_m: float = 3.0) -> SoccerStream:
    """Q1's stream from a generated match (the module docstring)."""
    from specula.soccer.match import generate_match

    match = generate_match(seconds, seed=seed)
    ev, meta = match.events, match.metadata
    t0, t1 = int(ev["ts"][0]), int(ev["ts"][-1])
    grid = np.arange(t0, t1, int(PS / hz))
    order = np.argsort(ev["key"], kind="stable")
    keys, starts = np.unique(ev["key"][order], return_index=True)
    ends = np.r_[starts[1:], len(order)]

    def readings(sid: int) -> np.ndarray:
        k = int(np.searchsorted(keys, sid))
        rows = ev[order[starts[k]:ends[k]]]  # this sensor's readings, in time order
        i = np.searchsorted(rows["ts"], grid)
        return rows[i[i < len(rows)]]

    ball = readings(match.profile.ball_in_play)
    players = [p for p in meta.players]
    own = {p.id: readings(p.sensors[0]) for p in players}

    def at(rows: np.ndarray, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        j = np.clip(np.searchsorted(rows["ts"], ts), 0, len(rows) - 1)
        return rows["x"][j], rows["y"][j]

    kicks = np.bincount(match.truth.kicks["player"], minlength=len(players))
    striker = {}
    for team in (0, 1):
        field = [p.id for p in players if p.team == team and not p.goalkeeper]
        striker[team] = max(field, key=lambda i: kicks[i])
    names = ["STR0", "STR1", "BALL", "REF"] + [f"DF{p.id}" for p in players] + \
        [f"P{p.id}" for p in players]
    reg = TypeRegistry(ticks_per_second=PS)
    for n in names:
        reg.register(n)
    WindowDetector.register_output(reg, "q1")
    parts = []
    for p in players:
        rows = own[p.id]
        out = np.zeros(len(rows), reg.dtype(names))
        out["ts"], out["key"] = rows["ts"], p.id
        sx, sy = at(own[striker[1 - p.team]], rows["ts"])
        defends = np.hypot(rows["x"] - sx, rows["y"] - sy) < defend_m * 1_000
        kind = np.where(defends, reg.id(f"DF{p.id}"), reg.id(f"P{p.id}"))
        if p.id == striker[p.team]:
            bx, by = at(ball, rows["ts"])
            near = np.hypot(rows["x"] - bx, rows["y"] - by) < possess_m * 1_000
            kind = np.where(near & ~np.r_[False, near[:-1]], reg.id(f"STR{p.team}"), kind)
        out["type"] = kind
        parts.append(out)
    for name, rows in (("BALL", ball), ("REF", readings(meta.referee[0]))):
        out = np.zeros(len(rows), reg.dtype(names))
        out["ts"], out["key"], out["type"] = rows["ts"], -1, reg.id(name)
        parts.append(out)
    events = np.concatenate(parts)
    events = events[np.argsort(events["ts"], kind="stable")]
    events["seq"] = np.arange(len(events))
    defenders = tuple(tuple(f"DF{p.id}" for p in players if p.team == t) for t in (0, 1))
    return SoccerStream(reg, events, names, (defenders[0], defenders[1]))


def q1_opponents(stream: SoccerStream) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Q1's types per opener: a window opened by team ``t``'s striker counts the defend
    events of the other team's players only (``AnyOf(per_opener=...)``)."""
    return (("STR0", stream.defenders[1]), ("STR1", stream.defenders[0]))


def soccer_sources(names: list[str]) -> dict[str, str]:
    """What a shedder sees of Q1's types: the player a reading comes from (``DF<p>`` and
    ``P<p>`` are the class ``O<p>``). Whether a reading is a defend event is a distance
    the operator computes while matching (the paper's Q1); a shedder decides before it."""
    return {n: f"O{n[2:] if n.startswith('DF') else n[1:]}" for n in names
            if n.startswith(("DF", "P"))}


def stock_stream(minutes: int, seed: int, *, beta: float = 0.8
                 ) -> tuple[TypeRegistry, np.ndarray, tuple[str, ...]]:
    """Q2-Q4's quote stream: (registry, events, type names); ts in microseconds."""
    rng = np.random.default_rng(seed)
    names = tuple([f"RE{s}" for s in range(SYMBOLS)] + [f"FE{s}" for s in range(SYMBOLS)])
    reg = TypeRegistry(ticks_per_second=1e6)
    for n in names:
        reg.register(n)
    for q in ("q2", "q3", "q4"):
        WindowDetector.register_output(reg, q)
    market = rng.standard_normal((minutes, 1))
    moves = beta * market + np.sqrt(1 - beta**2) * rng.standard_normal((minutes, SYMBOLS))
    symbol = np.tile(np.arange(SYMBOLS), minutes)
    rises = moves.ravel() > 0
    events = np.zeros(minutes * SYMBOLS, reg.dtype(list(names)))
    # ids: RE<s> is registered s-th, FE<s> (SYMBOLS + s)-th
    events["type"] = np.where(rises, reg.id("RE0") + symbol, reg.id("FE0") + symbol)
    minute = np.repeat(np.arange(minutes), SYMBOLS)
    events["ts"] = minute * 60_000_000 + symbol * (60_000_000 // SYMBOLS)
    events["key"] = symbol
    events["seq"] = np.arange(len(events))
    return reg, events, names
