"""A watch's lease on its run folder: who is writing there, and what a watch that died
left behind.

A watch claims its run folder before Spark or Ray start (:func:`claim`): it writes
``out/runs/<run>.running`` (its process id, a tag of its own and the last micro-batch
handed on before it) and puts the tag in its environment, which every process it
starts inherits (Spark's JVMs, their Python workers, Ray's processes on this machine).
It gives the lease back (:func:`release`) once its output and summary are saved, after
a flush at its idle timeout and after a suspension by Ctrl-C or SIGTERM alike.

A lease that is still there when the next watch starts (:func:`check`) is either a
watch that is running (its process is alive, started when it claimed: refused, two
watches would write one folder) or one that died without saving: killed (SIGKILL, an
OOM kill, a lost VM), aborted by a second Ctrl-C, or ended by an error. Its processes
on this machine that outlived it (found by the tag, so a reused process id is never
hit) are ended, and the next watch goes on from the last checkpoint the dead one
committed (:mod:`~specula.pipelines.watch_checkpoint`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specula.detectors.graph import GraphError

#: The environment variable that tags every process of a watch.
TAG = "SPECULA_WATCH_TAG"
_SUFFIX = ".running"


@dataclass(frozen=True)
class Lease:
    """A watch's claim on a run folder: run number, driver process (its id and start
    time, so that a reused id is not taken for it) and tag."""

    run: int
    pid: int
    started: int
    tag: str

    def to_json(self) -> dict[str, int | str]:
        return {"run": self.run, "pid": self.pid, "started": self.started, "tag": self.tag}

    @classmethod
    def from_json(cls, data: dict[str, int | str]) -> Lease:
        return cls(int(data["run"]), int(data["pid"]), int(data["started"]), str(data["tag"]))


def lease_path(out: Path, run: int) -> Path:
    """Where the lease of watch ``run`` on ``out`` lies."""
    return Path(out) / "runs" / f"{run}{_SUFFIX}"


def claim(out: Path, run: int) -> Lease:
    """Claim ``out`` for watch ``run``: write the lease, written whole (a rename), and
    tag this process's environment, so that every process started from now on carries
    the tag."""
    pid = os.getpid()
    lease = Lease(run, pid, _start_time(pid), uuid.uuid4().hex)
    path = lease_path(out, run)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}")
    scratch.write_text(json.dumps(lease.to_json()) + "\n")
    os.replace(scratch, path)
    os.environ[TAG] = lease.tag
    return lease


def release(out: Path, lease: Lease) -> None:
    """Give the lease back: the watch saved its output (call it after the summary)."""
    lease_path(out, lease.run).unlink(missing_ok=True)
    if os.environ.get(TAG) == lease.tag:
        del os.environ[TAG]


def check(out: Path, say: Callable[[str], None] | None = print) -> list[Lease]:
    """Before a watch on ``out`` starts, look at the leases there: refuse the watch
    (:class:`GraphError`) while another holds the folder; end the processes a dead
    watch left (``say`` tells of them) and drop its lease. Returns the dead watches'
    leases."""
    dead = []
    for path in sorted(Path(out, "runs").glob(f"*{_SUFFIX}")):
        lease = _read(path)
        if _alive(lease):
            raise GraphError(f"{out}: watch {lease.run} (process {lease.pid}) is running "
                             "on this folder; stop it first (Ctrl-C), or give this watch "
                             "another --out")
        gone = end_tagged(lease.tag)
        if gone and say is not None:
            say(f"ended {len(gone)} process(es) left by watch {lease.run}, which died "
                "without saving")
        path.unlink()
        dead.append(lease)
    return dead


def end_tagged(tag: str, grace_s: float = 5.0) -> list[int]:
    """End every process of this machine whose environment holds ``TAG=tag``, but this
    one and its ancestors: SIGTERM, then SIGKILL to those alive after ``grace_s``.
    Returns their process ids (none where ``/proc`` cannot be read)."""
    spare = _ancestors()
    tagged = [pid for pid in _pids() if pid not in spare and _has_tag(pid, tag)]
    _signal(tagged, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_running(pid) for pid in tagged):
        time.sleep(0.05)
    _signal([pid for pid in tagged if _running(pid)], signal.SIGKILL)
    return tagged


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _read(path: Path) -> Lease:
    try:
        return Lease.from_json(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise GraphError(f"{path}: not a watch's lease ({type(exc).__name__}: {exc}); "
                         "remove it if no watch runs on this folder") from None


def _alive(lease: Lease) -> bool:
    """Is the lease's driver running: its process alive, started when it claimed?
    (Its own environment shows no tag: /proc holds the one it started with.)"""
    return _running(lease.pid) and _start_time(lease.pid) == lease.started


def _stat(pid: int) -> list[bytes]:
    """The fields of ``/proc/<pid>/stat`` after the command: state first (empty if it
    cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _running(pid: int) -> bool:
    """Is ``pid`` a process that has not ended (a zombie has)?"""
    fields = _stat(pid)
    return bool(fields) and fields[0] != b"Z"


def _start_time(pid: int) -> int:
    """When ``pid`` started, in clock ticks since boot (0 if unknown)."""
    fields = _stat(pid)
    return int(fields[19]) if len(fields) > 19 else 0


def _has_tag(pid: int, tag: str) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return f"{TAG}={tag}".encode() in environ.read().split(b"\0")
    except OSError:  # gone, or another user's
        return False


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _ancestors() -> set[int]:
    """This process and its ancestors."""
    out, pid = set(), os.getpid()
    while pid > 1 and pid not in out:
        out.add(pid)
        fields = _stat(pid)
        pid = int(fields[1]) if len(fields) > 1 else 0
    return out
