"""Slow, obviously correct references for the ordering unit and the in-process runtime.

Nothing here shares code with :mod:`specula.ordering`: it sorts lists and loops.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from specula.detectors.graph import Graph, Node
from specula.events import RETRACTION, REVOKE, UPDATE
from specula.events.hashing import partition_of
from specula.ordering.emitter import Emitter

TB_SHIFT = 40


def key(row: np.void) -> tuple[int, int]:
    return int(row["ts"]), (int(row["producer"]) << TB_SHIFT) | int(row["seq"])


def content(rows: np.ndarray) -> list[tuple]:
    """Rows as comparable tuples of every field but flags, arrival, K+ and origin."""
    names = [n for n in rows.dtype.names if n not in ("flags", "ats", "kplus", "origin")]
    return sorted(tuple(r[n].item() for n in names) for r in rows)


def canonical(rows: np.ndarray) -> np.ndarray:
    """A producer's whole output with its counters replaced by their ranks: 0, 1, 2, ...
    in counter order, per producer (raw events, producer 0, as they are).

    An on-demand speculative unit names its outputs by labels, which increase in its
    output order but leave gaps (an output inserted later takes a free label in
    between); the in-order reference numbers the same outputs 0, 1, 2, ... So two
    outputs of a producer are the same when their canonical forms are: same events,
    in the same order."""
    rows = rows.copy()
    rows["seq"] = canonical_seq(rows["producer"], rows["seq"])
    return rows


def canonical_seq(producer: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """The counters ``seq`` replaced by their ranks per producer (producer 0 kept)."""
    out = np.array(seq, np.int64)
    for p in np.unique(producer).tolist():
        if p != 0:
            mine = np.flatnonzero(producer == p)
            out[mine[np.argsort(out[mine], kind="stable")]] = np.arange(len(mine))
    return out



def assert_net_equals(report, reference, name: str) -> np.ndarray:
    """A node's net output in ``report`` is ``reference``'s: neither has late events, the
    contents are equal, and no generated event appears twice. Returns ``report``'s."""
    assert len(report.late(name)) == len(reference.late(name)) == 0, name
    got = report.net(name)
    assert content(canonical(got)) == content(canonical(reference.net(name))), name
    ids = got["producer"].astype(np.int64) << 40 | got["seq"]
    assert len(np.unique(ids)) == len(ids), name  # no duplicates
    return got

def run_detector(detector, rows: list[np.void], registry, producer: int, out_dtype) -> np.ndarray:
    """Feed ``rows`` in key order to a copy of ``detector``, one event per call, then end
    the stream (``on_end``)."""
    det = copy.deepcopy(detector)
    names = ["?"] * (max(t.id for t in registry.types()) + 1)
    for t in registry.types():
        names[t.id] = t.name
    out = []

    def collect(emit: Emitter) -> None:
        generated = list(emit.rows)
        for name, cols, _ in emit.column_batches:
            for i in range(len(cols["ts"])):
                payload = {f: v[i] for f, v in cols.items() if f not in ("ts", "key")}
                generated.append((name, int(cols["ts"][i]), int(cols["key"][i]), payload))
        for name, ts, k, payload in generated:
            r = np.zeros(1, out_dtype)[0]
            r["type"], r["ts"], r["key"] = registry.id(name), ts, k
            r["producer"], r["seq"] = producer, len(out)
            for f, v in payload.items():
                r[f] = v
            out.append(r)

    for row in sorted(rows, key=key):
        emit = Emitter()
        det.on_batch(np.array([row]), names, emit)
        collect(emit)
    emit = Emitter()
    det.on_end(emit)
    collect(emit)
    return np.array(out, dtype=out_dtype) if out else np.empty(0, out_dtype)


def instances(graph: Graph) -> list[tuple[Node, int, int]]:
    """(node, partition index, producer id) of every detector instance, numbered as the
    runtimes number them: nodes in topological order, a node's partitions in a row,
    producers from 1."""
    out: list[tuple[Node, int, int]] = []
    for node in graph.topological_order():
        for index in range(node.partitions):
            out.append((node, index, len(out) + 1))
    return out


def in_view(row: np.void, node: Node, index: int, registry) -> bool:
    """Is ``row`` for partition ``index`` of ``node``: one of its input types, with
    a key that hashes to ``index``?"""
    return (registry.name(int(row["type"])) in node.inputs
            and int(partition_of(int(row["key"]), node.partitions)) == index)


def reference_instances(graph: Graph, raw: np.ndarray) -> dict[tuple[str, int], np.ndarray]:
    """Every detector instance's output when all events are delivered in key order: each
    partition gets the raw and generated events of its input types and keys."""
    reg = graph.registry
    produced: dict[tuple[str, int], np.ndarray] = {}
    for node, index, producer in instances(graph):
        rows = [r for r in raw if in_view(r, node, index, reg)]
        for out in produced.values():
            rows += [r for r in out if in_view(r, node, index, reg)]
        produced[node.name, index] = run_detector(node.detector, rows, reg, producer,
                                                  reg.dtype(node.outputs))
    return produced


def reference_graph(graph: Graph, raw: np.ndarray) -> dict[str, np.ndarray]:
    """Every detector's output (its partitions together) when all events are delivered
    in key order."""
    per_instance = reference_instances(graph, raw)
    out = {}
    for name, node in graph.nodes.items():
        out[name] = np.concatenate([per_instance[name, i] for i in range(node.partitions)])
    return out


def same_content(a: np.void, b: np.void) -> bool:
    """Two versions of an event are equal: every shared field but flags, arrival, K+ and
    origin."""
    names = [n for n in a.dtype.names if n in b.dtype.names
             and n not in ("flags", "ats", "kplus", "origin")]
    return all(a[n] == b[n] for n in names)


def same_message(record: np.void, sent: np.void) -> bool:
    """Is the late record ``record`` a copy of the message ``sent``: same content, same
    arrival time, both or neither a retraction, both or neither a revocation (an update
    may be recorded without its flag)."""
    return (all(bool(record["flags"] & f) == bool(sent["flags"] & f)
                for f in (RETRACTION, REVOKE))
            and int(record["ats"]) == int(sent["ats"]) and same_content(record, sent))


@dataclass
class Consumed:
    """What a consumer must have processed of one producer's messages.

    ``rows``: events it processed for sure. ``undecided``: per late retraction, in
    order, the events it revoked that the consumer may have purged (processed) already;
    :func:`kept_choices` lists what they may have left. ``problems``: late records that
    cannot be explained.
    """

    rows: list[np.void] = field(default_factory=list)
    undecided: list[list[np.void]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def consumed(stream: Sequence[np.void], late: Sequence[np.void],
             wanted: Callable[[np.void], bool], registry=None) -> Consumed:
    """Replay one producer's messages ``stream`` (in the order sent) against the
    consumer's late records of that producer (in the order declared).

    The producer's net output is kept as a sink keeps it (an event lives from its
    emission until a retraction from its counter on, or an update that differs); the
    consumer's share is what ``wanted`` accepts. A message matched by a late record is
    refused: a late event or update never counts. A late update leaves the consumer
    holding the version it revises (when the consumer held it: else the record is a
    problem); that version is processed unless a later revision that is not late
    removes or replaces it (a revocation or retraction finds an event by producer and
    counter, whatever its version). A late revocation leaves the version the consumer
    held processed. A late retraction leaves processed the events it revokes that the
    consumer had already purged: those with a key up to its horizon then (see
    :func:`purged`). ``registry`` names types in problems.
    """
    out = Consumed()
    live: dict[int, np.void] = {}
    # counters whose live version the consumer refused, with the version it holds
    # instead (None: none, the live version was a late event)
    held: dict[int, np.void | None] = {}
    checked: list[tuple[int, bool, tuple[int, int]]] = []  # (position, late?, key)
    retractions: list[tuple[int, list[np.void]]] = []
    records, unmatched = align(stream, late)

    def version(s: int) -> np.void | None:
        """The version of counter ``s`` the consumer holds or processed."""
        return held[s] if s in held else live.get(s)

    for i, msg in enumerate(stream):
        record = records.get(i)
        seq = int(msg["seq"])
        if msg["flags"] & RETRACTION:
            gone = sorted(s for s in live if s >= seq)
            if record is not None:
                mine = [v for v in map(version, gone) if v is not None and wanted(v)]
                retractions.append((i, sorted(mine, key=key)))
            for s in gone:
                del live[s]
                held.pop(s, None)
            continue
        old = version(seq)
        if msg["flags"] & REVOKE:  # late: the consumer had purged the version it revokes
            if record is not None and old is not None and wanted(old):
                out.rows.append(old)
            live.pop(seq, None)
            held.pop(seq, None)
            continue
        if record is None:
            if msg["flags"] & UPDATE and old is not None and same_content(old, msg):
                continue  # discarded as equal, whatever the horizon
            if wanted(msg):
                checked.append((i, False, key(msg)))
            held.pop(seq, None)
        elif record["flags"] & UPDATE:  # the version it revises was purged or refused
            if seq not in held:
                if old is None or not wanted(old):
                    out.problems.append(
                        f"late update {show(record, registry)} revises "
                        f"{'nothing' if old is None else show(old, registry)}, which the "
                        "consumer never held")
                held[seq] = old
        else:  # refused for its key below the horizon
            checked.append((i, True, key(msg)))
            held.setdefault(seq, None)
        live[seq] = msg
    for i, revoked in retractions:
        sure, maybe = purged(revoked, checked, i)
        out.rows += sure
        out.undecided.append(maybe)
    out.rows += [v for v in map(version, live) if v is not None and wanted(v)]
    out.problems += [f"late record {show(r, registry)} matches no message its producer sent"
                     for r in unmatched]
    return out


def purged(revoked: list[np.void], checked: list[tuple[int, bool, tuple[int, int]]],
           at: int) -> tuple[list[np.void], list[np.void]]:
    """Of the events a late retraction at stream position ``at`` revoked (in key order),
    those the consumer had purged for sure, and those it may have purged.

    The consumer's horizon h (the key of its last purged event) only grows; an event
    arriving with a key below h is late, any other enters the buffer. So an event
    refused as late before the retraction has a key below h, and one accepted after it
    a key at or above h: the revoked events up to the first key are purged, those
    beyond the second are not.
    """
    lo = max((k for j, is_late, k in checked if j < at and is_late), default=None)
    hi = min((k for j, is_late, k in checked if j > at and not is_late), default=None)
    sure = [r for r in revoked if lo is not None and key(r) <= lo]
    maybe = [r for r in revoked[len(sure):] if hi is None or key(r) <= hi]
    return sure, maybe


def kept_choices(undecided: list[list[np.void]]) -> Iterator[list[np.void]]:
    """Every set of the ``undecided`` events (of one producer) its late retractions may
    have left processed, each once.

    At each retraction the consumer's horizon h (the key of its last purged event) had
    some value, growing from one retraction to the next: the events with a key below h
    were purged, those above were not, and one with a key equal to h may or may not
    be the one purged (another version of an event can share its key). The sets that
    keep the most come first.
    """
    below_all = (-(2**63), 0)
    options = [*sorted({key(r) for u in undecided for r in u}, reverse=True), below_all]
    seen = set()
    for falling in itertools.combinations_with_replacement(options, len(undecided)):
        horizons = falling[::-1]
        picked = [[(n, i) for i, r in enumerate(u) if key(r) < h]
                  for n, (u, h) in enumerate(zip(undecided, horizons, strict=True))]
        ties = [(n, i) for n, (u, h) in enumerate(zip(undecided, horizons, strict=True))
                for i, r in enumerate(u) if key(r) == h]
        for mask in itertools.product((True, False), repeat=len(ties)):
            chosen = tuple(sorted([x for p in picked for x in p]
                                  + [t for t, m in zip(ties, mask, strict=True) if m]))
            if chosen not in seen:
                seen.add(chosen)
                yield [undecided[n][i] for n, i in chosen]


def align(stream: Sequence[np.void], late: Sequence[np.void]
          ) -> tuple[dict[int, np.void], list[np.void]]:
    """Which message of ``stream`` each late record is a copy of (by position), and the
    records that match none. A producer may send the same message twice (two replays
    in one step retract from the same counter); once a copy is late, so are later
    ones (the horizon and the purged counters only grow), so records are matched to
    the latest possible messages, from the end."""
    matched: dict[int, np.void] = {}
    i = len(stream) - 1
    for j in range(len(late) - 1, -1, -1):
        while i >= 0 and not same_message(late[j], stream[i]):
            i -= 1
        if i < 0:
            return matched, list(late[:j + 1])
        matched[i] = late[j]
        i -= 1
    return matched, []


def show(row: np.void, registry=None) -> str:
    """A message as ``T@ts key=.. p=.. seq=.. v=.. ats=..`` with its flags, for failure
    messages (type names from ``registry``, else type ids)."""
    flags = int(row["flags"])
    t = int(row["type"])
    name = registry.name(t) if registry is not None and t else f"type{t}"
    kind = "RETRACTION " if flags & RETRACTION else "UPDATE " if flags & UPDATE else ""
    v = f" v={int(row['v'])}" if "v" in row.dtype.names else ""
    return (f"{kind}{name}@{int(row['ts'])} key={int(row['key'])} "
            f"p={int(row['producer'])} seq={int(row['seq'])}{v} ats={int(row['ats'])}")


def kslack_late(rows: np.ndarray, clock_ids: set[int], alpha: float, k0: int = 0) -> list[int]:
    """Indices (arrival order) of the events a K-slack unit must call late.

    Pure K-slack (alpha = 1): emitted and purged as soon as ts + K <= clk, after every
    arrival; late = key below the last emitted key. Speculative (alpha < 1): emitted once
    ts + ceil(alpha K) <= clk, purged at clock updates when ts + K <= clk except the last
    emitted event; late = key below the last purged key. K is the largest
    clk - ts + K+ of the events received since the previous clock update, measured at
    that update.
    """
    buf: list[tuple[tuple[int, int], bool]] = []  # (key, emitted)
    clk, k, pending = None, k0, []
    horizon = None
    late = []
    for i, r in enumerate(rows):
        kk = key(r)
        pending.append(int(r["kplus"]) - int(r["ts"]))
        if horizon is not None and kk < horizon:
            late.append(i)
        else:
            buf.append((kk, False))
            buf.sort(key=lambda e: e[0])
            # an insertion in front of emitted events re-emits them (a replay): all stay emitted
            first_new = next(j for j, e in enumerate(buf) if e[0] == kk and not e[1])
            if any(e[1] for e in buf[first_new + 1:]):
                buf[first_new] = (kk, True)
        clock_step = int(r["type"]) in clock_ids
        if clock_step:
            clk = int(r["ts"]) if clk is None else max(clk, int(r["ts"]))
            k = max(k, clk + max(pending))
            pending = []
        if clk is None:
            continue
        slack = k if alpha >= 1 else math.ceil(Fraction(repr(float(alpha))) * k) if k > 0 else 0
        for j, (kk2, em) in enumerate(buf):
            if not em and kk2[0] + slack <= clk:
                buf[j] = (kk2, True)
            elif not em:
                break
        if alpha >= 1:
            while buf and buf[0][1]:
                horizon = buf.pop(0)[0]
        elif clock_step:
            n_emitted = sum(e[1] for e in buf)
            while len(buf) > 1 and buf[0][1] and n_emitted > 1 and buf[0][0][0] + k <= clk:
                horizon = buf.pop(0)[0]
                n_emitted -= 1
    return late
