"""Does the answer of the main job depend on how the stream is cut or paced?

    python benchmarks/replay_batches.py --seconds 65
    python benchmarks/replay_batches.py --quick

Runs ``specula replay`` (Spark, Ray on Spark, Parquet) on one generated match (profile
``paper``) in-process, then on Ray with raw batches of 1,000, 5,000 and 20,000 events
as fast as possible, and with 1,000-event batches paced at ``--speed`` times real time.
For each Ray run it prints the late events, K per level (the largest over the level's
detectors) and whether every detector's net output (the ``complex/`` Parquet, arrival
fields left out) equals the in-process one. Each variant is one run: the figures are
counts and equality, not timings. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from specula.pipelines.replay import ReplayConfig, replay
from specula.soccer.spark_log import PositionLog

ARRIVAL_FIELDS = ("flags", "ats", "kplus", "origin")


def net_rows(out: Path) -> set[tuple]:
    """Every net event of the run, as comparable tuples without arrival fields."""
    table = pq.read_table(out / "complex")
    names = sorted(n for n in table.column_names if n not in ARRIVAL_FIELDS)
    columns = [table.column(n).to_pylist() for n in names]
    return set(zip(*columns, strict=True))


def run(name: str, folder: Path, seconds: float, **options) -> dict:
    out = folder / name
    config = ReplayConfig(profile="paper", seconds=seconds, out=out, plots=False, **options)
    summary = replay(config, PositionLog()).summary
    levels: dict[int, float] = {}
    for d in summary["detectors"].values():
        levels[d["level"]] = max(levels.get(d["level"], 0.0), d["k_s"])
    return {"late": summary["late"], "k_ms_per_level": {lv: round(k * 1e3, 1) for lv, k in
                                                        sorted(levels.items())},
            "net": net_rows(out), "wall_s": round(summary["wall_seconds"], 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=65.0)
    parser.add_argument("--speed", type=float, default=4.0)
    parser.add_argument("--quick", action="store_true", help="10 s of play, two Ray runs")
    args = parser.parse_args()
    seconds = 10.0 if args.quick else args.seconds
    variants = {"batch_1000": {"batch_size": 1_000}, "batch_20000": {"batch_size": 20_000}}
    if not args.quick:
        variants = {"batch_1000": {"batch_size": 1_000}, "batch_5000": {"batch_size": 5_000},
                    "batch_20000": {"batch_size": 20_000},
                    f"speed_{args.speed:g}": {"batch_size": 1_000, "speed": args.speed}}
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        reference = run("in_process", folder, seconds, in_process=True)
        print(f"in-process: {len(reference['net'])} net events, late {reference['late']}, "
              f"K per level (ms) {reference['k_ms_per_level']}", flush=True)
        for name, options in variants.items():
            r = run(name, folder, seconds, **options)
            same = r["net"] == reference["net"]
            results[name] = {"late": r["late"], "k_ms_per_level": r["k_ms_per_level"],
                             "same_net_as_in_process": same, "wall_s": r["wall_s"],
                             "net_events": len(r["net"]),
                             "differing_events": len(r["net"] ^ reference["net"])}
            print(f"{name}: late {r['late']}, K per level (ms) {r['k_ms_per_level']}, "
                  f"same net output as in-process: {same} "
                  f"({len(r['net'] ^ reference['net'])} events differ)", flush=True)
    print(json.dumps({"seconds": seconds, "in_process_late": reference["late"],
                      "in_process_k_ms_per_level": reference["k_ms_per_level"], **results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
