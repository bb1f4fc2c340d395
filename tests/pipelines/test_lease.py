"""A watch's lease on its run folder: a running watch keeps others out, a dead one's
processes are ended on the next start, and the quarantine of the micro-batches a dead
one took after its last checkpoint is dropped (they are taken again)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from specula.detectors.graph import GraphError
from specula.pipelines.lease import TAG, check, claim, lease_path, release

SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]


def _tagged(tag: str, count: int) -> list[subprocess.Popen]:
    """Processes carrying ``tag``, each in a session of its own, as a dead watch's
    JVMs and workers are once their parent is gone."""
    env = {**os.environ, TAG: tag}
    return [subprocess.Popen(SLEEP, env=env, start_new_session=True) for _ in range(count)]


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _dead_lease(out, run: int, tag: str) -> None:
    """The lease a watch left when it was killed."""
    path = lease_path(out, run)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run": run, "pid": _dead_pid(), "started": 1, "tag": tag}))


@pytest.fixture
def restore_environment():
    before = os.environ.get(TAG)
    yield
    os.environ.pop(TAG, None)
    if before is not None:
        os.environ[TAG] = before


def test_a_claim_tags_what_the_watch_starts_and_a_release_gives_the_folder_back(
        tmp_path, restore_environment):
    held = claim(tmp_path, 3)
    assert json.loads(lease_path(tmp_path, 3).read_text()) == held.to_json()
    assert (held.run, held.pid) == (3, os.getpid())
    child = subprocess.run([sys.executable, "-c", f"import os; print(os.environ['{TAG}'])"],
                           capture_output=True, text=True, check=True)
    assert child.stdout.strip() == held.tag  # what the watch starts carries the tag
    with pytest.raises(GraphError, match=r"watch 3 \(process \d+\) is running on this"):
        check(tmp_path)  # this process is a live watch holding the folder
    release(tmp_path, held)
    assert not lease_path(tmp_path, 3).exists() and TAG not in os.environ
    assert check(tmp_path) == []


def test_a_dead_watch_leaves_no_process_and_no_lease(tmp_path):
    left = _tagged("t-dead", 3)
    other = _tagged("t-someone-else", 1)[0]  # another watch's: not touched
    try:
        _dead_lease(tmp_path, 2, "t-dead")
        said: list[str] = []
        assert [lease.run for lease in check(tmp_path, say=said.append)] == [2]
        assert all(p.wait(timeout=10) is not None for p in left)
        assert other.poll() is None
        assert said == ["ended 3 process(es) left by watch 2, which died without saving"]
        assert not lease_path(tmp_path, 2).exists()
    finally:
        for p in [*left, other]:
            p.kill()
            p.wait()


def test_a_process_that_ignores_sigterm_is_killed_and_the_caller_is_spared():
    """The caller carries the tag itself (a restart started from a dead watch's shell):
    it ends the others, and lives."""
    env = {**os.environ, TAG: "t-stubborn"}
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
         "signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
        env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert stubborn.stdout.readline().strip() == "ready"
        start = time.monotonic()
        caller = subprocess.run(
            [sys.executable, "-c", "from specula.pipelines.lease import end_tagged; "
             "print(end_tagged('t-stubborn', grace_s=0.5))"],
            env=env, capture_output=True, text=True, timeout=30, check=False)
        assert caller.returncode == 0, caller.stderr
        assert caller.stdout.strip() == f"[{stubborn.pid}]"
        assert stubborn.wait(timeout=10) == -9 and time.monotonic() - start < 20
    finally:
        stubborn.kill()
        stubborn.wait()


def test_a_lease_that_does_not_read_is_refused_with_what_to_do(tmp_path):
    path = lease_path(tmp_path, 1)
    path.parent.mkdir()
    path.write_text("{")
    with pytest.raises(GraphError, match=r"not a watch's lease .*remove it if no watch runs"):
        check(tmp_path)


def test_the_quarantine_of_what_is_taken_again_is_dropped_and_micro_batches_found(tmp_path):
    """A watch put back to its last checkpoint: the quarantine parts that hold only
    records of the files taken after it go (they are taken again), as does what an
    append left unfinished; the micro-batches taken after it are found."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from specula.pipelines.spark_stream import (
        TakenBatch,
        committed_batch,
        forget_taken,
        record_taken,
        taken_batches,
    )
    from specula.pipelines.watch_checkpoint import recover

    out = tmp_path
    (out / "quarantine" / "_temporary").mkdir(parents=True)  # an append aborted mid-way
    watched = tmp_path / "watched"
    for name, files in (("mine", ["b.csv", "c.csv"]), ("earlier", ["a.csv"]),
                        ("mixed", ["a.csv", "b.csv"])):
        pq.write_table(pa.table({"file": [(watched / f).as_uri() for f in files]}),
                       out / "quarantine" / f"part-{name}.parquet")
    (out / "state" / "run-x").mkdir(parents=True)  # a dead watch's graph, uncommitted
    for batch_id, name in enumerate(["a.csv", "b.csv", "c.csv"]):
        record_taken(out, TakenBatch(batch_id, (f"file:{watched / name}",)))
    taken = taken_batches(out, after=0)
    assert taken == [TakenBatch(1, (f"file:{watched / 'b.csv'}",)),
                     TakenBatch(2, (f"file:{watched / 'c.csv'}",))]
    assert recover(out, [p for t in taken for p in t.paths]) is None
    assert sorted(p.name for p in (out / "quarantine").iterdir()) == [
        "part-earlier.parquet", "part-mixed.parquet"]
    assert not (out / "state").exists()
    forget_taken(out, 1)
    assert [t.batch_id for t in taken_batches(out, after=-1)] == [2]
    assert committed_batch(out) == -1
    (out / "checkpoint" / "commits").mkdir(parents=True)
    for name in ("0", "1", ".1.crc"):
        (out / "checkpoint" / "commits" / name).write_text("")
    assert committed_batch(out) == 1
