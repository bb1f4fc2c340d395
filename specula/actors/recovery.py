"""Crash recovery of detector actors: checkpoints, determinants, and why the net output
of a run with restarts is exactly the crash-free one. One actor's part in it is
:class:`~.actor_recovery.ActorRecovery`.

What a checkpoint holds (one msgpack object per actor, written atomically; NumPy
arrays as their dtype, shape and bytes, the detector's states as its ``snapshot``
returns them):

* the ordering unit's whole state (:mod:`specula.ordering.checkpoint`): buffer,
  snapshots, clock, K, counters, the versions a replay may revise (its late events
  go to the output segments);
* the input position: per sender, the pushes taken (processed), their digests (the
  last :data:`DIGESTS_KEPT`), and the step count;
* the emission position: per consumer, the pushes numbered so far, the last step whose
  determinants went out, the consumer's incarnation as known, and the pushes the
  consumer's own checkpoint does not cover yet (to resend if it restarts);
* the determinants this actor holds for its producers (:class:`StepLog`);
* the progress last published, and where the actor's output stands on storage: its
  net output and late events as a list of immutable segments (each checkpoint writes
  what came since the previous one) after an optional base (:mod:`.output_log`);
* what its gate shed (:meth:`~.inbox.Gate.counts`): counts of the timeline, like the
  unit's, which the steps taken again after a restart count again.

Not in it: the counts of pushes dropped and resent, which add up over the actor's
processes and are stored by each as it makes them (:mod:`.tally`).

Resend and dedupe. A consumer checkpoints the pushes it has *taken*; the replies to
later pushes tell each producer how many its checkpoint covers, and the producer drops
those from what it keeps. After a restart the consumer holds exactly what its
checkpoint took; every producer resends what it kept from there (on the stale epoch of
its next push, when the restarted consumer asks, or when the runtime flushes it).
Pushes are numbered per (sender, consumer), so a push numbered below what the consumer
holds is a duplicate: dropped and counted. Event ``(producer, seq)`` pairs cannot name
a message, since updates, revocations and retractions reuse the pair of what they
revise; the push number names every message a producer sent to a consumer. A consumer
keeps the :func:`digest` of its last :data:`DIGESTS_KEPT` pushes of each sender but the
driver (every field, payloads included, but the arrival stamps; the driver never restarts
and resends the very batch it kept: :data:`~.sources.DRIVER`), those taken in its
checkpoint too,
and counts a duplicate unlike the push it holds as *divergent* (a regeneration that
broke the promise below), also when the consumer restarted with its producer (a
chain): a restarted producer tags what it regenerates with its consumers' incarnations
as they answered its recovery, so their duplicates are checked, not bounced as stale.

Why the net output is exact. A restarted actor re-publishes from its checkpoint's
emission position, and downstream drops the pushes it already has, so the restarted
actor must regenerate *the same* pushes, not just equivalent ones: a speculative unit's
output (what it emits early, which revisions it sends, how batches are cut) depends on
the order in which its inputs arrived, and splicing two different timelines of one
producer at a push boundary would leave a consumer with revisions of events it never got
and events no revision reaches. Processing is deterministic given the order of the
batches taken and the alpha each ran under: the unit and detector are (the contract
test checks determinism and snapshot/restore), routing and punctuations are functions
of the output, and fixed alphas never change. So every actor logs, per batch taken,
the sender and the alpha of its step (a step takes every batch waiting, up to a number
of rows, so the grouping depends on timing too: a batch that joined the step before
logs no alpha): the *determinants*. They travel with its pushes, and
each consumer keeps a producer's determinants from the producer's last checkpoint on,
in its own checkpoint too. A restarted actor asks its consumers for them and, in the
order of the longest log, takes its resent inputs again (the *plan*): every push a
consumer already has is regenerated bit for bit (arrival times aside) and dropped as a
duplicate, and what no consumer has seen may come out of any order. Its own net output
is restored from the checkpoint and rebuilt from the regenerated output. The
consumers thus see one timeline of each producer, as in a run without crashes, and
with nothing late (the runtime reports late events), speculation's net output is the
in-order output whatever the arrival order (``specula.ordering.unit``). A level-1
actor fed by the driver has one sender, whose batches are numbered: its plan is its
FIFO; one fed by source actors (:mod:`.sources`) logs which source each batch came
from, as any actor with several producers. A source keeps no checkpoint: it
regenerates its pushes from its part (:mod:`.source_worker`).

Fencing. Each process of an actor has an incarnation (stored beside the checkpoint).
Pushes carry their sender's: a restarted producer raises the fence at its consumers
when it asks for determinants, and a push of an older incarnation still on its way is
dropped. Pushes carry the consumer's incarnation as the sender knows it: a stale one is
answered at once with the new incarnation and the position held, which is what makes
the sender resend.

Chains. A chain (:mod:`.chain`) restarts as a unit, every member from its own last
checkpoint, and members checkpoint at their own pace, so a consumer's checkpoint may
hold pushes its producer in the chain made after the producer's checkpoint. The
producer regenerates them from the consumer's log of its determinants; but the steps
that made them took pushes of *its* producers in the chain, made after their
checkpoints too, whose determinants were only in memory: regenerated on another
timeline, they would change what the consumer holds. So a member's checkpoint also
holds, read after its own state is fixed and downstream first, every mate's
determinants since the mate's checkpoint. The latest checkpoint in the chain then
covers every step whose output any restored member holds, each mate's log reaching at
least as far as those of its consumers, and a restarted member plans from the longest
log its consumers or its mates' checkpoints hold.

Suspending. A run can end without flushing, to be resumed by a later run (a live
watch stopped with Ctrl-C, started again on the same folder): the driver stops feeding
and suspends the actors level by level, as it flushes them, but each one only takes
what it was sent, waits until what it published is in its consumers' inboxes and
checkpoints (:meth:`~specula.actors.worker.DetectorWorker.suspend`). The checkpoints
then form a cut with nothing in flight. The resuming run starts every actor from them
(each one a restart whose peers all hold what it sent and sent what it holds, so nothing
is resent) and the source numbers its pushes on from where it stopped
(:class:`Suspension`). Its net output is then the uninterrupted run's. Of the net output
at the suspension, the events below each unit's settled counter can be persisted at
once: no replay reaches them.

Trust. Everything an actor stores is signed with the run's key and checked before it
is parsed (:mod:`.signing`): a checkpoint holds the detector's state pickled, and a file
altered by someone without the key is refused instead of run. A resume checks every
actor's files before anything starts (:func:`verify_run`).

Limits: one failure at a time (two restarting neighbours may wait on each other);
shedding decisions depend on timing and are not replayed, so a shedding node recovers
without duplicates but its output after a restart is what its replayed shedding keeps
(and its shed counts are that output's).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np

from specula.actors.signing import signed_head, verify
from specula.detectors.graph import Graph
from specula.events import fields_of

#: Layout version of an actor checkpoint (3: late events in the output segments, the
#: output's base: :mod:`.output_log`; 4: a step takes several batches, the determinants
#: of a batch that joined a step have no alpha; 5: the digests of the pushes taken, per
#: sender, and the count of divergent ones; 6: digests of every field but the arrival
#: stamps, payloads included, and the recovery counts out of the checkpoint, in
#: :class:`~.tally.Tally`; 7: digests by SHA-256; 8: arrays as description, shape and
#: bytes (:func:`~specula.ordering.checkpoint.pack_array`), output segments and bases as
#: :mod:`.frames`). A checkpoint of another layout is
#: refused, before anything starts (:func:`verify_run`, :class:`CheckpointLayoutError`):
#: a watch suspended by another version resumes only with that version, or starts afresh.
CHECKPOINT_VERSION = 8

#: Pushes per sender whose digest a worker keeps (and checkpoints), to check duplicates
#: against.
DIGESTS_KEPT = 1_024

#: The fields a push's digest leaves out: its arrival stamps, the wall clock of the
#: receiving unit and of the source (a source that regenerates its part stamps it again).
#: Every other field, payload columns included, is what a regenerated push repeats.
DIGEST_SKIPS = ("ats", "origin")

#: Rows up to which a digest hashes slices of a batch's bytes, row by row, rather than
#: copy each run of fields out with NumPy (1.1 against 2.6 us for one row; even at 5).
_SLICED_ROWS = 4


def digest(batch: np.ndarray) -> int:
    """A push's content, arrival stamps aside: what its regeneration must repeat.

    The first 8 bytes of a SHA-256, the same in every process (Python's ``hash`` of
    bytes is salted per process: a consumer checks a duplicate against the digest its
    checkpoint kept, in a process that restarted since), of the batch's field names and
    types and of the bytes of every field but :data:`DIGEST_SKIPS`, run by run of
    adjacent such fields (two runs for a batch of core fields and payloads), each run's
    bytes over all rows in one update, not one per event or field. SHA-256, not BLAKE2b:
    on processors with SHA extensions (recent x86, ARMv8) it hashes ~1.5-1.8x faster.
    """
    ranges, h = _digest_layout(batch.dtype)
    h = h.copy()
    size = batch.dtype.itemsize
    if len(batch) <= _SLICED_ROWS:  # a live step's few rows: slices of its bytes cost less
        data = memoryview(batch.tobytes())
        for lo, hi in ranges:
            for at in range(0, len(data), size):
                h.update(data[at + lo:at + hi])
    else:
        rows = np.ascontiguousarray(batch).view(np.uint8).reshape(len(batch), size)
        for lo, hi in ranges:
            h.update(np.ascontiguousarray(rows[:, lo:hi]))
    return int.from_bytes(h.digest()[:8], "little")


@functools.lru_cache(maxsize=64)
def _digest_layout(dtype: np.dtype) -> tuple[tuple[tuple[int, int], ...], Any]:
    """For a batch dtype: the byte ranges of a record that its digest covers (adjacent
    fields merged; padding and :data:`DIGEST_SKIPS` left out), and a SHA-256 that holds
    the names and types of those fields (copied for each digest)."""
    ranges: list[list[int]] = []
    names: list[str] = []
    fields: Mapping[str, Any] = dtype.fields or {}
    for name in fields_of(dtype):
        if name in DIGEST_SKIPS:
            continue
        sub, offset = fields[name][:2]
        names.append(f"{name}:{sub.str}")
        if ranges and ranges[-1][1] == offset:
            ranges[-1][1] = offset + sub.itemsize
        else:
            ranges.append([offset, offset + sub.itemsize])
    head = hashlib.sha256(",".join(names).encode())
    return tuple((lo, hi) for lo, hi in ranges), head


@dataclass(frozen=True)
class Checkpoints:
    """Where and how often actors checkpoint (a run-wide option of the Ray runtime).

    ``uri`` is a local directory or a URI ``pyarrow.fs`` opens (``s3://bucket/prefix``,
    ``gs://...``, ``file:///...``); every actor of the cluster must reach it. ``run``
    names the run's folder under it. An actor checkpoints after ``every_batches``
    batches or ``every_s`` seconds, whichever comes first, and at the end of the stream.
    ``key`` signs and checks what the actors store (:mod:`.signing`; at least 32 bytes).
    """

    uri: str
    run: str
    every_batches: int = 50
    every_s: float = 2.0
    key: bytes = field(kw_only=True, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str) or not self.uri:
            raise ValueError(f"checkpoint storage must be a directory or a URI; got {self.uri!r}")
        if not (isinstance(self.key, bytes) and len(self.key) >= 32):
            raise ValueError("the checkpoint key must be at least 32 bytes")
        if not (isinstance(self.every_batches, int) and self.every_batches >= 1):
            raise ValueError("checkpoint_every_batches must be an integer >= 1; got "
                             f"{self.every_batches!r}")
        if not (isinstance(self.every_s, int | float) and self.every_s > 0):
            raise ValueError(f"checkpoint_every_s must be a number > 0; got {self.every_s!r}")

    def store(self, label: str) -> Store:
        return Store(self.uri, f"{self.run}/{label}", self.key)


class CheckpointLayoutError(ValueError):
    """An actor's checkpoint of another layout than :data:`CHECKPOINT_VERSION`'s (another
    version of Specula wrote it): refused, not read with fields missing or misread."""


def verify_run(checkpoints: Checkpoints, graph: Graph) -> None:
    """Check the signature of every object the actors of ``graph`` stored in the run
    folder of ``checkpoints`` (``UntrustedCheckpointError`` naming the first that fails),
    and the layout of their checkpoints (:class:`CheckpointLayoutError` naming the
    actor): before a resume starts anything."""
    for instance in graph.instances():
        store = checkpoints.store(instance.label)
        store.verify_all()
        data = store.read("checkpoint")
        if data is not None:
            unpack_checkpoint(data, instance.label)


@dataclass(frozen=True)
class Suspension:
    """Where a suspended run stopped, for the run that resumes it (see "Suspending").

    ``run`` is the folder of its checkpoints under the checkpoint URI, ``sent`` the
    pushes the source sent to each instance it feeds (by producer id) and ``settled``
    each instance's settled counter (:attr:`~specula.ordering.OrderingUnit.settled_seq`)
    then: its events below it are final. ``segments`` gives the output segments
    (:mod:`.output_log`) each instance had written: a resuming run hands on the
    emissions and late events from there.
    """

    run: str
    sent: dict[int, int]
    settled: dict[int, int]
    #: the suspended graph's nodes (:func:`graph_shape`): only the same graph resumes
    graph: list[str]
    segments: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "sent": {str(k): v for k, v in self.sent.items()},
                "settled": {str(k): v for k, v in self.settled.items()},
                "graph": self.graph,
                "segments": {str(k): v for k, v in self.segments.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Suspension:
        if not re.fullmatch(r"[\w-]+", str(data["run"])):
            raise ValueError(f"run {data['run']!r} is not a folder name")
        return cls(str(data["run"]), {int(k): int(v) for k, v in data["sent"].items()},
                   {int(k): int(v) for k, v in data["settled"].items()},
                   [str(n) for n in data["graph"]],
                   {int(k): int(v) for k, v in data.get("segments", {}).items()})

    def check(self, graph: Graph) -> None:
        """Refuse to resume with another graph than the one suspended: its actors'
        checkpoints would not fit (``ValueError`` naming the difference)."""
        mine = graph_shape(graph)
        if mine != self.graph:
            gone, new = sorted(set(self.graph) - set(mine)), sorted(set(mine) - set(self.graph))
            raise ValueError("the suspended run had another graph: "
                             + "; ".join(filter(None, [
                                 f"it had {', '.join(gone)}" if gone else "",
                                 f"this one has {', '.join(new)}" if new else "",
                                 "" if gone or new else "its nodes in another order"]))
                             + ". Resume it with its graph, or start afresh without its state")


def graph_shape(graph: Graph) -> list[str]:
    """What of a graph its actors' checkpoints depend on, one entry per node in the
    order of its producer ids: name, detector class, partitions, inputs and outputs."""
    return [f"{name} ({type(node.detector).__qualname__} x{node.partitions}: "
            f"{','.join(node.inputs)} -> {','.join(node.outputs)})"
            for name, node in graph.nodes.items()]


class Store:
    """An actor's objects under ``uri``/``prefix``, on any ``pyarrow.fs`` file system,
    signed with ``key`` (:mod:`.signing`).

    An object is written to a temporary name, then moved over the final one: a reader
    sees the old object or the new one, never a part (a local rename is atomic; on
    object stores a single PUT is, and the move is a copy). A read returns an object's
    bytes only once its signature checks (``UntrustedCheckpointError`` naming the file).
    """

    def __init__(self, uri: str, prefix: str, key: bytes) -> None:
        from pyarrow import fs

        if "://" not in uri:
            uri = os.path.abspath(uri)
        self.fs, root = fs.FileSystem.from_uri(uri)
        self.prefix, self.key = prefix, key
        self.path = f"{root.rstrip('/')}/{prefix}"
        self.fs.create_dir(self.path, recursive=True)

    def write(self, name: str, *parts: bytes | memoryview) -> None:
        """Store the object ``name`` whose bytes are ``parts`` in order (an object of
        several parts, such as :mod:`.frames` makes, is signed and written part by
        part, not joined in memory first)."""
        tmp = f"{self.path}/.{name}.{uuid.uuid4().hex}"
        with self.fs.open_output_stream(tmp) as out:
            out.write(signed_head(self.key, f"{self.prefix}/{name}", *parts))
            for part in parts:
                out.write(part)
        self.fs.move(tmp, f"{self.path}/{name}")

    def read(self, name: str) -> bytes | None:
        from pyarrow import fs

        path = f"{self.path}/{name}"
        if self.fs.get_file_info(path).type == fs.FileType.NotFound:
            return None
        with self.fs.open_input_stream(path) as src:
            return verify(self.key, f"{self.prefix}/{name}", src.read(), path)

    def verify_all(self) -> None:
        """Read every object (temporary ones aside), which checks its signature."""
        from pyarrow import fs

        for info in self.fs.get_file_info(fs.FileSelector(self.path)):
            if info.type == fs.FileType.File and not info.base_name.startswith("."):
                self.read(info.base_name)

    def delete(self, name: str) -> None:
        """Remove an object (nothing if it is not there)."""
        from pyarrow import fs

        path = f"{self.path}/{name}"
        if self.fs.get_file_info(path).type != fs.FileType.NotFound:
            self.fs.delete_file(path)

    def next_incarnation(self) -> int:
        """The incarnation of the process calling this (0 for the first), recorded."""
        data = self.read("incarnation")
        n = 0 if data is None else int(data) + 1
        self.write("incarnation", str(n).encode())
        return n


class Determinants:
    """An actor's own determinants since its last checkpoint: for each batch taken from
    ``base`` on (``step`` batches taken in all), the sender and the alpha of its step
    (None: the batch joined the step of the batch before); and after a restart the
    *plan*, the batches to take again, in the same steps. The actor's processing thread
    logs and commits; other members of its chain read the log (:meth:`logged`)."""

    def __init__(self, step: int = 0) -> None:
        self.step = self.base = step
        self.senders: list[int] = []
        self.alphas: list[float | None] = []
        self.plan: deque[tuple[int, float | None]] = deque()
        self._lock = threading.Lock()

    def log(self, sender: int, alpha: float | None) -> None:
        """A batch of ``sender`` is taken (the plan's next one while a plan is left)."""
        with self._lock:
            if self.plan:
                self.plan.popleft()
            self.senders.append(sender)
            self.alphas.append(alpha)
            self.step += 1

    def logged(self) -> StepLog:
        """From any thread: the log since the last checkpoint, followed by what is left
        of the plan (steps of this timeline that a restored peer may hold the output
        of, not taken again yet)."""
        with self._lock:
            senders, alphas = list(self.senders), list(self.alphas)
            for sender, alpha in self.plan:
                senders.append(sender)
                alphas.append(alpha)
            return StepLog(self.base, senders, alphas)

    def since(self, last: int) -> tuple[int, list[int], list[float | None], int]:
        """What a push carries: the determinants after batch ``last`` (the last one a
        push to the same consumer carried), or all since the checkpoint; and the
        checkpoint's step."""
        first = max(last + 1, self.base)
        i = first - self.base
        return first, self.senders[i:], self.alphas[i:], self.base

    def committed(self) -> None:
        """A checkpoint covers every batch taken so far."""
        with self._lock:
            self.base = self.step
            self.senders.clear()
            self.alphas.clear()

    def follow(self, logs: list[StepLog]) -> None:
        """Plan to take again what the longest of ``logs`` (this actor's determinants as
        its consumers hold them) has from this step on."""
        best: tuple[list[int], list[float | None]] = ([], [])
        for log in logs:
            plan = log.plan(self.step)
            if plan is not None and len(plan[0]) > len(best[0]):
                best = plan
        with self._lock:
            self.plan = deque(zip(*best, strict=True))

    def planned_step(self) -> list[int]:
        """The senders of the plan's next step, in order ([]: no plan left, or only its
        flush, which is dropped: the flush comes when asked)."""
        plan = self.plan
        step = [plan[0][0]] if plan else []
        while step and len(step) < len(plan) and plan[len(step)][1] is None:
            step.append(plan[len(step)][0])
        if step == [-1]:
            with self._lock:
                plan.clear()
            return []
        return step

    def planned_alpha(self) -> float | None:
        """The alpha of the plan's next step (its batches leave the plan as they are
        logged)."""
        return self.plan[0][1]


class StepLog:
    """One producer's determinants as a consumer received them: for each batch it took
    from ``base`` on, the sender (-1: its flush) and the alpha of its step (None: the
    batch joined the step of the batch before). Entries, and the steps that number
    them here and in the worker, count batches taken: a step of three batches is three."""

    def __init__(self, base: int = 0, senders: list[int] | None = None,
                 alphas: list[float | None] | None = None) -> None:
        self.base = base
        self.senders = senders or []
        self.alphas = alphas or []

    @property
    def end(self) -> int:
        return self.base + len(self.senders)

    def extend(self, first: int, senders: list[int], alphas: list[float | None],
               checkpoint_step: int) -> None:
        """Add steps ``first``, ``first + 1``, ...; forget those before the producer's
        checkpoint step."""
        if not self.base <= first <= self.end:
            self.base, self.senders, self.alphas = first, [], []
        cut = first - self.base
        self.senders[cut:] = senders
        self.alphas[cut:] = alphas
        drop = min(checkpoint_step - self.base, len(self.senders))
        if drop > 0:
            del self.senders[:drop], self.alphas[:drop]
            self.base += drop
        if checkpoint_step > self.base and not self.senders:
            self.base = checkpoint_step

    def plan(self, step: int) -> tuple[list[int], list[float | None]] | None:
        """The steps from ``step`` on, or None if this log does not reach back to it."""
        if self.base > step:
            return None
        return self.senders[step - self.base:], self.alphas[step - self.base:]

    def as_list(self) -> list[Any]:
        return [self.base, self.senders, self.alphas]


def pack_checkpoint(state: dict[str, Any]) -> bytes:
    return msgpack.packb(state, use_bin_type=True)


def unpack_checkpoint(data: bytes, label: str) -> dict[str, Any]:
    """The state in an actor's checkpoint (``label`` names the actor), refused
    (:class:`CheckpointLayoutError`) if another layout than this version's."""
    try:
        state = msgpack.unpackb(data, raw=False, strict_map_key=False)
    except ValueError as exc:  # msgpack's errors of format
        raise CheckpointLayoutError(f"{label}: its checkpoint is not msgpack ({exc})") from None
    layout = state.get("v") if isinstance(state, dict) else None
    if layout != CHECKPOINT_VERSION:
        raise CheckpointLayoutError(
            f"{label}: checkpoint layout {layout!r} is not {CHECKPOINT_VERSION}, "
            "the one this version of Specula reads")
    return state


def pack_dets(dets: Any) -> Any:
    """A push's determinants as msgpack-ready data (None stays None)."""
    if dets is None:
        return None
    first, senders, alphas, ckpt = dets
    return [first, list(senders), list(alphas), ckpt]
