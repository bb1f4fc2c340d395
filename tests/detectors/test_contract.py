"""The detector contract, checked on every Detector subclass in the package.

The checks are :func:`specula.testing.check_detector`'s, the same a user runs on a
detector of their own: declarations, no input mutation, the same output for the same
input however it is cut into batches, snapshot -> restore -> continue, pickling.

Every detector class found in ``specula`` needs a fixture below: a detector and a
non-empty, time-ordered input on which it produces output. A new detector without one
fails :func:`test_every_detector_has_a_fixture`, which says where to add it.
"""

from __future__ import annotations

import copy
import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import specula
from specula import events as ev
from specula.detectors import Detector
from specula.events import TypeRegistry
from specula.testing import check_detector


@dataclass
class Case:
    """A detector, the registry of its types, and a time-ordered input batch."""

    detector: Detector
    registry: TypeRegistry
    batch: np.ndarray


def discovered() -> list[str]:
    """``module.Class`` of every concrete Detector subclass defined in ``specula``."""
    for module in pkgutil.walk_packages(specula.__path__, "specula."):
        importlib.import_module(module.name)
    found, todo = set(), [Detector]
    while todo:
        for sub in todo.pop().__subclasses__():
            todo.append(sub)
            if sub.__module__.startswith("specula.") and not sub.__name__.startswith("_"):
                found.add(f"{sub.__module__}.{sub.__qualname__}")
    return sorted(found)


# ------------------------------------------------------------------------ fixtures


def _examples(cls_name: str) -> Case:
    from specula.detectors import examples
    from specula.pipelines.synthetic import abc_stream

    cls = getattr(examples, cls_name)
    reg = examples.example_registry()
    raw = abc_stream(reg, 400, seed=1, keys=4)
    raw = raw[np.argsort(raw["ts"], kind="stable")]
    rows = []
    for r in raw:
        t = reg.name(int(r["type"]))
        for want in cls.inputs:
            if want == t:
                rows.append({"type": t, "ts": int(r["ts"]), "key": int(r["key"]),
                             **({"v": int(r["v"])} if t == "C" else {})})
            elif want not in ("A", "B", "C") and t == "C":  # derived types, made from C
                rows.append({"type": want, "ts": int(r["ts"]), "key": int(r["key"]),
                             **{f: int(r["v"]) for f in dict(reg[want].fields)}})
    return Case(cls(), reg, reg.from_records(rows, dtype=reg.dtype(cls.inputs)))


_RULES = """
define CE(x: int, s: float, by: int)
from C(x=$p) and last B(x=$p) within 12 from C and last A(x=$p) within 12 from B
where x=$p and s=Sum(A(x=$p).v within 12 from B) and by=B.y

define Quiet(n: int)
from D(y=$q) and each B(y=$q) within 8 from D and not C(y=$q) between B and D
where n=Count(A() within 5 from D)
"""


def _rules(engine: str) -> Case:
    from specula.detectors.rules import RuleDetector

    reg = TypeRegistry()
    for t in "ABCD":
        reg.register(t, x="i8", y="i8", v="f8")
    rng = np.random.default_rng(7)
    n = 600
    batch = np.zeros(n, reg.dtype(list("ABCD")))
    batch["type"] = [reg.id(t) for t in rng.choice(list("ABCD"), n, p=[0.3, 0.3, 0.25, 0.15])]
    batch["ts"] = np.cumsum(rng.integers(0, 3, n))
    batch["seq"] = np.arange(n)
    batch["key"] = rng.integers(0, 4, n)
    for f in ("x", "y"):
        batch[f] = rng.integers(0, 3, n)
    batch["v"] = rng.integers(0, 20, n)
    return Case(RuleDetector(_RULES, reg, engine=engine), reg, batch)


@functools.cache
def _soccer_inputs() -> dict[str, tuple[Detector, np.ndarray]]:
    """Every soccer detector's time-ordered input on a generated match."""
    from specula import InProcessRuntime
    from specula.soccer.graph import soccer_graph
    from specula.soccer.match import generate_match
    from specula.soccer.types import soccer_registry

    reg = soccer_registry()
    match = generate_match(SOCCER_SECONDS, profile="debs2013", seed=SOCCER_SEED)
    graph = soccer_graph(alpha=1.0, queries=True)
    # The readings arrive in time order and K covers the levels' reaction times, so
    # nothing is late and the net outputs are the in-order outputs whatever the step:
    # steps of 100 ms of arrival (not the default 5 ms) give the same events, >10x sooner.
    stream = match.stream()  # the readings and the referee's interruptions
    report = InProcessRuntime(graph).run(stream, step_ticks=SOCCER_STEP)
    assert not any(len(report.late(n)) for n in graph.nodes)
    produced = [stream] + [report.net(n) for n in graph.nodes]
    inputs = {}
    for node in graph.nodes.values():
        ids = [reg.id(t) for t in node.inputs]
        parts = [ev.conform(p[np.isin(p["type"], ids)], reg.dtype(node.inputs), drop=True)
                 for p in produced]
        batch = np.concatenate(parts)
        order = np.lexsort((batch["seq"], batch["producer"], batch["ts"]))
        inputs[type(node.detector).__name__] = (node.detector, batch[order])
    return inputs


#: The generated match behind the soccer fixtures of levels 1 to 4, and the step (of
#: arrival time, picoseconds) in which the in-process runtime delivers its readings.
SOCCER_SECONDS, SOCCER_SEED, SOCCER_STEP = 20.0, 1, 100 * 10**9  # seed 1: an interception


def _soccer(cls_name: str) -> Case:
    from specula.soccer.types import soccer_registry

    detector, batch = _soccer_inputs()[cls_name]
    return Case(copy.deepcopy(detector), soccer_registry(), batch)


def _soccer_play(cls_name: str) -> Case:
    """Shots, one-twos and blocks are rare in a short generated match: the detectors
    above level 3 get a scripted stream of random play (passes among four players of
    two teams, hits, shots, kicked balls flying towards or past a goal, changes of
    ends)."""
    from specula.soccer import play, shots
    from specula.soccer.geometry import GOALS
    from specula.soccer.types import soccer_registry

    reg = soccer_registry()
    cls = getattr(play, cls_name, None) or getattr(shots, cls_name)
    rng = np.random.default_rng(11)
    ms, rows, ts = 10**9, [], 0
    for _ in range(150):
        ts += int(rng.integers(50, 2_500)) * ms
        a, b = (int(p) for p in rng.choice(4, 2, replace=False))
        team = a % 2
        kind = rng.choice(["pass", "back", "shot", "hit", "double_pass", "kick"])
        if kind in ("pass", "back"):
            a, b = (b, a) if kind == "back" else (a, b)
            rows.append({"type": "pass", "ts": ts, "key": a, "player": a, "team": team,
                         "receiver": b, "received": ts + 800 * ms})
        elif kind == "double_pass":
            rows.append({"type": "double_pass", "ts": ts, "key": a, "player": a,
                         "team": team, "receiver": b, "received": ts + 900 * ms})
        elif kind == "shot":
            rows.append({"type": "shot", "ts": ts, "key": a, "player": a, "team": team,
                         "goal": team, "eta": ts + int(rng.integers(100, 900)) * ms})
        elif kind == "hit":
            rows.append({"type": "hit", "ts": ts, "key": a, "player": a, "team": team,
                         "ball": 4})
        else:  # a kick, then the ball's readings, straight at goal 0 or wide of it
            x = int(rng.choice([26_000, 40_000]))
            rows.append({"type": "hit", "ts": ts, "key": a, "player": a, "team": team,
                         "ball": 4, "x": x, "y": 20_000})
            for t in range(5, 200, 10):
                rows.append({"type": "ball", "ts": ts + t * ms, "key": 4, "x": x,
                             "y": 20_000 + 25 * t, "z": 300, "v": 25_000_000, "vy": 10_000})
    for k, at in enumerate(range(0, ts, 40_000 * ms)):  # the teams change ends
        rows += [{"type": "side", "ts": at, "key": t, "team": t, "goal": (t + k) % 2}
                 for t in (0, 1)]
    assert GOALS[0]["x"][0] < 26_000 < GOALS[0]["x"][1] < 40_000
    rows = [r for r in rows if r["type"] in cls.inputs]
    rows.sort(key=lambda r: r["ts"])
    return Case(cls(), reg, reg.from_records(rows, dtype=reg.dtype(cls.inputs)))


def _window(unit: str, selection: str) -> Case:
    """eSPICE's window operator: windows opened by S (count-based) or of 60 ticks (time),
    ``any(2, D1..D4)`` or ``seq(D1; D2; D3)``, on a random stream; it retrains UT every
    few windows, which must not change what it detects while it is not told to shed."""
    from specula.shedding import AnyOf, Sequence, UtilityModel, WindowDetector

    reg = TypeRegistry()
    names = ("S", "D1", "D2", "D3", "D4", "O")
    for t in names:
        reg.register(t)
    WindowDetector.register_output(reg, "match")
    rng = np.random.default_rng(5)
    n = 700
    batch = np.zeros(n, reg.dtype(list(names)))
    batch["type"] = [reg.id(t) for t in rng.choice(names, n, p=[.06, .2, .2, .2, .2, .14])]
    batch["ts"] = np.cumsum(rng.integers(0, 4, n))
    batch["seq"] = np.arange(n)
    batch["key"] = rng.integers(0, 3, n)
    pattern = AnyOf(2, ("D1", "D2", "D3", "D4"), selection, with_opener=True) \
        if unit == "count" else Sequence(("D1", "D2", "D3"), selection)
    model = UtilityModel(len(names), 30, retrain_every=5)
    det = WindowDetector(names, pattern, 30 if unit == "count" else 60, output="match",
                         openers=("S",), unit=unit, reference_size=30, model=model)
    return Case(det, reg, batch)


_SOCCER_PLAY = ("BlockedShot", "CombinationShot", "DoublePass", "ShotOnGoal")
_SOCCER = ("AccelerationPeak", "BallInPlay", "BallNearFoot", "BallPossession", "BlockedShot",
           "CombinationShot", "DoublePass", "HeatMap", "Interception", "Pass",
           "PlayerHitsBall", "PossessionStats", "RunningAnalysis", "RunningIntensity",
           "ShotOnGoal", "TeamSides")
_EXAMPLES = ("ANotBC", "ANotBCBatch", "CountPerKey", "FollowedWithin", "RunningCount",
             "SlowThreshold", "Threshold")

#: ``module.Class`` -> fixtures (id, factory); the soccer ones need a generated match.
FIXTURES: dict[str, list[tuple[str, Callable[[], Case], bool]]] = {
    **{f"specula.detectors.examples.{c}": [(c, functools.partial(_examples, c), False)]
       for c in _EXAMPLES},
    "specula.shedding.window_detector.WindowDetector": [
        (f"WindowDetector[{u},{sel}]", functools.partial(_window, u, sel), False)
        for u, sel in (("count", "first"), ("time", "last"))],
    "specula.detectors.rules.detector.RuleDetector": [
        (f"RuleDetector[{e}]", functools.partial(_rules, e), False) for e in ("aip", "cdp")],
    **{f"specula.soccer.{m}.{c}": [
        (c, functools.partial(_soccer_play, c), False) if c in _SOCCER_PLAY
        else (c, functools.partial(_soccer, c), True)]
       for m, cs in {"ball": ("AccelerationPeak", "BallInPlay"),
                     "players": ("BallNearFoot", "RunningIntensity"),
                     "play": ("BallPossession", "DoublePass", "Interception", "Pass",
                              "PlayerHitsBall"),
                     "shots": ("BlockedShot", "CombinationShot", "ShotOnGoal"),
                     "sides": ("TeamSides",),
                     "queries": ("HeatMap", "PossessionStats", "RunningAnalysis")}.items()
       for c in cs},
}
assert {k.rsplit(".", 1)[1] for k in FIXTURES if ".soccer." in k} == set(_SOCCER)

CASES = [pytest.param(factory, id=name, marks=[pytest.mark.slow] if slow else [])
         for entries in FIXTURES.values() for name, factory, slow in entries]


def test_every_detector_has_a_fixture():
    missing = sorted(set(discovered()) - set(FIXTURES))
    assert not missing, (f"detectors without a contract fixture: {missing}; add one to "
                         "FIXTURES in tests/detectors/test_contract.py")
    assert not set(FIXTURES) - set(discovered()), "fixtures of detectors that do not exist"


def test_every_detector_has_an_example():
    """Every detector's docstring shows it at work (run by ``--doctest-modules``)."""
    def example(name: str) -> bool:
        module, cls = name.rsplit(".", 1)
        return ">>> " in (getattr(importlib.import_module(module), cls).__doc__ or "")

    missing = [name for name in discovered() if not example(name)]
    assert not missing, (f"detectors without an example in their docstring: {missing}; add "
                         "one that feeds a few events (specula.testing.feed)")


# -------------------------------------------------------------------------- checks


@pytest.mark.parametrize("factory", CASES)
def test_detector_contract(factory: Callable[[], Case]):
    case = factory()
    check_detector(case.detector, case.batch, case.registry)
