"""Slow, obviously correct references for the ordering unit and the in-process runtime.

Nothing here shares code with :mod:`specula.ordering`: it sorts lists and loops.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import numpy as np

from specula.detectors.graph import Graph
from specula.ordering.emitter import Emitter

TB_SHIFT = 40


def key(row: np.void) -> tuple[int, int]:
    return int(row["ts"]), (int(row["producer"]) << TB_SHIFT) | int(row["seq"])


def content(rows: np.ndarray) -> list[tuple]:
    """Rows as comparable tuples of every field but flags, arrival, K+ and origin."""
    names = [n for n in rows.dtype.names if n not in ("flags", "ats", "kplus", "origin")]
    return sorted(tuple(r[n].item() for n in names) for r in rows)


def run_detector(detector, rows: list[np.void], registry, producer: int, out_dtype) -> np.ndarray:
    """Feed ``rows`` in key order to a copy of ``detector``, one event per call."""
    det = copy.deepcopy(detector)
    names = ["?"] * (max(t.id for t in registry.types()) + 1)
    for t in registry.types():
        names[t.id] = t.name
    out = []
    for row in sorted(rows, key=key):
        emit = Emitter()
        det.on_batch(np.array([row]), names, emit)
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
    return np.array(out, dtype=out_dtype) if out else np.empty(0, out_dtype)


def reference_graph(graph: Graph, raw: np.ndarray) -> dict[str, np.ndarray]:
    """Every detector's output when all events are delivered in key order."""
    reg = graph.registry
    produced: dict[str, np.ndarray] = {}
    for i, node in enumerate(graph.topological_order()):
        rows = [r for r in raw if reg.name(int(r["type"])) in node.inputs]
        for src, out in produced.items():
            rows += [r for r in out if reg.name(int(r["type"])) in node.inputs]
            del src
        produced[node.name] = run_detector(node.detector, rows, reg, i + 1,
                                           reg.dtype(node.outputs))
    return produced


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
