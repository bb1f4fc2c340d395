"""Where rules run: heavy rules on a detector of their own, simple ones packed together.

Cugola & Margara (sec. 6 and 8) find that CDP on a GPU pays off only when a rule keeps
many events per column: with their base rule the GPU starts to win at windows of 4000
ticks over 3 states, about 1333 events per state, while simple rules and many rules are
better served by the CPU (the GPU's fixed cost per terminator dominates, and its memory
holds the columns of only a few big rules, sec. 5.5). CPU engines gain from several
cores by running different rules in parallel (sec. 5.6): here, different actors.

So a rule's cost is estimated from the event rates of the types it reads and its
windows; a rule is *heavy* when it expects at least :data:`GPU_THRESHOLD` events per
column. :func:`plan` gives every heavy rule a detector of its own, on the engine
``heavy_engine`` names, and packs the simple rules into a few shared CPU detectors;
:func:`specula.actors.rules.add_rules` adds those detectors to a graph. With
``heavy_engine="gpu"`` the heavy rules run on GPU CDP engines, at most
:data:`MAX_RULES_PER_GPU` per GPU (the paper's GPU loses its lead beyond about 10 large
rules, sec. 6, Fig. 14); the rest, and all of them without GPUs, on the CPU CDP
engine, with a warning.

Which engine a heavy rule gets (``heavy_engine="auto"``, the default) follows what
``benchmarks/rules_gpu.py`` measures. The CPU CDP engine looks a parameter bound by
equality up in the column's equality index, so a rule whose expensive columns are
looked up that way (R5) stays on the CPU: on one H100 the GPU engine took 4 to 10 times
the CPU's time on R5 at every window from 1,000 to 500,000 ticks. A rule whose expensive
columns only a scan can check (inequalities and arithmetic between elements, aggregates
and negations without an equality, see :func:`scanned`) goes to a GPU when the cluster
has one and its scanned columns hold at least :data:`GPU_SCAN_CROSSOVER` events: the GPU
engine now runs those scans, predicates included, on the device. ``heavy_engine="cdp"``
or ``"gpu"`` forces the choice. :data:`GPU_THRESHOLD` was measured when the CPU engine
still scanned R5's columns (below ~33,000 events per column the GPU lost then); it
decides which rules get a detector of their own.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from specula.detectors.rules.ast import Param, Rule
from specula.detectors.rules.detector import RuleDetector
from specula.detectors.rules.disjunctions import derived_rates
from specula.detectors.rules.expand import expand
from specula.events import TypeRegistry

__all__ = ["GPU_SCAN_CROSSOVER", "GPU_THRESHOLD", "MAX_RULES_PER_GPU", "Placement", "RuleCost",
           "cost", "is_heavy", "plan", "scanned", "suits_gpu"]

log = logging.getLogger(__name__)

GPU_THRESHOLD = 50_000.0
GPU_SCAN_CROSSOVER = GPU_THRESHOLD
"""Events in a heavy rule's scanned columns from which ``heavy_engine="auto"`` puts it
on a GPU. A placeholder, to be measured with ``benchmarks/rules_gpu.py`` on the device
(``gpu_vs_cpu_r5_ineq`` and the scan sweep) once the device predicates have run on one;
until then, the bar of a heavy rule."""
MAX_RULES_PER_GPU = 10
SINGLE_SELECTION_FACTOR = 0.5  # a last/first scan stops at its hit: half a column on average


@dataclass(frozen=True)
class RuleCost:
    """Expected work of one rule.

    Attributes
    ----------
    columns : tuple of float
        Expected events per column: one per sequence step, then one per aggregate and
        per negation (the events its window holds).
    per_terminator : float
        Events examined per terminator: the columns, single-selection steps counted at
        :data:`SINGLE_SELECTION_FACTOR`.
    terminators : float
        Terminators per tick.
    """

    columns: tuple[float, ...]
    per_terminator: float
    terminators: float

    @property
    def events_per_column(self) -> float:
        """Mean events per column (0 for a rule without columns)."""
        return sum(self.columns) / len(self.columns) if self.columns else 0.0

    @property
    def per_tick(self) -> float:
        """Events examined per tick."""
        return self.per_terminator * self.terminators


def cost(rule: Rule, rates: Mapping[str, float], *,
         ticks_per_second: float | None = None) -> RuleCost:
    """Estimated cost of ``rule`` given the event rates (events per tick) of its types.

    A column holds the events of its pattern's type within its window (content
    constraints are not estimated: every event of the type counts). The composite type
    of another rule that ``rates`` does not list is not allowed here; :func:`plan`
    estimates those.

    Examples
    --------
    Rule R5 of the paper: one event per tick, three types, windows of 100000 ticks.

    >>> from specula.detectors.rules.parser import parse_rule
    >>> r5 = parse_rule('''define CE(att1: int, att2: int)
    ... from C(att=$x) and last B(att=$x) within 100000 from C
    ...   and last A(att=$x) within 100000 from B
    ... where att1=$x and att2=Sum(A(att=$x).value within 100000 from B)''')
    >>> c = cost(r5, {"A": 1 / 3, "B": 1 / 3, "C": 1 / 3})
    >>> round(c.events_per_column), round(c.per_terminator)
    (33333, 66667)
    """
    if not rule.plain:  # the union of its expansions, each on its own engine
        rates = derived_rates(rule, rates)  # last/first disjunctions: one derived type
        parts = [cost(r, rates, ticks_per_second=ticks_per_second)
                 for r in expand(rule, ticks_per_second)]
        return RuleCost(tuple(c for p in parts for c in p.columns),
                        sum(p.per_terminator for p in parts),
                        sum(p.terminators for p in parts))

    def rate(type_name: str) -> float:
        if type_name not in rates:
            raise KeyError(f"rule {rule.name}: rates has no entry for event type "
                           f"{type_name!r}; give its events per tick")
        return float(rates[type_name])

    steps = [rate(s.pattern.type) * s.within.ticks(ticks_per_second) for s in rule.steps]
    work = sum(c * (1.0 if s.selection == "each" else SINGLE_SELECTION_FACTOR)
               for c, s in zip(steps, rule.steps, strict=True))
    extra = [rate(a.pattern.type) * a.within.ticks(ticks_per_second) for a in rule.aggregates]
    offsets = [0]
    for s in rule.steps:
        offsets.append(offsets[-1] + s.within.ticks(ticks_per_second))
    for n in rule.negations:
        if n.within is not None:
            span = n.within.ticks(ticks_per_second)
        else:
            assert n.after is not None  # Rule checks: a window or an element after
            span = max(0, offsets[n.after] - offsets[n.anchor])
        extra.append(rate(n.pattern.type) * span)
    return RuleCost(tuple(steps + extra), work + sum(extra), rate(rule.terminator.type))


def is_heavy(rule: Rule, rates: Mapping[str, float], *,
             ticks_per_second: float | None = None,
             threshold: float = GPU_THRESHOLD) -> bool:
    """Whether ``rule`` keeps enough events per column for a GPU to pay off.

    >>> from specula.detectors.rules.parser import parse_rule
    >>> rule = parse_rule("define X() from C() and each B() within 200000 from C")
    >>> is_heavy(rule, {"B": 0.5, "C": 0.5}), is_heavy(rule, {"B": 0.1, "C": 0.5})
    (True, False)
    """
    return cost(rule, rates, ticks_per_second=ticks_per_second).events_per_column >= threshold


def scanned(rule: Rule, *, ticks_per_second: float | None = None) -> tuple[bool, ...]:
    """Per column of :func:`cost` (steps, then aggregates, then negations), whether the
    CDP engines scan it: no parameter bound by an earlier element is compared with an
    attribute of its pattern by equality, so no equality index narrows it.

    >>> from specula.detectors.rules.parser import parse_rule
    >>> scanned(parse_rule("define X(n: int) from C(p=$x) as c and last B(p=$x) within 9 "
    ...                    "from c and each A(v > c.v) within 9 from B "
    ...                    "where n=Count(D() within 5 from A)"))
    (False, True, True)
    """
    if not rule.plain:
        return tuple(s for r in expand(rule, ticks_per_second) for s in scanned(r))

    def by_equality(pattern, element: int | None) -> bool:
        return any(isinstance(c.value, Param) and rule.binder(c.value.name) != element
                   for c in pattern.constraints)  # a parameter compares by "=" only

    return (*(not by_equality(st.pattern, i) for i, st in enumerate(rule.steps, start=1)),
            *(not by_equality(a.pattern, None) for a in rule.aggregates),
            *(not by_equality(n.pattern, None) for n in rule.negations))


def suits_gpu(rule: Rule, rates: Mapping[str, float], *,
              ticks_per_second: float | None = None,
              crossover: float = GPU_SCAN_CROSSOVER) -> bool:
    """Whether ``rule``'s expensive columns are scans that a GPU takes over: its scanned
    columns hold at least as many events as its looked-up ones, and one holds at least
    ``crossover`` (see the module).

    >>> from specula.detectors.rules.parser import parse_rule
    >>> ineq = parse_rule("define X() from C() as c and last B(v > c.v) within 200000 from c")
    >>> eq = parse_rule("define X() from C(p=$x) and last B(p=$x) within 200000 from C")
    >>> suits_gpu(ineq, {"B": 0.5, "C": 0.5}), suits_gpu(eq, {"B": 0.5, "C": 0.5})
    (True, False)
    """
    columns = cost(rule, rates, ticks_per_second=ticks_per_second).columns
    scans = scanned(rule, ticks_per_second=ticks_per_second)
    on_scans = [c for c, s in zip(columns, scans, strict=True) if s]
    return (sum(on_scans) >= sum(columns) - sum(on_scans)
            and max(on_scans, default=0.0) >= crossover)


@dataclass(frozen=True)
class Placement:
    """One rule detector of a plan: its node name, rules, engine and GPU share (the
    node's ``gpus`` option, :func:`specula.actors.rules.add_rules`)."""

    name: str
    rules: tuple[Rule, ...]
    engine: str
    num_gpus: float = 0.0

    def detector(self, registry: TypeRegistry) -> RuleDetector:
        """A :class:`RuleDetector` for this placement (its engine is not imported yet)."""
        return RuleDetector(self.rules, registry, engine=self.engine)  # type: ignore[arg-type]


def plan(rules: Iterable[Rule], rates: Mapping[str, float], *, gpus: float,
         ticks_per_second: float | None = None, cpu_engine: str = "cdp",
         rules_per_detector: int = 8, threshold: float = GPU_THRESHOLD,
         max_rules_per_gpu: int = MAX_RULES_PER_GPU,
         heavy_engine: str = "auto") -> list[Placement]:
    """Place rules on detectors: heavy rules alone (on ``heavy_engine``), simple rules
    packed on CPU detectors.

    Parameters
    ----------
    rules : iterable of Rule
        The rules. A rule that reads another rule's composite never shares its detector.
    rates : mapping of str to float
        Events per tick of every raw type the rules read. A composite type of a rule in
        ``rules`` that is not listed is estimated at its terminator's rate (an upper
        bound).
    gpus : float
        GPUs in the cluster (see :func:`specula.cluster.gpus_available`). The heavy
        rules placed on GPUs get one each while there are enough, else equal shares,
        down to ``1 / max_rules_per_gpu``; the heaviest rules (events examined per tick)
        come first.
    ticks_per_second : float, optional
        For windows written with a unit.
    cpu_engine : {"cdp", "aip"}
        Engine of the packed simple rules.
    rules_per_detector : int
        At most this many simple rules per CPU detector.
    threshold : float
        Events per column from which a rule is heavy.
    max_rules_per_gpu : int
        At most this many heavy rules share one GPU; the rest run on the CPU.
    heavy_engine : {"auto", "cdp", "gpu"}
        Engine of the heavy rules: ``"auto"`` puts those whose expensive columns are
        scans (:func:`suits_gpu`) on the GPUs and the others on CDP on the CPU (see the
        module); ``"cdp"`` puts all of them on the CPU; ``"gpu"`` all of them on the
        GPUs, CDP on the CPU where they are full or missing (with a warning).

    Returns
    -------
    list of Placement
        Heavy rules first, then the packed detectors, in dependency order.

    Examples
    --------
    >>> from specula.detectors.rules.parser import parse_rules
    >>> rules = parse_rules('''
    ... define Big() from C() and last B() within 90000 from C
    ... define S1() from C() and last A() within 10 from C
    ... define S2() from B() and each A() within 10 from B''')
    >>> rates = {"A": 1.0, "B": 1.0, "C": 1.0}
    >>> [(p.name, [r.name for r in p.rules], p.engine, p.num_gpus)
    ...  for p in plan(rules, rates, gpus=1)]  # Big's one step scans its column
    [('rules_gpu_Big', ['Big'], 'gpu', 1.0), ('rules_cpu_0', ['S1', 'S2'], 'cdp', 0.0)]
    >>> [(p.name, p.engine, p.num_gpus) for p in plan(rules, rates, gpus=0)][0]
    ('rules_cpu_Big', 'cdp', 0.0)
    """
    rules = list(rules)
    if cpu_engine not in ("cdp", "aip"):
        raise ValueError(f"cpu_engine must be 'cdp' or 'aip', got {cpu_engine!r}")
    if heavy_engine not in ("auto", "cdp", "gpu"):
        raise ValueError(f"heavy_engine must be 'auto', 'cdp' or 'gpu', got {heavy_engine!r}")
    if not (isinstance(rules_per_detector, int) and rules_per_detector >= 1):
        raise ValueError(f"rules_per_detector must be an integer >= 1, got {rules_per_detector!r}")
    rates = _with_composite_rates(rules, rates)
    costs = {id(r): cost(r, rates, ticks_per_second=ticks_per_second) for r in rules}
    heavy = [r for r in rules if costs[id(r)].events_per_column >= threshold]
    wanted = heavy if heavy_engine == "gpu" else [  # the rules that would take a GPU
        r for r in heavy if heavy_engine == "auto"
        and suits_gpu(r, rates, ticks_per_second=ticks_per_second)]
    room = math.floor(max(0.0, gpus) * max_rules_per_gpu) if wanted else 0
    on_gpu = {id(r) for r in sorted(wanted, key=lambda r: -costs[id(r)].per_tick)[:room]}
    share = 0.0 if not on_gpu else min(1.0, math.floor(100 * gpus / len(on_gpu)) / 100)
    placements = []
    for r in heavy:
        if id(r) in on_gpu:
            placements.append(Placement(f"rules_gpu_{r.name}", (r,), "gpu", max(share, 0.01)))
            continue
        if heavy_engine == "gpu":  # asked for a GPU and got none
            why = ("the cluster has no GPU" if room == 0 else
                   f"the GPUs already hold {room} heavier rules ({max_rules_per_gpu} per GPU)")
            log.warning("rule %s is heavy (~%.0f events per column) but %s: it falls back "
                        "to CDP on the CPU", r.name, costs[id(r)].events_per_column, why)
        placements.append(Placement(f"rules_cpu_{r.name}", (r,), "cdp"))
    simple = [r for r in rules if costs[id(r)].events_per_column < threshold]
    order = {id(r): i for i, r in enumerate(rules)}
    packed = 0
    for level in _levels(simple):
        n_bins = math.ceil(len(level) / rules_per_detector)
        bins: list[list[Rule]] = [[] for _ in range(n_bins)]
        load = [0.0] * n_bins
        for r in sorted(level, key=lambda r: -costs[id(r)].per_tick):  # longest first
            b = min((i for i in range(n_bins) if len(bins[i]) < rules_per_detector),
                    key=lambda i: load[i])
            bins[b].append(r)
            load[b] += costs[id(r)].per_tick
        for members in bins:
            members.sort(key=lambda r: order[id(r)])
            placements.append(Placement(f"rules_cpu_{packed}", tuple(members), cpu_engine))
            packed += 1
    return _unique_names(placements)


def _with_composite_rates(rules: list[Rule], rates: Mapping[str, float]) -> dict[str, float]:
    """``rates`` plus, for composite types it lacks, their terminator's rate."""
    out = dict(rates)
    defined: dict[str, list[Rule]] = {}
    for r in rules:
        defined.setdefault(r.name, []).append(r)
    for _ in range(len(rules)):
        for name, rs in defined.items():
            if name not in rates and all(r.terminator.type in out for r in rs):
                out[name] = sum(out[r.terminator.type] for r in rs)
    return out


def _levels(rules: list[Rule]) -> list[list[Rule]]:
    """Rules grouped so that no rule shares a group with one whose output it reads."""
    defined = {r.name for r in rules}
    level: dict[int, int] = {}

    def depth(r: Rule, seen: tuple[str, ...] = ()) -> int:
        if id(r) not in level:
            if r.name in seen:
                raise ValueError(f"rules read each other's composites in a cycle: "
                                 f"{' -> '.join((*seen, r.name))}")
            below = [depth(q, (*seen, r.name)) for q in rules
                     if q.name in r.input_types and q.name in defined]
            level[id(r)] = 1 + max(below, default=-1)
        return level[id(r)]

    for r in rules:
        depth(r)
    groups: dict[int, list[Rule]] = {}
    for r in rules:
        groups.setdefault(level[id(r)], []).append(r)
    return [groups[k] for k in sorted(groups)]


def _unique_names(placements: list[Placement]) -> list[Placement]:
    seen: dict[str, int] = {}
    out = []
    for p in placements:
        n = seen.get(p.name, 0)
        seen[p.name] = n + 1
        out.append(p if n == 0 else Placement(f"{p.name}_{n}", p.rules, p.engine, p.num_gpus))
    return out

