"""The ``specula`` command."""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from specula import events as ev
from specula.actors import InProcessRuntime, RayRuntime, RunReport
from specula.actors.report import format_detectors
from specula.detectors import Graph
from specula.detectors.examples import example_registry
from specula.detectors.graph import Alpha
from specula.options import (
    NODE_OPTIONS,
    RUNTIME_OPTIONS,
    CostModel,
    OptionError,
    check_option,
)
from specula.ordering.net import ranked
from specula.pipelines.synthetic import abc_stream, example_graph


def demo(args: argparse.Namespace) -> int:
    """Run the example hierarchy on a synthetic out-of-order stream twice, with pure
    K-slack buffering and with adaptive speculation, and compare latency and answers."""
    reg = example_registry()
    raw = abc_stream(reg, args.events, seed=args.seed, max_delay=args.max_delay)
    span = (raw["ts"].max() - raw["ts"].min()) / args.ticks_per_second
    print(f"{len(raw):,} raw events over {span:.1f} s of virtual time; arrival delays up to "
          f"{args.max_delay} ticks, 5 % bursts up to {5 * args.max_delay}; seed {args.seed}")
    cost = CostModel(per_event=args.cost_us * 1e-6, per_snapshot=args.cost_us * 0.5e-6,
                     per_restore=args.cost_us * 1e-6, per_comparison=args.cost_us * 0.25e-6)
    runs: dict[str, RunReport] = {}
    alphas: tuple[tuple[str, Alpha], ...] = (("kslack", 1.0), ("adaptive", "adaptive"))
    for label, alpha in alphas:
        graph = example_graph(alpha, args.retraction, k0=args.k0)
        rt = InProcessRuntime(graph, cost_model=cost, ticks_per_second=args.ticks_per_second)
        t0 = time.perf_counter()
        runs[label] = rt.run(raw, step_ticks=args.step_ticks)
        print(f"  {label:<9} run: {time.perf_counter() - t0:.1f} s wall")
    print(_table(runs))
    same = all(_same(runs["kslack"], runs["adaptive"], name) for name in runs["kslack"].detectors)
    late = sum(len(r.late(n)) for r in runs.values() for n in r.detectors)
    print("net outputs identical: " + ("yes" if same else "no")
          + (f" ({late} late events; they may differ there)" if late else ""))
    return 0 if same or late else 1


def _table(runs: dict[str, RunReport]) -> str:
    a, b = runs["kslack"], runs["adaptive"]
    lines = [f"{'detector':<10} {'net':>7} {'late':>9} {'replays':>8} {'revised':>8} "
             f"{'mean alpha':>10} {'latency k-slack':>16} {'adaptive':>9} {'cut':>5}",
             ""]
    lines[1] = "-" * len(lines[0])
    for name in a.detectors:
        st = b.stats(name)
        la, lb = _mean(a.latencies(name)), _mean(b.latencies(name))
        alphas = [s.alpha for s in b.alpha_history(name)]
        lines.append(
            f"{name:<10} {len(b.net(name)):>7,} {len(a.late(name)):>4}/{len(b.late(name)):<4} "
            f"{st.relocations:>8,} {st.events_retracted + st.updates_sent:>8,} "
            f"{np.mean(alphas) if alphas else 1.0:>10.2f} {la:>16.1f} {lb:>9.1f} "
            f"{1 - lb / la if la else 0:>5.0%}")
    lines.append("late: k-slack/adaptive; latency: mean ticks from the newest raw input's "
                 "arrival to the first emission of the final version")
    return "\n".join(lines)


def _same(a: RunReport, b: RunReport, name: str) -> bool:
    x, y = ranked(a.net(name)), ranked(b.net(name))  # on-demand counters are labels
    names = [n for n in ev.fields_of(x.dtype) if n not in ("flags", "ats", "kplus", "origin")]
    return len(x) == len(y) and bool(np.all(x[names] == y[names]))


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if len(x) else float("nan")


def run(args: argparse.Namespace) -> int:
    """Run a graph defined in a Python module against a source, on Ray (embedded by
    default, ``--address`` to join a cluster) or in-process, and print the report."""
    graph, raw, made_with = _check_run(args)
    # an array is fed in batches of --batch-size rows; a position log is read in such
    # batches, and fed a batch per step, as it comes
    rows = args.batch_size if isinstance(raw, np.ndarray) else None
    runtime = InProcessRuntime(graph) if args.in_process else RayRuntime(
        graph, address=args.address, chaining=args.chaining)
    report = runtime.run(raw, registry=made_with, batch_rows=rows)
    print(_summary_table(report))
    if args.report:
        Path(args.report).write_text(report.to_json())
        print(f"report written to {args.report}")
    return 0


def _check_run(args: argparse.Namespace
               ) -> tuple[Graph, np.ndarray | Iterator[np.ndarray], ev.TypeRegistry | None]:
    """Everything ``run`` needs before Ray starts: the graph and the raw events."""
    if args.in_process and args.address:
        raise UsageError("--address joins a Ray cluster; --in-process runs without Ray")
    if _names_a_file(args.source):
        _check_readable(args.source, "--source", folder=False)
    if args.report is not None:
        _check_writable_file(args.report, "--report")
    graph = _graph(args.graph, "MODULE:GRAPH")
    return (graph, *_source(args.source, graph, args.batch_size))


def replay(args: argparse.Namespace) -> int:
    """Replay a DEBS 2013 log (or, without LOG, a generated match) through Spark and Ray on
    Spark: Spark validates and quarantines the rows, applies network delays and orders
    them by arrival; Ray, started on the Spark cluster, runs the detector graph with
    speculative ordering units; Spark writes the complex events, the emission log, late
    events, the quarantine and the metrics as Parquet, with a summary and plots, to
    --out. For a generated match it also scores the detections against the truth."""
    from specula.pipelines.replay import format_summary
    from specula.pipelines.replay import replay as run_replay
    from specula.soccer.scoring import format_scores, score_match
    from specula.soccer.spark_log import PositionLog

    config = _check_replay(args)
    graph = config.graph
    kind = PositionLog()
    if args.referee:
        kind = kind.with_referee(args.referee)
    print(f"writing to {config.out}/", flush=True)
    result = run_replay(config, kind)
    print(format_summary(result.summary))
    if result.truth is not None and graph is None:
        print(format_scores(score_match(result.report, result.truth)))
    from specula.soccer.analytics import coach_tables

    coach_tables(result, Path(config.out), config.plots)
    if config.plots:
        from specula.soccer.replay_page import write_run_page

        page = write_run_page(result, Path(config.out))
        if page is not None:
            print(f"replay page (open it in a browser): {page}")
    if args.debs_output:
        from specula.soccer.debs_output import write_run

        written = write_run(result, Path(config.out, "debs"))
        print(f"{len(written)} DEBS 2013 result streams (CSV) in {config.out}/debs/")
    print(f"complex events, emissions, late events, quarantine and metrics (Parquet), tables, "
          f"summary.json{' and plots' if config.plots else ''} in {config.out}/")
    return 0


def _check_replay(args: argparse.Namespace) -> Any:
    """Everything ``replay`` needs before Spark starts: its ReplayConfig, whose graph (the
    soccer one, with the options applied, or --graph's) is checked here too."""
    from specula.pipelines.replay import ReplayConfig, replay_graph
    from specula.soccer.spark_log import PositionLog

    if args.log is not None:
        _check_readable(args.log, "", folder=True)
    if args.watch and (args.in_process or not (args.log and os.path.isdir(args.log))):
        raise UsageError("--watch needs LOG to be a directory, and Ray (not --in-process)")
    _check_replay_combinations(args)
    _check_spark(args)
    if args.out is not None:
        _check_writable_folder(args.out, "--out")
    graph = None if args.graph == "soccer" else _graph(args.graph, "--graph")
    config = ReplayConfig(
        log=args.log, graph=graph, seed=args.seed,
        seconds=20.0 if args.seconds is None else args.seconds,
        profile=args.profile or "debs2013",
        delays=not args.no_delays, alpha=args.alpha, retraction=args.retraction,
        k0_ms=args.k0_ms,
        speed=args.speed, batch_size=args.batch_size, spark_master=args.spark_master,
        ray_workers=args.ray_workers, ray_address=args.ray_address, sources=args.sources,
        in_process=args.in_process, chaining=args.chaining, plots=not args.no_plots,
        progress=not args.no_progress, watch=args.watch,
        latency_plots=("hits", "passes", "shots") if graph is None else None,
        idle_timeout=_IDLE_TIMEOUT if args.idle_timeout is None
        else args.idle_timeout if args.idle_timeout > 0 else None,
        checkpoint_interval=_CHECKPOINT_INTERVAL if args.checkpoint_interval is None
        else args.checkpoint_interval,
        **({"out": Path(args.out)} if args.out else {}))
    replay_graph(config, PositionLog()).validate()
    return config


def score(args: argparse.Namespace) -> int:
    """Score the shots and possession of a replay of the real DEBS 2013 game (its --out
    folder) against the referee's annotations (the ``referee-events`` folder of the
    challenge data); print the table and write ``referee_score.json`` beside the run."""
    from specula.soccer.debs2013 import kickoff_aligned, read_referee_events
    from specula.soccer.referee_score import DEFAULT_TOLERANCE_S, score_run
    from specula.soccer.scoring import format_scores

    _check_score(args)
    try:
        referee = kickoff_aligned(read_referee_events(args.referee))
        scores = score_run(args.out, referee, args.tolerance_s or DEFAULT_TOLERANCE_S)
    except (FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    print(format_scores(scores))
    print(f"written to {Path(args.out, 'referee_score.json')}")
    return 0


def _check_score(args: argparse.Namespace) -> None:
    """OUT is a replay's folder that can take ``referee_score.json``; --referee a folder
    that can be read."""
    _check_readable(args.out, "OUT", folder=True)
    if not Path(args.out).is_dir():
        raise UsageError(f"OUT {args.out}: not a folder; give the --out folder of a "
                         "finished 'specula replay'")
    _check_writable_file(str(Path(args.out, "referee_score.json")), "OUT")
    _check_readable(args.referee, "--referee", folder=True)


class UsageError(Exception):
    """Arguments that cannot run: ``main`` prints one line and exits with status 2."""


#: Seconds a watch waits for a new file before it stops, unless --idle-timeout says.
_IDLE_TIMEOUT = 30.0
#: Seconds between a watch's checkpoints, unless --checkpoint-interval says.
_CHECKPOINT_INTERVAL = 60.0


def _check_replay_combinations(args: argparse.Namespace) -> None:
    """Refuse options that the rest of the command line makes meaningless."""
    if args.in_process and args.ray_address:
        raise UsageError("--ray-address joins a Ray cluster; --in-process runs without Ray")
    if args.ray_workers is not None and (args.in_process or args.ray_address):
        raise UsageError("--ray-workers sizes Ray on Spark; --in-process runs without Ray "
                         "and --ray-address joins a Ray cluster")
    if args.referee is not None:
        if not args.log:
            raise UsageError("--referee annotates a real log; a generated match brings its "
                             "own interruptions")
        from specula.soccer.spark_log import PositionLog

        try:
            PositionLog().with_referee(args.referee)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--referee {args.referee}: {exc}") from None
    if args.log and (args.seconds is not None or args.profile is not None):
        raise UsageError("--seconds and --profile describe a generated match; LOG is "
                         "replayed as it is")
    if args.idle_timeout is not None and not args.watch:
        raise UsageError("--idle-timeout applies to --watch only")
    if args.checkpoint_interval is not None and not args.watch:
        raise UsageError("--checkpoint-interval applies to --watch only")
    if args.sources > 1 and (args.in_process or args.watch):
        raise UsageError("--sources feeds a replay on Ray from source actors; --in-process "
                         "and --watch read the stream in this process")


#: What ``--source`` reads as a file (anything else that exists is a file too).
_SOURCE_FILES = (".csv", ".csv.gz", ".npy", ".msgpack", ".mpk")


def _names_a_file(spec: str) -> bool:
    """Does ``--source`` name a file (not a ``MODULE:FUNCTION``)?"""
    return spec.endswith(_SOURCE_FILES) or os.path.lexists(spec) or ":" not in spec


def _check_readable(path: str, option: str, *, folder: bool) -> None:
    """Prove ``path`` is a regular file (or, with ``folder``, a folder) this process can
    read, by opening it (permission bits say nothing to root): a device, a pipe or a
    folder where a file is read would fail, or hang, once the run has started."""
    name = f"{option} {path}" if option else path
    if not path:
        raise UsageError(f"{option or 'LOG'}: an empty path")
    target = Path(path)
    if not target.exists():
        raise UsageError(f"{name}: no such file or directory")
    try:
        if target.is_dir():
            if not folder:
                raise UsageError(f"{name}: is a folder, not a file")
            os.listdir(target)
        elif not target.is_file():
            raise UsageError(f"{name}: not a regular file (a device, a pipe or a socket)")
        else:
            target.open("rb").close()
    except OSError as exc:
        raise UsageError(f"{name}: cannot read it ({exc.strerror or exc})") from None


def _check_writable_folder(folder: str, option: str) -> None:
    """Prove ``folder`` can be made (or is there) and written, without making it: a
    folder is made and removed in the nearest one that exists (permission bits say
    nothing to root, nor of file systems such as /proc)."""
    if not folder:
        raise UsageError(f"{option}: an empty path; give a folder")
    target = Path(folder).absolute()
    existing = next(p for p in (target, *target.parents) if p.exists())
    if not existing.is_dir():
        raise UsageError(f"{option} {folder}: {existing} is not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".specula-check-", dir=existing))
    except OSError as exc:
        raise UsageError(f"{option} {folder}: cannot make a folder in {existing} "
                         f"({exc.strerror or exc})") from None


def _check_writable_file(path: str, option: str) -> None:
    """Prove ``path`` can be written, without changing it: an existing file is opened
    for appending, else a file is made and removed beside it."""
    if not path:
        raise UsageError(f"{option}: an empty path; give a file name")
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise UsageError(f"{option} {path}: is a folder")
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: no folder {folder}")
    try:
        if target.exists():
            target.open("ab").close()
        else:
            tempfile.TemporaryFile(prefix=".specula-check-", dir=folder).close()
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there ({exc.strerror or exc})") \
            from None


def _check_spark(args: argparse.Namespace) -> None:
    """The Spark master URL is one Spark takes, and the Ray worker nodes asked for fit
    the cores it offers, where the URL says how many (a local master)."""
    from specula.cluster.spark import EMBEDDED_MASTER, master_cores, ray_nodes_for

    master = args.spark_master or EMBEDDED_MASTER
    try:
        cores = master_cores(master)
    except ValueError as exc:
        raise UsageError(f"--spark-master {master}: {exc}") from None
    if args.ray_workers is not None and cores is not None \
            and args.ray_workers > (fits := ray_nodes_for(cores)):
        raise UsageError(f"--ray-workers {args.ray_workers}: Spark on {master} offers "
                         f"{cores} core(s) and keeps one for its own jobs: at most {fits} "
                         "Ray worker node(s)")


def _graph(spec: str, option: str) -> Graph:
    """The graph ``spec`` names: a Graph, or a function returning one, called here."""
    graph = _load(spec)
    if callable(graph) and not isinstance(graph, Graph):
        try:
            graph = graph()
        except Exception as exc:  # a user's function: any error is its own
            raise UsageError(f"{option} {spec}: calling it raised {type(exc).__name__}: "
                             f"{exc}") from None
    if not isinstance(graph, Graph):
        raise UsageError(f"{option} {spec}: not a specula Graph (nor a function returning "
                         "one)")
    return graph


def _number(kind: type, low: float, *, above: bool, high: float | None = None) -> Any:
    """An argparse ``type``: a finite ``kind`` (int or float) above (or at least) ``low``
    and, with ``high``, at most ``high`` (what the int64 columns, memory or the match
    generator can take: more would fail, or never end, after Spark and Ray started)."""
    word = "an integer" if kind is int else "a number"
    bound = f"{'>' if above else '>='} {low:g}"

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        # math.isfinite(10**400) raises OverflowError; every int is finite
        if (value is None or not (kind is int or math.isfinite(value)) or value < low
                or (above and value == low)):
            raise argparse.ArgumentTypeError(f"expected {word} {bound}, got {text!r}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"expected {word} <= {high:,}, got {text!r}")
        return value

    parse.__name__ = f"{word} {bound}"
    return parse


#: Integers end in int64 columns, where some are added to time stamps.
_MAX_INT = 2**62
_POSITIVE_INT = _number(int, 0, above=True, high=_MAX_INT)
_POSITIVE = _number(float, 0, above=True)
_NOT_NEGATIVE_INT = _number(int, 0, above=False, high=_MAX_INT)
_SEED = _number(int, 0, above=False, high=2**63 - 1)  # NumPy takes no negative seed
_NOT_NEGATIVE = _number(float, 0, above=False)


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line: ``specula replay: error: ... (see --help)``."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)\n")


#: How the replay options' help ends: their default, and what a user graph does.
_GRAPH_KEEPS = (" Default: {} for the soccer graph; a --graph keeps its own unless this is "
                "given, then it applies to every node.")


def _chaining_argument(parser: argparse.ArgumentParser) -> None:
    """``--chaining``: RayRuntime's ``chaining`` (RUNTIME_OPTIONS), 'auto' or 'none'."""
    option = RUNTIME_OPTIONS["chaining"]
    parser.add_argument("--chaining", choices=("auto", "none"), default=option.default,
                        help=option.doc + f" (default {option.default})")


def _option(name: str) -> Any:
    """An argparse ``type`` that parses and checks node option ``name`` from the table."""
    def parse(text: str) -> Any:
        value: Any = text
        number = float if name == "alpha" else int if name in ("k0", "partitions") else None
        if number is not None and text != "adaptive":
            with contextlib.suppress(ValueError):
                value = number(text)
        try:
            return check_option(name, value)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = name
    return parse


def _milliseconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"expected milliseconds >= 0, got {text!r}")
    return value


def _load(spec: str) -> Any:
    """``package.module:attribute`` -> the attribute (the current directory is importable)."""
    if ":" not in spec:
        raise UsageError(f"expected MODULE:NAME, got {spec!r}")
    module, name = spec.split(":", 1)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:  # ValueError: an empty name
        raise UsageError(f"cannot load {spec}: {exc}") from None
    except Exception as exc:  # the module itself fails to import
        raise UsageError(f"cannot load {spec}: importing it raised {type(exc).__name__}: "
                         f"{exc}") from None


def _source(spec: str, graph: Graph, batch_size: int
            ) -> tuple[np.ndarray | Iterator[np.ndarray], ev.TypeRegistry | None]:
    """Raw events from a DEBS 2013 position log (``.csv``, ``.csv.gz``: batches read as
    the run goes, :func:`~specula.soccer.debs2013.read_batches`), a ``.npy`` file, a
    msgpack batch file (``encode_batch``), or a ``MODULE:FUNCTION`` returning an array of
    raw events (``ats`` sets arrival order), and the registry they were made with: the
    soccer registry for a position log, the one a msgpack file was encoded with (if
    any); None (the graph's) for the others."""
    path = Path(spec)
    if spec.endswith((".csv", ".csv.gz")) and path.exists():
        from specula.soccer.debs2013 import read_batches
        from specula.soccer.types import soccer_registry

        tell = functools.partial(print, file=sys.stderr)
        return read_batches(path, batch_size, tell=tell), soccer_registry()
    made_with = None
    try:
        if path.suffix == ".npy" and path.exists():
            raw = np.load(path)
        elif path.suffix in (".msgpack", ".mpk") and path.exists():
            data = path.read_bytes()
            raw, made_with = ev.decode_batch(data), ev.batch_registry(data)
        elif ":" in spec and not path.exists():
            function = _load(spec)
            raw = function()
        else:
            raise UsageError(f"source {spec!r}: not a .csv[.gz], .npy or .msgpack file, "
                             "nor MODULE:FUNCTION")
        bad, errors = ev.validate_batch(raw, graph.registry if made_with is None
                                        else made_with)
        not_raw, refused = ev.validate_raw(raw)
        errors = sorted(errors + [e for e in refused if not bad[_row(e)]], key=_row)
        bad |= not_raw
    except UsageError:
        raise
    except Exception as exc:  # a file that is not a batch, a user's function that fails
        raise UsageError(f"--source {spec}: {type(exc).__name__}: {exc}") from None
    if bad.any():
        for e in errors[:5]:
            print(f"quarantined: {e}", file=sys.stderr)
        print(f"{int(bad.sum())} bad records quarantined", file=sys.stderr)
        raw = raw[~bad]
    return raw, made_with


def _row(error: ev.InvalidEvent) -> int:
    """The row a batch validation error names (each of them names one)."""
    assert error.record is not None, error
    return error.record


def _summary_table(report: RunReport) -> str:
    s = report.summary()
    rate = s["raw_events_per_s"] or 0
    return "\n".join([f"{report.runtime}: {s['raw_events']:,} raw events in "
                      f"{s['wall_seconds']:.2f} s ({rate:,.0f} events/s)",
                      *format_detectors(s["detectors"])])


def main(argv: Sequence[str] | None = None, *, start: bool = True) -> int:
    """Run the ``specula`` command line ``argv``; the exit status.

    Every argument is checked before Spark, Ray or a run starts: a bad one prints one line
    on stderr and gives status 2. With ``start=False`` only those checks run (status 0 if
    they pass); ``--help`` prints the help and gives 0 either way.
    """
    parser = _parser()
    args = parser.parse_args(argv)
    from specula.actors.signing import UntrustedCheckpointError
    from specula.cluster import ClusterError, clear_interrupt, interrupt
    from specula.cluster.java import JavaNotFoundError
    from specula.detectors.graph import GraphError
    from specula.pipelines.logs import LogError

    clear_interrupt()
    previous = signal.signal(signal.SIGTERM, interrupt)
    previous_int = signal.signal(signal.SIGINT, interrupt)
    try:
        if not start:
            args.check(args)
            return 0
        return args.func(args)
    except (UsageError, LogError, JavaNotFoundError, ClusterError, ev.RegistryMismatchError,
            GraphError, OptionError, UntrustedCheckpointError) as exc:
        print(f"specula {args.command}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"specula {args.command}: interrupted; Spark and Ray were shut down",
              file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)


def _parser() -> argparse.ArgumentParser:
    """The parser of the command line: each command's ``func`` runs it, its ``check``
    does what ``func`` checks before anything starts."""
    parser = _Parser(prog="specula", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="speculative ordering on a synthetic out-of-order stream",
                       description=demo.__doc__)
    p.add_argument("--events", type=_number(int, 0, above=True, high=10_000_000),
                   default=50_000, help="at most 10,000,000 (they are made in memory)")
    p.add_argument("--seed", type=_SEED, default=0)
    p.add_argument("--max-delay", type=_number(int, 0, above=False, high=2**60), default=20,
                   help="ticks")
    p.add_argument("--k0", type=_option("k0"), default=100,
                   help="initial K of level-1 units, ticks")
    p.add_argument("--retraction", choices=NODE_OPTIONS["retraction"].choices,
                   default="on-demand", help=NODE_OPTIONS["retraction"].doc)
    p.add_argument("--step-ticks", type=_POSITIVE_INT, default=5,
                   help="raw events arriving within this many ticks of the first form "
                        "one step (run(step_ticks=...))")
    p.add_argument("--ticks-per-second", type=_POSITIVE, default=1_000.0)
    p.add_argument("--cost-us", type=_NOT_NEGATIVE, default=600.0,
                   help="modelled busy time per processed event, microseconds")
    p.set_defaults(func=demo, check=lambda args: None)  # argparse has checked it all
    r = sub.add_parser("run", help="run a graph from a Python module against a source",
                       description=run.__doc__)
    r.add_argument("graph", metavar="MODULE:GRAPH",
                   help="a Graph, or a function returning one, in an importable module")
    r.add_argument("--source", required=True,
                   help="a .npy or .msgpack file of raw events, or MODULE:FUNCTION")
    r.add_argument("--address", default=None, help="join this Ray cluster (default: embedded)")
    r.add_argument("--in-process", action="store_true", help="run without Ray")
    _chaining_argument(r)
    r.add_argument("--batch-size", type=_POSITIVE_INT, default=10_000,
                   help="raw events per batch at most: a position log is read and fed in "
                        "batches of this many (a step each), an array is fed in steps of "
                        "at most this many (run(batch_rows=...))")
    r.add_argument("--report", default=None, help="write the JSON report here")
    r.set_defaults(func=run, check=_check_run)
    s = sub.add_parser("replay", help="replay a DEBS 2013 log or a generated match through "
                                      "Spark and Ray on Spark", description=replay.__doc__)
    s.add_argument("log", nargs="?", default=None,
                   help="a DEBS 2013 position log: .csv, .csv.gz, Parquet with the 13 "
                        "position columns, or a directory of them; default: generate a match")
    s.add_argument("--graph", default="soccer",
                   help="'soccer' (default) or MODULE:GRAPH, a graph whose sources are "
                        "soccer types (ball, player, referee readings and the referee's "
                        "interruption_begin/_end: specula.soccer.types.SOURCES) with the "
                        "soccer fields; ids are matched by name")
    s.add_argument("--out", default=None, help="output folder (default: runs/<time stamp>)")
    s.add_argument("--spark-master", default=None,
                   help="Spark master URL (default: an embedded local-cluster)")
    s.add_argument("--ray-workers", type=_number(int, 1, above=False, high=1_000),
                   default=None,
                   help="Ray worker nodes to start on Spark, one CPU each (default: one "
                        "per core of the Spark cluster but one, which Spark keeps)")
    s.add_argument("--ray-address", default=None,
                   help="join this Ray cluster instead of starting Ray on Spark")
    s.add_argument("--sources", type=_number(int, 1, above=False, high=1_024), default=1,
                   help="feed the stream from this many source actors, each reading a "
                        "part of it cut by sensor, instead of from the driver (default 1: "
                        "the driver feeds)")
    s.add_argument("--in-process", action="store_true",
                   help="run the detectors in this process instead of on Ray")
    _chaining_argument(s)
    s.add_argument("--seconds", type=_number(float, 0, above=True, high=86_400), default=None,
                   help="length of a generated match, seconds (default 20, at most 86,400)")
    s.add_argument("--profile", choices=["debs2013", "paper"], default=None,
                   help="kind of generated match (default debs2013)")
    s.add_argument("--seed", type=_SEED, default=0, help="seed of the match and the delays")
    s.add_argument("--no-delays", action="store_true",
                   help="keep the recorded order instead of modelling network delays")
    s.add_argument("--referee", default=None,
                   help="the referee-events folder of the DEBS 2013 data: its game "
                        "interruptions (and the time outside the halves) stop play")
    s.add_argument("--alpha", type=_option("alpha"), default=None,
                   help=NODE_OPTIONS["alpha"].doc + _GRAPH_KEEPS.format("adaptive"))
    s.add_argument("--retraction", choices=NODE_OPTIONS["retraction"].choices,
                   default=None,
                   help=NODE_OPTIONS["retraction"].doc + _GRAPH_KEEPS.format("on-demand"))
    s.add_argument("--k0-ms", type=_milliseconds, default=None,
                   help="initial K of every detector, milliseconds" + _GRAPH_KEEPS.format("400"))
    s.add_argument("--speed", type=_POSITIVE, default=None,
                   help="pace as a multiple of real time (default: as fast as possible)")
    s.add_argument("--batch-size", type=_POSITIVE_INT, default=5_000,
                   help="raw events per batch (default 5,000): a push costs about the same "
                        "for few rows as for many, so fewer, larger batches take less CPU and "
                        "a little more latency; K at fan-ins must cover about a batch")
    s.add_argument("--no-plots", action="store_true",
                   help="do not write the PNG plots and the replay page (report.html)")
    s.add_argument("--debs-output", action="store_true",
                   help="also write the DEBS 2013 queries' results in the Grand Challenge's "
                        "schemas, one CSV per stream, under OUT/debs/")
    s.add_argument("--no-progress", action="store_true",
                   help="no progress lines for the phases of the job")
    s.add_argument("--watch", action="store_true",
                   help="live mode: LOG is a directory; process log files as they land in it "
                        "(Spark Structured Streaming)")
    s.add_argument("--idle-timeout", type=_NOT_NEGATIVE, default=None,
                   help="with --watch: stop after this many seconds without a new file "
                        "(default 30; 0: run until Ctrl-C)")
    s.add_argument("--checkpoint-interval", type=_POSITIVE, default=None,
                   help="with --watch: seconds between checkpoints, each committing the "
                        "detections that became final; a restart goes on from the last "
                        "(default 60)")
    s.set_defaults(func=replay, check=_check_replay)
    c = sub.add_parser("score", help="score a replay of the real game against the referee's "
                                     "annotations", description=score.__doc__)
    c.add_argument("out", help="the --out folder of a finished 'specula replay'")
    c.add_argument("--referee", required=True,
                   help="the referee-events folder of the DEBS 2013 data")
    c.add_argument("--tolerance-s", type=_POSITIVE, default=None,
                   help="seconds a detection may lie from its annotation (default 2: the "
                        "annotations were made by hand on an unsynchronised clock)")
    c.set_defaults(func=score, check=_check_score)
    return parser


def _one_line(message: str) -> str:
    """``message`` with line breaks escaped: an argument may hold them (``--seed $'1\\n'``)."""
    return message.replace("\r", "\\r").replace("\n", "\\n")


if __name__ == "__main__":
    sys.exit(main())
