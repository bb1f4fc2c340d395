"""Adding TESLA rules to a graph: rule detectors placed on CPU (or GPU) actors.

The placement itself (cost per rule, heavy or simple, which rules share an actor) is
:func:`specula.detectors.rules.placement.plan`; this module asks the Ray cluster how many
GPUs it has and adds one graph node per placement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal

from specula.detectors.graph import Graph
from specula.detectors.rules.ast import Rule
from specula.detectors.rules.detector import as_rules, engine_class
from specula.detectors.rules.placement import Placement, plan

__all__ = ["add_rules"]


def add_rules(graph: Graph, rules: str | Rule | Iterable[Rule], *, rates: Mapping[str, float],
              gpus: float | None = None, alpha: float | Literal["adaptive"] = 1.0,
              retraction: Literal["on-demand", "full"] = "on-demand", cpu_engine: str = "cdp",
              rules_per_detector: int = 8, heavy_engine: str = "auto",
              k0: int = 0) -> list[Placement]:
    """Add rules to ``graph`` as rule detectors placed by :func:`plan`.

    Parameters
    ----------
    graph : Graph
        The graph; its registry gets the composite types, its ``ticks_per_second``
        converts windows with units.
    rules : str, Rule or iterable of Rule
        Rule text (parsed with ``parse_rules``) or rules.
    rates, cpu_engine, rules_per_detector, heavy_engine
        As for :func:`plan`.
    gpus : float, optional
        GPUs to plan for; default: :func:`specula.cluster.gpus_available` (none with
        ``heavy_engine="cdp"``).
    alpha, retraction, k0
        Settings of every rule detector's ordering unit (see ``Graph.add``); each node's
        ``gpus`` is its placement's GPU share.

    Returns
    -------
    list of Placement
        The placements, whose names are the new nodes.

    Examples
    --------
    >>> from specula.events import TypeRegistry
    >>> from specula import Graph
    >>> reg = TypeRegistry(); _ = reg.register("A", x="i8"); _ = reg.register("B", x="i8")
    >>> g = Graph(reg, sources=("A", "B"))
    >>> text = "define AB(x: int) from B(x=$p) and last A(x=$p) within 10 from B where x=$p"
    >>> [p.name for p in add_rules(g, text, rates={"A": 1, "B": 1}, gpus=0, cpu_engine="aip")]
    ['rules_cpu_0']
    >>> g.nodes["rules_cpu_0"].outputs
    ('AB',)
    """
    from specula.cluster import gpus_available

    rules = as_rules(rules)
    if gpus is None:
        gpus = gpus_available() if heavy_engine != "cdp" else 0.0
    tps = graph.ticks_per_second
    placements = plan(rules, rates, gpus=gpus, ticks_per_second=tps, cpu_engine=cpu_engine,
                      rules_per_detector=rules_per_detector, heavy_engine=heavy_engine)
    for engine in {p.engine for p in placements} - {"gpu"}:
        engine_class(engine)  # a CPU engine that cannot be imported fails here, not in a run
    for p in placements:
        graph.add(p.name, p.detector(graph.registry), alpha=alpha,
                  retraction=retraction, k0=k0, gpus=p.num_gpus)
    return placements
