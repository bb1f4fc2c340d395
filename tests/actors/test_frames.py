"""Arrays stored as frames (:mod:`specula.actors.frames`) and the driver's raw pushes as
slices of its stream (:class:`specula.actors.sources.RawSlice`): what comes back is
what went in, for random pieces, dtypes, slices and subscriptions."""

from __future__ import annotations

import tempfile

import numpy as np
import pytest
import ray
from hypothesis import given, settings
from hypothesis import strategies as st

from specula import events as ev
from specula.actors import sources
from specula.actors.frames import frames, read_frames
from specula.actors.recovery import Store
from specula.actors.routing import Router
from specula.actors.signing import random_key
from specula.actors.worker import joined
from specula.detectors.examples import (
    ANotBCBatch,
    CountPerKey,
    RunningCount,
    Threshold,
    example_registry,
)
from specula.detectors.graph import Graph
from specula.pipelines.synthetic import abc_stream

#: Dtypes of every shape a stored array has: events with payloads, plain integers, and
#: records with padding and a subarray (as ``np.save`` would describe them).
DTYPES = [example_registry().dtype(), example_registry().dtype(["D"]), np.dtype("<i8"),
          np.dtype({"names": ["a", "b"], "formats": ["<i8", "u1"], "offsets": [0, 11],
                    "itemsize": 24}),
          np.dtype([("a", "<i4", (3,)), ("b", [("x", "<f8"), ("y", "u1")])])]


def _piece(rng: np.random.Generator, dtype: np.dtype, rows: int) -> np.ndarray:
    raw = rng.integers(0, 256, rows * dtype.itemsize, dtype=np.uint8)
    piece = raw.view(dtype)
    return piece[::2] if rng.random() < 0.3 else piece  # some not contiguous


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), arrays=st.integers(1, 4))
def test_frames_written_through_a_store_read_back_as_the_pieces_joined(seed, arrays):
    rng = np.random.default_rng(seed)
    want, given_arrays = [], []
    for _ in range(arrays):
        dtype = DTYPES[rng.integers(len(DTYPES))]
        pieces = [_piece(rng, dtype, int(rng.integers(0, 6))) for _ in range(rng.integers(1, 4))]
        given_arrays.append(pieces)
        # the rows one after the other, in the dtype given (concatenate would drop padding)
        want.append(np.frombuffer(b"".join(np.ascontiguousarray(p).tobytes() for p in pieces),
                                  dtype))
    meta = {"seed": seed, "list": [1, [2, 3]]}
    with tempfile.TemporaryDirectory() as folder:
        store = Store(folder, "run/a", random_key())
        store.write("obj", *frames(meta, given_arrays))
        data = store.read("obj")
    assert data is not None
    got_meta, got = read_frames(data)
    assert got_meta == meta
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and len(g) == len(w)
        for name in g.dtype.names or [None]:  # field by field: padding holds anything
            assert (g if name is None else g[name]).tobytes() == \
                (w if name is None else w[name]).tobytes()
        assert g.flags.writeable and g.flags.owndata


def test_frames_refuse_bytes_that_do_not_add_up():
    data = b"".join(frames(None, [[np.arange(3)]]))
    with pytest.raises(ValueError, match="frames of"):
        read_frames(data + b"\0")
    with pytest.raises(ValueError, match="differ in dtype"):
        frames(None, [[np.arange(2), np.arange(2, dtype="i4")]])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), partitions=st.integers(1, 3))
def test_a_raw_slice_gives_each_instance_the_piece_of_the_stamped_rows(seed, partitions):
    """An instance's piece of a RawSlice (cut from the unstamped slab, then stamped) is
    its piece of the batch stamped first, as the driver sent it before."""
    rng = np.random.default_rng(seed)
    graph = Graph(example_registry(), sources=("A", "B", "C"))
    graph.add("a_not_bc", ANotBCBatch(), k0=50)
    graph.add("big_c", Threshold(limit=int(rng.integers(0, 100))), k0=50)
    graph.add("per_key", CountPerKey(), k0=50, partitions=partitions, idle_after=5)
    router = Router(graph)
    slab = abc_stream(example_registry(), int(rng.integers(1, 400)), seed=seed, keys=5)
    slab.flags.writeable = False  # as Ray's object store gives it
    start = int(rng.integers(0, len(slab)))
    end = int(rng.integers(start, len(slab) + 1))
    stamp = int(rng.integers(1, 2**62))
    sent = sources.RawSlice(slab, start, end, stamp)
    stamped = slab[start:end].copy()
    stamped["ats"] = stamped["origin"] = stamp
    for instance in graph.instances():
        with pytest.MonkeyPatch.context() as mp:  # the slab itself, not Ray's reference
            mp.setattr(sources, "_slab", lambda ref: ref)
            got, arrived = sources.take_raw(
                sent, lambda rows, i=instance: router.piece(i, None, rows))
        if arrived is not None:  # left where it lies: the unit stamps it as it copies it
            assert arrived == stamp and not got.flags.writeable
            got = got.copy()
            ev.stamp_arrival(got, arrived)
        want = router.piece(instance, None, stamped)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), instance.label
        assert got.flags.writeable
    assert len(sent) == end - start


class CountAB(RunningCount):
    """The running count of A and B events: a node whose rows (no payload) are narrower
    than the raw stream's, so its unit copies its part into rows of its own dtype."""

    inputs = ("A", "B")


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), alpha=st.sampled_from([1.0, 0.5, 0.0]),
       late=st.sampled_from(["side", "process"]), partitions=st.integers(1, 3))
def test_raw_slices_stamped_where_the_unit_copies_them_give_what_stamped_rows_give(
        seed, alpha, late, partitions):
    """Each instance fed the driver's pushes as RawSlices, a piece left in the slab
    stamped by its ordering unit (or where a step joins several pushes,
    :func:`~specula.actors.worker.joined`), generates, sets aside as late and holds the
    same rows, byte for byte, as one fed each piece stamped first; the slab, read-only,
    is never written. Random streams (late events, raw punctuations among them),
    pushes, steps, subscriptions, partitions, K-slack and speculative units."""
    rng = np.random.default_rng(seed)
    reg = example_registry()
    graph = Graph(reg, sources=("A", "B", "C"))
    options = {"k0": int(rng.integers(0, 30)), "alpha": alpha, "late": late}
    graph.add("a_not_bc", ANotBCBatch(), **options)
    graph.add("big_c", Threshold(limit=int(rng.integers(0, 100))), **options)
    graph.add("per_key", CountPerKey(), **options, partitions=partitions, idle_after=5)
    graph.add("count_ab", CountAB(), **options)
    router = Router(graph)
    mix = (0.4, 0.2, 0.4) if rng.random() < 0.6 else (0.5, 0.5, 0.0)
    slab = abc_stream(reg, int(rng.integers(1, 300)), seed=seed, keys=5, max_delay=40,
                      mix=mix)
    # raw punctuations, and revisions of raw events
    slab["flags"] = rng.choice([0, ev.PROGRESS, ev.UPDATE], len(slab), p=[0.94, 0.03, 0.03])
    slab.flags.writeable = False  # as Ray's object store gives it
    edges = np.unique(rng.integers(0, len(slab) + 1, int(rng.integers(0, 8))))
    pushes = list(zip(np.r_[0, edges], np.r_[edges, len(slab)], strict=True))
    stamps = np.cumsum(rng.integers(0, 1_000, len(pushes))) + 10**15
    steps, at = [], 0
    while at < len(pushes):  # a step takes one push or several
        size = int(rng.integers(1, 4))
        steps.append(list(range(at, min(at + size, len(pushes)))))
        at += size
    before = slab.tobytes()
    for instance in graph.instances():
        fed, stamped = instance.unit(reg), instance.unit(reg)

        def cut(rows, i=instance):
            return router.piece(i, None, rows)

        for now, step in enumerate(steps, 1):
            pieces = []
            for p in step:
                (start, end), stamp = pushes[p], int(stamps[p])
                with pytest.MonkeyPatch.context() as mp:  # the slab, not Ray's reference
                    mp.setattr(sources, "_slab", lambda ref: ref)
                    pieces.append(sources.take_raw(sources.RawSlice(slab, start, end, stamp),
                                                   cut))
                rows = slab[start:end].copy()
                ev.stamp_arrival(rows, stamp)
                pieces[-1] += (cut(rows),)
            batch, arrived = joined([p[0] for p in pieces], [p[1] for p in pieces],
                                    fed.in_dtype)
            want, _ = joined([p[2] for p in pieces], [None] * len(pieces), fed.in_dtype)
            got = fed.push(batch, now, arrived) if len(batch) else None
            expected = stamped.push(want, now) if len(want) else None
            assert (got is None) == (expected is None)
            if got is not None:
                assert got.tobytes() == expected.tobytes(), instance.label
            assert fed.buffer.contents().rows.tobytes() == \
                stamped.buffer.contents().rows.tobytes(), instance.label
        assert fed.flush(len(steps) + 1).tobytes() == stamped.flush(len(steps) + 1).tobytes()
        assert fed.late_events().tobytes() == stamped.late_events().tobytes(), instance.label
    assert slab.tobytes() == before


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), slab_pushes=st.integers(1, 5),
       slab_rows=st.integers(1, 400))
def test_the_driver_s_slabs_hold_a_few_pushes_and_each_slice_is_its_rows(
        seed, slab_pushes, slab_rows):
    """Pushes of random sizes cut from a prepared stream: each slice read from its slab
    (again after later slabs were put, as a resend reads it) is its rows of the
    stream, stamped by the consumer; a slab is put only when a push runs past the one
    before, and holds at most the rows of ``SLAB_PUSHES`` pushes the size of the one
    that put it and :data:`~specula.actors.sources.SLAB_BYTES` (unless that push is
    larger)."""
    rng = np.random.default_rng(seed)
    rows = abc_stream(example_registry(), int(rng.integers(1, 600)), seed=seed)
    rows.flags.writeable = False
    stream = sources.PreparedStream(rows)
    puts: list[np.ndarray] = []
    sent = []
    with pytest.MonkeyPatch.context() as mp:  # a slab is the rows put, not Ray's reference
        mp.setattr(sources, "SHARE_BYTES", 0)
        mp.setattr(sources, "SLAB_PUSHES", slab_pushes)
        mp.setattr(sources, "SLAB_BYTES", slab_rows * rows.itemsize)
        mp.setattr(sources, "_slab", lambda ref: ref)
        mp.setattr(ray, "is_initialized", lambda: True)
        mp.setattr(ray, "put", lambda part: puts.append(part) or part)
        start = slab_end = 0
        while start < len(rows):
            end = min(len(rows), start + int(rng.integers(1, 60)))
            put_before = len(puts)
            push = stream.share(start, end, start + 1)
            assert isinstance(push, sources.RawSlice) and len(push) == end - start
            if len(puts) > put_before:  # only a push past the slab before puts one
                assert len(puts) == put_before + 1 and end > slab_end
                assert push.slab is puts[-1]
                assert puts[-1].tobytes() == rows[start:start + len(puts[-1])].tobytes()
                assert len(puts[-1]) <= max(end - start,
                                            min(slab_rows, slab_pushes * (end - start)))
                slab_end = start + len(puts[-1])
            else:
                assert push.slab is sent[-1][0].slab and end <= slab_end
            sent.append((push, start, end))
            start = end
        for push, start, end in sent:
            got, stamp = push.take(lambda r: r)
            assert stamp == start + 1 and got.tobytes() == rows[start:end].tobytes()
