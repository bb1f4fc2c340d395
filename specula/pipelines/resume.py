"""A live run stopped and started again on one run folder: where the suspended graph's
state lives.

A watch stopped by Ctrl-C or SIGTERM suspends its graph instead of flushing it
(:meth:`~specula.actors.ray_runtime.RayRuntime.run` with ``suspend``): the actors'
checkpoints stay in ``out/state/`` and ``out/state/suspended.json`` says where the run
stopped (a :class:`~specula.actors.recovery.Suspension`). The next watch on ``out``
resumes from there, so a detection that spans the stop is found as if the watch had
never stopped. A watch that ends by its idle timeout flushes (the stream is over) and
removes the state.

The actors' files in ``out/state/`` are signed (:mod:`specula.actors.signing`): a resume
checks every one against the key derived from the user's key file and the suspended
run, before Spark or Ray start, and refuses a folder altered by anyone without the key.

A watch also suspends its graph at every checkpoint interval, and its checkpoints keep
a copy of this state (:mod:`~specula.pipelines.watch_checkpoint`): a watch that died
goes on from the last one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from specula.actors.recovery import CheckpointLayoutError, Checkpoints, Suspension, verify_run
from specula.actors.signing import run_key
from specula.detectors.graph import Graph, GraphError

#: The folder of a run folder that holds a suspended graph's checkpoints.
STATE = "state"
_RECORD = "suspended.json"


def state_dir(out: Path) -> Path:
    """Where the actors of a watch on ``out`` checkpoint (absolute: actors resolve it)."""
    return (Path(out) / STATE).resolve()


def read_suspension(out: Path) -> Suspension | None:
    """Where the last watch on ``out`` suspended, or None (it flushed, or none ran);
    a record that does not read as one is refused (``GraphError`` naming it)."""
    record = state_dir(out) / _RECORD
    if not record.exists():
        return None
    try:
        return Suspension.from_json(json.loads(record.read_text()))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GraphError(f"{record}: not a suspension record ({type(exc).__name__}: {exc}); "
                         f"remove {state_dir(out)} to start afresh") from None


def suspended_watch(out: Path, graph: Graph, in_process: bool = False) -> Suspension | None:
    """The suspended watch a watch on ``out`` resumes, or None; refused (``GraphError``
    naming the folder and why) when ``graph`` is not the suspended one or the watch
    runs in-process, which cannot resume, or an actor's checkpoint has another layout
    (written by another version), and (``UntrustedCheckpointError`` naming the file)
    when an actor's file in it is not signed with the run's key."""
    suspension = read_suspension(out)
    if suspension is None:
        return None
    if in_process:
        raise GraphError(f"{state_dir(out)} holds a watch stopped mid-stream, which only "
                         "the Ray runtime resumes: run without --in-process to go on from "
                         "it, or remove that folder to start afresh")
    try:
        suspension.check(graph)
    except ValueError as exc:
        raise GraphError(f"{state_dir(out)}: {exc} (remove that folder)") from None
    try:
        verify_run(Checkpoints(str(state_dir(out)), suspension.run,
                               key=run_key(suspension.run)), graph)
    except CheckpointLayoutError as exc:
        raise GraphError(f"{state_dir(out)}: {exc}: resume it with the version that "
                         "suspended it, or remove that folder to start afresh") from None
    return suspension


def save_suspension(out: Path, suspension: Suspension | None) -> None:
    """Record ``suspension`` for the next watch, or (None: the run flushed) remove the
    state, which no run needs any more. Call it once the run's output is persisted."""
    state = state_dir(out)
    if suspension is None:
        shutil.rmtree(state, ignore_errors=True)
        return
    tmp = state / f".{_RECORD}"
    tmp.write_text(json.dumps(suspension.to_json()) + "\n")
    tmp.replace(state / _RECORD)
