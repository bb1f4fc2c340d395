"""Spark for the data pipeline, and Ray started on Spark (``ray.util.spark``).

The embedded default is a Spark ``local-cluster`` master on this machine: a real
standalone master and worker in separate JVMs, so that Ray on Spark finds the worker
processes it needs (a plain ``local[N]`` master works too). Everything started here is
stopped on exit, on errors and on Ctrl-C, and :func:`stray_processes` lets tests prove
it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specula.cluster import (
    ClusterError,
    check_reachable,
    keep_sigterm_handler,
    reinstall_sigterm_handler,
)
from specula.cluster.java import ensure_java

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: One worker JVM with 2 cores and 2 GB: one core runs the Ray worker node, one Spark jobs.
EMBEDDED_MASTER = "local-cluster[1,2,2048]"

#: A job whose input takes less text than this is small: its JVMs compile with C1 only
#: (``-XX:TieredStopAtLevel=1``). The C2 compiler's warm-up costs more CPU than its code
#: saves on a small log, and on a larger one it pays (docs/architecture.md, "JIT").
SMALL_INPUT_BYTES = 24 << 20

log = logging.getLogger(__name__)


#: What Spark remembers of finished work, kept small: a watch runs several jobs per
#: micro-batch, and the defaults (a thousand jobs, stages and SQL executions, a hundred
#: progress reports per query) hold hundreds of MB of history in the driver's JVM.
_BOUNDED_HISTORY = {
    "spark.ui.retainedJobs": "50", "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "5000", "spark.sql.ui.retainedExecutions": "20",
    "spark.sql.streaming.ui.retainedQueries": "5",
    "spark.sql.streaming.ui.retainedProgressUpdates": "20",
    "spark.sql.streaming.numRecentProgressUpdates": "20",
    "spark.cleaner.periodicGC.interval": "5min",
}

#: Spark SQL's thread pools, bounded: each keeps up to its bound of threads alive (a
#: cached pool whose core size is its bound starts a thread per task until it holds
#: them all, up to 60 s idle each), and a watch, which runs several queries per
#: micro-batch, grows them towards their defaults (16 to 1,024 threads): its driver JVM
#: went from 100 to ~190 threads in minutes, and on. Our queries run a few exchanges at
#: a time.
_BOUNDED_THREADS = {
    "spark.sql.broadcastExchange.maxThreadThreshold": "8",
    "spark.sql.shuffleExchange.maxThreadThreshold": "8",
    "spark.sql.subquery.maxThreadThreshold": "8",
    "spark.sql.resultQueryStage.maxThreadThreshold": "8",
}


@contextmanager
def spark_session(master: str | None = None, *, app_name: str = "specula",
                  small_input: bool = False, driver_memory: str | None = None
                  ) -> Iterator[SparkSession]:
    """A Spark session on ``master`` (default :data:`EMBEDDED_MASTER`), stopped on exit.

    Finds Java first (:func:`~specula.cluster.java.ensure_java`), makes the executors
    run this interpreter, turns the web UI off (no port to collide on) and Arrow on.
    ``small_input``: the job reads less than :data:`SMALL_INPUT_BYTES` of text, so its
    JVMs skip C2 compilation. ``driver_memory`` (e.g. ``"1g"``) bounds the driver JVM's
    heap, where ``local`` masters also run the tasks (default: a quarter of the RAM).
    """
    ensure_java()
    _prepare_environment()
    master = master or EMBEDDED_MASTER
    if master.startswith("spark://"):
        for hostport in master[len("spark://"):].split(","):  # HA masters: host:port,...
            check_reachable(f"spark://{hostport}", "Spark master")
    if master.startswith("local"):
        # One machine: bind to loopback rather than guessing an interface.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    # Thread stacks of 8 MB: the validation's one CASE over some 40 checks overflows
    # the 1 MB default in the analyzer of a streaming query's thread. HotSpot leaves
    # methods over 8,000 bytes of bytecode interpreted; the validation's generated code
    # is larger, so without -XX:-DontCompileHugeMethods it runs several times slower.
    # A long watch: G1 gives memory back to the system after a collection (free ratios)
    # and when the JVM idles between files (a periodic collection), instead of keeping
    # the high-water mark of its heap.
    options = (f"-Dlog4j2.configurationFile={Path(__file__).with_name('log4j2.properties')}"
               " -Xss8m -XX:-DontCompileHugeMethods"
               " -XX:MinHeapFreeRatio=10 -XX:MaxHeapFreeRatio=30 -XX:G1PeriodicGCInterval=30000"
               + (" -XX:TieredStopAtLevel=1" if small_input else ""))
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.extraJavaOptions", options)
               .config("spark.executor.extraJavaOptions", options)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.sql.session.timeZone", "UTC"))
    for name, value in {**_BOUNDED_HISTORY, **_BOUNDED_THREADS}.items():
        builder = builder.config(name, value)
    if driver_memory is not None:
        builder = builder.config("spark.driver.memory", driver_memory)
    for name, value in _executor_environment().items():
        builder = builder.config(f"spark.executorEnv.{name}", value)
    try:
        spark = builder.getOrCreate()
    except BaseException as exc:  # the JVM launcher raises several types; or Ctrl-C
        _stop_active_spark()
        if not isinstance(exc, Exception):
            raise
        raise ClusterError(f"could not start Spark on master {master!r}: "
                           f"{_first_line(exc)}") from exc
    try:
        spark.sparkContext.setLogLevel("ERROR")
        # One shuffle partition per core: the validation's shuffles (row numbers,
        # duplicates, the arrival order) cost a task per partition and stage, which on a
        # small log is most of the ingestion (docs/architecture.md, "Shuffle partitions").
        spark.conf.set("spark.sql.shuffle.partitions",
                       str(max(2, spark.sparkContext.defaultParallelism)))
        yield spark
    finally:
        spark.stop()


def _stop_active_spark() -> None:
    """Stop the Spark context a failed or interrupted start left behind, if any."""
    from pyspark import SparkContext

    with contextlib.suppress(Exception):
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()


#: The master URLs Spark takes (``SparkContext.createTaskScheduler`` and the cluster
#: managers): ``local``, ``local[N]``, ``local[*]`` (and ``[N, F]`` with retries),
#: ``local-cluster[W,C,M]``, ``spark://host:port[,host:port...]``, ``yarn``,
#: ``k8s://...``.
_LOCAL = re.compile(r"local(?:\[\s*([1-9][0-9]*|\*)\s*(?:,\s*[0-9]+\s*)?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*([1-9][0-9]*)\s*,\s*([1-9][0-9]*)\s*,"
                            r"\s*([1-9][0-9]*)\s*\]")
_HOST_PORT = r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):[0-9]{1,5}"
_MANAGER = re.compile(rf"spark://{_HOST_PORT}(?:,{_HOST_PORT})*|yarn|k8s://\S+")


def master_cores(master: str) -> int | None:
    """The cores Spark on ``master`` offers, where the URL says so: ``local`` 1,
    ``local[N]`` N, ``local[*]`` this machine's, ``local-cluster[W,C,M]`` W x C; None
    for a cluster manager's master (``spark://``, ``yarn``, ``k8s://``). Anything else
    is not a master URL Spark takes: ``ValueError`` saying which it takes."""
    if m := _LOCAL.fullmatch(master):
        if m[1] == "*":
            return os.cpu_count() or 1
        return 1 if m[1] is None else int(m[1])
    if m := _LOCAL_CLUSTER.fullmatch(master):
        return int(m[1]) * int(m[2])
    if _MANAGER.fullmatch(master):
        return None
    raise ValueError("not a Spark master URL: expected local, local[N], local[*], "
                     "local-cluster[WORKERS,CORES,MEMORY_MB], spark://HOST:PORT, yarn or "
                     "k8s://...")


def ray_nodes_for(cores: int, worker_cpus: int = 1) -> int:
    """How many Ray worker nodes fit a Spark cluster of ``cores`` cores: one per
    ``worker_cpus`` cores, less one core kept for Spark's own jobs (reading and writing
    the tables while Ray runs), and at least one."""
    return max(1, (cores - 1) // max(1, worker_cpus))


def ray_worker_nodes(spark: SparkSession, worker_cpus: int = 1) -> int:
    """How many Ray worker nodes fit the running Spark cluster (:func:`ray_nodes_for`
    its cores). A cluster manager's executors register after the session starts, and
    until one has, Spark counts 2 cores: a first job (of one task) waits for one."""
    spark.sparkContext.parallelize([0], 1).count()
    return ray_nodes_for(int(spark.sparkContext.defaultParallelism), worker_cpus)


@contextmanager
def ray_on_spark(spark: SparkSession, *, worker_nodes: int | None = None,
                 worker_cpus: int = 1, worker_gpus: int = 0,
                 log: str | os.PathLike[str] | None = None) -> Iterator[str]:
    """Start a Ray cluster on ``spark`` and yield its address; shut it down on exit.

    ``worker_nodes`` Ray worker nodes (default :func:`ray_worker_nodes`: sized to the
    Spark cluster's cores) each run inside a Spark task with ``worker_cpus`` cores
    (Ray's two ``*_worker_node`` sizes must be given together). With ``log``, what Ray
    on Spark and the Ray head node it starts print goes to that file instead of this
    terminal.

    On one machine (a ``local`` or ``local-cluster`` master) its servers listen on
    loopback only (:func:`~specula.cluster.ray_access.loopback_nodes`), on a cluster on
    every interface; either way the cluster runs with token authentication and a token
    of its own that only its nodes and this driver know
    (:func:`~specula.cluster.ray_access.private_token`).
    """
    _prepare_environment()
    from ray.util.spark import setup_ray_cluster, shutdown_ray_cluster

    from specula.cluster.ray_access import loopback_nodes, private_token

    fits = ray_worker_nodes(spark, worker_cpus)
    if worker_nodes is not None and worker_nodes > fits:
        raise ClusterError(f"{worker_nodes} Ray worker nodes of {worker_cpus} CPU do not fit "
                           f"the Spark cluster ({spark.sparkContext.defaultParallelism} "
                           f"cores, one kept for Spark's jobs): at most {fits}")
    nodes = worker_nodes if worker_nodes is not None else fits
    address = None
    one_machine = (spark.sparkContext.master or "").startswith("local")
    with private_token(), loopback_nodes() if one_machine else contextlib.nullcontext():
        try:
            with _output_to(log), keep_sigterm_handler():  # it calls ray.init
                print(f"Ray on Spark: {nodes} worker node(s) of {worker_cpus} CPU", flush=True)
                try:
                    address = _setup(setup_ray_cluster, shutdown_ray_cluster, nodes,
                                     worker_cpus, worker_gpus)
                except ClusterError as exc:
                    raise ClusterError(f"{exc}{f'; details in {log}' if log else ''}") from exc
            yield address
        finally:
            if address is not None:  # else _setup stopped what it had started
                import ray

                with _output_to(log):
                    ray.shutdown()
                    reinstall_sigterm_handler()
                    with contextlib.suppress(Exception):
                        shutdown_ray_cluster()
                _kill_workers_of(address)


def _setup(setup_ray_cluster: Any, shutdown_ray_cluster: Any, worker_nodes: int,
           worker_cpus: int, worker_gpus: int) -> str:
    """Start Ray on Spark; its address. Failed (``ClusterError``) or interrupted (Ctrl-C,
    SIGTERM), it stops what it had started (:func:`_stop_partial_cluster`) first."""
    try:
        with _sigterm_handler_after_ray_init(), _prompt_waits():
            address, _ = setup_ray_cluster(max_worker_nodes=worker_nodes,
                                           min_worker_nodes=worker_nodes,
                                           num_cpus_worker_node=worker_cpus,
                                           num_gpus_worker_node=worker_gpus,
                                           object_store_memory_worker_node=1 << 30,
                                           # Without the dashboard's optional dependencies
                                           # Ray waits 60 s for a dashboard that never
                                           # comes.
                                           head_node_options={"include_dashboard": False})
    except BaseException as exc:  # Ray on Spark raises several types; or Ctrl-C
        _stop_partial_cluster(shutdown_ray_cluster)
        if not isinstance(exc, Exception):
            raise
        raise ClusterError(f"could not start Ray on Spark: {_first_line(exc)}") from exc
    return address


#: Seconds between Ray on Spark's looks at its head node's port and at its worker nodes,
#: within :func:`_prompt_waits`.
START_POLL_S = 0.2

#: Seconds Ray on Spark waits for its head node's port, within :func:`_prompt_waits` (a
#: head on 2 cores shared with ~50 busy processes was not up in 20 s).
HEAD_WAIT_S = 60.0


@contextmanager
def _prompt_waits() -> Iterator[None]:
    """Within the block, Ray on Spark waits for its head node and its worker nodes only
    as long as they take to start.

    Once it has launched the head node, Ray on Spark sleeps a fixed
    ``_RAY_HEAD_STARTUP_TIMEOUT`` (20 s) and then checks once that the head's port is
    open, though the head is up in a few seconds; and it looks for its worker nodes
    every ``_RAY_CLUSTER_STARTUP_PROGRESS_CHECKING_INTERVAL`` (3 s). For the block the
    sleep is 0 and the one check of the port polls it every :data:`START_POLL_S`, for up
    to :data:`HEAD_WAIT_S`, as does the look for the worker nodes: the same checks,
    without the idle seconds (docs/measurements.md, "The main job")."""
    from ray.util.spark import cluster_init as module

    cluster_init: Any = module  # its constants are typed by their values: 3 is an int
    saved = (cluster_init._RAY_HEAD_STARTUP_TIMEOUT, cluster_init.is_port_in_use,
             cluster_init._RAY_CLUSTER_STARTUP_PROGRESS_CHECKING_INTERVAL)
    limit, is_port_in_use = max(saved[0], HEAD_WAIT_S), saved[1]

    def port_open(host: str, port: int) -> bool:
        deadline = time.monotonic() + limit
        while not is_port_in_use(host, port) and time.monotonic() < deadline:
            time.sleep(START_POLL_S)
        return bool(is_port_in_use(host, port))

    cluster_init._RAY_HEAD_STARTUP_TIMEOUT = 0
    cluster_init.is_port_in_use = port_open
    cluster_init._RAY_CLUSTER_STARTUP_PROGRESS_CHECKING_INTERVAL = START_POLL_S
    try:
        yield
    finally:
        (cluster_init._RAY_HEAD_STARTUP_TIMEOUT, cluster_init.is_port_in_use,
         cluster_init._RAY_CLUSTER_STARTUP_PROGRESS_CHECKING_INTERVAL) = saved


@contextmanager
def _sigterm_handler_after_ray_init() -> Iterator[None]:
    """Within the block, put the SIGTERM handler back as soon as ``ray.init`` returns.

    Ray on Spark installs a SIGTERM handler of its own before it connects (``ray.init``)
    to wait for the worker nodes; it would stop the cluster itself and leave
    :func:`_stop_partial_cluster` to signal its head node a second time.
    :func:`keep_sigterm_handler` puts the caller's back only once the setup returns, so
    ``ray.init`` is wrapped for the block: the caller's handler (which unwinds like
    Ctrl-C) is back from then on.
    """
    import ray

    init, handler = ray.init, signal.getsignal(signal.SIGTERM)

    def init_keeping_handler(*args: Any, **kwargs: Any) -> Any:
        try:
            return init(*args, **kwargs)
        finally:
            if handler is not None:
                signal.signal(signal.SIGTERM, handler)

    ray.init = init_keeping_handler
    try:
        yield
    finally:
        ray.init = init


def _stop_partial_cluster(shutdown_ray_cluster: Any) -> None:
    """Stop what an unfinished ``setup_ray_cluster`` started. Once its head node is up,
    Ray on Spark holds the cluster and shuts it down; before that (it waits 20 s for the
    head) it has no handle on the head node's process, which runs in a process group of
    its own, so Ctrl-C does not reach it, and this process could not exit: a thread that
    copies the head's output waits for it to end. That process is a child of this one
    running ``ray.util.spark.start_ray_node``; on SIGTERM it stops its Ray node."""
    try:
        shutdown_ray_cluster()
    except Exception:  # none registered yet: stop the head node here
        for pid in _children_running("ray.util.spark.start_ray_node"):
            tree = _Tree(pid)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
            tree.kill_after(HEAD_STOP_S)


#: Seconds a head node's processes get to end after its launcher's SIGTERM; the node's
#: agents (dashboard, runtime environments) may outlive a node stopped half-started.
HEAD_STOP_S = 5.0


class _Tree:
    """A process and its descendants, each known by its pid and start time (so that a
    reused pid is not taken for it), followed as they start more."""

    def __init__(self, root: int) -> None:
        self.started: dict[int, str] = {}
        self._add([root])

    def _add(self, pids: list[int]) -> None:
        for pid in pids:
            if pid not in self.started and (t := _start_time(pid)) is not None:
                self.started[pid] = t

    def alive(self) -> list[int]:
        """Those still running, after taking in what the running ones have started."""
        for pid in [p for p, t in self.started.items() if _start_time(p) == t]:
            self._add(_descendants(pid))
        return [p for p, t in self.started.items() if _start_time(p) == t]

    def kill_after(self, grace_s: float) -> None:
        """Wait up to ``grace_s`` for every process of the tree to end, then kill those
        left."""
        deadline = time.monotonic() + grace_s
        while (left := self.alive()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (None: no such process,
    or a zombie, which has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else fields


def _start_time(pid: int) -> str | None:
    fields = _proc_stat(pid)
    return None if fields is None else fields[19]


def _descendants(root: int) -> list[int]:
    """The processes descended from ``root``, now."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _proc_stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


def _children_running(module: str) -> list[int]:
    """The child processes of this one that run ``python -m module``."""
    me, found = os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _proc_stat(int(entry.name))
        if fields is None or int(fields[1]) != me:
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        if module.encode() in args:
            found.append(int(entry.name))
    return found


@contextmanager
def _output_to(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Point file descriptors 1 and 2 at ``path`` (appending) for the block, so that
    child processes started in it write there for good; ``None`` changes nothing."""
    if path is None:
        yield
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def _prepare_environment() -> None:
    """Environment the Spark JVMs pass on to executors and Ray nodes; set before Spark starts.

    Executors run this interpreter. Ray on Spark runs the ``ray`` script found on
    ``PATH``, which a virtual environment used without activation has only beside its
    interpreter. Ray's authentication is left as it is: Ray on Spark's nodes get their
    token when the cluster starts (:func:`ray_on_spark`).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # The Ray worker node runs in a Spark executor that writes to this terminal.
    os.environ.setdefault("RAY_LOGGER_LEVEL", "warning")
    bindir = os.path.dirname(sys.executable)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bindir, os.environ.get("PATH", "")])


#: What executors need from the driver's environment (:func:`_prepare_environment`).
_EXECUTOR_ENV = ("PATH", "RAY_USAGE_STATS_ENABLED", "RAY_LOGGER_LEVEL")


def _executor_environment() -> dict[str, str]:
    """The variables executors get through ``spark.executorEnv``. A local or
    ``local-cluster`` master starts its executors from this process and they inherit
    its environment; a standalone, YARN or Kubernetes worker starts them from its own,
    where the ``ray`` script beside this interpreter is not on ``PATH`` and Ray on
    Spark fails to start its worker nodes. Executors run this interpreter either way
    (``PYSPARK_PYTHON``), so the cluster's hosts need it at the same path."""
    return {name: os.environ[name] for name in _EXECUTOR_ENV if name in os.environ}


def _kill_workers_of(address: str) -> None:
    """Kill the Ray worker processes on this machine that the cluster at ``address``
    launched and that outlive its shutdown: one launched as the cluster went down (an
    actor being created when a run is interrupted) waits for the gone GCS up to Ray's
    ``gcs_rpc_server_reconnect_timeout_s`` (60 s) before it exits. The workers name the
    GCS by the node's address where ``address`` may say 127.0.0.1: the port decides."""
    port = address.rpartition(":")[2]
    out = subprocess.run(["ps", "-ww", "-eo", "pid,args"], capture_output=True, text=True,
                         check=False).stdout
    for line in out.splitlines()[1:]:
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit() and any(a.startswith("--gcs-address=") and a.endswith(f":{port}")
                                 for a in args.split()):
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)


def stray_processes(outside: Iterable[int] = ()) -> list[str]:
    """Command lines of Ray and Spark processes running on this machine right now, but
    for those descended from a process in ``outside`` (a test's own process, whose
    Spark session or Ray cluster is no stray of the command it checks). A process that
    outlived its parent was handed to ``init`` and is never excluded."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid,ppid,args"], capture_output=True, text=True,
                         check=False).stdout
    marks = ("raylet", "gcs_server", "ray::", "ray/_private", "org.apache.spark",
             "pyspark/daemon", "pyspark.daemon")
    parent, lines = {}, {}
    for line in out.splitlines()[1:]:
        fields = line.split(None, 2)
        if len(fields) == 3 and fields[0].isdigit() and fields[1].isdigit():
            pid = int(fields[0])
            parent[pid] = int(fields[1])
            if any(m in fields[2] for m in marks):
                lines[pid] = f"{pid} {fields[2].strip()}"
    skip = set(outside)

    def excluded(pid: int) -> bool:
        seen = set()
        while pid > 1 and pid not in seen:
            if pid in skip:
                return True
            seen.add(pid)
            pid = parent.get(pid, 0)
        return False

    return [line for pid, line in lines.items() if not excluded(pid)]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
