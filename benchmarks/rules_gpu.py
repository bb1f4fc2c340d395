"""CDP on a CUDA GPU against CDP on the CPU: the figures the placement follows, then the
paper's base scenario (Cugola & Margara, JPDC 2012, Fig. 8) and the window sweep of
Fig. 10.

    python benchmarks/rules_gpu.py --quick      # the three headline ratios only
    python benchmarks/rules_gpu.py
    python benchmarks/rules_gpu.py --crossover  # the constants of the placement only

Headline ratios, CPU time over GPU time of the GPU engine as deployed (``auto``, below),
batches of ``--batch`` events, composites compared between the engines:

* ``gpu_vs_cpu_stock60``: OpenCEP's stock rule (``tests/detectors/rules/stock.py``:
  ``each`` steps, predicates between the elements, a pattern window, ``ties nonstrict``)
  with a 60-minute window over ``--stock-quotes`` minute quotes (1,000,000 by default),
  each engine over the whole stream once; matches compared by count and checksum.
* ``gpu_vs_cpu_r5_ineq``: R5 (``last``) with its binding turned into an inequality
  (``R5_INEQ``: ``att >= c.att and att <= c.att``, the same composites, which no equality
  index finds), window ``--window`` (100,000).
* ``gpu_vs_cpu_r5``: R5 (``last``) as in the paper, window ``--window``.

The rest (not with ``--quick``) uses the scenario, stream and method of
``benchmarks/rules.py`` (rule R5 with ``last`` and with ``each``, prefill of one window,
then the measured events in batches and one per call, medians of interleaved repeats,
composites compared between the engines); ratios are CPU time over GPU time. ``gpu``
launches a kernel for every step (the paper's engine: what the sweep reproduces);
``auto`` is the engine as deployed, which runs steps with less work than the bar
of their kind (``MIN_GPU_WORK_INDEXED`` and the others in ``cdp_gpu``) on the CPU.
``restore_ms_*`` is a rollback by one batch, as a speculative ordering unit does it.

R5 binds ``$x`` by equality, so the CPU engine looks each sequence's events up in the
column's equality index and the GPU's full scan competes with a lookup. The *scan
sweep* (``scan_sweep`` in the JSON line) measures the other kind of rule, one whose
steps only a scan can check: ``SCAN``, selective inequalities between the elements
(about one composite per 10,000 events at a 100k window). Its prefill holds no
terminator (the C events of the first window are turned into A and B), so that filling
the columns costs no scans. The last line printed is one JSON object.

``--crossover`` measures, instead of all the above, where the device starts to pay, per
kind of step (:data:`KINDS`): ``indexed``, a plain ``last`` step bound by equality
(``C(att=$x)``, ``B(att=$x)``: the CPU engine looks it up in an equality index);
``scan_last`` and ``scan_each``, one step of selective inequality, ``last`` (``B(att >
c.att + 49500)``, about one fit in 20,000 pairs) and ``each`` (``+ 49800``, one in
125,000, so that its composites stay few); ``reduce``, one ``Sum`` over a column without
an equality. A step's work is its *pairs*, the terminators of a batch times the events
in their window (what the engine compares with ``min_gpu_work``); the sweep sets both
(:func:`crossover_sizes`: ``--crossover-min-pairs`` to ``--crossover-max-pairs``, 1e3 to
1e8 by default, ``--crossover-per-decade`` sizes a decade, 3) in a stream of B and C
alternating after a prefill of the window's B events (:func:`crossover_stream`). Per
size the GPU engine with every step on the device (``min_gpu_work=0``) and the CPU
engine get the same events (``measure``: medians of ``--crossover-repeat`` interleaved
repeats, composites compared); the table gives the time per batch and CPU time over GPU
time. ``min_gpu_work_<kind>`` is the smallest size from which the device was faster at
that size and every larger one measured (None: never at the largest); a kind's sweep
stops after the device has won three sizes in a row, which bounds the CPU's share (the
larger one: the CPU engine alone took 19 s over the default sizes of all four kinds on a
shared 2-core machine, the device never stopping it). The run ends with a block of
constants to paste, stamped with the device and the date.

The figures need a CUDA GPU. Without one it says so, prints a JSON line with
``"measured": false`` and the reason, and exits with status 3 ("nothing measured"), so
that a script running it can tell a skipped benchmark from a passed one (0) and from a
failed one (1). Numba's CUDA simulator is not a GPU: it is refused unless
``--simulator`` is given, which only checks that the script runs (timings meaningless;
give it small sizes, e.g. ``--window 300 --events 300 --stock-quotes 2000``, or
``--crossover --crossover-min-pairs 100 --crossover-max-pairs 1000 --crossover-repeat 1``;
there a repeat is one batch).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from numba import config, cuda
from rules import R5, SELECTIONS, VALUES, compare, feed, measure, registry, rule, stream

from specula.detectors.rules.cdp import CDPEngine

NOTHING_MEASURED = 3
SWEEP = (1_000, 2_000, 4_000, 10_000, 20_000, 50_000, 100_000)
SCAN = ("define CE(att1: int, att2: int) from C() as c "
        "and {sel} B(att > c.att + 49500) as b within {w} from c "
        "and {sel} A(att < b.att - 49990) as a within {w} from b "
        "where att1=c.att and att2=a.att")
SCAN_SWEEP = (1_000, 10_000, 50_000, 100_000, 200_000)
R5_INEQ = ("define CE(att1: int, att2: int) from C(att=$x) as c "
           "and {sel} B(att >= c.att and att <= c.att) as b within {w} from c "
           "and {sel} A(att >= b.att and att <= b.att) as a within {w} from b "
           "where att1=$x and att2=Sum(A(att=$x).value within {w} from b)")

KINDS = {  # kind of step: (selection, rule template) of the crossover sweep
    "indexed": ("last", "define CE(att1: int, att2: int) from C(att=$x) as c "
                             "and {sel} B(att=$x) as b within {w} from c "
                             "where att1=$x and att2=b.value"),
    "scan_last": ("last", "define CE(att1: int, att2: int) from C() as c "
                          "and {sel} B(att > c.att + 49500) as b within {w} from c "
                          "where att1=c.att and att2=b.att"),
    "scan_each": ("each", "define CE(att1: int, att2: int) from C() as c "
                          "and {sel} B(att > c.att + 49800) as b within {w} from c "
                          "where att1=c.att and att2=b.att"),
    "reduce": ("last", "define CE(att1: int, att2: int) from C() as c "
                       "where att1=c.att and att2=Sum(B().value within {w} from c)"),
}
MAX_TERMINATORS = 1_000  # per batch in the crossover sweep (then the window grows)
WINS_TO_STOP = 3  # sizes in a row the device must win for a kind's sweep to stop


def engines_for(selection: str, window: int, reg, threads: int | None, text: str = ""):
    """CDP-GPU with every step on the device, as deployed (``auto``), and CDP-CPU, on
    R5 or on ``text`` (a rule template with ``{sel}`` and ``{w}``)."""
    from specula.detectors.rules.cdp_gpu import GPUCDPEngine
    from specula.detectors.rules.parser import parse_rule

    r = parse_rule(text.format(sel=selection, w=window)) if text else rule(selection, window)
    return {"gpu": lambda: GPUCDPEngine(r, reg, threads_per_block=threads, min_gpu_work=0),
            "auto": lambda: GPUCDPEngine(r, reg, threads_per_block=threads),
            "cdp": lambda: CDPEngine(r, reg)}


def restore_ms(engines: dict, events: np.ndarray, batch: int, repeat: int = 5
               ) -> dict[str, float]:
    """Median time of a restore to the state one batch back, per engine (prefilled
    with ``events[:-repeat * batch]``)."""
    times: dict[str, list[float]] = {}
    for name, make in engines.items():
        engine = make()
        head = len(events) - repeat * batch
        feed(engine, events[:head], 10_000)
        for r in range(repeat):
            part = events[head + r * batch:head + (r + 1) * batch]
            state = engine.snapshot()
            feed(engine, part, batch)
            t0 = time.perf_counter()
            engine.restore(state)
            times.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
            feed(engine, part, batch)
    return {name: round(statistics.median(v), 3) for name, v in times.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the headline ratios only")
    p.add_argument("--events", type=int, default=None, help="measured events per repeat")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--window", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=1_000)
    p.add_argument("--stock-quotes", type=int, default=1_000_000,
                   help="quotes of the stock rule's 60-minute window run")
    p.add_argument("--single", type=int, default=None,
                   help="events also fed one per call (0: skip)")
    p.add_argument("--sweep", default=",".join(map(str, SWEEP)),
                   help="comma-separated windows of the sweep ('' to skip)")
    p.add_argument("--scan-sweep", default=",".join(map(str, SCAN_SWEEP)),
                   help="comma-separated windows of the scan rule's sweep ('' to skip)")
    p.add_argument("--threads", type=int, default=None, help="threads per block")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--simulator", action="store_true",
                   help="accept Numba's CUDA simulator (to check the script only)")
    p.add_argument("--crossover", action="store_true",
                   help="only the work per step from which the device is faster, per kind")
    p.add_argument("--crossover-min-pairs", type=float, default=1e3,
                   help="the smallest work per step swept (terminators x window events)")
    p.add_argument("--crossover-max-pairs", type=float, default=1e8,
                   help="the largest work per step swept")
    p.add_argument("--crossover-per-decade", type=int, default=3, help="sizes a decade")
    p.add_argument("--crossover-repeat", type=int, default=5,
                   help="interleaved repeats per size (the median is reported)")
    args = p.parse_args()
    if not 0 < args.crossover_min_pairs <= args.crossover_max_pairs:
        p.error("--crossover-min-pairs must be positive and at most --crossover-max-pairs")
    if min(args.crossover_per_decade, args.crossover_repeat) < 1:
        p.error("--crossover-per-decade and --crossover-repeat must be at least 1")
    why = _no_gpu(args.simulator)
    if why:
        print(f"rules_gpu: these figures need a CUDA GPU: {why}; nothing measured")
        print(json.dumps({"measured": False, "reason": why}))
        return NOTHING_MEASURED
    if args.crossover:
        print(json.dumps({"measured": True, **crossover(registry(), args)}))
        return 0
    n = args.events or (20_000 if args.quick else 100_000)
    reg = registry()
    print(f"{_device()}; headline: stock rule over {args.stock_quotes:,} quotes (60 min), "
          f"R5 and R5_INEQ (last, window {args.window:,}, {args.repeat} x {n:,} events); "
          f"batches of {args.batch:,}")
    result: dict[str, Any] = {"measured": True, **headline(reg, n, args)}
    if not args.quick:
        result.update(details(reg, n, args))
    result.update(events=n, repeat=args.repeat, window=args.window, batch=args.batch,
                  stock_quotes=args.stock_quotes, device=_device())
    print(json.dumps(result))
    return 0


def _no_gpu(simulator: bool) -> str:
    """Why no figure can be measured here ('' when a GPU, or the simulator accepted
    with ``--simulator``, is there)."""
    if config.ENABLE_CUDASIM and not simulator:
        return ("NUMBA_ENABLE_CUDASIM is set, and the simulator is not a GPU (pass "
                "--simulator to check the script anyway)")
    if not cuda.is_available():
        return "no CUDA GPU on this machine (numba.cuda.is_available() is False)"
    return ""


def headline(reg, n: int, args: argparse.Namespace) -> dict[str, float]:
    """``gpu_vs_cpu_stock60``, ``gpu_vs_cpu_r5_ineq`` and ``gpu_vs_cpu_r5`` (the
    module's docstring), each with the times per event behind it."""
    w = min(1_000, args.window)
    warm = stream(reg, 3 * w, seed=99)
    for text in (R5, R5_INEQ):  # compile the kernels
        measure(engines_for("last", w, reg, args.threads, text), warm, w, w, 1, args.batch, 0)
    out: dict[str, float] = {}
    events = stream(reg, args.window + args.repeat * n, args.seed)
    for key, text in (("r5_ineq", R5_INEQ), ("r5", R5)):
        engines = engines_for("last", args.window, reg, args.threads, text)
        del engines["gpu"]
        got = measure(engines, events, args.window, n, args.repeat, args.batch, 0)
        out[f"cpu_ms_per_event_{key}"] = round(got["cdp_ms"], 5)
        out[f"gpu_ms_per_event_{key}"] = round(got["auto_ms"], 5)
        out[f"gpu_vs_cpu_{key}"] = round(got["cdp_ms"] / got["auto_ms"], 2)
        print(f"  {key:<8} CPU {got['cdp_ms']:.4f} ms/event  GPU {got['auto_ms']:.4f} "
              f"ms/event  GPU {out[f'gpu_vs_cpu_{key}']:.2f}x faster "
              f"({got['composites']} composites)")
    out.update(stock60(args.stock_quotes, args.batch, args.threads, args.seed))
    return out


def stock60(n_quotes: int, batch: int, threads: int | None, seed: int) -> dict[str, float]:
    """The stock rule with a 60-minute window over ``n_quotes`` quotes on both engines,
    each over the whole stream once (after a warm-up run of the GPU one on a few)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests/detectors/rules"))
    from stock import STOCK_RULE, quotes, stock_registry

    from specula.detectors.rules.cdp_gpu import GPUCDPEngine
    from specula.detectors.rules.parser import parse_rule

    reg = stock_registry()
    events = quotes(reg, max(60, round(n_quotes / 2.4)), seed=seed)[:n_quotes]
    r = parse_rule(STOCK_RULE.format(minutes=60))
    _run(GPUCDPEngine(r, reg, ticks_per_second=1.0, threads_per_block=threads),
         events[:min(len(events), 5 * batch)], batch)
    seconds, found = {}, {}
    for name, engine in (("cpu", CDPEngine(r, reg, ticks_per_second=1.0)),
                         ("gpu", GPUCDPEngine(r, reg, ticks_per_second=1.0,
                                              threads_per_block=threads))):
        seconds[name], found[name] = _run(engine, events, batch)
    assert found["cpu"] == found["gpu"], "the engines disagree"
    ratio = round(seconds["cpu"] / seconds["gpu"], 2)
    print(f"  stock60  {len(events):,} quotes, {found['cpu'][0]:,} matches: CPU "
          f"{seconds['cpu']:.2f} s  GPU {seconds['gpu']:.2f} s  GPU {ratio:.2f}x faster")
    return {"cpu_s_stock60": round(seconds["cpu"], 3), "gpu_s_stock60": round(seconds["gpu"], 3),
            "stock60_quotes": len(events), "stock60_matches": found["cpu"][0],
            "gpu_vs_cpu_stock60": ratio}


def _run(engine, events: np.ndarray, batch: int) -> tuple[float, tuple[int, int]]:
    """Seconds to process ``events`` in batches (and flush), and the matches' count and
    checksum (over their terminators and elements' time stamps and sequence numbers)."""
    count = checksum = 0
    elapsed = 0.0
    for i in range(0, len(events) + 1, batch):
        t0 = time.perf_counter()
        found = engine.process(events[i:i + batch]) if i < len(events) else engine.flush()
        elapsed += time.perf_counter() - t0
        count += len(found)
        for k, element in enumerate(found.elements, start=1):
            checksum += k * int((element["ts"] * 31 + element["seq"]).sum())
    return elapsed, (count, checksum)


def details(reg, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """R5 with both selections, restores, and the two sweeps (``benchmarks/rules.py``'s
    method; the module's docstring)."""
    single = 2_000 if args.single is None else args.single
    window = args.window
    events = stream(reg, window + args.repeat * n + single, args.seed)
    print(f"R5, 3 types, attributes in [1, {VALUES}], window {window:,} ticks; "
          f"prefill {window:,} events, then {args.repeat} x {n:,} events in batches of "
          f"{args.batch:,} and {single:,} one per call")
    warm = stream(reg, 3_000, seed=99)
    for selection in SELECTIONS:  # compile the kernels
        measure(engines_for(selection, 1_000, reg, args.threads), warm, 1_000, 1_000, 1,
                args.batch, 10)
    result: dict[str, Any] = {}
    for selection in SELECTIONS:
        got = measure(engines_for(selection, window, reg, args.threads), events, window, n,
                      args.repeat, args.batch, single)
        result.update(compare(got, selection, ("cdp", "CDP-CPU"), ("gpu", "CDP-GPU"), single))
        result.update(compare(got, selection, ("cdp", "CDP-CPU"), ("auto", "CDP-GPU auto"),
                              single))
        restore = restore_ms(engines_for(selection, window, reg, args.threads),
                             events[:window + 10 * args.batch], args.batch)
        print(f"  {selection:<5} restore one batch back: " + "  ".join(
            f"{k} {v} ms" for k, v in restore.items()))
        result.update({f"restore_ms_{k}_{selection}": v for k, v in restore.items()})
    windows = [int(w) for w in args.sweep.split(",") if w]
    if windows:
        sweep_n = min(n, 20_000)
        print(f"window sweep (Fig. 10): {args.repeat} x {sweep_n:,} events after a "
              "window-size prefill")
        result["sweep"] = {}
        for w in windows:
            events = stream(reg, w + args.repeat * sweep_n, args.seed)
            row: dict[str, float] = {}
            for selection in SELECTIONS:
                both = engines_for(selection, w, reg, args.threads)
                del both["auto"]
                got = measure(both, events, w, sweep_n, args.repeat, args.batch, 0)
                row[f"gpu_{selection}"] = round(got["gpu_ms"], 5)
                row[f"cdp_{selection}"] = round(got["cdp_ms"], 5)
                row[f"gpu_vs_cdp_{selection}"] = round(got["cdp_ms"] / got["gpu_ms"], 2)
            print(f"  window {w:>7,}: " + "  ".join(f"{k} {v}" for k, v in row.items()))
            result["sweep"][str(w)] = row
    windows = [int(w) for w in args.scan_sweep.split(",") if w]
    if windows:
        result["scan_sweep"] = scan_sweep(reg, windows, 1_000, args)
    return result


def scan_sweep(reg, windows: list[int], n: int, args: argparse.Namespace
               ) -> dict[str, dict[str, float]]:
    """CPU and GPU time per event of ``SCAN`` per window (the module's docstring)."""
    print(f"scan rule sweep: {args.repeat} x {n:,} events after a prefill without "
          "terminators")
    for selection in SELECTIONS:  # compile the kernels of its steps
        measure(engines_for(selection, 1_000, reg, args.threads, SCAN),
                stream(reg, 1_200, seed=99), 1_000, 200, 1, args.batch, 0)
    out: dict[str, dict[str, float]] = {}
    for w in windows:
        events = stream(reg, w + args.repeat * n, args.seed)
        head = events[:w]
        c = np.flatnonzero(head["type"] == reg.id("C"))
        head["type"][c] = np.where(np.arange(len(c)) % 2 == 0, reg.id("A"), reg.id("B"))
        row: dict[str, float] = {}
        for selection in SELECTIONS:
            engines = engines_for(selection, w, reg, args.threads, SCAN)
            got = measure(engines, events, w, n, args.repeat, args.batch, 0)
            for name in ("gpu", "auto", "cdp"):
                row[f"{name}_{selection}"] = round(got[f"{name}_ms"], 5)
            row[f"gpu_vs_cdp_{selection}"] = round(got["cdp_ms"] / got["gpu_ms"], 2)
            row[f"auto_vs_cdp_{selection}"] = round(got["cdp_ms"] / got["auto_ms"], 2)
            row[f"composites_{selection}"] = got["composites"]
        print(f"  window {w:>7,}: " + "  ".join(f"{k} {v}" for k, v in row.items()))
        out[str(w)] = row
    return out


def crossover(reg, args: argparse.Namespace) -> dict[str, Any]:
    """Per kind of step (:data:`KINDS`) the table of CPU and GPU time per batch over the
    sizes of :func:`crossover_sizes`, and ``min_gpu_work_<kind>`` (the module's
    docstring); prints the tables and a block of constants."""
    sizes = crossover_sizes(args.crossover_min_pairs, args.crossover_max_pairs,
                            args.crossover_per_decade)
    device, today = _device(), datetime.datetime.now(datetime.UTC).date().isoformat()
    print(f"{device}; crossover: pairs = terminators per batch x B events in their window, "
          f"{len(sizes)} sizes from {sizes[0][0] * sizes[0][1]:,} to "
          f"{sizes[-1][0] * sizes[-1][1]:,}; medians of {args.crossover_repeat} "
          "interleaved repeats; ms per batch")
    out: dict[str, Any] = {"crossover": {}}
    for kind, (selection, text) in KINDS.items():
        print(f"{kind}: {text.format(sel=selection, w='W')}")
        rows = sweep_kind(reg, selection, text, sizes, args)
        out["crossover"][kind] = rows
        out[f"min_gpu_work_{kind}"] = first_win(rows)
    print(f"suggested constants:\n# (sequence, event) pairs from which a step on the device "
          f"was faster than on the CPU,\n# per kind: benchmarks/rules_gpu.py --crossover "
          f"on {device}, {today}")
    for kind in KINDS:
        print(constant_line(kind, out[f"min_gpu_work_{kind}"], out["crossover"][kind]))
    out.update(device=device, date=today, repeat=args.crossover_repeat,
               sizes_per_decade=args.crossover_per_decade, max_terminators=MAX_TERMINATORS)
    return out


def crossover_sizes(low: float, high: float, per_decade: int) -> list[tuple[int, int]]:
    """(terminators per batch, events in their window) for pairs from ``low`` to
    ``high``, ``per_decade`` sizes a decade: the window ten times the terminators until
    the batch holds :data:`MAX_TERMINATORS` of them, then the window alone grows."""
    sizes: list[tuple[int, int]] = []
    steps = math.floor(per_decade * math.log10(high / low) + 1e-9)
    for i in range(steps + 1):
        pairs = low * 10 ** (i / per_decade)
        t = min(MAX_TERMINATORS, max(1, round(math.sqrt(pairs / 10))))
        size = (t, max(1, round(pairs / t)))
        if size not in sizes:
            sizes.append(size)
    return sizes


def crossover_stream(reg, terminators: int, width: int, batches: int, seed: int
                     ) -> np.ndarray:
    """``width`` B events at the even ticks before the measured part, then ``batches``
    batches of ``2 * terminators`` events alternating B (even ticks) and C (odd): the
    window of ``2 * width`` ticks before each C holds ``width`` B events."""
    rng = np.random.default_rng(seed)
    measured = 2 * terminators * batches
    n = width + measured
    out = np.zeros(n, reg.dtype())
    out["ts"] = np.concatenate([2 * np.arange(width), 2 * width + np.arange(measured)])
    out["seq"] = np.arange(n)
    out["type"] = reg.id("B")
    out["type"][width + 1::2] = reg.id("C")
    for attr in ("att", "value", "other"):
        out[attr] = rng.integers(1, VALUES + 1, n)
    return out


def sweep_kind(reg, selection: str, text: str, sizes: list[tuple[int, int]],
               args: argparse.Namespace) -> list[dict[str, float]]:
    """One kind's table: per size the CPU and GPU engine's milliseconds per batch (each
    repeat enough batches for about 1e7 pairs, one in the simulator), until the device
    has won :data:`WINS_TO_STOP` sizes in a row."""
    # compile the kernels, over a window wide enough that a reduction takes two passes
    t, width = sizes[0][0], max(sizes[0][1], min(sizes[-1][1], 1_024))
    measure(_pair(selection, 2 * width, reg, args.threads, text),
            crossover_stream(reg, t, width, 2, seed=99), width, 2 * t, 1, 2 * t, 0)
    rows: list[dict[str, float]] = []
    print(f"  {'pairs':>11} {'C/batch':>7} {'window':>7} {'CPU ms':>9} {'GPU ms':>9} "
          f"{'CPU/GPU':>7} {'composites':>10}")
    for t, width in sizes:
        batches = 1 if config.ENABLE_CUDASIM else min(20, max(1, 10**7 // (t * width)))
        events = crossover_stream(reg, t, width, batches * args.crossover_repeat, args.seed)
        got = measure(_pair(selection, 2 * width, reg, args.threads, text), events, width,
                      2 * t * batches, args.crossover_repeat, 2 * t, 0)
        cpu, gpu = got["cdp_ms"] * 2 * t, got["gpu_ms"] * 2 * t
        rows.append({"pairs": t * width, "terminators": t, "window": width,
                     "cpu_ms": round(cpu, 4), "gpu_ms": round(gpu, 4),
                     "cpu_vs_gpu": round(cpu / gpu, 3), "composites": got["composites"]})
        print(f"  {t * width:>11,} {t:>7,} {width:>7,} {cpu:>9.3f} {gpu:>9.3f} "
              f"{cpu / gpu:>7.2f} {got['composites']:>10,}")
        if len(rows) >= WINS_TO_STOP and all(r["cpu_vs_gpu"] > 1
                                             for r in rows[-WINS_TO_STOP:]):
            break
    return rows


def _pair(selection: str, window: int, reg, threads: int | None, text: str) -> dict:
    """The GPU engine with every step on the device, and the CPU engine."""
    engines = engines_for(selection, window, reg, threads, text)
    del engines["auto"]
    return engines


def first_win(rows: list[dict[str, float]]) -> int | None:
    """The smallest pairs from which the device was faster at every size measured (None
    if it was not at the largest)."""
    since = None
    for row in reversed(rows):
        if row["cpu_vs_gpu"] <= 1:
            break
        since = int(row["pairs"])
    return since


def constant_line(kind: str, pairs: int | None, rows: list[dict[str, float]]) -> str:
    """A line of Python setting ``MIN_GPU_WORK_<KIND>`` to ``pairs``, with what it rests
    on."""
    name = f"MIN_GPU_WORK_{kind.upper()} = "
    top = rows[-1]
    if pairs is None:
        return (f"{name}None  # the CPU was faster up to {top['pairs']:,} pairs "
                f"(CPU/GPU {top['cpu_vs_gpu']:.2f} there)")
    at = next(r for r in rows if r["pairs"] == pairs)
    return (f"{name}{pairs:_}  # the device faster from {pairs:,} pairs (CPU/GPU "
            f"{at['cpu_vs_gpu']:.2f}) to {top['pairs']:,} ({top['cpu_vs_gpu']:.2f})")


def _device() -> str:
    if config.ENABLE_CUDASIM:
        return "Numba CUDA simulator"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


if __name__ == "__main__":
    sys.exit(main())
