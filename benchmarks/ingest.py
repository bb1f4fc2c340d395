"""How fast does Spark ingest a position log (validation, quarantine, delays, arrival order)?

    python benchmarks/ingest.py --quick          # a 20 s match, ~6 minutes
    python benchmarks/ingest.py --seconds 60     # ~820,000 rows

Writes one generated match (profile ``debs2013``, the real game's sensors) as a Parquet
position log and ingests it with :func:`specula.pipelines.spark_ingest.ingest` on the
embedded Spark master, with the delay model, twice in one Spark application: the first
ingestion pays for a cold JVM (class loading, code generation, JIT), the second is the
steady state a long log sees. Each variant runs in its own process, alternating,
``--repeat`` times; the figures are medians.

Variants, side by side: ``specula`` (the JVM options Specula sets for this log: C1
only below :data:`~specula.cluster.spark.SMALL_INPUT_BYTES` of text), ``tiered`` (the
options for a large log: C1 and C2) and ``hotspot_default`` (``tiered`` with
``_JAVA_OPTIONS=-XX:+DontCompileHugeMethods``, which the JVM applies after the command
line: HotSpot's default, under which methods over 8,000 bytes of bytecode stay
interpreted, as the validation's generated code did).

The last line printed is one JSON object: ``rows``, ``small_input`` (what Specula chose),
``cold_s`` / ``warm_s`` and ``warm_rows_per_s`` per variant, ``warm_speedup``
(hotspot_default's warm time over tiered's) and ``cold_speedup_small`` (tiered's cold
time over specula's: 1.0 for a log Specula does not count as small).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: variant -> (environment, JIT choice: "auto" is Specula's for the log, "tiered" C1 and C2)
VARIANTS = {"specula": ({}, "auto"), "tiered": ({}, "tiered"),
            "hotspot_default": ({"_JAVA_OPTIONS": "-XX:+DontCompileHugeMethods"}, "tiered")}


def child(log: str, folder: str, jit: str) -> None:
    """Ingest ``log`` twice in one Spark application; print the times as JSON."""
    from specula.cluster.spark import spark_session
    from specula.pipelines.delays import DelayModel
    from specula.pipelines.log_files import is_small_log
    from specula.pipelines.spark_ingest import ingest
    from specula.soccer.debs2013 import Metadata
    from specula.soccer.spark_log import PositionLog

    kind = PositionLog(metadata=Metadata.default())
    times = []
    small = jit == "auto" and is_small_log(log)
    with spark_session(small_input=small) as spark:
        for i in range(2):
            t = time.perf_counter()
            done = ingest(spark, kind, log, Path(folder) / f"run{i}", delays=DelayModel())
            times.append(time.perf_counter() - t)
    print(json.dumps({"rows": done.rows, "cold_s": times[0], "warm_s": times[1],
                      "small_input": small}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a 20 s match, one run per variant")
    p.add_argument("--seconds", type=float, default=None, help="match length (default 60)")
    p.add_argument("--repeat", type=int, default=None, help="runs per variant (default 3)")
    p.add_argument("--child", nargs=3, metavar=("LOG", "FOLDER", "JIT"),
                   help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(*args.child)
        return
    seconds = args.seconds or (20.0 if args.quick else 60.0)
    repeat = args.repeat or (1 if args.quick else 3)

    from specula.soccer.match import generate_match
    from specula.soccer.spark_log import write_position_parquet

    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "match.parquet"
        match = generate_match(seconds, profile="debs2013", seed=0)
        write_position_parquet(match.events, log)
        runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
        for i in range(repeat):
            for name, (env, jit) in VARIANTS.items():
                done = subprocess.run(
                    [sys.executable, __file__, "--child", str(log), f"{folder}/{name}{i}",
                     jit],
                    env={**os.environ, **env}, capture_output=True, text=True, check=True)
                runs[name].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"{name:16s} run {i + 1}: cold {runs[name][-1]['cold_s']:6.1f} s, "
                      f"warm {runs[name][-1]['warm_s']:6.1f} s", flush=True)
    rows = runs["specula"][0]["rows"]
    out: dict[str, float | int] = {"rows": rows, "seconds_of_match": seconds,
                                   "repeat": repeat,
                                   "small_input": runs["specula"][0]["small_input"]}
    for name, results in runs.items():
        cold = statistics.median(r["cold_s"] for r in results)
        warm = statistics.median(r["warm_s"] for r in results)
        out |= {f"cold_s_{name}": round(cold, 2), f"warm_s_{name}": round(warm, 2),
                f"warm_rows_per_s_{name}": round(rows / warm)}
    out["warm_speedup"] = round(out["warm_s_hotspot_default"] / out["warm_s_tiered"], 2)
    out["cold_speedup_small"] = round(out["cold_s_tiered"] / out["cold_s_specula"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
