"""The soccer detector hierarchy: 16 detectors on 6 levels.

    level 1  BallInPlay (ball, interruptions), AccelerationPeak (ball), RunningIntensity (player)
             TeamSides                           (player: the goalkeepers)
             RunningAnalysis, HeatMap  (player, interruptions)       DEBS 2013 Q1, Q3
    level 2  BallNearFoot                        (player, ball, ball_in, ball_out)
    level 3  PlayerHitsBall                      (near, not_near, peak; ball clock) - A!BC
    level 4  BallPossession, Pass, Interception  (hit, ball_out)
             ShotOnGoal (hit, ball, side)        DEBS 2013 Q4
             PossessionStats                     (hit, ball_in, ball_out; ball clock) Q2
    level 5  DoublePass (pass)                   BlockedShot (shot, hit)
    level 6  CombinationShot                     (double_pass, shot)
"""

from __future__ import annotations

from specula.detectors.graph import Alpha, Graph
from specula.options import k0_of_ms
from specula.ordering.unit import RetractionMode
from specula.soccer.ball import AccelerationPeak, BallInPlay
from specula.soccer.debs2013.metadata import Metadata
from specula.soccer.play import (
    BallPossession,
    DoublePass,
    Interception,
    Pass,
    PlayerHitsBall,
)
from specula.soccer.players import BallNearFoot, RunningIntensity
from specula.soccer.queries import HeatMap, PossessionStats, RunningAnalysis
from specula.soccer.shots import BlockedShot, CombinationShot, ShotOnGoal
from specula.soccer.sides import TeamSides, goalkeepers_of
from specula.soccer.types import SOURCES, soccer_registry

DETECTORS = {
    "ball_in_play": BallInPlay,
    "acceleration_peak": AccelerationPeak,
    "running_intensity": RunningIntensity,
    "sides": TeamSides,
    "near_foot": BallNearFoot,
    "hits": PlayerHitsBall,
    "possession": BallPossession,
    "passes": Pass,
    "interceptions": Interception,
    "shots": ShotOnGoal,
    "double_passes": DoublePass,
    "blocked_shots": BlockedShot,
    "combination_shots": CombinationShot,
    "running_analysis": RunningAnalysis,
    "possession_stats": PossessionStats,
    "heat_map": HeatMap,
}
#: The nodes of the DEBS 2013 queries 1-3.
QUERIES = ("running_analysis", "possession_stats", "heat_map")


def soccer_graph(alpha: Alpha = "adaptive", retraction: RetractionMode = "on-demand",
                 k0_ms: float = 400.0, queries: bool = False,
                 metadata: Metadata | None = None) -> Graph:
    """The whole hierarchy with one setting for every unit.

    ``k0_ms`` is the initial K of every unit and should cover the network delays. Units
    above level 1 are clocked by the progress their producers publish (and by the ball
    where they also hear raw readings), so they need no K for the depth of the levels
    below. ``queries=True`` adds the DEBS 2013 aggregates (running analysis, possession
    statistics, heat maps). They are off by default for now: each is one more ordering
    unit on a raw stream, and together they make the hierarchy about 1.5 times slower
    (``benchmarks/soccer.py --quick --no-ray``, the adaptive in-process run: 6.3 s
    without, 9.7 s with them).
    ``metadata`` names the goalkeepers, whose positions tell which goal each team
    defends (:class:`~specula.soccer.sides.TeamSides`); default: the DEBS 2013 game's.
    """
    g = Graph(soccer_registry(), sources=SOURCES)
    k0 = k0_of_ms(k0_ms, g.ticks_per_second)
    for name, cls in DETECTORS.items():
        if not queries and name in QUERIES:
            continue
        detector = TeamSides(goalkeepers_of(metadata)) if name == "sides" and metadata \
            else cls()
        # near_foot learns which ball is in play from rare ball_in/ball_out events: one
        # that comes late (a slow sibling on a fast replay) is still better processed out
        # of order than dropped, or the ball would never become active
        g.add(name, detector, alpha=alpha, retraction=retraction,
              k0=k0,
              late="process" if name == "near_foot" else "side")
    return g
