"""An actor's output on its checkpoint storage: segments, forgetting what was handed
on, the base, and restoring from them (:mod:`specula.actors.output_log`)."""

from __future__ import annotations

import numpy as np
import pytest
from naive import content

from specula import events as ev
from specula.actors.output_log import ActorOutput, read_segment
from specula.actors.recovery import Store
from specula.actors.signing import random_key
from specula.detectors.examples import example_registry
from specula.ordering.net import NetOutput

DTYPE = example_registry().dtype(["D"])
KEY = random_key()


def _rows(seqs: list[int], flags: int = 0, value: int = 0) -> np.ndarray:
    rows = np.zeros(len(seqs), DTYPE)
    rows["producer"], rows["seq"], rows["ts"] = 1, seqs, seqs
    rows["flags"], rows["type"] = flags, example_registry().id("D")
    rows["origin"] = np.asarray(seqs) * 1_000
    rows["a_ts"] = value
    return rows


def _late(rng: np.random.Generator, n: int) -> np.ndarray:
    rows = np.zeros(n, DTYPE)
    rows["seq"] = rng.integers(0, 10**6, n)
    rows["flags"] = ev.LATE
    return rows


@pytest.mark.parametrize("seed", range(12))
def test_forgetting_and_restoring_keep_what_was_not_handed_on(tmp_path, seed):
    """Random streams of new events, updates and retractions above a settled counter
    that only grows, late events, checkpoints, hand-ons (forget the net events below
    the counter and the segments written) and restores from storage at random points:
    the output holds exactly the reference net events from the counter on, its tally
    counts the rest, it holds the late events of the segments not handed on, a
    restore gives back what the last checkpoint saved, one base is kept, and storage
    keeps exactly the segments that the base or the tail still needs."""
    rng = np.random.default_rng(seed)
    store = Store(str(tmp_path), f"s{seed}", KEY)
    out = ActorOutput(DTYPE, DTYPE, store)
    reference = NetOutput(DTYPE)
    next_seq = settled = forgotten = 0
    late_by_segment: dict[int, np.ndarray] = {}
    saved = None
    for step in range(300):
        op = rng.choice(["emit", "emit", "emit", "save", "forget", "restore"])
        now = step * 10
        if op == "emit":
            parts = [_rows(list(range(next_seq, next_seq + int(rng.integers(0, 5)))))]
            next_seq += len(parts[0])
            if next_seq > settled and rng.random() < 0.3:  # revise an unsettled event
                s = int(rng.integers(settled, next_seq))
                flag = ev.RETRACTION if rng.random() < 0.5 else ev.UPDATE
                parts.append(_rows([s], flag, value=step))
            batch = ev.concat_records(parts)
            out.apply(batch, now)
            reference.apply(batch, now)
        elif op == "save":
            late = _late(rng, int(rng.integers(0, 3)))
            if len(late):
                late_by_segment[out.segments] = late
            out.save(late)
            out.committed()
            saved = (out.state(), content(out.net.net()), content(out.late()),
                     out.handed.events)
        elif op == "forget":
            settled = int(rng.integers(settled, next_seq + 1))
            out.forget(settled, out.segments)  # as the tail does: what it read
        elif saved is not None:  # a restarted actor, from the last checkpoint
            again = ActorOutput(DTYPE, DTYPE, store)
            again.restore(saved[0])
            assert (content(again.net.net()), content(again.late()),
                    again.handed.events) == saved[1:]
        if op == "save":
            forgotten = out._forgotten[1]
            floor = out._forgotten[0]
            want = reference.net()
            assert content(out.net.net()) == content(want[want["seq"] >= floor])
            assert out.handed.events == int((want["seq"] < floor).sum())
            late = [r for i, r in sorted(late_by_segment.items()) if i >= forgotten]
            assert content(out.late()) == content(np.concatenate(late) if late else
                                                  np.zeros(0, DTYPE))
            kept = sorted(int(f.base_name[4:]) for f in store.fs.get_file_info(_selector(store))
                          if f.base_name.startswith("net-"))
            assert kept == list(range(min(out.base, forgotten), out.segments))
    assert len([f for f in store.fs.get_file_info(_selector(store)) if
                f.base_name.startswith("base-")]) <= 1


def _selector(store: Store):
    from pyarrow import fs

    return fs.FileSelector(store.path)


def test_a_segment_holds_the_batches_and_the_late_events_of_its_interval(tmp_path):
    out = ActorOutput(DTYPE, DTYPE, Store(str(tmp_path), "a", KEY))
    out.apply(_rows([0, 1]), 5)
    out.save(np.zeros(0, DTYPE))
    out.apply(_rows([2]), 7)
    out.apply(_rows([1], ev.RETRACTION), 8)
    late = _late(np.random.default_rng(0), 2)
    out.save(late)
    seg = read_segment(out.store, 1)
    assert seg.lengths.tolist() == [1, 1] and seg.times.tolist() == [7, 8]
    assert seg.rows["seq"].tolist() == [2, 1] and content(seg.late) == content(late)
    with pytest.raises(FileNotFoundError, match="output segment 2 is missing"):
        read_segment(out.store, 2)
