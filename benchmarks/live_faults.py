"""Live faults: a watch of a generated match fed file by file, with bad files dropped
between the good ones and the driver killed (SIGKILL) mid-stream; the detections saved
against an uninterrupted in-process run of the same rows.

    python benchmarks/live_faults.py                      # 120 s of play, 8 files
    python benchmarks/live_faults.py --seconds 20 --files 4 --kill-after 2

1. Generate ``--seconds`` of play and cut it into ``--files`` position logs.
2. Start a local Ray cluster and ``specula replay DIR --watch`` joined to it; land the
   files one by one (each once the watch committed the one before), and after every
   other good file one bad one (a truncated ``.csv.gz``, binary garbage, a Parquet
   table of other columns) until the three are in.
3. After every ``--kill-after`` good files, SIGKILL the driver (``--kills`` times at
   most), start the watch again on the same ``--out`` and go on landing files; the
   last watch ends by its idle timeout (``--idle``).
4. Compare the saved detections (``OUT/complex``) with the in-process run of every good
   row, per detector: rows missing, rows more than once.

The last line printed is one JSON object: ``seconds``, ``files``, ``driver_kills``,
``actor_kills`` (0: the watch's actors are restarted by Ray after crashes, which
``benchmarks/soak.py`` measures), ``bad_files``, ``quarantined``, ``detections``,
``missing``, ``duplicated``, ``wall_seconds``.

With ``--soak MINUTES`` it measures a long watch instead: a first file, and once the
watch committed its first micro-batch (Spark's start may take minutes on a loaded
machine) a file of ``--file-seconds`` of play every ``--every`` seconds for MINUTES
(warm-up included: the first ``--warm-up`` minutes are left out of the slopes), while
the resident memory of the watch's driver, its Spark JVMs, the executor's Python workers
(``pyspark.daemon``) and the Ray workers (the detector actors) is sampled every ~5 s,
and every ``--jvm-gc-every`` seconds, right after the next micro-batch's commit (the
JVMs between two batches), what the JVMs keep after a full collection (they run with
Native Memory Tracking). It prints three growth figures, least-squares slopes in MB per
minute after warm-up: ``driver_mb_per_min`` (the driver's RSS), ``jvm_mb_per_min`` (what
the JVMs keep, :func:`jvm_after_full_gc`: the memory they committed outside their heaps
but for G1's tables, and the floor of each one's live heap after a full collection,
:func:`jvm_growth`; their plain RSS follows G1's heaps, which grow towards ``-Xmx`` and
shrink at G1's own pace, a saw-tooth of ±400 MB whose slope over minutes changes sign
between runs of the same code, and their RSS less the heaps' free room swung by ±150 MB
between minutes: G1 takes its room back within seconds of the collection on a busy JVM)
and ``actors_mb_per_min`` (the Ray workers' largest sum in each segment: they are
started again at every checkpoint, so their sum is a saw-tooth too; a segment's peak
grows if they grow from one segment to the next). The plain slopes are printed beside
them (``*_rss_mb_per_min``: the JVMs', the driver's, of its own memory and of the shared
memory it touched, the executor's Python workers', the Ray workers'; the JVMs' live
heaps, their memory outside the heaps and their RSS less the heaps' free room after each
collection, ``jvm_*_mb_per_min``; the samples are kept in ``samples.json``), with
``complex_files`` (files in ``OUT/complex`` at the end), ``complex_files_per_5_min``
(the files it held after 5 minutes, or at the end of a shorter soak), ``events``, the
segments and Ray worker processes after warm-up, and the machine's load average (1
minute; lowest and highest after warm-up). ``--quick``: 3 minutes, 1 of warm-up.

    python benchmarks/live_faults.py --soak 7               # >= 5 minutes after warm-up
    python benchmarks/live_faults.py --soak 3 --quick
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from specula.actors.inprocess import InProcessRuntime
from specula.soccer.debs2013 import write_positions
from specula.soccer.graph import soccer_graph
from specula.soccer.match import generate_match

IGNORED = ("flags", "ats", "kplus", "origin", "seq", "producer")
REFERENCE_STEP = 100 * 10**9  # ps


def committed(out: Path) -> int:
    commits = out / "checkpoint" / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def bad_files(staging: Path, good: np.ndarray) -> dict[str, bytes]:
    """A .csv.gz cut within its first line (so none of its rows is read), binary
    garbage (one line), a Parquet table of other columns."""
    write_positions(staging / "cut.csv.gz", good[:50], newline="\n")
    gz = (staging / "cut.csv.gz").read_bytes()
    noise = np.random.default_rng(0).integers(0, 256, 3_000, np.uint8)
    noise[(noise == ord("\n")) | (noise == ord("\r"))] = ord("x")
    pq.write_table(pa.table({"sid": [1], "when": [2]}), staging / "other.parquet")
    return {"cut.csv.gz": gz[:20], "noise.bin": noise.tobytes(),
            "other.parquet": (staging / "other.parquet").read_bytes()}


def land(staging: Path, watched: Path, name: str, data: bytes) -> None:
    (staging / name).write_bytes(data)
    (staging / name).rename(watched / name)


def start(cmd: list[str], idle: float) -> subprocess.Popen:
    return subprocess.Popen([*cmd, "--idle-timeout", str(idle)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def wait_for(out: Path, commits: int, proc: subprocess.Popen, limit: float = 600) -> None:
    deadline = time.time() + limit
    while committed(out) < commits:
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit(f"the watch ended or stalled:\n{proc.stdout.read()}")
        time.sleep(0.5)


def land_part(staging: Path, watched: Path, i: int, part: np.ndarray) -> None:
    """Write part ``i`` of the match and land it in the watched folder (a rename)."""
    write_positions(staging / f"part{i:04}.csv", part, newline="\n")
    (staging / f"part{i:04}.csv").rename(watched / f"part{i:04}.csv")


def check_running(proc: subprocess.Popen, work: Path) -> None:
    if proc.poll() is not None:
        raise SystemExit(f"the watch ended:\n{(work / 'watch.log').read_text()}")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of process ``pid`` in MB (0 once it is gone): all of it, or one
    part (``RssAnon``: its own; ``RssShmem``: shared memory it touched, such as Ray's
    object store)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def processes() -> dict[int, tuple[int, str]]:
    """Every process of this machine: its parent and command line."""
    found = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                command = cmdline.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        found[int(name)] = (parent, command)
    return found


def descendants(root: int, table: dict[int, tuple[int, str]]) -> set[int]:
    """``root`` and its descendants in ``table`` (:func:`processes`)."""
    tree, grew = {root}, True
    while grew:
        more = {p for p, (parent, _) in table.items() if parent in tree} - tree
        grew, tree = bool(more), tree | more
    return tree


def memory(driver: int, out: Path) -> dict[str, float]:
    """RSS in MB of the watch's driver, its JVMs (Spark's), the executor's Python
    workers (``pyspark.daemon`` and its forks) and the workers of the Ray cluster this
    process started (not those of other clusters on the machine); the watch's last
    checkpoint (``segment``: the segment running is the one after it)."""
    table = processes()
    tree = descendants(driver, table)
    workers = [p for p in descendants(os.getpid(), table) if table[p][1].startswith("ray::")]
    return {"driver": rss_mb(driver), "driver_anon": rss_mb(driver, "RssAnon"),
            "driver_shmem": rss_mb(driver, "RssShmem"),
            "jvm": sum(rss_mb(p) for p in jvms(driver, table)),
            "spark_python": sum(rss_mb(p) for p in tree if "pyspark.daemon" in table[p][1]),
            "actors": sum(rss_mb(p) for p in workers), "workers": len(workers),
            "segment": last_checkpoint_id(out), "load": os.getloadavg()[0]}


def jvms(driver: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """The JVMs the watch ``driver`` started (Spark's driver and executor)."""
    table = processes() if table is None else table
    return [p for p in descendants(driver, table) if "java" in table[p][1].split(" ")[0]]


def last_checkpoint_id(out: Path) -> int:
    """The id of the watch's last committed checkpoint (-1: none yet)."""
    ids = [int(p.stem) for p in Path(out, "checkpoints").glob("*.json") if p.stem.isdigit()]
    return max(ids, default=-1)


#: Seconds between the collection of Spark's driver JVM and the executor's.
EXECUTOR_GC_DELAY_S = 3.0
#: Native Memory Tracking in the soak's JVMs (summary: a few percent of their time).
NMT_OPTION = "-XX:NativeMemoryTracking=summary"


def jcmd_path() -> str | None:
    """``jcmd`` of the ``JAVA_HOME`` the watch runs on, else the one on the path."""
    home = os.environ.get("JAVA_HOME")
    return (shutil.which("jcmd", path=os.path.join(home, "bin")) if home else None
            ) or shutil.which("jcmd")


def jvm_kept(jcmd: str, pid: int) -> dict[str, float] | None:
    """What JVM ``pid`` keeps, in MB, right after a full collection (``jcmd PID
    GC.run``, which returns once it is done): ``live_heap``, what its heap holds
    (``GC.heap_info``), and ``outside_heap``, the memory it committed outside the heap
    (Native Memory Tracking's committed total less the heap's: code, metaspace, threads,
    symbols), less G1's own tables (NMT's ``GC``: they follow the heap's committed size,
    bounded as it is, and moved by ±12 MB between collections); ``rss_kept``, its RSS
    less the heap's free room, for a check; ``nmt:CATEGORY``, what it committed in each
    of Native Memory Tracking's categories, to tell which grows. None where the JVM is
    gone or runs without Native Memory Tracking."""
    with tempfile.NamedTemporaryFile("w", suffix=".jcmd") as commands:
        commands.write("GC.run\nGC.heap_info\nVM.native_memory summary\n")
        commands.flush()  # one jcmd (a JVM's start) for the three
        said = subprocess.run([jcmd, str(pid), "-f", commands.name], capture_output=True,
                              text=True, timeout=180, check=False).stdout
    heap = re.search(r"heap\s+total (\d+)K, used (\d+)K", said)
    total = re.search(r"Total: reserved=\d+KB, committed=(\d+)KB", said)
    categories = {f"nmt:{name}": int(kb) / 1024 for name, kb in re.findall(
        r"^-\s+(\S[^(]*?) \(reserved=\d+KB, committed=(\d+)KB", said, re.MULTILINE)}
    if heap is None or total is None or "nmt:Java Heap" not in categories:
        return None
    committed, used = int(heap[1]) / 1024, int(heap[2]) / 1024
    return {"pid": pid, "live_heap": used,
            "outside_heap": int(total[1]) / 1024 - categories["nmt:Java Heap"]
            - categories.get("nmt:GC", 0.0),
            "rss_kept": rss_mb(pid) - (committed - used), **categories}


def jvm_after_full_gc(driver: int) -> dict[str, Any] | None:
    """:func:`jvm_kept` summed over the watch's JVMs, with ``kept``, their live heaps
    and committed memory outside them: their growth is a leak's, not G1's heaps growing
    and shrinking within ``-Xmx`` (the plain RSS: a saw-tooth of ±400 MB); each JVM's
    own under ``jvms``. None where ``jcmd`` is missing or a JVM could not be read."""
    jcmd = jcmd_path()
    if jcmd is None:
        return None
    table = processes()
    parts = []
    # Spark's driver JVM first: its collection lets Spark's ContextCleaner drop the
    # blocks of batches gone, which the executors then drop; the executors a few
    # seconds later
    for k, pid in enumerate(sorted(jvms(driver, table),
                                   key=lambda p: "CoarseGrainedExecutorBackend" in table[p][1])):
        if k:
            time.sleep(EXECUTOR_GC_DELAY_S)
        parts.append(jvm_kept(jcmd, pid))
    if not parts or None in parts:
        return None
    summed = {k: sum(p[k] for p in parts if p is not None) for k in
              ("live_heap", "outside_heap", "rss_kept")}
    return {"kept": summed["live_heap"] + summed["outside_heap"], **summed, "jvms": parts}


def window_minima(points: list[tuple[float, float]], width: float
                  ) -> tuple[list[float], list[float]]:
    """The lowest of ``points`` (time in seconds, value) in each ``width`` seconds from
    the first, with its time (:func:`jvm_growth`)."""
    if not points:
        return [], []
    first = points[0][0]
    lowest: dict[int, tuple[float, float]] = {}
    for t, v in points:
        k = int((t - first) // width)
        if k not in lowest or v < lowest[k][1]:
            lowest[k] = (t, v)
    return [lowest[k][0] for k in sorted(lowest)], [lowest[k][1] for k in sorted(lowest)]


def jvm_growth(gc_after: list[tuple[float, dict[str, Any]]], parts: int = 3
               ) -> float | None:
    """How fast what the JVMs keep (:func:`jvm_after_full_gc`, each one's under
    ``jvms``) grows, in MB per minute: the slope of what they committed outside their
    heaps, over every collection, plus each JVM's live-heap floor: the slope of its
    lowest live heap after a collection in each of ``parts`` equal stretches of the
    window. The floor because an executor's live heap after a collection sits at one of
    a few levels (55, 113-119 or 166-177 MB in one run) for minutes at a time, by the
    batches' tasks and blocks it holds, even right after a commit: the slope of every
    collection, or of the lowest of each three, follows where those stretches fall
    (-21 to +23 MB/min for the same code); a leak raises the floor. None with fewer
    than three collections or stretches."""
    if len(gc_after) < 3:
        return None
    growth = slope_per_min([t for t, _ in gc_after],
                           [sum(j["outside_heap"] for j in v["jvms"]) for _, v in gc_after])
    for pid in sorted({j["pid"] for _, v in gc_after for j in v["jvms"]}):
        heap = [(t, j["live_heap"]) for t, v in gc_after for j in v["jvms"] if j["pid"] == pid]
        width = (heap[-1][0] - heap[0][0]) / parts * (1 + 1e-9)
        floor = slope_per_min(*window_minima(heap, width)) if width > 0 else None
        if growth is None or floor is None:
            return None
        growth += floor
    return growth


def slope_per_min(times: list[float], values: list[float]) -> float | None:
    """Least-squares slope of ``values`` over ``times`` (seconds), per minute."""
    if len(times) < 3:
        return None
    return float(np.polyfit(np.asarray(times) / 60, np.asarray(values), 1)[0])


def segment_peaks(samples: list[tuple[float, dict[str, float]]], key: str
                  ) -> tuple[list[float], list[float]]:
    """Per segment of the watch whose samples are all in ``samples`` (the first and
    the last left out: cut by the window), the time and value of ``key``'s largest
    sample. The Ray workers are started again at every segment, so their memory is a
    saw-tooth whose slope over a few segments depends on where the window cuts it;
    the slope of the segments' peaks is their growth from one segment to the next."""
    peaks: dict[int, tuple[float, float]] = {}
    for t, m in samples:
        k = int(m["segment"])
        if k not in peaks or m[key] > peaks[k][1]:
            peaks[k] = (t, m[key])
    inner = [peaks[k] for k in sorted(peaks)[1:-1]]
    return [t for t, _ in inner], [v for _, v in inner]


def soak(args: argparse.Namespace) -> None:
    """A long watch, a file landing every ``--every`` seconds: memory slopes and files."""
    import ray

    if args.quick:
        args.soak, args.warm_up = 3.0, 1.0
    os.environ["RAY_AUTH_MODE"] = "disabled"
    n_files = int(args.soak * 60 / args.every) + 1
    match = generate_match(n_files * args.file_seconds, seed=args.seed)
    parts = np.array_split(match.events, n_files)
    work = Path(tempfile.mkdtemp(prefix="specula-watch-soak-"))
    staging, watched, out = work / "staging", work / "watched", work / "run"
    staging.mkdir()
    watched.mkdir()
    context = ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
                       log_to_driver=False)
    cmd = [sys.executable, "-m", "specula.cli", "replay", str(watched), "--watch", "--out",
           str(out), "--no-progress", "--no-plots", "--ray-address",
           context.address_info["gcs_address"], "--checkpoint-interval",
           str(args.checkpoint_interval)]
    log = open(work / "watch.log", "w")  # noqa: SIM115 (closed with the watch)
    env = {**os.environ, "JAVA_TOOL_OPTIONS": " ".join(
        filter(None, [os.environ.get("JAVA_TOOL_OPTIONS"), NMT_OPTION]))}
    proc = subprocess.Popen([*cmd, "--idle-timeout", "0"], stdout=log,  # until stopped
                            stderr=subprocess.STDOUT, text=True, env=env)
    samples: list[tuple[float, dict[str, float]]] = []
    collected: list[tuple[float, dict[str, float]]] = []  # the JVMs after a full GC
    at_5_min = 0
    began = time.time()
    try:
        # the first file, then the watch's first micro-batch (Spark's start may take
        # minutes on a loaded machine); the minutes of the soak count from there
        land_part(staging, watched, 0, parts[0])
        while not committed(out):
            check_running(proc, work)
            time.sleep(1.0)
        first_batch, began = time.time() - began, time.time()
        next_gc = began + args.jvm_gc_every if args.jvm_gc_every else float("inf")
        next_sample, gc_at = began, None  # gc_at: the micro-batch a collection waits for
        for i, part in enumerate(parts[1:], 1):
            due = began + i * args.every
            while time.time() < due:
                check_running(proc, work)
                if time.time() >= next_sample:
                    next_sample = time.time() + 5.0
                    samples.append((time.time() - began, memory(proc.pid, out)))
                if time.time() >= next_gc and gc_at is None:
                    gc_at = committed(out) + 1
                if gc_at is not None and (committed(out) >= gc_at
                                          or time.time() >= next_gc + args.jvm_gc_every):
                    # right after a micro-batch's commit: the JVMs between two batches
                    gc_at = None
                    kept = jvm_after_full_gc(proc.pid)
                    if kept is not None:
                        collected.append((time.time() - began, kept))
                    next_gc = time.time() + args.jvm_gc_every
                if time.time() - began <= 300:
                    at_5_min = len(list(Path(out, "complex").rglob("*.parquet")))
                time.sleep(max(0.0, min(0.5 if gc_at is not None else 5.0,
                                        next_sample - time.time(), due - time.time())))
            land_part(staging, watched, i, part)
        files = len(list(Path(out, "complex").rglob("*.parquet")))
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
        ray.shutdown()
    watched_min = (time.time() - began) / 60
    warm = args.warm_up * 60
    after = [(t, m) for t, m in samples if t >= warm]
    (work / "samples.json").write_text(json.dumps({"samples": samples,
                                                   "jvm_after_full_gc": collected}))
    times = [t for t, _ in after]
    slopes = {f"{k}_rss_mb_per_min": slope_per_min(times, [m[k] for _, m in after])
              for k in ("jvm", "driver", "driver_anon", "driver_shmem", "spark_python",
                        "actors")}
    gc_after = [(t, v) for t, v in collected if t >= warm]
    slopes.update({f"jvm_{k}_mb_per_min": slope_per_min([t for t, _ in gc_after],
                                                        [v[k] for _, v in gc_after])
                   for k in ("live_heap", "outside_heap", "rss_kept")})
    print(json.dumps({"minutes": round(watched_min, 1), "warm_up_minutes": args.warm_up,
                      "first_batch_s": round(first_batch),
                      "samples_after_warm_up": len(after),
                      "files_landed": len(parts), "events": len(match.events),
                      **rounded(measures(after, gc_after, slopes)),
                      **rounded(slopes),
                      "jvm_mb_end": round(after[-1][1]["jvm"]) if after else None,
                      "jvm_mb_max": round(max(m["jvm"] for _, m in after)) if after else None,
                      "driver_mb_end": round(after[-1][1]["driver"]) if after else None,
                      "segments_after_warm_up": len({m["segment"] for _, m in after}),
                      "ray_workers_after_warm_up": after[0][1]["workers"] if after else None,
                      "ray_workers_end": after[-1][1]["workers"] if after else None,
                      "load_average": [round(min(m["load"] for _, m in after), 1),
                                       round(max(m["load"] for _, m in after), 1)]
                      if after else None,
                      "complex_files": files,
                      "complex_files_per_5_min": at_5_min,
                      "exit_status": proc.returncode,
                      "samples": str(work / "samples.json")}))


def measures(after: list[tuple[float, dict[str, float]]],
             gc_after: list[tuple[float, dict[str, Any]]], slopes: dict[str, float | None]
             ) -> dict[str, float | None]:
    """The three growth figures of a soak, in MB per minute after warm-up: the driver's
    RSS; what the JVMs keep after a full collection (``gc_after``, :func:`jvm_after_full_gc`:
    their plain RSS is a saw-tooth of G1's heaps within their ``-Xmx``), by
    :func:`jvm_growth`; the Ray workers' peak per segment (:func:`segment_peaks`)."""
    jvm = jvm_growth(gc_after)
    return {"jvm_mb_per_min": jvm, "driver_mb_per_min": slopes["driver_rss_mb_per_min"],
            "actors_mb_per_min": slope_per_min(*segment_peaks(after, "actors"))}


def rounded(figures: dict[str, float | None]) -> dict[str, float | None]:
    return {k: None if v is None else round(v, 2) for k, v in figures.items()}


def rows(table: object, names: list[str]) -> Counter:
    cols = [np.asarray(table[n].tolist()).tolist() for n in names]  # type: ignore[index]
    return Counter(zip(*cols, strict=True))


def detected_per_type(report: object, graph: object) -> dict[str, int]:
    """Net detections per type of ``report``, as ``summary.json`` counts them."""
    counts: dict[str, int] = {}
    for name, node in graph.nodes.items():  # type: ignore[attr-defined]
        found = report.detectors[name].detected()  # type: ignore[attr-defined]
        for t in node.outputs:
            counts[t] = counts.get(t, 0) + found.get(graph.registry.id(t), 0)  # type: ignore[attr-defined]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--kill-after", type=int, default=3,
                        help="good files landed before each SIGKILL of the driver")
    parser.add_argument("--kills", type=int, default=1)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--idle", type=float, default=15.0,
                        help="seconds without a new file after which a watch ends")
    parser.add_argument("--soak", type=float, default=0.0,
                        help="minutes of a long watch whose memory is measured (0: faults)")
    parser.add_argument("--quick", action="store_true", help="--soak 3 --warm-up 1")
    parser.add_argument("--every", type=float, default=9.0, help="seconds between files")
    parser.add_argument("--file-seconds", type=float, default=2.0,
                        help="seconds of play per file")
    parser.add_argument("--warm-up", type=float, default=2.0, help="minutes")
    parser.add_argument("--checkpoint-interval", type=float, default=60.0)
    parser.add_argument("--jvm-gc-every", type=float, default=30.0,
                        help="seconds between full collections of the soak's JVMs before "
                             "what they keep is read (0: none; jvm_mb_per_min is then None)")
    args = parser.parse_args()
    if args.soak or args.quick:
        soak(args)
        return
    import ray

    os.environ["RAY_AUTH_MODE"] = "disabled"
    began = time.time()
    match = generate_match(args.seconds, seed=args.seed)
    parts = np.array_split(match.events, args.files)
    work = Path(tempfile.mkdtemp(prefix="specula-live-faults-"))
    staging, watched, out = work / "staging", work / "watched", work / "run"
    staging.mkdir()
    watched.mkdir()
    bad = bad_files(staging, parts[0])
    # every file written before the watch starts, each landed by a rename: writing one
    # while the watch waits could outlast its idle timeout on a loaded machine
    for i, part in enumerate(parts):
        write_positions(staging / f"part{i:03}.csv", part, newline="\n")
    context = ray.init(num_cpus=2, include_dashboard=False, configure_logging=False,
                       log_to_driver=False)
    cmd = [sys.executable, "-m", "specula.cli", "replay", str(watched), "--watch", "--out",
           str(out), "--no-progress", "--no-plots", "--ray-address",
           context.address_info["gcs_address"]]
    kills, landed, bad_names = 0, 0, list(bad)
    proc = start(cmd, args.idle)
    try:
        for i in range(len(parts)):
            (staging / f"part{i:03}.csv").rename(watched / f"part{i:03}.csv")
            landed += 1
            if bad_names and i % 2 == 0:
                name = bad_names.pop()
                land(staging, watched, name, bad[name])
                landed += 1
            wait_for(out, landed, proc)
            if kills < args.kills and (i + 1) % args.kill_after == 0 and i + 1 < len(parts):
                proc.kill()
                proc.wait()
                kills += 1
                print(f"killed the driver after {i + 1} file(s)", file=sys.stderr)
                proc = start(cmd, args.idle)
        output, _ = proc.communicate(timeout=1800)  # ends by its idle timeout
        if proc.returncode != 0:
            raise SystemExit(f"the last watch failed ({proc.returncode}):\n{output}")
    finally:
        if proc.poll() is None:
            proc.kill()
        ray.shutdown()

    graph = soccer_graph("adaptive", "on-demand", k0_ms=400.0, queries=True)
    raw = match.events.copy()
    raw["ats"] = raw["ts"]
    reference = InProcessRuntime(graph).run(raw, step_ticks=REFERENCE_STEP)
    saved = pq.read_table(out / "complex").to_pandas()
    missing = duplicated = detections = 0
    for name in graph.nodes:
        want = reference.net(name)
        names = [n for n in want.dtype.names if n not in IGNORED]
        expect = rows(want, names)
        got = rows(saved[saved["detector"] == name], names)
        detections += sum(expect.values())
        missing += sum((expect - got).values())
        duplicated += sum((got - expect).values())
    quarantined = pq.read_table(out / "quarantine").num_rows
    summary = json.loads((out / "summary.json").read_text())
    expected = detected_per_type(reference, graph)
    types_off = sorted(t for t in {*expected, *summary["detected"]}
                       if expected.get(t, 0) != summary["detected"].get(t, 0))
    print(json.dumps({"seconds": args.seconds, "files": args.files, "driver_kills": kills,
                      "actor_kills": 0, "bad_files": len(bad) - len(bad_names),
                      "quarantined": quarantined,
                      "detections": detections, "missing": missing,
                      "duplicated": duplicated,
                      "summary_detections": sum(summary["detected"].values()),
                      "summary_types_off": len(types_off),
                      "wall_seconds": round(time.time() - began, 1)}))


if __name__ == "__main__":
    main()
