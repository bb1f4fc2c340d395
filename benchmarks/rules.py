"""Rule engines in the base scenario of Cugola & Margara (JPDC 2012, sec. 6): AIP against
CDP on the CPU, average processing time per event (Fig. 8) and, in full mode, the window
sweep of Fig. 10.

    python benchmarks/rules.py --quick     # < 60 s on 2 cores
    python benchmarks/rules.py             # the paper's 100,000 measured events + sweep

Scenario (Table 1): one rule, R5, with ``last`` (and its ``each`` variant: both steps
``each``); three event types A, B, C, uniformly distributed; integer attributes ``att``,
``value`` and ``other`` uniform in [1, 50000]; one event per clock tick, time stamped
with the tick; windows of 100,000 ticks. As in the paper, window-size events are
submitted first (not measured), then the measured events; the time per event is the
measured total over their number. AIP and CDP get the same events; their composite
events are compared, so a faster wrong engine cannot pass. (Until revision e832629 a
frozen copy of the AIP engine whose per-event loop ran in Python ran beside them,
``aip_vs_python_loop``; its last figure and how to rerun it are in
``docs/measurements.md``.)

Events go to the engines in batches (``--batch``, 1,000 by default), as the ordering
units deliver them; the figure reported is still the time per event. The paper submits
events one at a time, so ``--single`` more events are also fed one per call, which adds
the per-call cost of NumPy and Python (``*_single`` keys; ``*_single_vs_batch_*``:
one event per call over batches, per event). Every measurement is repeated
``--repeat`` times on consecutive parts of the stream, the engines interleaved, and the
median is reported; ratios are AIP time over CDP time. ``*_slowest_batch_ms_*`` is the
longest single batch over the repeats: the stall a detector's latency sees when a column
grows, compacts or rebuilds its index. The last line printed is one JSON object.

R5 chains two windows (an A within the window before a B, the B within the window
before the C), so the engines' state grows for two windows, not one: after the paper's
prefill of one window the measured parts fall in that growth, and both engines slow
down part by part. ``cdp_vs_aip_steady_*`` (and ``*_steady_ms_per_event_*``) measure the
same parts after a prefill of both windows, once the state has stopped growing.

``unbounded_kleene_events_per_s``: SASE's and FlinkCEP's ``A B+ C within 10 s`` as a
rule with an unbounded closure, on 1,000,000 events through the CDP engines of its union
(:func:`unbounded_kleene`); PyFlink is not installed here, so FlinkCEP's ``oneOrMore``
is not run beside it.

Then the cost of a step around the engines: ``stock_events_per_s``, OpenCEP's stock rule
in a graph on the InProcessRuntime with one delivery of quotes per step (:func:`stock`),
and ``step_overhead_us`` / ``one_event_step_us``, a step with no event and a step of one
event through the runtime, an ordering unit and a detector that does nothing, beside
``heapq_ns_per_event`` as a reference for the machine's speed (:func:`step_costs`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from specula import InProcessRuntime
from specula.detectors import Detector
from specula.detectors.graph import Graph
from specula.detectors.rules import RuleDetector
from specula.detectors.rules.aip import AIPEngine
from specula.detectors.rules.cdp import CDPEngine
from specula.detectors.rules.engine import compose
from specula.detectors.rules.expand import Union
from specula.detectors.rules.parser import parse_rule
from specula.events import TypeRegistry

R5 = ("define CE(att1: int, att2: int) from C(att=$x) "
      "and {sel} B(att=$x) within {w} from C and {sel} A(att=$x) within {w} from B "
      "where att1=$x and att2=Sum(A(att=$x).value within {w} from B)")
SELECTIONS = ("last", "each")
VALUES = 50_000


def registry() -> TypeRegistry:
    reg = TypeRegistry()
    for name in "ABC":
        reg.register(name, att="i8", value="i8", other="i8")
    return reg


def rule(selection: str, window: int):
    return parse_rule(R5.format(sel=selection, w=window))


def stream(reg: TypeRegistry, n: int, seed: int) -> np.ndarray:
    """``n`` events, one per tick: types uniform over A, B, C, attributes uniform."""
    rng = np.random.default_rng(seed)
    out = np.zeros(n, reg.dtype())
    out["type"] = rng.integers(reg.id("A"), reg.id("C") + 1, n)
    out["ts"] = np.arange(n)
    out["seq"] = np.arange(n)
    for attr in ("att", "value", "other"):
        out[attr] = rng.integers(1, VALUES + 1, n)
    return out


def feed(engine: Any, events: np.ndarray, batch: int) -> tuple[float, list[tuple], float]:
    """Seconds to process ``events`` in batches, the composites produced, and the
    seconds of the slowest batch."""
    out: list[tuple] = []
    elapsed = slowest = 0.0
    for i in range(0, len(events), batch):
        part = events[i:i + batch]
        t0 = time.perf_counter()
        matches = engine.process(part)
        took = time.perf_counter() - t0
        elapsed += took
        slowest = max(slowest, took)
        kept, columns = compose(engine.rule, matches)
        ts = matches.elements[0]["ts"][kept]
        out += list(zip(ts.tolist(), *(c.tolist() for c in columns.values()), strict=True))
    return elapsed, out, slowest


def measure(engines: dict[str, Callable[[], Any]], events: np.ndarray, window: int, n: int,
            repeat: int, batch: int, single: int) -> dict[str, Any]:
    """Prefill every engine with ``window`` events, then time ``repeat`` parts of ``n``
    events in batches and one part of ``single`` events one per call."""
    built = {name: make() for name, make in engines.items()}
    for engine in built.values():
        feed(engine, events[:window], max(batch, 10_000))
    times: dict[str, list[float]] = {name: [] for name in built}
    slowest = dict.fromkeys(built, 0.0)
    composites = 0
    for r in range(repeat):
        part = events[window + r * n:window + (r + 1) * n]
        outputs = {}
        for name, engine in built.items():
            seconds, outputs[name], worst = feed(engine, part, batch)
            times[name].append(seconds / n * 1e3)
            slowest[name] = max(slowest[name], worst * 1e3)
        first, *others = outputs.values()
        assert all(o == first for o in others), "the engines disagree"
        composites += len(first)
    result: dict[str, Any] = {f"{name}_ms": statistics.median(v) for name, v in times.items()}
    result.update({f"{name}_slowest_batch_ms": v for name, v in slowest.items()})
    result["composites"] = composites
    if single:
        part = events[window + repeat * n:window + repeat * n + single]
        outputs = {}
        for name, engine in built.items():
            seconds, outputs[name], _ = feed(engine, part, 1)
            result[f"{name}_single_ms"] = seconds / single * 1e3
        first, *others = outputs.values()
        assert all(o == first for o in others), "the engines disagree"
    return result


def engines_for(selection: str, window: int, reg: TypeRegistry) -> dict[str, Callable[[], Any]]:
    """The engines to compare on R5."""
    r = rule(selection, window)
    return {"aip": lambda: AIPEngine(r, reg), "cdp": lambda: CDPEngine(r, reg)}


def warm_up(reg: TypeRegistry) -> None:
    """Compile the Numba kernels (cached on disk after the first run) and load them."""
    events = stream(reg, 3_000, seed=99)
    for selection in SELECTIONS:
        for engine in (AIPEngine, CDPEngine):
            feed(engine(rule(selection, 1_000), reg), events, 500)
            feed(engine(rule(selection, 1_000), reg), events[:50], 1)


def compare(got: dict[str, Any], selection: str, slow: tuple[str, str],
            fast: tuple[str, str], single: int) -> dict[str, float]:
    """Print one selection's figures of two engines (key, label) and return them as
    ``<key>_ms_per_event_<selection>`` and ``<fast>_vs_<slow>_<selection>`` (slow time
    over fast time), plus ``..._single`` times when events were also fed one per call."""
    (s, s_label), (f, f_label) = slow, fast
    slow_ms, fast_ms = got[f"{s}_ms"], got[f"{f}_ms"]
    print(f"  {selection:<5} {s_label} {slow_ms:.4f} ms/event  {f_label} {fast_ms:.4f} "
          f"ms/event  {f_label} {slow_ms / fast_ms:.2f}x faster  "
          f"({got['composites']} composites)")
    print(f"  {selection:<5} slowest batch: {s_label} {got[f'{s}_slowest_batch_ms']:.2f} ms  "
          f"{f_label} {got[f'{f}_slowest_batch_ms']:.2f} ms")
    out = {f"{s}_ms_per_event_{selection}": round(slow_ms, 5),
           f"{f}_ms_per_event_{selection}": round(fast_ms, 5),
           f"{f}_vs_{s}_{selection}": round(slow_ms / fast_ms, 2),
           f"{s}_slowest_batch_ms_{selection}": round(got[f"{s}_slowest_batch_ms"], 2),
           f"{f}_slowest_batch_ms_{selection}": round(got[f"{f}_slowest_batch_ms"], 2)}
    if single:
        slow1, fast1 = got[f"{s}_single_ms"], got[f"{f}_single_ms"]
        print(f"  {selection:<5} one event per call: {s_label} {slow1:.4f} ms  {f_label} "
              f"{fast1:.4f} ms  {f_label} {slow1 / fast1:.2f}x faster")
        out[f"{s}_ms_per_event_{selection}_single"] = round(slow1, 5)
        out[f"{f}_ms_per_event_{selection}_single"] = round(fast1, 5)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="20,000 measured events x 3 and no sweep (< 60 s)")
    p.add_argument("--events", type=int, default=None, help="measured events per repeat")
    p.add_argument("--repeat", type=int, default=None)
    p.add_argument("--window", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=1_000)
    p.add_argument("--single", type=int, default=None,
                   help="events also fed one per call (0: skip)")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    n = args.events or (20_000 if args.quick else 100_000)
    repeat = args.repeat or 3
    single = 2_000 if args.single is None else args.single
    reg = registry()
    window = args.window
    events = stream(reg, 2 * window + repeat * n + single, args.seed)
    print(f"R5, 3 types, attributes in [1, {VALUES}], window {window:,} ticks, one event per "
          f"tick; prefill {window:,} events (steady_*: {2 * window:,}), then {repeat} x "
          f"{n:,} events in batches of {args.batch:,} and {single:,} one per call")
    warm_up(reg)
    result: dict[str, Any] = {}
    for selection in SELECTIONS:
        got = measure(engines_for(selection, window, reg), events, window, n, repeat,
                      args.batch, single)
        result.update(compare(got, selection, ("aip", "AIP"), ("cdp", "CDP"), single))
        steady = measure(engines_for(selection, window, reg), events,
                         2 * window, n, repeat, args.batch, 0)
        result.update(compare(steady, f"steady_{selection}", ("aip", "AIP"), ("cdp", "CDP"), 0))
        if single:
            for name in ("aip", "cdp"):  # the fixed cost of a call, as a factor
                result[f"{name}_single_vs_batch_{selection}"] = round(
                    got[f"{name}_single_ms"] / got[f"{name}_ms"], 1)
    result.update(unbounded_kleene(args.seed, 1 if args.quick else 3))
    result.update(stock(args.quick, args.seed))
    result.update(step_costs(20_000 if args.quick else 100_000))
    if not args.quick:
        result["sweep"] = sweep(reg, args.batch, args.seed)
    result.update(events=n, repeat=repeat, window=window, batch=args.batch)
    print(json.dumps(result))


KLEENE = ("define K(n: double, a: int) from C() and last B()+ as bs within 10 s from C "
          "and last A() within 10 s from bs within 10 s where n=Count(bs) and a=A.value")


def unbounded_kleene(seed: int, repeat: int, n: int = 1_000_000) -> dict[str, Any]:
    """``A B+ C within 10 s`` (:data:`KLEENE`) on ``n`` events, types uniform over A, B
    and C, time stamps in ms with gaps uniform in [1, 2000) (one event a second on
    average, so about 3 B in 10 s): events per second through the rule's union on CDP
    engines, in batches of 1,000 (median of ``repeat`` runs), the matches, and the
    longest closure the windows needed (one engine per length)."""
    reg = registry()
    rng = np.random.default_rng(seed)
    events = stream(reg, n, seed)
    events["ts"] = np.cumsum(rng.integers(1, 2_000, n))
    times, found, longest = [], 0, 0
    for _ in range(repeat):
        union = Union(parse_rule(KLEENE), CDPEngine, reg, ticks_per_second=1_000.0)
        start = time.perf_counter()
        found = sum(len(union.process(events[i:i + 1_000])) for i in range(0, n, 1_000))
        found += len(union.flush())
        times.append(time.perf_counter() - start)
        longest = union.longest
    per_s = n / statistics.median(times)
    print(f"A B+ C within 10 s: {n:,} events, {found:,} matches, closures up to {longest} "
          f"items: {per_s:,.0f} events/s on CDP (FlinkCEP's oneOrMore not run: PyFlink is "
          "not installed)")
    return {"unbounded_kleene_events_per_s": round(per_s), "unbounded_kleene_matches": found,
            "unbounded_kleene_longest": longest}


def stock(quick: bool, seed: int) -> dict[str, Any]:
    """OpenCEP's stock example (``tests/detectors/rules/stock.py``) on minute quotes:
    events per second through a CDP RuleDetector in a graph on the InProcessRuntime
    (median of 3 runs), and the partial sequences the CDP engine enumerates for a
    60-minute window against the matches, with the engine's CPU time per batch of 1,000
    quotes there (``window60_cpu_ms_per_batch``, after a warm-up batch).

    Two deliveries of the same stream: ``live``, each minute's quotes arriving at their
    minute (one step per minute, about 2.4 quotes: the per-step cost of the runtime,
    the ordering unit and the engine decides), and ``replay``, the stream read from a
    file in batches of about 1,000 quotes (one step per batch: the engine's cost per
    event decides). Both give the same matches."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests/detectors/rules"))
    from stock import STOCK_RULE, SYMBOLS, quotes, stock_registry

    minutes = 10_000 if quick else 40_000
    reg = stock_registry()
    events = quotes(reg, minutes, seed=seed)
    events["ats"] = events["ts"]
    per_s, found = {}, {}
    replay_ticks = 60 * round(1_000 * minutes / len(events))  # about 1,000 quotes a step
    for delivery, step_ticks in (("live", 0), ("replay", replay_ticks)):
        times = []
        for _ in range(3):
            graph = Graph(stock_registry(), sources=SYMBOLS)
            graph.add("rising", RuleDetector(STOCK_RULE.format(minutes=5), graph.registry,
                                             engine="cdp"))
            start = time.perf_counter()
            found[delivery] = len(InProcessRuntime(graph).run(
                events, step_ticks=step_ticks).net("rising"))
            times.append(time.perf_counter() - start)
        per_s[delivery] = len(events) / statistics.median(times)
    assert found["live"] == found["replay"], "the deliveries disagree"
    rule60 = parse_rule(STOCK_RULE.format(minutes=60))
    CDPEngine(rule60, reg, ticks_per_second=1.0).process(events[:1000])  # compiled, loaded
    engine = CDPEngine(rule60, reg, ticks_per_second=1.0)
    start = time.process_time()
    found60 = [*(engine.process(events[i:i + 1000]) for i in range(0, len(events), 1000)),
               engine.flush()]
    ms_per_batch = (time.process_time() - start) * 1e3 / (len(found60) - 1)
    matches = sum(len(compose(engine.rule, m)[0]) for m in found60)
    print(f"stock example: {len(events):,} quotes, {found['live']:,} matches (5 min), "
          f"through a RuleDetector in a graph: {per_s['live']:,.0f} events/s arriving "
          f"minute by minute, {per_s['replay']:,.0f} events/s replayed in steps of about "
          f"1,000 quotes; 60 min window: {engine.partials:,} partial sequences enumerated "
          f"for {matches:,} matches, the engine alone {ms_per_batch:.2f} ms of CPU per batch "
          "of 1,000 quotes")
    return {"stock_events_per_s": round(per_s["live"]),
            "stock_events_per_s_replay": round(per_s["replay"]), "stock_matches": found["live"],
            "window60_candidates": engine.partials, "window60_matches": matches,
            "window60_cpu_ms_per_batch": round(ms_per_batch, 2)}


class Still(Detector):
    """Takes ``x`` events, generates nothing, keeps no state: a step through it costs
    what the runtime and the ordering unit add."""

    inputs = ("x",)
    outputs = ("y",)

    def on_batch(self, events: np.ndarray, type_names: Any, emit: Any) -> None:
        pass

    def snapshot(self) -> None:
        return None

    def restore(self, state: Any) -> None:
        pass


def step_costs(steps: int, repeat: int = 5) -> dict[str, float]:
    """Microseconds per step of the InProcessRuntime around one :class:`Still` node
    (median of ``repeat`` runs of ``steps`` steps, the run's set-up and flush included):

    * ``step_overhead_us``: each step carries one raw ``w`` event, which the node does
      not read; with ``idle_after=0`` the node still gets the raw stream's clock, a
      ``PROGRESS`` punctuation alone, so its unit moves its clock, has nothing to hand
      to the detector, and publishes its progress: a step with no events.
    * ``one_event_step_us``: each step carries one ``x`` event, in order, which the unit
      (K = 0) hands to the detector at once.

    ``heapq_ns_per_event`` (the K-slack written with heapq in ``benchmarks/ordering.py``,
    pure Python) is measured beside them, as a fixed reference for a loaded machine."""
    reg = TypeRegistry()
    for name in ("x", "w", "y"):
        reg.register(name)
    def seconds(source: str, n: int) -> float:
        events = np.zeros(n, reg.dtype(["x", "w"]))
        events["type"] = reg.id(source)
        events["ts"] = events["ats"] = np.arange(n) * 10
        events["seq"] = np.arange(1, n + 1)
        graph = Graph(reg, sources=("x", "w")).add("still", Still(), idle_after=0)
        start = time.perf_counter()
        InProcessRuntime(graph).run(events, step_ticks=0)
        return time.perf_counter() - start

    figures: dict[str, list[float]] = {"step_overhead_us": [], "one_event_step_us": []}
    reference = []
    seconds("w", 100), seconds("x", 100)  # load the kernels
    for _ in range(repeat):
        for key, source in (("step_overhead_us", "w"), ("one_event_step_us", "x")):
            figures[key].append(seconds(source, steps) / steps * 1e6)
        reference.append(_heapq_seconds(steps) / steps * 1e9)
    result = {k: round(statistics.median(v), 2) for k, v in figures.items()}
    result["heapq_ns_per_event"] = round(statistics.median(reference), 1)
    print(f"a step through the in-process runtime, an ordering unit and a detector that "
          f"does nothing: {result['step_overhead_us']:.1f} us with no event (progress "
          f"only), {result['one_event_step_us']:.1f} us with one event (heapq K-slack: "
          f"{result['heapq_ns_per_event']:.0f} ns per event)")
    return result


def _heapq_seconds(n: int) -> float:
    """Seconds the heapq K-slack of ``benchmarks/ordering.py`` takes for ``n`` events."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ordering import run_heapq
    from ordering import stream as ordering_stream

    rate, _ = run_heapq(ordering_stream(n, seed=1))
    return n / rate


SWEEP = (1_000, 2_000, 4_000, 10_000, 20_000, 50_000, 100_000)


def sweep(reg: TypeRegistry, batch: int, seed: int, n: int = 20_000,
          repeat: int = 3) -> dict[str, dict[str, float]]:
    """Fig. 10: time per event against the window size, both selections."""
    print(f"window sweep (Fig. 10): {repeat} x {n:,} events after a window-size prefill")
    out: dict[str, dict[str, float]] = {}
    for window in SWEEP:
        events = stream(reg, window + repeat * n, seed)
        row: dict[str, float] = {}
        for selection in SELECTIONS:
            got = measure(engines_for(selection, window, reg), events, window,
                          n, repeat, batch, 0)
            row[f"aip_{selection}"] = round(got["aip_ms"], 5)
            row[f"cdp_{selection}"] = round(got["cdp_ms"], 5)
        print(f"  window {window:>7,}: " + "  ".join(f"{k} {v:.4f}" for k, v in row.items())
              + " ms/event")
        out[str(window)] = row
    return out


if __name__ == "__main__":
    main()
