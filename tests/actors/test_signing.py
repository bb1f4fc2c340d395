"""Checkpoints hold data, never code: every object an actor stores is signed with its
run's key, and a file someone without the key wrote or altered is refused, naming it,
before anything in it is parsed (:mod:`specula.actors.signing`)."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import stat

import msgpack
import numpy as np
import pytest

from specula import Graph
from specula.actors.ray_runtime import RayRuntime
from specula.actors.recovery import (
    CHECKPOINT_VERSION,
    Checkpoints,
    Store,
    Suspension,
    graph_shape,
    pack_checkpoint,
    verify_run,
)
from specula.actors.routing import Router
from specula.actors.signing import (
    KEY_ENV,
    MAGIC,
    UntrustedCheckpointError,
    random_key,
    run_key,
    signed_head,
    user_key,
)
from specula.actors.worker import DetectorWorker
from specula.cli import main
from specula.detectors.examples import Threshold, example_registry
from specula.pipelines.resume import save_suspension, state_dir, suspended_watch
from specula.pipelines.spark_stream import WatchCounts
from specula.pipelines.watch_checkpoint import commit
from specula.soccer.graph import soccer_graph

RUN = "0123456789ab"


class CreatesFile:
    """Pickles to a call of ``open(path, "w")``: unpickling it creates ``path``."""

    def __init__(self, path: os.PathLike) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def c_batch(first: int, n: int) -> np.ndarray:
    reg = example_registry()
    out = np.zeros(n, reg.dtype(["C"]))
    out["type"], out["v"] = reg.id("C"), 60
    out["ts"] = out["seq"] = np.arange(first, first + n)
    return out


def suspended_run(out) -> tuple[Graph, Checkpoints, DetectorWorker]:
    """A one-node graph whose actor (a worker without Ray) checkpointed into ``out``'s
    state folder as a watch does, and the record of a watch suspended there."""
    graph = Graph(example_registry(), sources=("C",)).add("big", Threshold(), alpha=0.5, k0=5)
    checkpoints = Checkpoints(str(state_dir(out)), RUN, key=run_key(RUN))
    worker = DetectorWorker(graph.instances()[0], graph.registry, router=Router(graph),
                            checkpoints=checkpoints)
    worker.start()
    for i in range(4):
        worker.push(c_batch(i * 50, 50), 0, i)
    worker.suspend({0: 4})
    worker.halt()
    save_suspension(out, Suspension(RUN, {0: 4}, {}, graph_shape(graph)))
    return graph, checkpoints, worker


def forge(path, marker, how: str) -> None:
    """Replace the detector state in the checkpoint at ``path`` with a pickle that
    creates ``marker`` when loaded, as someone without the run's key can."""
    signed = path.read_bytes()
    head = len(MAGIC) + 32
    state = msgpack.unpackb(signed[head:], raw=False, strict_map_key=False)
    state["unit"]["detector"] = pickle.dumps(CreatesFile(marker))
    data = msgpack.packb(state, use_bin_type=True)
    path.write_bytes({"keep the signature": signed[:head] + data,
                      "unsigned, as before signing": data,
                      "signed with another key": signed_head(random_key(), "x", data) + data}[how])


HOW = ["keep the signature", "unsigned, as before signing", "signed with another key"]


@pytest.mark.parametrize("how", HOW)
def test_a_checkpoint_whose_detector_state_became_code_is_refused_and_never_loaded(
        tmp_path, how):
    """Resuming a watch whose actor's detector state was replaced by a pickled call is
    refused, naming the file, by the watch's check before Spark, by the Ray runtime
    before Ray starts (the test would fail if it started Ray: it is not marked
    `cluster`) and by the actor itself when it restores; the call never runs."""
    out, marker = tmp_path / "run", tmp_path / "marker"
    graph, checkpoints, worker = suspended_run(out)
    label = graph.instances()[0].label
    path = state_dir(out) / RUN / label / "checkpoint"
    assert suspended_watch(out, graph).run == RUN  # untouched, it resumes
    restarted = DetectorWorker(graph.instances()[0], graph.registry, router=Router(graph),
                               checkpoints=checkpoints)
    assert restarted.status()["incarnation"] == 1 and restarted.unit.clk == worker.unit.clk
    restarted.halt()

    forge(path, marker, how)
    pickle.loads(pickle.dumps(CreatesFile(tmp_path / "live")))
    assert (tmp_path / "live").exists()  # the payload does run when unpickled
    message = re.escape(f"{path}: " + ("not signed" if how.startswith("unsigned") else
                                       "its signature does not match this run's key"))
    with pytest.raises(UntrustedCheckpointError, match=message):
        suspended_watch(out, graph)
    with pytest.raises(UntrustedCheckpointError, match=message):
        RayRuntime(graph, checkpoint_uri=str(state_dir(out))).run(
            c_batch(200, 10), resume=Suspension(RUN, {0: 4}, {}, graph_shape(graph)))
    with pytest.raises(UntrustedCheckpointError, match=message):
        DetectorWorker(graph.instances()[0], graph.registry, router=Router(graph),
                       checkpoints=checkpoints)
    assert not marker.exists()


def test_the_cli_refuses_a_forged_checkpoint_in_one_line_before_anything_starts(
        tmp_path, capsys):
    """`specula replay --watch` on a run folder whose last checkpoint's suspended state
    holds a forged actor checkpoint: one line naming the file, status 2, and no Spark
    (this test is not marked `cluster`) nor the forged call."""
    graph = soccer_graph("adaptive", "on-demand", k0_ms=400.0, queries=True)
    out, watched, marker = tmp_path / "run", tmp_path / "watched", tmp_path / "marker"
    watched.mkdir()
    label = graph.instances()[0].label
    store = Checkpoints(str(state_dir(out)), RUN, key=random_key()).store(label)
    store.write("checkpoint", msgpack.packb({"v": 4, "unit": {
        "detector": pickle.dumps(CreatesFile(marker))}}, use_bin_type=True))
    save_suspension(out, Suspension(RUN, {}, {}, graph_shape(graph)))
    commit(out, 1, 0, WatchCounts().state(), {"delivered": [], "clock": None}, {},
           graph.registry)
    code = main(["replay", str(watched), "--watch", "--out", str(out), "--no-progress",
                 "--no-plots"])
    err = capsys.readouterr().err
    assert code == 2, err
    path = state_dir(out) / RUN / label / "checkpoint"
    assert err.startswith(f"specula replay: error: {path}: its signature does not match")
    assert err.count("\n") == 1
    assert not marker.exists()


def test_what_a_store_reads_is_what_it_wrote_under_its_key_and_name(tmp_path):
    """Any byte changed, another key, another name (an object moved to another actor
    or run), or no signature: refused naming the file; the untouched object reads back."""
    key = random_key()
    store = Store(str(tmp_path), "run/a-0", key)
    rng = np.random.default_rng(3)
    data = rng.bytes(1_000)
    store.write("checkpoint", data)
    assert store.read("checkpoint") == data and store.read("missing") is None
    path = tmp_path / "run" / "a-0" / "checkpoint"
    signed = path.read_bytes()
    for i in rng.choice(len(signed), 40, replace=False).tolist():  # any one byte changed
        changed = bytearray(signed)
        changed[i] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(changed))
        with pytest.raises(UntrustedCheckpointError, match=re.escape(f"{path}: ")):
            store.read("checkpoint")
    path.write_bytes(signed[:len(MAGIC) + 10])  # cut short
    with pytest.raises(UntrustedCheckpointError, match="not signed"):
        store.read("checkpoint")
    path.write_bytes(signed)
    with pytest.raises(UntrustedCheckpointError, match="signature does not match"):
        Store(str(tmp_path), "run/a-0", random_key()).read("checkpoint")
    other = Store(str(tmp_path), "run/b-0", key)
    shutil.copy(path, tmp_path / "run" / "b-0" / "checkpoint")
    with pytest.raises(UntrustedCheckpointError, match="signature does not match"):
        other.read("checkpoint")
    assert store.read("checkpoint") == data


def test_a_resume_checks_every_file_of_every_actor(tmp_path):
    """Not only the checkpoint: an output segment altered is refused too, before any
    actor starts."""
    graph = Graph(example_registry(), sources=("C",)).add(
        "big", Threshold(), partitions=2)
    checkpoints = Checkpoints(str(tmp_path), RUN, key=random_key())
    for i in graph.instances():
        store = checkpoints.store(i.label)
        store.write("checkpoint", pack_checkpoint({"v": CHECKPOINT_VERSION}))
        store.write("net-000000", b"segment")
    verify_run(checkpoints, graph)
    segment = tmp_path / RUN / graph.instances()[1].label / "net-000000"
    segment.write_bytes(segment.read_bytes()[:-1] + b"!")
    with pytest.raises(UntrustedCheckpointError, match=re.escape(f"{segment}: its signature")):
        verify_run(checkpoints, graph)


def test_the_key_file_is_made_private_once_and_refused_if_others_can_use_it(
        tmp_path, monkeypatch):
    path = tmp_path / "conf" / "checkpoint.key"
    monkeypatch.setenv(KEY_ENV, str(path))
    key = user_key()
    assert len(key) == 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert user_key() == key
    assert run_key("a") == run_key("a") != run_key("b")
    path.chmod(0o644)
    with pytest.raises(UntrustedCheckpointError, match=r"read or written by others \(mode 644\)"):
        user_key()
    path.chmod(0o600)
    path.write_text("not hex\n")
    with pytest.raises(UntrustedCheckpointError, match="not a checkpoint key"):
        user_key()
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "other.key"))
    assert user_key() != key


def test_a_suspension_record_names_a_folder_not_a_path():
    shape = ["a (A x1: C -> D)"]
    for run in ("../../etc", "a/b", ""):
        with pytest.raises(ValueError, match="is not a folder name"):
            Suspension.from_json({"run": run, "sent": {}, "settled": {}, "graph": shape})
