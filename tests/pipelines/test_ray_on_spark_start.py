"""Starting Ray on Spark: more worker nodes than the Spark cluster can hold are refused
before Ray starts, the cluster takes only drivers with its own token, and on Ctrl-C or
SIGTERM while Ray starts `specula replay` exits within seconds and nothing it started is
left running, whichever step of Ray on Spark's start it hit (the head node starting,
before Ray on Spark has a handle on it; the driver waiting for the worker nodes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from listening import processes

from specula.cluster import ClusterError
from specula.cluster.spark import ray_on_spark

pytestmark = [pytest.mark.slow, pytest.mark.cluster]  # Spark and Ray on Spark in a subprocess

SPECULA = [sys.executable, "-m", "specula.cli"]

#: Seconds the command may take to exit after the signal, and its processes to be gone.
EXIT_S = 20


def _descendants(root: int, seen: dict[int, str]) -> None:
    """Add ``root``'s descendants now alive to ``seen`` (pid -> start time)."""
    procs = processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        seen.setdefault(pid, procs[pid][1])
        todo += children.get(pid, [])


def _alive(seen: dict[int, str]) -> list[str]:
    """The processes of ``seen`` still running (the same process: same start time)."""
    procs = processes()
    left = []
    for pid, start in seen.items():
        if pid in procs and procs[pid][1] == start:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if state != "Z":  # a zombie has exited; its parent (init) reaps it
                left.append(f"{pid} {args.decode(errors='replace')[:200]}")
    return left


@pytest.mark.parametrize(("signum", "mark", "after_s"), [
    (signal.SIGINT, "Ray on Spark:", 3.0),           # the head node is starting
    # connected, waiting for the worker nodes (Ray on Spark checks every 3 s)
    (signal.SIGTERM, "Ray head node started.", 1.0),
], ids=["sigint-head-starting", "sigterm-waiting-for-workers"])
def test_an_interrupt_while_ray_starts_on_spark_exits_and_leaves_nothing(
        tmp_path, signum, mark, after_s):
    out = tmp_path / "run"
    log = out / "logs" / "ray-on-spark.log"
    # its output to a file: a process it left running would hold a pipe open
    printed = tmp_path / "output.txt"
    with printed.open("w") as sink:
        proc = subprocess.Popen([*SPECULA, "replay", "--seconds", "1", "--out", str(out),
                                 "--no-plots", "--no-progress"],
                                stdout=sink, stderr=subprocess.STDOUT)
    tree: dict[int, str] = {}
    try:
        deadline = time.time() + 300
        while not (log.exists() and mark in log.read_text(errors="replace")):
            assert proc.poll() is None and time.time() < deadline, printed.read_text()
            _descendants(proc.pid, tree)
            time.sleep(0.2)
        until = time.time() + after_s
        while time.time() < until:
            _descendants(proc.pid, tree)
            time.sleep(0.2)
        _descendants(proc.pid, tree)
        sent = time.time()
        proc.send_signal(signum)
        while proc.poll() is None and time.time() < sent + EXIT_S:
            _descendants(proc.pid, tree)
            time.sleep(0.2)
        exited_s = time.time() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        left = []
        deadline = time.time() + EXIT_S
        while (left := _alive(tree)) and time.time() < deadline:
            time.sleep(0.5)
        for line in left:  # leave the machine as it was for the next test
            os.kill(int(line.split()[0]), signal.SIGKILL)
    output = printed.read_text(errors="replace")
    assert exited_s < EXIT_S, f"still running {EXIT_S} s after the signal"
    assert proc.returncode == 130, output
    assert "interrupted" in output
    assert len(tree) > 3, tree  # it did start Spark and Ray's head node
    assert not left, "\n".join(left)


def test_more_ray_worker_nodes_than_spark_holds_are_refused_before_ray_starts(spark):
    """What the command line cannot know of a cluster master's cores is checked once
    Spark runs: the session's local[2] holds one worker node beside Spark's own jobs."""
    import ray

    starting = ray_on_spark(spark, worker_nodes=2)
    with pytest.raises(ClusterError, match=r"^2 Ray worker nodes of 1 CPU do not fit the "
                       r"Spark cluster \(2 cores, one kept for Spark's jobs\): at most 1$"):
        starting.__enter__()
    assert not ray.is_initialized()


#: Run in a new process (Ray on Spark needs a ``local-cluster`` master, and a process
#: holds one Spark context): Ray on Spark with one worker node; prints, as JSON, its token
#: mode, the nodes alive and their addresses, the sockets its tree listens on (with an
#: actor up), what a driver without the token is told, and whether its authentication
#: settings were put back.
ON_SPARK = """
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from listening import listeners
import ray
from specula.cluster import ray_session
from specula.cluster.spark import ray_on_spark, spark_session

REFUSED = ("import sys\\n"
           "from specula.cluster import ClusterError, check_joinable\\n"
           "try:\\n"
           "    check_joinable(sys.argv[1])\\n"
           "except ClusterError as exc:\\n"
           "    print(exc)\\n")

def settings():
    return {k: os.environ.get(k) for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN",
                                           "RAY_ON_SPARK_START_HOOK")}

before = settings()
with spark_session("local-cluster[1,2,1024]", small_input=True) as spark:
    with ray_on_spark(spark, worker_nodes=1) as address, ray_session(address):
        mode = os.environ["RAY_AUTH_MODE"]
        alive = [n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]]
        actor = ray.remote(num_cpus=1)(type("Up", (), {"up": lambda self: 1})).remote()
        ray.get(actor.up.remote())
        sockets = [[s.address, s.port, s.command, s.loopback]
                   for s in listeners(os.getpid())]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        refused = subprocess.run([sys.executable, "-c", REFUSED, address], text=True,
                                 capture_output=True, timeout=120,
                                 env=env | {"HOME": sys.argv[2]}).stdout
print(json.dumps({"mode": mode, "alive": alive, "sockets": sockets, "refused": refused,
                  "restored": settings() == before}))
"""


def test_ray_on_spark_on_one_machine_listens_on_loopback_and_takes_only_its_token(tmp_path):
    """Ray on Spark on a ``local-cluster`` master: its nodes (the head and the worker node
    Spark starts) take 127.0.0.1 as their address, and nothing of the run's process tree
    (Spark, Ray's GCS, raylets, client server, driver and actor workers) listens beyond
    loopback. It runs with token authentication and a token of its own: a driver
    without it is refused; the environment is as it was afterwards."""
    tests = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", ON_SPARK, tests, str(tmp_path)],
                          capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["mode"] == "token"
    # the head, and the worker node Spark started
    assert result["alive"] == ["127.0.0.1", "127.0.0.1"]
    commands = " ".join(s[2] for s in result["sockets"])
    for seen in ("gcs_server", "raylet", "ray.util.client.server", "ray::", "java"):
        assert seen in commands, seen
    exposed = [s for s in result["sockets"] if not s[3]]
    assert not exposed, "\n".join(map(str, exposed))
    assert "refused this driver (InvalidAuthToken)" in result["refused"], result
    assert result["restored"]
