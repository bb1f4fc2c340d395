"""The specula command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specula import events as ev
from specula.cli import main
from specula.detectors.examples import example_registry
from specula.events import TypeRegistry
from specula.pipelines.synthetic import abc_stream

MODULE = '''
from specula.pipelines.synthetic import abc_stream, example_graph
from specula.detectors.examples import example_registry

graph = example_graph(0.5, k0=300)

def source():
    return abc_stream(example_registry(), 3_000, seed=2, max_delay=20)
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "cli_graph.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_demo_prints_identical_answers(capsys):
    assert main(["demo", "--events", "3000"]) == 0
    out = capsys.readouterr().out
    assert "net outputs identical: yes" in out and "a_not_bc" in out


def test_run_in_process_from_a_module_and_a_msgpack_file(project, capsys):
    raw = abc_stream(example_registry(), 3_000, seed=2, max_delay=20)
    (project / "raw.msgpack").write_bytes(ev.encode_batch(raw))
    code = main(["run", "cli_graph:graph", "--source", "raw.msgpack", "--in-process",
                 "--report", "report.json"])
    assert code == 0
    out = capsys.readouterr().out
    assert "in-process: 3,000 raw events" in out
    report = json.loads((project / "report.json").read_text())
    assert report["summary"]["detectors"]["count"]["net_events"] > 0


def test_run_quarantines_bad_records_and_continues(project, capsys):
    raw = abc_stream(example_registry(), 1_000, seed=2, max_delay=20)
    raw["type"][[3, 7]] = 99  # unknown type ids
    np.save(project / "raw.npy", raw)
    assert main(["run", "cli_graph:graph", "--source", "raw.npy", "--in-process"]) == 0
    captured = capsys.readouterr()
    assert "2 bad records quarantined" in captured.err
    assert "998 raw events" in captured.out


def test_run_quarantines_raw_events_that_claim_a_producer_or_flags(project, capsys):
    raw = abc_stream(example_registry(), 1_000, seed=2, max_delay=20)
    raw["producer"][5] = 1  # would read as the output of the graph's first detector
    raw["flags"][[8, 9]] = ev.RETRACTION, ev.PROGRESS
    np.save(project / "raw.npy", raw)
    assert main(["run", "cli_graph:graph", "--source", "raw.npy", "--in-process"]) == 0
    captured = capsys.readouterr()
    assert "quarantined: record 5, field 'producer': a raw event's producer must be 0, " \
        "not 1" in captured.err
    assert "quarantined: record 8, field 'flags': a raw event's flags must be 0" in captured.err
    assert "3 bad records quarantined" in captured.err
    assert "997 raw events" in captured.out


def test_run_names_what_it_cannot_load(project, capsys):
    assert main(["run", "cli_graph:nothing", "--source", "cli_graph:source",
                 "--in-process"]) == 2
    assert capsys.readouterr().err.startswith("specula run: error: cannot load "
                                              "cli_graph:nothing: ")
    (project / "data.txt").write_text("")
    assert main(["run", "cli_graph:graph", "--source", "data.txt", "--in-process"]) == 2
    assert capsys.readouterr().err == ("specula run: error: source 'data.txt': not a "
                                       ".csv[.gz], .npy or .msgpack file, nor "
                                       "MODULE:FUNCTION\n")


def test_run_soccer_graph_on_the_real_debs_sample(tmp_path, monkeypatch, capsys):
    from pathlib import Path

    sample = Path(__file__).resolve().parent / "data/debs2013/sample-pregame-2000.csv"
    (tmp_path / "soccer_cli.py").write_text(
        "from specula.soccer.graph import soccer_graph\n"
        "graph = soccer_graph(alpha=1.0)\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "soccer_cli:graph", "--source", str(sample), "--in-process"]) == 0
    out = capsys.readouterr().out
    assert "2,000 raw events" in out and "near_foot" in out


def test_options_are_checked_from_the_one_table(capsys):
    with pytest.raises(SystemExit):
        main(["replay", "--alpha", "1.5"])
    assert "alpha must be a number in [0, 1] or 'adaptive'; got 1.5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--k0", "-5"])
    assert ("k0 must be an integer >= 0 and < 2**63 (ticks) or None; got -5"
            in capsys.readouterr().err)
    with pytest.raises(SystemExit):
        main(["replay", "--retraction", "partial"])
    assert "'on-demand', 'full'" in capsys.readouterr().err


def test_run_reads_a_msgpack_file_by_the_registry_it_was_encoded_with(project, capsys):
    canonical = example_registry()
    raw = abc_stream(canonical, 3_000, seed=2, max_delay=20)
    reordered = TypeRegistry()  # the same types, ids the other way round
    for t in reversed(canonical.types()):
        reordered.register(t.name, **dict(t.fields))
    theirs = raw.copy()
    theirs["type"] = [reordered.id(canonical.name(int(i))) for i in raw["type"]]
    (project / "canonical.msgpack").write_bytes(ev.encode_batch(raw))
    (project / "theirs.msgpack").write_bytes(ev.encode_batch(theirs, reordered))
    nets = {}
    for name in ("canonical", "theirs"):
        assert main(["run", "cli_graph:graph", "--source", f"{name}.msgpack", "--in-process",
                     "--report", f"{name}.json"]) == 0
        detectors = json.loads((project / f"{name}.json").read_text())["summary"]["detectors"]
        nets[name] = {d: s["net_events"] for d, s in detectors.items()}
    assert nets["theirs"] == nets["canonical"] and nets["canonical"]["a_not_bc"] > 0


RAISING_GRAPH = '''
def graph():
    raise RuntimeError("no graph today")
'''


@pytest.mark.parametrize(("argv", "message"), [
    (["replay", "--speed", "-1"],
     "specula replay: error: argument --speed: expected a number > 0, got '-1' "
     "(see specula replay --help)"),
    (["replay", "--seconds", "0"],
     "specula replay: error: argument --seconds: expected a number > 0, got '0' "
     "(see specula replay --help)"),
    (["replay", "--batch-size", "0"],
     "specula replay: error: argument --batch-size: expected an integer > 0, got '0' "
     "(see specula replay --help)"),
    (["replay", "--sources", "2", "--in-process"],
     "specula replay: error: --sources feeds a replay on Ray from source actors; "
     "--in-process and --watch read the stream in this process"),
    (["replay", "--sources", "0"],
     "specula replay: error: argument --sources: expected an integer >= 1, got '0' "
     "(see specula replay --help)"),
    (["replay", "data.csv", "--seconds", "5"],
     "specula replay: error: --seconds and --profile describe a generated match; LOG is "
     "replayed as it is"),
    (["replay", "--graph", "raising:graph", "--in-process"],
     "specula replay: error: --graph raising:graph: calling it raised RuntimeError: "
     "no graph today"),
    (["replay", "--in-process", "--out", "data.csv/run"],
     "specula replay: error: --out data.csv/run: {project}/data.csv is not a folder"),
    (["run", "cli_graph:graph", "--source", "cli_graph:source", "--batch-size", "-3"],
     "specula run: error: argument --batch-size: expected an integer > 0, got '-3' "
     "(see specula run --help)"),
    (["run", "raising:graph", "--source", "cli_graph:source", "--in-process"],
     "specula run: error: MODULE:GRAPH raising:graph: calling it raised RuntimeError: "
     "no graph today"),
    (["run", "cli_graph:graph", "--source", "cli_graph:source", "--report", "no/r.json"],
     "specula run: error: --report no/r.json: no folder no"),
    (["demo", "--events", "0"],
     "specula demo: error: argument --events: expected an integer > 0, got '0' "
     "(see specula demo --help)"),
    (["replay", "--ray-workers", "99"],
     "specula replay: error: --ray-workers 99: Spark on local-cluster[1,2,2048] offers 2 "
     "core(s) and keeps one for its own jobs: at most 1 Ray worker node(s)"),
    (["replay", "--spark-master", "local[3]", "--ray-workers", "3"],
     "specula replay: error: --ray-workers 3: Spark on local[3] offers 3 core(s) and keeps "
     "one for its own jobs: at most 2 Ray worker node(s)"),
    (["replay", "--ray-workers", "1", "--in-process"],
     "specula replay: error: --ray-workers sizes Ray on Spark; --in-process runs without "
     "Ray and --ray-address joins a Ray cluster"),
    (["replay", "--in-process", "--spark-master", "bogus://x"],
     "specula replay: error: --spark-master bogus://x: not a Spark master URL: expected "
     "local, local[N], local[*], local-cluster[WORKERS,CORES,MEMORY_MB], spark://HOST:PORT, "
     "yarn or k8s://..."),
])
def test_arguments_are_checked_before_anything_starts(project, capsys, argv, message):
    """One line on stderr and exit status 2, before Spark, Ray or a run starts."""
    (project / "raising.py").write_text(RAISING_GRAPH)
    (project / "data.csv").write_text("")
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse exits by itself
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err == message.format(project=project) + "\n"


@pytest.mark.parametrize("argv", [
    ["replay", "--in-process", "--out", "/proc/specula/run"],
    ["run", "cli_graph:graph", "--source", "cli_graph:source", "--in-process", "--report",
     "/proc/specula.json"],
])
def test_an_output_path_that_cannot_be_written_is_refused_whoever_runs_it(
        project, capsys, argv):
    """/proc lets no one make a file or folder, root included, whom permission bits
    would let: the check makes one (and removes it) rather than asking."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    option, path = argv[-2:]
    assert err.startswith(f"specula {argv[0]}: error: {option} {path}: cannot ")
    assert err.count("\n") == 1
    writable = project / Path(path).name
    assert main([*argv[:-2], option, str(writable)], start=False) == 0
    assert not writable.exists() and not list(project.glob(".specula-check-*"))


RUN = ["run", "cli_graph:graph", "--source", "cli_graph:source", "--in-process"]


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "cli_graph:graph", "--source", "folder.csv", "--in-process"],
     "--source folder.csv: is a folder, not a file"),
    (["run", "cli_graph:graph", "--source", "missing.npy", "--in-process"],
     "--source missing.npy: no such file or directory"),
    (["run", "cli_graph:graph", "--source", "pipe.csv", "--in-process"],
     "--source pipe.csv: not a regular file (a device, a pipe or a socket)"),
    (["run", "cli_graph:graph", "--source", "/proc/specula.npy", "--in-process"],
     "--source /proc/specula.npy: no such file or directory"),
    ([*RUN, "--report", ""], "--report: an empty path; give a file name"),
    ([*RUN, "--report", "folder.csv"], "--report folder.csv: is a folder"),
    ([*RUN, "--report", "/proc/x.json"], "--report /proc/x.json: cannot write there"),
    (["replay", "/dev/null", "--in-process"],
     "/dev/null: not a regular file (a device, a pipe or a socket)"),
    (["replay", "pipe.csv", "--in-process"],
     "pipe.csv: not a regular file (a device, a pipe or a socket)"),
    (["replay", "", "--in-process"], "LOG: an empty path"),
    (["replay", "--in-process", "--out", ""], "--out: an empty path; give a folder"),
    (["replay", "--in-process", "--out", "/proc/x"], "--out /proc/x: cannot make a folder"),
    (["replay", "--in-process", "--out", "data.csv"], "--out data.csv: {project}/data.csv "
                                                      "is not a folder"),
    (["score", "missing", "--referee", "folder.csv"], "OUT missing: no such file or directory"),
    (["score", "data.csv", "--referee", "folder.csv"], "OUT data.csv: not a folder"),
    (["score", "/proc", "--referee", "folder.csv"],
     "OUT /proc/referee_score.json: cannot write there"),
    (["score", "folder.csv", "--referee", "missing"],
     "--referee missing: no such file or directory"),
])
def test_every_path_argument_is_checked_before_anything_starts(project, capsys, argv,
                                                               message):
    """A path that cannot be read or written as the argument needs (missing, a folder for
    a file, a device or a pipe that would block, empty, where nothing can be made): one
    line on stderr and status 2 from ``main`` itself, before Spark, Ray or a run."""
    (project / "folder.csv").mkdir()
    (project / "data.csv").write_text("")
    os.mkfifo(project / "pipe.csv")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"specula {argv[0]}: error: {message.format(project=project)}"), err
    assert err.count("\n") == 1


DEBS = Path(__file__).resolve().parent / "data" / "debs2013"


def test_replay_referee_is_checked_before_anything_starts(capsys, tmp_path):
    """--referee reads the referee's folder before Spark starts: it needs a real log, and
    a folder that does not hold the annotations is refused in one line."""
    assert main(["replay", "--referee", str(DEBS / "referee-events")], start=False) == 2
    assert "a generated match brings its own interruptions" in capsys.readouterr().err
    log = str(DEBS / "sample-pregame-2000.csv")
    assert main(["replay", log, "--referee", str(tmp_path)], start=False) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"specula replay: error: --referee {tmp_path}: ") and \
        "game-interruption" in err
    assert main(["replay", log, "--referee", str(DEBS / "referee-events"), "--in-process"],
                start=False) == 0


@pytest.mark.slow  # embedded Ray
@pytest.mark.cluster
def test_run_on_ray_streams_a_position_log_with_the_in_process_answer(tmp_path):
    """``specula run`` on Ray hands a DEBS 2013 log to the runtime a batch at a time as
    it reads it (``read_batches``), and so does the in-process run, a step per batch.
    Both detect the same events, and nothing is late. Each runs as its own ``specula``
    process, as a user starts it."""
    from specula.soccer.debs2013 import write_positions
    from specula.soccer.match import generate_match

    match = generate_match(10.0, profile="debs2013", seed=2)
    write_positions(tmp_path / "match.csv", match.events, newline="\n")
    (tmp_path / "ball_cli.py").write_text(
        "from specula import Graph\n"
        "from specula.soccer.ball import AccelerationPeak, BallInPlay\n"
        "from specula.soccer.types import SOURCES, soccer_registry\n"
        "graph = Graph(soccer_registry(), sources=SOURCES)\n"
        "graph.add('ball_in_play', BallInPlay(), alpha=1.0)\n"
        "graph.add('acceleration_peak', AccelerationPeak(), alpha=1.0)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    summaries = {}
    for where in ("ray", "in_process"):
        args = [sys.executable, "-m", "specula.cli", "run", "ball_cli:graph", "--source",
                "match.csv", "--batch-size", "2000", "--report", f"{where}.json"]
        done = subprocess.run([*args, "--in-process"] if where == "in_process" else args,
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        summaries[where] = json.loads((tmp_path / f"{where}.json").read_text())["summary"]
    counts = {where: {name: (d["net_events"], d["late"]) for name, d in s["detectors"].items()}
              for where, s in summaries.items()}
    assert counts["ray"] == counts["in_process"]
    assert sum(net for net, _ in counts["ray"].values()) > 5
    assert not any(late for _, late in counts["ray"].values())
