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
by one batch, as a speculative ordering unit does it. The last line printed is one JSON
object.

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


def engines_for(selection: str, window: int, reg, threads: int | None):
    from specula.detectors.rules.cdp_gpu import GPUCDPEngine

    r = rule(selection, window)
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
    result.update(events=n, repeat=args.repeat, window=window, batch=args.batch,
                  device=_device())
    print(json.dumps(result))
    return 0


def _device() -> str:
    if config.ENABLE_CUDASIM:
        return "Numba CUDA simulator"
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


if __name__ == "__main__":
    sys.exit(main())
