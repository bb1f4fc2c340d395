"""CDP on a CUDA GPU against CDP on the CPU in the paper's base scenario (Cugola &
Margara, JPDC 2012, Fig. 8) and the window sweep of Fig. 10.

    python benchmarks/rules_gpu.py --quick
    python benchmarks/rules_gpu.py

Same scenario, stream and method as ``benchmarks/rules.py`` (rule R5 with ``last`` and
with ``each``, prefill of one window, then the measured events in batches and one per
call, medians of interleaved repeats, composites compared between the engines); ratios
are CPU time over GPU time. ``gpu`` launches a kernel for every step (the paper's
engine: what the sweep reproduces); ``auto`` is the engine as deployed, which runs
steps with less work than ``MIN_GPU_WORK`` on the CPU. ``restore_ms_*`` is a rollback
by one batch, as a speculative ordering unit does it.

R5 binds ``$x`` by equality, so the CPU engine looks each sequence's events up in the
column's equality index and the GPU's full scan competes with a lookup. The *scan
sweep* (``scan_sweep`` in the JSON line) measures the other kind of rule, one whose
steps only a scan can check: ``SCAN``, selective inequalities between the elements
(about one composite per 10,000 events at a 100k window). Its prefill holds no
terminator (the C events of the first window are turned into A and B), so that filling
the columns costs no scans. The last line printed is one JSON object.

Without a GPU it prints one line saying so and exits with status 3 ("nothing measured"),
so that a script running it can tell a skipped benchmark from a passed one (0) and from a
failed one (1). Numba's CUDA simulator is not a GPU: it is refused unless
``--simulator`` is given, which only checks that the script runs (timings meaningless).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import numpy as np
from numba import config, cuda
from rules import SELECTIONS, VALUES, compare, feed, measure, registry, rule, stream

from specula.detectors.rules.cdp import CDPEngine

NOTHING_MEASURED = 3
SWEEP = (1_000, 2_000, 4_000, 10_000, 20_000, 50_000, 100_000)
SCAN = ("define CE(att1: int, att2: int) from C() as c "
        "and {sel} B(att > c.att + 49500) as b within {w} from c "
        "and {sel} A(att < b.att - 49990) as a within {w} from b "
        "where att1=c.att and att2=a.att")
SCAN_SWEEP = (1_000, 10_000, 50_000, 100_000, 200_000)


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
    p.add_argument("--quick", action="store_true", help="fewer events per measurement")
    p.add_argument("--events", type=int, default=None, help="measured events per repeat")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--window", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=1_000)
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
    args = p.parse_args()
    if config.ENABLE_CUDASIM and not args.simulator:
        print("rules_gpu: NUMBA_ENABLE_CUDASIM is set, and the simulator is not a GPU; "
              "nothing measured (pass --simulator to check the script anyway)")
        return NOTHING_MEASURED
    if not cuda.is_available():
        print("rules_gpu: no CUDA GPU on this machine (numba.cuda.is_available() is False); "
              "nothing measured")
        return NOTHING_MEASURED
    n = args.events or (20_000 if args.quick else 100_000)
    single = (500 if args.quick else 2_000) if args.single is None else args.single
    reg = registry()
    window = args.window
    events = stream(reg, window + args.repeat * n + single, args.seed)
    print(f"{_device()}; R5, 3 types, attributes in [1, {VALUES}], window {window:,} ticks; "
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
        sweep_n = max(1, n // 4) if args.quick else min(n, 20_000)
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
        result["scan_sweep"] = scan_sweep(reg, windows, 300 if args.quick else 1_000, args)
    result.update(events=n, repeat=args.repeat, window=window, batch=args.batch,
                  device=_device())
    print(json.dumps(result))
    return 0


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


def _device() -> str:
    if config.ENABLE_CUDASIM:
        return "Numba CUDA simulator"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


if __name__ == "__main__":
    sys.exit(main())
