"""Every combination of node options either runs or is refused when the graph is built.

The factors are representative values of every option of
:data:`specula.options.NODE_OPTIONS` that changes what a node does in-process (``cpus``
and ``gpus`` only ask Ray for resources), crossed with the CPU rule engines. The full
product is several thousand runs, so the test walks a pairwise covering array of it
(every pair of values of every two factors appears in some case; the covering is
checked) and the whole product of the factors that decide ordering and refusals:
engine, late, alpha and retraction.

A case either raises :class:`~specula.options.OptionError` at :meth:`Graph.add` (only
the combinations listed in :func:`refusals` may, and each of them must, with a message
that says what to use instead), or runs on a stream with late events on the in-process
runtime. Where its output is comparable it equals the in-order reference
(:mod:`naive`): nothing shed and late events not processed, the net output is the
detector's output on the stream in key order without the events the node declared late,
per partition.
"""

from __future__ import annotations

import itertools
import random
import zlib
from typing import Any

import numpy as np
import pytest
from naive import canonical, content, in_view, run_detector

from specula import CostModel, Graph, InProcessRuntime
from specula.detectors.rules.detector import RuleDetector
from specula.events import TypeRegistry
from specula.options import NODE_OPTIONS, MemoryLimit, OptionError, Shedding

RULES = """
define Each(x: int) from B() as b and each A() as a within 30 from b where x=a.v
define Last(x: int) from C(x=$p) and last B(x=$p) within 12 from C
  and last A(x=$p) within 12 from B where x=$p
define Quiet(n: int) from D(y=$q) and each B(y=$q) within 8 from D
  and not C(y=$q) between B and D where n=Count(A() within 5 from D)
"""

#: Representative values per factor; the first of each is the default.
FACTORS: dict[str, tuple[Any, ...]] = {
    "engine": ("aip", "cdp"),
    "alpha": (1.0, 0.0, 0.5, "adaptive"),
    "retraction": ("on-demand", "full"),
    "late": ("side", "process"),
    "k0": (0, 40),
    "idle_after": (None, 6),
    "partitions": (1, 3),
    "memory": (MemoryLimit(), MemoryLimit(buffered_events=24, snapshot_mb=0.05)),
    "shedding": (None, Shedding(latency_bound_s=2e-5), Shedding(latency_bound_s=2e-5,
                                                               strategy="detector")),
}
#: The factors whose whole product is walked.
CORE = ("engine", "late", "alpha", "retraction")


def registry() -> TypeRegistry:
    reg = TypeRegistry()
    for t in "ABCD":
        reg.register(t, x="i8", y="i8", v="i8")
    return reg


def stream(reg: TypeRegistry, seed: int, n: int = 160) -> np.ndarray:
    """Raw events of random types, keys and values, in arrival order: most delayed a
    little, one in ten by far more than any K here, so some are late."""
    rng = np.random.default_rng(seed)
    raw = np.zeros(n, reg.dtype(["A", "B", "C", "D"]))
    raw["type"] = [reg.id(t) for t in rng.choice(list("ABCD"), n, p=[0.3, 0.3, 0.25, 0.15])]
    raw["ts"] = np.cumsum(rng.integers(0, 3, n))
    raw["seq"] = np.arange(n)
    raw["key"] = rng.integers(0, 4, n)
    for f in ("x", "y", "v"):
        raw[f] = rng.integers(0, 3, n)
    delay = rng.integers(0, 8, n)
    delay[rng.random(n) < 0.1] += 100
    raw["ats"] = raw["ts"] + delay
    return raw[np.argsort(raw["ats"], kind="stable")]


def refusals(case: dict[str, Any]) -> list[str]:
    """What the message of a combination that must be refused says to use, one per
    reason it is refused (the first found is given); none for one that must run."""
    out = []
    if case["late"] == "process" and case["engine"] != "aip":
        out.append("engine='aip'")
    if case["shedding"] is not None and case["shedding"].strategy == "detector":
        out.append("strategy='random'")
    return out


def pairwise(factors: dict[str, tuple[Any, ...]], seed: int = 0,
             candidates: int = 40) -> list[dict[str, Any]]:
    """A covering array of strength 2 over the combinations that must run (AETG's greedy
    construction): cases until every pair of values of every two factors that some such
    combination holds is in one, each the best of ``candidates`` random ones that start
    from an uncovered pair."""
    rng = random.Random(seed)
    names = list(factors)

    def case(row: dict[str, int]) -> dict[str, Any]:
        return {n: factors[n][row[n]] for n in names}

    uncovered = {(a, i, b, j) for a, b in itertools.combinations(names, 2)
                 for i in range(len(factors[a])) for j in range(len(factors[b]))
                 if not refusals(case({**{n: 0 for n in names}, a: i, b: j}))}
    rows: list[dict[str, int]] = []
    while uncovered:
        a, i, b, j = min(uncovered)
        best, gain = None, -1
        for _ in range(candidates):
            row = {n: rng.randrange(len(factors[n])) for n in names}
            row[a], row[b] = i, j
            new = len(uncovered & _pairs(row, names))
            if new > gain and not refusals(case(row)):
                best, gain = row, new
        assert best is not None, (a, i, b, j)
        rows.append(best)
        uncovered -= _pairs(best, names)
    return [case(r) for r in rows]


def _pairs(row: dict[str, int], names: list[str]) -> set[tuple[str, int, str, int]]:
    return {(a, row[a], b, row[b]) for a, b in itertools.combinations(names, 2)}


def core_product() -> list[dict[str, Any]]:
    """The product of the :data:`CORE` factors, every other at its first value."""
    out = []
    for values in itertools.product(*(FACTORS[n] for n in CORE)):
        chosen = dict(zip(CORE, values, strict=True))
        out.append({n: chosen.get(n, v[0]) for n, v in FACTORS.items()})
    return out


def refused_cases() -> list[dict[str, Any]]:
    """Every engine and late policy with the shedding strategy no rule detector takes
    (the core product holds the other refusal)."""
    return [{**core, "shedding": FACTORS["shedding"][2]} for core in core_product()
            if core["alpha"] == 0.0 and core["retraction"] == "on-demand"]


PAIRWISE = pairwise(FACTORS)
CASES = PAIRWISE + core_product() + refused_cases()


def test_the_pairwise_cases_cover_every_pair_that_can_run():
    names = list(FACTORS)
    for a, b in itertools.combinations(names, 2):
        seen = {(repr(c[a]), repr(c[b])) for c in PAIRWISE}
        want = {(repr(x), repr(y)) for x in FACTORS[a] for y in FACTORS[b]
                if not refusals({**{n: v[0] for n, v in FACTORS.items()}, a: x, b: y})}
        assert seen == want, (a, b)
    assert not any(refusals(c) for c in PAIRWISE)
    # every node option that changes a run in-process is a factor (where an actor runs
    # and what it asks Ray for do not)
    assert set(NODE_OPTIONS) - set(FACTORS) == {"cpus", "gpus", "chain"}
    assert len(PAIRWISE) < 40


def _label(case: dict[str, Any]) -> str:
    def show(v: Any) -> str:
        if isinstance(v, Shedding):
            return f"shed-{v.strategy}"
        if isinstance(v, MemoryLimit):
            return f"mem{v.buffered_events}"
        return str(v)
    return "-".join(show(v) for v in case.values())


def ident(row: np.void) -> tuple[int, int, int]:
    return int(row["producer"]), int(row["seq"]), int(row["ts"])


@pytest.mark.parametrize("case", CASES, ids=[_label(c) for c in CASES])
def test_a_combination_runs_or_is_refused_when_the_graph_is_built(case):
    reg = registry()
    det = RuleDetector(RULES, reg, engine=case["engine"])
    options = {n: v for n, v in case.items() if n != "engine"}
    graph = Graph(reg, sources=("A", "B", "C", "D"))
    uses = refusals(case)
    if uses:
        with pytest.raises(OptionError, match=r"^rules: .*[Uu]se ") as refused:
            graph.add("rules", det, **options)
        assert any(use in str(refused.value) for use in uses), refused.value
        return
    graph.add("rules", det, **options)
    raw = stream(reg, seed=zlib.crc32(_label(case).encode()))
    result = InProcessRuntime(graph, cost_model=CostModel()).run(raw, step_ticks=2)
    late = {ident(r) for r in result.late("rules")}
    stats = result.stats("rules")
    assert stats.late == len(late)
    if case["late"] == "process":
        assert stats.late_processed == stats.late
    if sum(result.shed("rules").values()) or (case["late"] == "process" and late):
        return  # not comparable: the net output depends on what was dropped or when
    node = graph.nodes["rules"]
    expect = [run_detector(det, [r for r in raw if ident(r) not in late
                                 and in_view(r, node, i, reg)], reg, i + 1,
                           reg.dtype(det.outputs))
              for i in range(node.partitions)]
    assert content(canonical(result.net("rules"))) == content(np.concatenate(expect))


def test_late_process_on_cdp_is_refused_before_the_run_and_aip_takes_the_late_event():
    """The issue's repro: A@10, B@20, B@30, A@15 (late with K = 0), B@40."""
    from specula.testing import feed

    reg = TypeRegistry()
    reg.register("A", v="i8")
    reg.register("B")
    rule = "define P(x: int) from B() as b and each A() as a within 100 from b where x=a.v"
    events = [{"type": "A", "ts": 10, "v": 1}, {"type": "B", "ts": 20},
              {"type": "B", "ts": 30}, {"type": "A", "ts": 15, "v": 2},
              {"type": "B", "ts": 40}]
    order = [0, 1, 2, 3, 4]
    with pytest.raises(OptionError, match="late='process' needs engine='aip'"):
        feed(RuleDetector(rule, reg, engine="cdp"), events, registry=reg, order=order,
             late="process", k0=0)
    graph = Graph(reg, sources=("A", "B")).add("p", RuleDetector(rule, reg, engine="cdp"))
    with pytest.raises(OptionError, match=r"^p: late='process' needs engine='aip'"):
        graph.with_options(late="process")
    out = feed(RuleDetector(rule, reg, engine="aip"), events, registry=reg, order=order,
               late="process", k0=0)
    assert [e["ts"] for e in out.late] == [15]
    assert [(e["ts"], e["x"]) for e in out.net] == [(20, 1), (30, 1), (40, 1), (40, 2)]
    side = feed(RuleDetector(rule, reg, engine="cdp"), events, registry=reg, order=order,
                k0=0)
    assert [(e["ts"], e["x"]) for e in side.net] == [(20, 1), (30, 1), (40, 1)]
