"""The net output against a plain model of it, on random streams of events, updates,
revocations and retractions (``benchmarks/net_output.py`` measures what a retraction
costs)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specula import events as ev
from specula.detectors.examples import example_registry
from specula.ordering import NetOutput

DTYPE = example_registry().dtype(["G"])
KINDS = ("event", "update", "revoke", "retraction")


@st.composite
def streams(draw) -> list[list[tuple]]:
    """Batches of (kind, producer, seq, count, now): counters mostly new and ascending
    per producer, sometimes old ones again (a revoked event sent anew), updates equal or
    not, range retractions anywhere."""
    n_producers = draw(st.integers(1, 3))
    top = dict.fromkeys(range(1, n_producers + 1), 0)
    batches = []
    for now in range(draw(st.integers(1, 25))):
        batch = []
        for _ in range(draw(st.integers(1, 12))):
            p = draw(st.integers(1, n_producers))
            kind = draw(st.sampled_from((*KINDS, "event", "event")))
            old = draw(st.integers(0, max(top[p] - 1, 0)))
            if kind == "event" and draw(st.booleans()):
                seq, top[p] = top[p], top[p] + 1
            else:
                seq = old
            batch.append((kind, p, seq, draw(st.integers(0, 2)), now))
        batches.append(batch)
    return batches


def as_rows(batch: list[tuple]) -> np.ndarray:
    rows = np.zeros(len(batch), DTYPE)
    for i, (kind, p, seq, count, _) in enumerate(batch):
        rows[i]["producer"], rows[i]["seq"], rows[i]["count"] = p, seq, count
        rows[i]["ts"] = seq * 10 + p
        rows[i]["flags"] = {"event": 0, "update": ev.UPDATE, "revoke": ev.REVOKE,
                            "retraction": ev.RETRACTION}[kind]
    return rows


def model(batches: list[list[tuple]]) -> dict[tuple[int, int], tuple[int, int]]:
    """(producer, seq) -> (count, first emission time of the live version)."""
    live: dict[tuple[int, int], tuple[int, int]] = {}
    for batch in batches:
        for kind, p, seq, count, now in batch:
            if kind == "retraction":
                for k in [k for k in live if k[0] == p and k[1] >= seq]:
                    del live[k]
            elif kind == "revoke":
                live.pop((p, seq), None)
            elif kind == "update" and live.get((p, seq), (None,))[0] == count:
                continue
            else:
                live[(p, seq)] = (count, now)
    return live


@settings(max_examples=100, deadline=None)
@given(batches=streams(), split=st.booleans())
def test_net_output_equals_the_plain_model(batches, split):
    """Also when applied in two halves and absorbed into one (the runtimes merge the
    net outputs of a node's instances this way)."""
    if split:
        first, second = NetOutput(DTYPE), NetOutput(DTYPE)
        for b in batches:
            by_p = {p for _, p, *_ in b}
            for p in by_p:  # each producer to one of the two, as instances own producers
                target = first if p % 2 else second
                target.apply(as_rows([x for x in b if x[1] == p]), b[0][4])
        net = NetOutput(DTYPE)
        net.absorb(first)
        net.absorb(second)
    else:
        net = NetOutput(DTYPE)
        for b in batches:
            net.apply(as_rows(b), b[0][4])
    assert_equals_model(net, batches)


@settings(max_examples=50, deadline=None)
@given(batches=streams(), cut=st.integers(0, 25), bound=st.integers(0, 8))
def test_split_at_hands_on_what_is_below_the_bound_and_the_rest_goes_on_alike(
        batches, cut, bound):
    """A holder that hands on the events below ``bound`` (final: nothing revises them
    later) gets them with their first emission times and keeps the rest with theirs;
    later batches act on what it keeps as on the whole net output."""
    before = batches[:cut]
    after = [[x for x in b if x[2] >= bound] for b in batches[cut:]]
    after = [b for b in after if b]
    whole = NetOutput(DTYPE)
    for b in before:
        whole.apply(as_rows(b), b[0][4])
    handed, handed_times, kept = whole.split_at(bound)
    assert {(int(r["producer"]), int(r["seq"])): (int(r["count"]), int(t))
            for r, t in zip(handed, handed_times, strict=True)} == {
        k: v for k, v in model(before).items() if k[1] < bound}
    for b in after:
        kept.apply(as_rows(b), b[0][4])
    rows, times = kept._gather()
    got = {(int(r["producer"]), int(r["seq"])): (int(r["count"]), int(t))
           for r, t in zip(rows, times, strict=True)}
    want = {k: v for k, v in model(before + after).items() if k[1] >= bound}
    assert got == want


WIDER = np.dtype([*DTYPE.descr, ("extra", "<i8")])


def gathered_batch_by_batch(net: NetOutput) -> tuple[np.ndarray, np.ndarray]:
    """The live rows and their first emission times as a ``take`` per applied batch
    would give them: ordered by batch, then as the live set lists them."""
    refs = net.live_refs()
    chunks = net.applied_batches()[0]
    order = np.argsort(refs[:, 0], kind="stable")
    parts = [ev.conform(chunks[c][r:r + 1], DTYPE, drop=True) for c, r in refs[order, :2]]
    rows = ev.concat_records(parts) if parts else np.empty(0, DTYPE)
    return rows, refs[order, 2]


@settings(max_examples=60, deadline=None)
@given(batches=streams(), wide=st.booleans())
def test_gather_joins_the_batches_in_the_order_of_a_take_per_batch(batches, wide):
    """The live rows taken in one call from the batches joined: same rows, same order,
    same times as a row at a time from each batch, also with batches in a dtype with
    a field more than the output's (conformed)."""
    net = NetOutput(DTYPE)
    for b in batches:
        rows = as_rows(b)
        net.apply(ev.conform(rows, WIDER) if wide else rows, b[0][4])
    rows, times = net._gather()
    want_rows, want_times = gathered_batch_by_batch(net)
    assert rows.dtype == DTYPE
    assert rows.tobytes() == want_rows.tobytes()
    assert times.tolist() == want_times.tolist()


@st.composite
def plain_runs(draw) -> list[list[tuple]]:
    """Batches of a producer's new counters ascending (the usual case: 1 to 16 rows, a
    few and many), between them now and then a retraction or old counters again."""
    top = {1: 0, 2: 0}
    batches = []
    for now in range(draw(st.integers(1, 20))):
        p = draw(st.integers(1, 2))
        if draw(st.integers(0, 4)) == 0:  # a retraction, or a counter sent again
            kind = draw(st.sampled_from(("retraction", "event")))
            batches.append([(kind, p, draw(st.integers(0, top[p])), 1, now)])
            continue
        batch = []
        for _ in range(draw(st.integers(1, 16))):
            top[p] += draw(st.integers(1, 2))
            batch.append(("event", p, top[p], draw(st.integers(0, 2)), now))
        batches.append(batch)
    return batches


@settings(max_examples=60, deadline=None)
@given(batches=plain_runs())
def test_plain_runs_of_a_few_rows_and_many_equal_the_model(batches):
    net = NetOutput(DTYPE)
    for b in batches:
        net.apply(as_rows(b), b[0][4])
    assert_equals_model(net, batches)


def assert_equals_model(net: NetOutput, batches) -> None:
    """The live rows ``net`` gathers, with their times, are the model's of ``batches``."""
    rows, times = net._gather()
    got = {(int(r["producer"]), int(r["seq"])): (int(r["count"]), int(t))
           for r, t in zip(rows, times, strict=True)}
    assert got == model(batches)
    assert len(net) == len(got)
