"""Fuzzing the ``specula`` command line: any argv gives status 0 or 2, and 2 comes with
exactly one line on stderr, all before Spark, Ray or a run starts.

The tests call ``main(argv, start=False)``: the very checks ``main`` makes before it
starts anything, without starting it.
"""

from __future__ import annotations

import numpy as np
import pytest
from fuzzing import budget, no_hang
from hypothesis import given
from hypothesis import strategies as st

from specula import events as ev
from specula.cli import main
from specula.detectors.examples import example_registry
from specula.pipelines.synthetic import abc_stream

pytestmark = pytest.mark.fuzz

MODULE = '''
from specula.pipelines.synthetic import abc_stream, example_graph
from specula.detectors.examples import example_registry

graph = example_graph(0.5, k0=300)
not_a_graph = 42

def source():
    return abc_stream(example_registry(), 100, seed=2, max_delay=20)

def raising():
    raise RuntimeError("no graph today")

def not_events():
    return [1, 2, 3]
'''

OPTIONS = ["--events", "--seed", "--max-delay", "--k0", "--retraction", "--step-ticks",
           "--ticks-per-second", "--cost-us", "--source", "--address", "--in-process",
           "--batch-size", "--report", "--graph", "--out", "--spark-master", "--ray-address",
           "--seconds", "--profile", "--no-delays", "--alpha", "--k0-ms", "--speed",
           "--no-plots", "--no-progress", "--watch", "--idle-timeout", "--checkpoint-interval",
           "--help", "-h",
           "--bogus", "--"]
VALUES = ["0", "1", "-1", "2", "0.5", "1.5", "nan", "inf", "-inf", "1e400", "9" * 30,
          str(2**63), str(2**62), "adaptive", "full", "on-demand", "partial", "debs2013",
          "paper", "", " ", "x", "é", "cli_fuzz:graph", "cli_fuzz:source", "cli_fuzz:raising",
          "cli_fuzz:not_a_graph", "cli_fuzz:not_events", "cli_fuzz:", ":graph", "nomodule:x",
          "cli_fuzz", "a:b:c", "good.npy", "flat.npy", "junk.npy", "good.msgpack",
          "junk.msgpack", "data.csv", "folder", "folder/new", "data.csv/run", "missing.csv",
          "soccer", "local[1]", "127.0.0.1:1"]
argvs = st.tuples(st.sampled_from(["demo", "run", "replay", "", "bogus", "--help"]),
                  st.lists(st.one_of(st.sampled_from(OPTIONS), st.sampled_from(VALUES),
                                     st.text(max_size=4)), max_size=7)
                  ).map(lambda t: [t[0], *t[1]])


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A folder with a graph module, good and bad sources, made once per test."""
    (tmp_path / "cli_fuzz.py").write_text(MODULE)
    raw = abc_stream(example_registry(), 100, seed=2, max_delay=20)
    np.save(tmp_path / "good.npy", raw)
    np.save(tmp_path / "flat.npy", np.arange(5))
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY garbage")
    (tmp_path / "good.msgpack").write_bytes(ev.encode_batch(raw))
    (tmp_path / "junk.msgpack").write_bytes(b"\xc1\xff")
    (tmp_path / "data.csv").write_text("")
    (tmp_path / "folder").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    with no_hang(30):
        try:
            code = main(argv, start=False)
        except SystemExit as exc:  # argparse exits by itself: --help, or a bad argument
            code = exc.code
    err = capsys.readouterr().err
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        assert err.startswith("specula") and err.endswith("\n") and err.count("\n") == 1, \
            (argv, err)


@budget(250)
@given(argvs)
def test_fuzz_command_line(project, capsys, argv):
    check(argv, capsys)


@budget(100)
@given(st.sampled_from(["demo", "replay"]),
       st.sampled_from(["--events", "--seed", "--max-delay", "--k0", "--step-ticks",
                        "--ticks-per-second", "--cost-us", "--seconds", "--alpha", "--k0-ms",
                        "--speed", "--batch-size", "--idle-timeout",
                        "--checkpoint-interval"]),
       st.one_of(st.sampled_from(VALUES), st.integers().map(str),
                 st.floats(allow_nan=True).map(repr), st.text(max_size=6)))
def test_fuzz_numbers(project, capsys, command, option, value):
    check([command, option, value], capsys)
    check([command, f"{option}={value}"], capsys)


# ------------------------------------------------------------------ found by fuzzing


@pytest.mark.parametrize(("argv", "message"), [
    (["demo", "--seed", "-1"], "specula demo: error: argument --seed: expected an integer >= 0, "
                               "got '-1' (see specula demo --help)"),
    (["demo", "--events", "1" + "0" * 400], None),
    (["demo", "--max-delay", str(2**70)], "specula demo: error: argument --max-delay: "
     "expected an integer <= 1,152,921,504,606,846,976, got '1180591620717411303424' "
     "(see specula demo --help)"),
    (["demo", "--step-ticks", str(2**64)], None),
    (["demo", "--events", str(10**12)], None),
    (["replay", "--seconds", "1e308"], None),
    (["replay", "--k0-ms", "inf"], "specula replay: error: argument --k0-ms: expected "
                                   "milliseconds >= 0, got 'inf' (see specula replay --help)"),
    (["replay", "--k0-ms", "1e300", "--in-process"],
     "specula replay: error: k0_ms 1e+300 is more ticks than any number holds"),
    (["replay", "--alpha", "0.5", "--k0-ms", "1e12", "--in-process"], None),
    (["replay", "missing.csv"], "specula replay: error: missing.csv: no such file or directory"),
    (["replay", "--watch"], "specula replay: error: --watch needs LOG to be a directory, and "
                            "Ray (not --in-process)"),
    (["run", "cli_fuzz:not_a_graph", "--source", "good.npy"],
     "specula run: error: MODULE:GRAPH cli_fuzz:not_a_graph: not a specula Graph (nor a "
     "function returning one)"),
    (["run", "cli_fuzz", "--source", "good.npy"],
     "specula run: error: expected MODULE:NAME, got 'cli_fuzz'"),
    (["run", ":graph", "--source", "good.npy"], None),
    (["run", "cli_fuzz:graph", "--source", "flat.npy"],
     "specula run: error: --source flat.npy: ValueError: batch must be a one-dimensional "
     "structured array"),
    (["run", "cli_fuzz:graph", "--source", "junk.msgpack"], None),
    (["run", "cli_fuzz:graph", "--source", "junk.npy"], None),
    (["replay", "--events=\n"], "specula: error: unrecognized arguments: --events=\\n "
                                 "(see specula --help)"),  # found by the soak run
    (["run", "cli_fuzz:graph", "--source", "cli_fuzz:raising"],
     "specula run: error: --source cli_fuzz:raising: RuntimeError: no graph today"),
])
def test_bad_arguments_found_by_fuzzing_give_one_line_and_status_2(project, capsys, argv,
                                                                   message):
    """Each was a traceback (ValueError, OverflowError from NumPy, math or round) or a
    message with status 1, or (--events, --seconds) ran until memory or patience ran out;
    the k0 and graph errors came only after Spark had started."""
    check(argv, capsys)
    try:
        code = main(argv, start=False)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    if message is not None:
        assert capsys.readouterr().err == message + "\n"
