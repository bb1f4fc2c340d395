"""The example detectors beyond the contract (tests/detectors/test_contract.py): the
vectorised A!BC equals the per-event one on any stream and any batching."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specula.detectors import Detector, Emitter
from specula.detectors.examples import ANotBC, ANotBCBatch, example_registry
from specula.pipelines.synthetic import abc_stream


def ordered_input(cls, seed: int, n: int = 300) -> np.ndarray:
    """A time-ordered stream of the detector's input types (F events made from C)."""
    reg = example_registry()
    raw = abc_stream(reg, n, seed=seed, keys=4)
    raw = raw[np.argsort(raw["ts"], kind="stable")]
    types = [reg.name(int(t)) for t in raw["type"]]
    rows = []
    for r, t in zip(raw, types, strict=True):
        t = {"A": "A", "B": "B", "C": "C"}[t]
        for want in cls.inputs:
            if want in ("A", "B", "C") and want == t:
                rows.append({"type": t, "ts": int(r["ts"]), "key": int(r["key"]),
                             **({"v": int(r["v"])} if t == "C" else {})})
            elif want not in ("A", "B", "C") and t == "C":  # derived input types
                fields = dict(reg[want].fields)
                rows.append({"type": want, "ts": int(r["ts"]), "key": int(r["key"]),
                             **{f: int(r["v"]) for f in fields}})
    return reg.from_records(rows, dtype=reg.dtype(cls.inputs))


def run(det: Detector, batch: np.ndarray, cut: int | None = None) -> list:
    names = ["?"] * 10
    for t in example_registry().types():
        names[t.id] = t.name
    emit, out = Emitter(), []
    pieces = [batch] if cut is None else [batch[i:i + cut] for i in range(0, len(batch), cut)]
    for piece in pieces:
        emit.clear()
        det.on_batch(piece, names, emit)
        out += [(n, ts, k, tuple(sorted(p.items()))) for n, ts, k, p in emit.rows]
        for name, cols, _ in emit.column_batches:
            for i in range(len(cols["ts"])):
                out.append((name, int(cols["ts"][i]), int(cols["key"][i]), tuple(sorted(
                    (f, v[i].item()) for f, v in cols.items() if f not in ("ts", "key")))))
    return out


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10**6), cut=st.integers(1, 40))
def test_vectorised_a_not_bc_equals_the_per_event_one(seed, cut):
    batch = ordered_input(ANotBC, seed=seed, n=200)
    assert run(ANotBCBatch(), batch, cut) == run(ANotBC(), batch)
