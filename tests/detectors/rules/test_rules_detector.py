"""Rule detectors in graphs: speculation never changes what a rule detects; checks at
construction; placement of heavy and simple rules."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from naive import canonical, content, run_detector

from specula import CostModel, Graph, InProcessRuntime
from specula.actors.placement import actor_options
from specula.actors.rules import add_rules
from specula.detectors.rules import RuleError, parse_rule, parse_rules
from specula.detectors.rules.detector import RuleDetector, check_rule
from specula.detectors.rules.placement import cost, is_heavy, plan, scanned, suits_gpu
from specula.events import TypeRegistry
from specula.ordering.emitter import Emitter

RULES = """
define CE(x: int, s: float, by: int)
from C(x=$p) and last B(x=$p) within 12 from C and last A(x=$p) within 12 from B
where x=$p and s=Sum(A(x=$p).v within 12 from B) and by=B.y

define Quiet(n: int)
from D(y=$q) and each B(y=$q) within 8 from D and not C(y=$q) between B and D
where n=Count(A() within 5 from D)

define Firsts(v: float)
from C(x=$p) and first B() within 6 from C and last A(x=$p) within 6 from B
where v=A.v + B.v
"""

CONSUMING = """define Used(v: float, y: int)
from C(x=$p) and each A(x=$p and v > 5) within 6 from C
where v=A.v and y=A.y
consuming A
"""

def _engines() -> list[str]:
    """The CPU engines, and the GPU one where a real CUDA GPU is present."""
    from numba import config, cuda

    gpu = cuda.is_available() and not config.ENABLE_CUDASIM
    return ["aip", "cdp", "gpu"] if gpu else ["aip", "cdp"]


ENGINES = _engines()


def registry() -> TypeRegistry:
    reg = TypeRegistry()
    for t in "ABCD":
        reg.register(t, x="i8", y="i8", v="f8")
    return reg


def make_stream(reg: TypeRegistry, seed: int, n: int, max_delay: int) -> np.ndarray:
    """Raw events with non-decreasing ts (ties allowed) and random arrival delays."""
    rng = np.random.default_rng(seed)
    raw = np.zeros(n, reg.dtype(["A", "B", "C", "D"]))
    raw["type"] = [reg.id(t) for t in rng.choice(list("ABCD"), n, p=[0.3, 0.3, 0.25, 0.15])]
    raw["ts"] = np.cumsum(rng.integers(0, 3, n))
    raw["seq"] = np.arange(n)
    raw["key"] = rng.integers(0, 4, n)
    raw["x"] = rng.integers(0, 3, n)
    raw["y"] = rng.integers(0, 3, n)
    raw["v"] = rng.integers(0, 20, n)
    delay = rng.integers(0, max_delay + 1, n)
    delay[rng.random(n) < 0.05] += 4 * max_delay
    raw["ats"] = raw["ts"] + delay
    return raw[np.argsort(raw["ats"], kind="stable")]


def ident(row) -> tuple[int, int, int, int]:
    return int(row["producer"]), int(row["seq"]), int(row["ts"]), int(row["type"])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("retraction", ["full", "on-demand"])
@pytest.mark.parametrize("alpha", [0.0, 0.5, "adaptive"])
def test_rules_behind_a_speculative_unit_give_the_ordered_answer(engine, retraction, alpha):
    """The issue's check: net output after all retractions == output on the ordered
    stream (without the events the unit declared late)."""
    check_speculation(RULES, engine, retraction, alpha, at_least=20)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_consuming_rule_behind_a_speculative_unit_gives_the_ordered_answer(engine):
    """Consumption state (the history and what waits) is part of the snapshots that
    replays restore."""
    check_speculation(CONSUMING, engine, "on-demand", 0.0, at_least=10)


def check_speculation(rules: str, engine: str, retraction: str, alpha, at_least: int) -> None:
    """Net output behind a speculative unit == the detector's output on the ordered
    stream, on two random streams (at least ``at_least`` composites each)."""
    reg = registry()
    det = RuleDetector(rules, reg, engine=engine)
    for seed, k0 in ((1, 0), (2, 30)):
        raw = make_stream(reg, seed, 300, max_delay=15)
        g = Graph(reg, sources=("A", "B", "C", "D"))
        g.add("rules", det, alpha=alpha, retraction=retraction, k0=k0)
        result = InProcessRuntime(g, cost_model=CostModel(per_event=0.02)).run(raw, step_ticks=2)
        late = {ident(r) for r in result.late("rules")}
        rows = [r for r in raw if ident(r) not in late]
        expect = run_detector(det, rows, reg, 1, reg.dtype(det.outputs))
        assert len(expect) >= at_least
        assert content(canonical(result.net("rules"))) == content(expect)
        stats = result.stats("rules")
        if alpha != "adaptive":
            assert stats.replayed > 0  # speculation did happen


def test_detector_output_per_rule_and_cause():
    reg = registry()
    det = RuleDetector(RULES, reg)
    assert det.inputs == ("C", "B", "A", "D")
    assert det.outputs == ("CE", "Quiet", "Firsts")
    assert reg["CE"].fields == (("x", np.dtype("i8")), ("s", np.dtype("f8")),
                                ("by", np.dtype("i8")))
    batch = reg.from_records([
        {"type": "A", "ts": 1, "x": 2, "v": 5}, {"type": "A", "ts": 2, "x": 2, "v": 7},
        {"type": "B", "ts": 3, "x": 2, "y": 1, "v": 1}, {"type": "C", "ts": 4, "x": 2}],
        dtype=reg.dtype(det.inputs))
    emit = Emitter()
    det.on_batch(batch, ["?"] + [t.name for t in reg.types()], emit)
    out = {name: (cols, cause.tolist()) for name, cols, cause in emit.column_batches}
    cols, cause = out["CE"]
    assert cause == [3]
    assert (cols["x"].tolist(), cols["s"].tolist(), cols["by"].tolist()) == ([2], [12.0], [1])
    cols, cause = out["Firsts"]
    assert cause == [3] and cols["v"].tolist() == [8.0]


def test_rules_are_checked_against_the_registry():
    reg = registry()
    with pytest.raises(RuleError, match="event type 'E' is not registered"):
        RuleDetector("define X() from E()", reg)
    with pytest.raises(RuleError, match="has no attribute 'z'; its attributes are x, y, v"):
        RuleDetector("define X() from C() and last B(z=1) within 3 from C", reg)
    with pytest.raises(RuleError, match="has no attribute 'w'"):
        RuleDetector("define X(a: int) from C() where a=Sum(A().w within 3 from C)", reg)
    with pytest.raises(RuleError, match="needs the ticks per second"):
        check_rule(parse_rule("define X() from C() and last B() within 3 s from C"), reg)
    with pytest.raises(RuleError, match="put the two rules in separate detectors"):
        RuleDetector("define X() from C()\ndefine Y() from X()", reg)
    with pytest.raises(ValueError, match="use one of aip, cdp, gpu"):
        RuleDetector("define X() from C()", reg, engine="fpga")


def test_a_gpu_detector_is_declared_anywhere_and_fails_clearly_without_a_gpu():
    from numba import cuda

    reg = registry()
    det = RuleDetector("define X() from C()", reg, engine="gpu")  # declared without CUDA
    assert det.num_gpus == 1
    if not cuda.is_available():
        with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
            det.engines()


# --------------------------------------------------------------------------- placement


PLACED = """
define Big(x: int) from C(x=$p) and last B(x=$p) within 200000 from C
  and last A(x=$p) within 200000 from B where x=$p
define Small1() from C() and last A() within 10 from C
define Small2() from B() and each A() within 10 from B
define Small3() from D() and last C() within 10 from D
define OnTop() from Small1() and last Small2() within 10 from Small1
"""
RATES = {"A": 0.3, "B": 0.3, "C": 0.3, "D": 0.1}


def test_cost_grows_with_windows_and_rates_and_single_selection_is_cheaper():
    big, small1, small2, *_ = parse_rules(PLACED)
    assert cost(big, RATES).columns == (60000.0, 60000.0)
    assert cost(big, RATES).per_terminator == 60000.0  # two last steps: half a column each
    assert cost(small2, RATES).per_terminator == 3.0  # each: the whole column
    assert cost(small1, RATES).per_terminator == 1.5
    assert is_heavy(big, RATES) and not is_heavy(small1, RATES)
    assert not is_heavy(big, {"A": 0.1, "B": 0.1, "C": 0.1})  # 20000 events per column
    with pytest.raises(KeyError, match="give its events per tick"):
        cost(big, {"A": 1.0})


def test_plan_keeps_heavy_equality_rules_on_the_cpu_engine_by_default_with_gpus_too(caplog):
    """The CPU CDP engine's equality index beats the GPU's scan (``placement``'s
    docstring): by default a heavy rule whose columns are looked up by a parameter gets
    a CDP detector of its own, no GPU, and no warning."""
    rules = parse_rules(PLACED)
    with caplog.at_level(logging.WARNING, logger="specula.detectors.rules.placement"):
        placements = plan(rules, RATES, gpus=1, cpu_engine="aip", rules_per_detector=2)
    big = placements[0]
    assert (big.name, [r.name for r in big.rules], big.engine, big.num_gpus) == (
        "rules_cpu_Big", ["Big"], "cdp", 0.0)
    assert all(p.num_gpus == 0 and p.engine == "aip" for p in placements[1:])
    assert not caplog.messages
    with pytest.raises(ValueError, match="must be 'auto', 'cdp' or 'gpu', got 'aip'"):
        plan(rules, RATES, gpus=1, heavy_engine="aip")


SCANNED = """
define Ineq() from C() as c and last B(x > c.x) as b within 200000 from c
  and last A(x < b.x) within 200000 from b
define Mixed(n: int) from C(x=$p) and last B(x=$p) within 400000 from C
  where n=Count(A() within 10 from B)
define Agg(s: int) from C(x=$p) and last B() within 10 from C
  and not D(x=$p) within 600000 from C where s=Sum(A(x=$p).x within 600000 from C)
define NoAgg(s: int) from C(x=$p) and last B() within 10 from C
  where s=Sum(A().x within 600000 from C)
"""


def test_plan_auto_puts_heavy_rules_whose_columns_are_scans_on_a_gpu(caplog):
    """``heavy_engine="auto"``: a heavy rule goes to a GPU when the cluster has one and
    its big columns are scans (no equality to look events up by); the others stay on
    the CPU, and without a GPU every one does, with no warning either way."""
    rules = parse_rules(SCANNED)
    assert [scanned(r) for r in rules] == [(True, True), (False, True), (True, False, False),
                                           (True, True)]
    assert [suits_gpu(r, RATES) for r in rules] == [True, False, False, True]
    with caplog.at_level(logging.WARNING, logger="specula.detectors.rules.placement"):
        got = {p.rules[0].name: (p.engine, p.num_gpus) for p in plan(rules, RATES, gpus=1)}
        assert got == {"Ineq": ("gpu", 0.5), "NoAgg": ("gpu", 0.5), "Mixed": ("cdp", 0.0),
                       "Agg": ("cdp", 0.0)}
        assert all(p.engine == "cdp" for p in plan(rules, RATES, gpus=0))
        assert all(p.engine == "cdp" for p in plan(rules, RATES, gpus=1, heavy_engine="cdp"))
    assert not caplog.messages
    ineq = rules[:1]
    assert plan(ineq, RATES, gpus=1, threshold=1e6)[0].engine == "cdp"  # not heavy


def test_plan_puts_heavy_rules_on_gpus_and_packs_simple_ones():
    rules = parse_rules(PLACED)
    placements = plan(rules, RATES, gpus=1, cpu_engine="aip", rules_per_detector=2,
                      heavy_engine="gpu")
    summary = [(p.name, [r.name for r in p.rules], p.engine, p.num_gpus) for p in placements]
    assert summary[0] == ("rules_gpu_Big", ["Big"], "gpu", 1.0)
    packed = summary[1:]
    assert all(engine == "aip" and gpus == 0 for _, _, engine, gpus in packed)
    assert sorted(n for _, names, _, _ in packed for n in names) == [
        "OnTop", "Small1", "Small2", "Small3"]
    assert all(len(names) <= 2 for _, names, _, _ in packed)
    on_top = next(names for _, names, _, _ in packed if "OnTop" in names)
    assert on_top == ["OnTop"]  # never with the rules whose composites it reads
    # two heavy rules and one GPU: half a GPU each
    two = [*rules, parse_rules(PLACED.replace("Big", "Big2"))[0]]
    assert [p.num_gpus for p in plan(two, RATES, gpus=1, heavy_engine="gpu")[:2]] == [
        0.5, 0.5]


def test_a_gpu_takes_at_most_max_rules_per_gpu_the_heaviest_first(caplog):
    big = PLACED.split("define Small1")[0]
    text = "".join(big.replace("Big", f"Big{i}").replace("200000", str(200000 + 1000 * i))
                   for i in range(5))
    rules = parse_rules(text)
    with caplog.at_level(logging.WARNING, logger="specula.detectors.rules.placement"):
        placements = plan(rules, RATES, gpus=1.5, max_rules_per_gpu=2, heavy_engine="gpu")
    assert [(p.rules[0].name, p.engine, p.num_gpus) for p in placements] == [
        ("Big0", "cdp", 0.0), ("Big1", "cdp", 0.0), ("Big2", "gpu", 0.5),
        ("Big3", "gpu", 0.5), ("Big4", "gpu", 0.5)]
    assert sum("GPUs already hold 3 heavier rules (2 per GPU)" in m
               for m in caplog.messages) == 2


def test_without_gpus_heavy_rules_asked_on_gpus_fall_back_to_the_cpu_with_a_warning(caplog):
    rules = parse_rules(PLACED)
    with caplog.at_level(logging.WARNING, logger="specula.detectors.rules.placement"):
        placements = plan(rules, RATES, gpus=0, heavy_engine="gpu")
    assert (placements[0].name, placements[0].engine, placements[0].num_gpus) == (
        "rules_cpu_Big", "cdp", 0.0)
    assert any("Big" in m and "falls back to CDP on the CPU" in m for m in caplog.messages)


def test_add_rules_without_gpus_runs_in_a_graph():
    reg = registry()
    g = Graph(reg, sources=("A", "B", "C", "D"))
    placements = add_rules(g, PLACED.replace("200000", "8"), rates=RATES, gpus=0,
                           cpu_engine="aip", alpha=0.5)
    assert all(p.engine == "aip" for p in placements)
    raw = make_stream(reg, 5, 300, max_delay=5)
    result = InProcessRuntime(g).run(raw)
    assert sum(len(result.net(p.name)) for p in placements) > 0
    assert all(actor_options(i) == {} for i in g.instances())


def test_a_gpu_placement_asks_ray_for_a_gpu():
    """The GPU path without a GPU: the plan for one GPU puts num_gpus in the actor
    options; nothing is launched and the GPU engine is not imported."""
    reg = registry()
    g = Graph(reg, sources=("A", "B", "C", "D"))
    placements = add_rules(g, PLACED, rates=RATES, gpus=1, cpu_engine="aip",
                           heavy_engine="gpu")
    gpu = next(p for p in placements if p.engine == "gpu")
    options = {i.node.name: actor_options(i) for i in g.instances()}
    assert options[gpu.name] == {"num_gpus": 1.0}
    assert all(o == {} for name, o in options.items() if name != gpu.name)
    assert g.nodes[gpu.name].detector._unions is None


# --------------------------------------------------------------------------- Ray


@pytest.mark.slow
@pytest.mark.cluster
def test_rule_detector_on_ray_equals_in_process():
    ray = pytest.importorskip("ray")
    from specula.actors.ray_runtime import RayRuntime

    reg = registry()
    raw = make_stream(reg, 9, 1_500, max_delay=10)
    g = Graph(reg, sources=("A", "B", "C", "D"))
    g.add("rules", RuleDetector(RULES, reg), alpha=0.0, k0=400)
    reference = InProcessRuntime(g).run(raw)
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False)
    try:
        on_ray = RayRuntime(g).run(raw, batch_rows=300)
    finally:
        ray.shutdown()
    for name in g.nodes:
        assert len(on_ray.late(name)) == len(reference.late(name)) == 0
        assert content(canonical(on_ray.net(name))) == content(
            canonical(reference.net(name))), name
        assert len(on_ray.net(name)) > 10
