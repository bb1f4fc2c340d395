"""A watch's lease on its run folder: who is writing there, and what a watch that died
left behind.

A watch claims its run folder before Spark or Ray start (:func:`claim`): it writes
``out/runs/<run>.running`` (its process id, a tag of its own and the last micro-batch
handed on before it) and puts the tag in its environment, which every process it
starts inherits (Spark's JVMs, their Python workers, Ray's processes on this machine).
It gives the lease back (:func:`release`) once its output and summary are saved, after
a flush at its idle timeout and after a suspension by Ctrl-C or SIGTERM alike.

A lease that is still there when the next watch starts (:func:`check`) is either a
watch that is running (its process is alive and has the tag: refused, two watches
would write one folder) or one that died without saving: killed (SIGKILL, an OOM
kill, a lost VM), aborted by a second Ctrl-C, or ended by an error. Its processes on
this machine that outlived it (found by the tag, so a reused process id is never
hit) are ended first. Then, if it had handed files to its detectors, their state is
lost with it, and going on would miss detections (its files are never read again)
and repeat others: that is refused, with a message that says so and what to do. If
it handed nothing, nothing was lost: the lease is dropped and the watch goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from specula.detectors.graph import GraphError

#: The environment variable that tags every process of a watch.
TAG = "SPECULA_WATCH_TAG"
_SUFFIX = ".running"


@dataclass(frozen=True)
class Lease:
    """A watch's claim on a run folder: run number, driver process (its id and start
    time, so that a reused id is not taken for it), tag, and the last micro-batch
    handed on when it started (-1: none)."""

    run: int
    pid: int
    started: int
    tag: str
    handed_before: int

    def to_json(self) -> dict[str, int | str]:
        return {"run": self.run, "pid": self.pid, "started": self.started, "tag": self.tag,
                "handed_before": self.handed_before}

    @classmethod
    def from_json(cls, data: dict[str, int | str]) -> Lease:
        return cls(int(data["run"]), int(data["pid"]), int(data["started"]),
                   str(data["tag"]), int(data["handed_before"]))


def lease_path(out: Path, run: int) -> Path:
    """Where the lease of watch ``run`` on ``out`` lies."""
    return Path(out) / "runs" / f"{run}{_SUFFIX}"


def claim(out: Path, run: int, handed: int) -> Lease:
    """Claim ``out`` for watch ``run`` (``handed``: the last micro-batch handed on so
    far): write the lease, written whole (a rename), and tag this process's
    environment, so that every process started from now on carries the tag."""
    pid = os.getpid()
    lease = Lease(run, pid, _start_time(pid), uuid.uuid4().hex, handed)
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


def check(out: Path, handed: int, say: object = print) -> list[int]:
    """Before a watch on ``out`` starts (``handed``: the last micro-batch handed on, as
    the folder records it): refuse it (:class:`GraphError`) while another watch holds
    the folder, or when one died after handing files on; end the processes a dead
    watch left; drop the lease of one that died having handed nothing. Returns the
    process ids ended; ``say`` (a callable) tells the user of them."""
    ended: list[int] = []
    for path in sorted(Path(out, "runs").glob(f"*{_SUFFIX}")):
        lease = _read(path)
        if _alive(lease):
            raise GraphError(f"{out}: watch {lease.run} (process {lease.pid}) is running "
                             "on this folder; stop it first (Ctrl-C), or give this watch "
                             "another --out")
        gone = end_tagged(lease.tag)
        if gone and callable(say):
            say(f"ended {len(gone)} process(es) left by watch {lease.run}, which died "
                "without saving")
        ended += gone
        if handed > lease.handed_before:
            raise GraphError(
                f"{out}: watch {lease.run} died without saving (killed, aborted by a second "
                f"Ctrl-C, or failed) after handing files to its detectors, whose state was "
                f"lost with it: going on would miss the detections of those files, which "
                f"are not read again. Watch again with a new --out (the files stay in the "
                f"watched folder), or remove {path} to go on knowing that")
        path.unlink()
    return ended


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
