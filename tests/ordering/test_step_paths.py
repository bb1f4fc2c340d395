"""The paths a live step takes: the pure K-slack unit's one kernel call per run (rows as
bytes, an event clock's proposals read by type, the emitted rows gathered, the output
stamped in one call) against a slow sorted-list K-slack, and the few-row paths (Python
ints) of the unit's accept, the router and the net output against their NumPy formulas.

Streams of every shape these paths cover: in and out of order, ties, late events,
K+ of premature events, raw and generated events, punctuations of the raw clock and of
channels, retractions, types the unit does not take; batches cut at random, and the
unit pickled, copied or restored from a checkpoint between pushes."""

from __future__ import annotations

import copy
import pickle

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specula import Graph
from specula import events as ev
from specula.actors.routing import Router, _newest
from specula.detectors import Detector
from specula.detectors.examples import example_registry
from specula.ordering import NetOutput, OrderingUnit
from specula.ordering.checkpoint import restore_unit, unit_state
from specula.ordering.net import ranked

NO_CLOCK = -(2**62)
SHIFT = 40
_CLOCK = (("A",), ("A", "C"))
_CHANNEL = 7  # the producer whose punctuations clock a channel-clocked unit


class Echo(Detector):
    """Emits one ``D`` per input event (alternately one by one and as a column batch),
    so the unit's output shows what it handed on, in order, and how it was stamped."""

    inputs = ("A", "B", "C")
    outputs = ("D",)

    def on_batch(self, events, type_names, emit):
        ts, key = events["ts"], events["producer"].astype(np.int64) << SHIFT | events["seq"]
        if len(events) % 2:
            for i in range(len(events)):
                emit.at(i)
                emit("D", int(ts[i]), int(key[i]))
        else:
            emit.many("D", ts=ts, key=key, cause=np.arange(len(events)))

    def snapshot(self):
        return None

    def restore(self, state):
        pass


def _behind(key, horizon):
    """Late against the horizon: below it, or, for a generated event, equal to it."""
    return key < horizon or (key == horizon and key[1] >= 1 << SHIFT)


def reference(arrivals, clock_types, channels, late_process, k0):
    """What a pure K-slack unit hands on and calls late, from a sorted list: per arrival
    the clock proposal (an event clock: a clock type's time stamp, or a raw
    punctuation's; a channel clock: the low watermark when a punctuation or a raw clock
    event moves its channel), then K, the horizon, retractions, and emission of every
    held event with ``ts + K <= clk``. Returns the keys handed on, in order, with the
    origin each one's output carries, the late rows' indices, and the final clock and K."""
    clk, k, pending = NO_CLOCK, k0, NO_CLOCK
    held: list[tuple[tuple[int, int], int, int]] = []  # (key, arrival index, origin)
    horizon = (NO_CLOCK, 0)
    purged: dict[int, int] = {}
    handed, late = [], []
    chan = dict.fromkeys(channels or (), NO_CLOCK)
    origin = 0

    def hand(key, origin_in, in_order=True):
        nonlocal origin, horizon
        origin = max(origin, origin_in)
        handed.append((key, origin))
        if in_order:  # a late event handed on out of order leaves the horizon
            horizon = key
        if key[1] >> SHIFT:
            p, s = key[1] >> SHIFT, key[1] & ((1 << SHIFT) - 1)
            purged[p] = max(purged.get(p, -1), s)

    def release():
        while held and held[0][0][0] + k <= clk:
            key, _, o = held.pop(0)
            hand(key, o)

    for i, r in enumerate(arrivals):
        t, ty, p, s, kp, f, o = (int(r[n]) for n in
                                 ("ts", "type", "producer", "seq", "kplus", "flags", "origin"))
        if f & ev.RETRACTION:
            if purged.get(p, -1) >= s:
                late.append(i)
            held[:] = [h for h in held if not (h[0][1] >> SHIFT == p
                                               and h[0][1] & ((1 << SHIFT) - 1) >= s)]
            continue
        data = not f & ev.PROGRESS
        proposal = NO_CLOCK
        if channels is None:
            if (data and ty in clock_types) or (not data and p == 0):
                proposal = t
        elif ((not data and p in chan) or (data and p == 0 and 0 in chan
                                           and ty in clock_types)) and t > chan[p]:
            chan[p] = t
            proposal = min(chan.values())
        if data:  # the delay: at the next clock update (event clock) or now (channels)
            delay = kp - t
            if channels is not None:
                if clk != NO_CLOCK and clk + delay > k:
                    k = clk + delay
            elif delay > pending:
                pending = delay
        moved = proposal != NO_CLOCK and (data or proposal > clk)
        if moved:
            clk = max(clk, proposal)
            if pending != NO_CLOCK and clk + pending > k:
                k = clk + pending
            pending = NO_CLOCK
        if data:
            key = (t, p << SHIFT | s)
            if _behind(key, horizon):
                late.append(i)
                if late_process:
                    hand(key, o, in_order=False)
            else:
                at = len(held)
                while at and key < held[at - 1][0]:
                    at -= 1
                held.insert(at, (key, i, o))
        if data or moved:
            release()
    return handed, late, clk, k


def _stream(draw_seed, n, disorder, reg, channel_clock):
    """Arrivals: raw A/B/C (and G, which the unit does not take) and generated events
    of producer 5, out of order by up to ``disorder``, with raw and channel
    punctuations and retractions of producer 5 among them."""
    rng = np.random.default_rng(draw_seed)
    rows, seq5 = [], 0
    for i in range(n):
        ts = i * 3 + int(rng.integers(-disorder, 1)) if disorder else i * 3
        pick = rng.random()
        r = {"ts": max(ts, 0), "type": "A", "seq": i, "origin": int(rng.integers(0, 50)),
             "kplus": int(rng.integers(0, 4)) if rng.random() < 0.2 else 0}
        if pick < 0.5:
            r["type"] = str(rng.choice(["A", "B", "C", "C", "G"]))
        elif pick < 0.7:
            r.update(type="B", producer=5, seq=seq5)
            seq5 += 1
        elif pick < 0.85:
            r.update(flags=ev.PROGRESS, producer=_CHANNEL if channel_clock and rng.random() < 0.6
                     else 0, kplus=0)
        elif pick < 0.92 and seq5:
            r.update(flags=ev.RETRACTION, producer=5, seq=int(rng.integers(0, seq5)), kplus=0)
        else:
            r["ts"] = int(rng.integers(0, max(ts, 1)))  # late, probably
        rows.append(r)
    return reg.from_records(rows, dtype=reg.dtype(["A", "B", "C", "G"]))


# the streams and units of the property tests below, and what happens between pushes
_UNIT_CASES = dict(
    seed=st.integers(0, 2**32 - 1), n=st.integers(0, 60), disorder=st.sampled_from([0, 2, 9]),
    clock=st.sampled_from(_CLOCK), channel_clock=st.booleans(),
    late=st.sampled_from(["side", "process"]), k0=st.sampled_from([0, 4]),
    between=st.lists(st.sampled_from(["", "", "pickle", "copy", "checkpoint"]), min_size=1,
                     max_size=20))


def _unit_maker(reg, clock, late, k0, channels):
    """What makes a fresh pure K-slack unit around an :class:`Echo`."""
    def fresh():
        det = Echo()
        return OrderingUnit(det, reg, producer=3, inputs=det.inputs, outputs=det.outputs,
                            clock=clock, late=late, k0=k0, channels=channels)
    return fresh


def _carried(units, how, fresh):
    """``units`` after ``how``: pickled, deep-copied, their checkpoints restored into
    fresh ones (``fresh()``), or as they are."""
    if how == "pickle":
        return [pickle.loads(pickle.dumps(u)) for u in units]
    if how == "copy":
        return [copy.deepcopy(u) for u in units]
    if how == "checkpoint":
        saved = [unit_state(u) for u in units]
        units = [fresh() for _ in units]
        for u, state in zip(units, saved, strict=True):
            restore_unit(u, state)
    return units


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**_UNIT_CASES, cuts=st.lists(st.integers(1, 9), min_size=1, max_size=20))
def test_a_pure_k_slack_unit_hands_on_what_a_sorted_list_does(
        seed, n, disorder, clock, channel_clock, late, k0, cuts, between):
    reg = example_registry()
    arrivals = _stream(seed, n, disorder, reg, channel_clock)
    channels = (0, _CHANNEL) if channel_clock else ()
    fresh = _unit_maker(reg, clock, late, k0, channels)
    unit, out, start, step = fresh(), [], 0, 0
    while start < len(arrivals):
        end = start + cuts[step % len(cuts)]
        out.append(unit.push(arrivals[start:end], now=step))
        [unit] = _carried([unit], between[step % len(between)], fresh)
        start, step = end, step + 1
    got = ev.concat(out, unit.out_dtype)
    handed, late_rows, clk, k = reference(
        arrivals[np.isin(arrivals["type"], [reg.id(t) for t in ("A", "B", "C")])
                 | (arrivals["flags"] != 0)],
        {reg.id(t) for t in clock}, channels or None, late == "process", k0)
    assert [(int(t), int(key)) for t, key in zip(got["ts"], got["key"], strict=True)] == [
        key for key, _ in handed]
    assert got["origin"].tolist() == [o for _, o in handed]
    assert got["seq"].tolist() == list(range(len(got)))
    assert set(got["producer"].tolist()) <= {3} and not got["kplus"].any()
    assert unit.stats.late == len(late_rows)
    assert (unit.clk, unit.k) == (clk, k)


def _strided(batch):
    """The rows of ``batch`` as a view that is not contiguous: the unit takes them the
    general way, cut into runs of data events and control messages."""
    spread = np.zeros(2 * len(batch), batch.dtype)
    spread[::2] = batch
    return spread[::2]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(**_UNIT_CASES, cuts=st.lists(st.integers(0, 8), min_size=1, max_size=20))
def test_a_few_data_events_in_one_call_do_what_the_runs_do(
        seed, n, disorder, clock, channel_clock, late, k0, cuts, between):
    """A batch of up to eight contiguous rows that are all data events of the unit's
    input types goes to the K-slack kernel in one call (push_few); the same rows as a
    strided view go the general way. Both units hand on, stamp, count and hold the
    same after every push (their checkpoints equal), late events, generated events,
    raw and channel clocks, punctuations and retractions among the rows."""
    reg = example_registry()
    arrivals = _stream(seed, n, disorder, reg, channel_clock)
    channels = (0, _CHANNEL) if channel_clock else ()
    fresh = _unit_maker(reg, clock, late, k0, channels)
    units, start, step = [fresh(), fresh()], 0, 0
    arrivals = ev.conform(arrivals, units[0].in_dtype, drop=True)  # as a runtime hands them
    while start < len(arrivals) or step < len(cuts):
        # the cuts once as drawn (empty batches too), then at least a row a push
        end = start + (cuts[step] if step < len(cuts) else max(cuts[step % len(cuts)], 1))
        batch = arrivals[start:end]
        one_call, runs = units[0].push(batch, now=step), units[1].push(_strided(batch),
                                                                        now=step)
        assert one_call.tobytes() == runs.tobytes()
        assert unit_state(units[0]) == unit_state(units[1])
        units = _carried(units, between[step % len(between)], fresh)
        start, step = end, step + 1
    assert units[0].late_events().tobytes() == units[1].late_events().tobytes()
    assert units[0].flush(step).tobytes() == units[1].flush(step).tobytes()


_ROW = st.tuples(st.integers(-1, 9), st.sampled_from([0, 0, 0, ev.PROGRESS, ev.RETRACTION]),
                 st.integers(0, 30))


def _batch(rows, dtype):
    batch = np.zeros(len(rows), dtype)
    for i, (t, f, ts) in enumerate(rows):
        batch[i]["type"], batch[i]["flags"], batch[i]["ts"] = t, f, ts
    return batch


class Two(Detector):
    """Publishes ``D`` and ``E``; only its output's types matter here."""

    inputs = ("A",)
    outputs = ("D", "E")


class Top(Detector):
    """Takes ``D`` only of what ``Two`` publishes."""

    inputs = ("D",)
    outputs = ("F",)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(_ROW, max_size=12), raw=st.booleans())
def test_few_rows_are_routed_and_accepted_as_the_numpy_formulas_say(rows, raw):
    reg = example_registry()
    graph = Graph(reg, sources=("A", "B", "C", "G"))
    graph.add("echo", Echo()).add("two", Two()).add("top", Top())
    router = Router(graph)
    node, source, takes = ("echo", None, Echo.inputs) if raw else ("top", "two", Top.inputs)
    batch = _batch([(t, 0 if raw else f, ts) for t, f, ts in rows], reg.dtype(["A", "B", "C"]))
    wanted = np.isin(np.clip(batch["type"], 0, None), [reg.id(t) for t in takes])
    control = (batch["flags"] & (ev.RETRACTION | ev.PROGRESS)) > 0
    got = router.select(node, source, batch)
    assert got.tobytes() == batch[wanted | (control & (not raw))].tobytes()
    mask = np.zeros(9, bool)
    mask[[reg.id("A"), reg.id("C")]] = True
    plain = mask[np.clip(batch["type"], 0, 8)] & (batch["flags"] == 0)
    assert _newest(batch, mask) == (int(batch["ts"][plain].max()) if plain.any() else -(2**62))
    # the unit takes its input types and every control message or punctuation
    det = Echo()
    unit = OrderingUnit(det, reg, producer=3, inputs=det.inputs, outputs=det.outputs,
                        clock=("A",))
    is_input = np.zeros(8, bool)
    is_input[[reg.id(t) for t in det.inputs]] = True
    kept = is_input[np.clip(batch["type"], 0, 7)] | (batch["flags"] > 0)
    unit.push(batch)
    stats = unit.stats
    assert stats.events_in + stats.control_in + stats.progress_in == np.count_nonzero(kept)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(0, 12), st.sampled_from(
    [0, 0, 0, ev.RETRACTION, ev.UPDATE, ev.REVOKE])), max_size=30), cut=st.integers(1, 12))
def test_few_rows_apply_to_a_net_output_as_many_do(rows, cut):
    reg = example_registry()
    batch = np.zeros(len(rows), reg.dtype(["D"]))
    for i, (p, s, f) in enumerate(rows):
        batch[i]["producer"], batch[i]["seq"], batch[i]["flags"] = p, s, f
        batch[i]["ts"] = 10 * s + p
    # the same batches whole (NumPy's checks past eight rows) and cut into pieces
    whole, pieces = NetOutput(batch.dtype), NetOutput(batch.dtype)
    for start in range(0, len(batch), cut):
        part = batch[start:start + cut]
        whole.apply(part, start)
        for i in range(len(part)):
            pieces.apply(part[i:i + 1], start)
    assert ranked(whole.net()).tobytes() == ranked(pieces.net()).tobytes()
