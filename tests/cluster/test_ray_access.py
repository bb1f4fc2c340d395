"""Who can reach the Ray that specula starts or joins: an embedded cluster, and a whole
replay on one machine (Spark, Ray on Spark, the actors), listen on loopback only, and a
cluster with token authentication refuses a driver without its
token in one plain line (``InvalidAuthToken``, status 2) before anything starts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from listening import listeners, process_tree

from specula.cluster import check_reachable

SPECULA = [sys.executable, "-m", "specula.cli"]
TOKEN = "specula-test-token-0123456789abcdef"

#: Run in a new process (whose tree holds nothing else): a small run on embedded Ray,
#: reading the listening sockets of its tree after every batch fed, while every actor
#: is up. Prints them as JSON.
EMBEDDED_RUN = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from listening import listeners, process_tree
from specula import Graph
from specula.actors.ray_runtime import RayRuntime
from specula.detectors.examples import Threshold, example_registry
from specula.pipelines.synthetic import abc_stream

reg = example_registry()
graph = Graph(reg, sources=("A", "B", "C")).add("t", Threshold(), k0=50, partitions=2)
seen = set()
report = RayRuntime(graph).run(abc_stream(reg, 2_000, seed=1), batch_rows=500,
                               on_fed=lambda n: seen.update(listeners(os.getpid())))
print(json.dumps({"net": len(report.net("t")),
                  "sockets": [[s.address, s.port, s.command, s.loopback] for s in seen]}))
"""


def test_the_socket_reader_tells_loopback_from_every_interface():
    """The reader the tests below trust: a socket on 0.0.0.0 is exposed, one on
    127.0.0.1 is not, and both are found under this process."""
    with socket.socket() as wide, socket.socket() as narrow:
        wide.bind(("0.0.0.0", 0))
        narrow.bind(("127.0.0.1", 0))
        wide.listen()
        narrow.listen()
        found = {s.port: s.loopback for s in listeners(os.getpid())}
        assert found[wide.getsockname()[1]] is False
        assert found[narrow.getsockname()[1]] is True


@pytest.mark.slow
@pytest.mark.cluster
def test_an_embedded_run_listens_on_loopback_only():
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", EMBEDDED_RUN, tests], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["net"] > 100
    commands = " ".join(s[2] for s in result["sockets"])
    # the GCS, the raylet, the driver and the actors' workers were all seen listening
    assert "gcs_server" in commands and "raylet" in commands and "ray::" in commands
    exposed = [s for s in result["sockets"] if not s[3]]
    assert not exposed, "\n".join(map(str, exposed))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def token_cluster() -> Iterator[str]:
    """A Ray head node started as an operator would (``ray start --head``) with token
    authentication and the token :data:`TOKEN`; its address. Its whole process group is
    stopped afterwards."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # Ray's socket paths must be short
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN, "RAY_USAGE_STATS_ENABLED": "0"}
    ray = os.path.join(os.path.dirname(sys.executable), "ray")
    head = subprocess.Popen([sys.executable, ray, "start", "--head", "--block",
                             f"--port={port}", f"--temp-dir={temp}", "--num-cpus=1",
                             "--include-dashboard=false"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while (address := _gcs_address(head.pid)) is None:
            assert head.poll() is None and time.monotonic() < deadline, "no head node"
            time.sleep(0.5)
        check_reachable(address, "Ray cluster")
        yield address
    finally:
        _stop_group(head)
        shutil.rmtree(temp, ignore_errors=True)


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the process group of ``proc`` (a session leader), SIGKILL to what is
    left of it after 5 s (``ray start --block`` takes longer than that to stop its
    raylet and monitor)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        proc.poll()
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.3)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _gcs_address(head: int) -> str | None:
    """The GCS address the head node's processes are given (``--gcs-address=``), once
    they run: the host is the node's, which Ray picks."""
    for pid in process_tree(head):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        for arg in args.split("\0"):
            if arg.startswith("--gcs-address="):
                return arg.partition("=")[2]
    return None


def _env(tmp_path, **auth: str) -> dict[str, str]:
    """This environment without Ray settings, with ``auth``, and a home of its own (no
    ``~/.ray/auth_token``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return env | {"HOME": str(tmp_path), "PYTHONPATH": os.getcwd()} | auth


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.parametrize(("auth", "says"), [
    ({}, "no token was sent; set RAY_AUTH_MODE=token"),
    ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "not-the-token"},
     "the token sent (from RAY_AUTH_TOKEN) is not the cluster's"),
], ids=["no-token", "wrong-token"])
def test_joining_without_the_clusters_token_says_invalid_auth_token_at_once(
        token_cluster, tmp_path, auth, says):
    started = time.monotonic()
    done = subprocess.run([*SPECULA, "replay", "--seconds", "1", "--ray-address",
                           token_cluster, "--out", str(tmp_path / "run"), "--no-plots",
                           "--no-progress"], capture_output=True, text=True, timeout=120,
                          env=_env(tmp_path, **auth), check=False)
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"specula replay: error: the Ray cluster at {token_cluster} "
                               "refused this driver (InvalidAuthToken): ")
    assert says in lines[0]
    assert took < 30  # before Spark starts, where ray.init would retry for 20 s


JOINED_RUN = """
from specula import Graph
from specula.actors.ray_runtime import RayRuntime
from specula.detectors.examples import Threshold, example_registry
from specula.pipelines.synthetic import abc_stream

reg = example_registry()
graph = Graph(reg, sources=("C",)).add("t", Threshold(), k0=0)
print(len(RayRuntime(graph, address=ADDRESS).run(abc_stream(reg, 500, seed=3)).net("t")))
"""


@pytest.mark.slow
@pytest.mark.cluster
def test_a_driver_with_the_clusters_token_joins_and_runs(token_cluster, tmp_path):
    done = subprocess.run([sys.executable, "-c",
                           JOINED_RUN.replace("ADDRESS", repr(token_cluster))],
                          capture_output=True, text=True, timeout=300, check=False,
                          env=_env(tmp_path, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=TOKEN))
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.strip().splitlines()[-1]) > 10


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.skipif(os.environ.get("SPECULA_SOAK") != "1",
                    reason="set SPECULA_SOAK=1 for the long runs")
def test_a_replay_on_one_machine_listens_on_loopback_only(tmp_path):
    """``specula replay`` as an operator runs it on one machine (Spark on its embedded
    ``local-cluster`` master, Ray on Spark): the sockets of its whole process tree,
    read every half second from Spark's start to the end, are all on loopback."""
    proc = subprocess.Popen([*SPECULA, "replay", "--seconds", "3", "--out", str(tmp_path),
                             "--no-plots", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = set()
    try:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            seen |= listeners(proc.pid)
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = proc.communicate()[0]
    assert proc.returncode == 0, output[-3000:]
    commands = " ".join(s.command for s in seen)
    # Spark, Ray on Spark's nodes and the detectors' actors were all seen listening
    for name in ("java", "gcs_server", "raylet", "ray.util.client.server", "ray::"):
        assert name in commands, name
    exposed = [s for s in seen if not s.loopback]
    assert not exposed, "\n".join(map(str, exposed))


def test_a_loopback_address_is_joined_as_the_cluster_listens():
    """A GCS at 127.0.0.1 that listens on loopback only (Ray on Spark on one machine) is
    joined with the driver on loopback too; one that also listens on the machine's
    outbound address (``ray start --head``) as Ray joins it by itself; others as given."""
    from ray._private import ray_constants

    from specula.cluster import joining

    with socket.socket() as wide, socket.socket() as narrow:
        wide.bind(("0.0.0.0", 0))
        narrow.bind(("127.0.0.1", 0))
        wide.listen()
        narrow.listen()
        with joining(f"127.0.0.1:{narrow.getsockname()[1]}"):
            assert not ray_constants.ENABLE_RAY_CLUSTER  # Ray keeps 127.0.0.1
        assert ray_constants.ENABLE_RAY_CLUSTER
        for address in (f"127.0.0.1:{wide.getsockname()[1]}", "192.0.2.1:6379",
                        "ray://127.0.0.1:10001"):
            with joining(address):
                assert ray_constants.ENABLE_RAY_CLUSTER, address
