"""eSPICE against a type-level baseline on small generated streams with an injected
overload (sec. 4's set-up). The baseline here ("BL" below) is the learned per-type one,
``type-rate`` (:meth:`~specula.shedding.TypeUtilityShedder.from_model`), stronger than the
paper's BL (``policy="bl"``, pinned in ``test_shedders.py``).

Each case trains UT on 20,000 events run without shedding, then runs 20,000 fresh events
three times: unshed (the truth), with eSPICE and with BL, both told to drop the same
``x = (R - th) p_size / R`` per partition for an input rate ``R`` 20 % or 40 % above the
throughput, with ``rho = ceil(ws / (q_max - f q_max))`` partitions (q_max = 2.5 ws, f = 0.8:
rho = 2). A complex event is lost (false negative) when the shed run lacks it, window and
constituents alike.

Figures measured on these streams (``pytest tests/shedding/test_quality.py -s`` prints them;
false negatives as a share of the truth, FN eSPICE / FN BL at +20 % and +40 %):

- Q1-like, ``seq(STR; any(2, DF1..DF6))``, count window of 40, first: 0.0 % / 25 % and
  0.0 % / 49 %; last, ``any(3, ...)``: 0.2 % / 42 % and 0.2 % / 65 %;
- Q1-like on a time window (~40 events, size predicted from closed windows): 0.0 % / 25 %;
- Q3-like, ``seq(RE1; ...; RE5)`` in a count window of 60 opened by MLE, first: 1.0 % / 28 %
  and 6.2 % / 93 %; last: 4.2 % / 27 %.

eSPICE drops at least the amount asked (its threshold is the smallest utility whose
expected drops reach ``x``; when zero-utility cells alone exceed ``x`` it drops all of them,
~80 % of the pairs on Q1), so its advantage is not bought by dropping less: the tests check
that too.
"""

from __future__ import annotations

import numpy as np
import pytest
from shedding_streams import q1_probs, run, stream

from specula.shedding import (
    AnyOf,
    ESpiceShedder,
    Sequence,
    TypeUtilityShedder,
    UtilityModel,
    WindowAssigner,
    partition_count,
)

Q3_PROBS = np.r_[0.02, np.full(5, 0.9 / 5), np.full(4, 0.02)]  # MLE, RE1..RE5, others

CASES = {
    "q1_first_count": (q1_probs(), lambda: WindowAssigner(40, openers=[0]),
                       AnyOf(2, (1, 2, 3, 4, 5, 6), "first", with_opener=True), 40),
    "q1_last_count": (q1_probs(), lambda: WindowAssigner(40, openers=[0]),
                      AnyOf(3, (1, 2, 3, 4, 5, 6), "last", with_opener=True), 40),
    "q1_first_time": (q1_probs(), lambda: WindowAssigner(400, openers=[0], unit="time",
                                                         expected_size=38),
                      AnyOf(2, (1, 2, 3, 4, 5, 6), "first", with_opener=True), 38),
    "q3_first_count": (Q3_PROBS, lambda: WindowAssigner(60, openers=[0]),
                       Sequence((1, 2, 3, 4, 5), "first"), 60),
    "q3_last_count": (Q3_PROBS, lambda: WindowAssigner(60, openers=[0]),
                      Sequence((1, 2, 3, 4, 5), "last"), 60),
}


def _false_negatives(case: str, overload: float) -> dict[str, float]:
    probs, assigner, pattern, n = CASES[case]
    model = UtilityModel(len(probs), n)
    run(stream(20_000, 1, probs), assigner(), pattern)[0].observe_into(model)
    table = model.build()
    test = stream(20_000, 2, probs)
    truth, work = run(test, assigner(), pattern)
    want = truth.complex_events()
    rho = partition_count(n, 2.5 * n, 0.8)
    espice = ESpiceShedder(table, rho)
    x = espice.set_rates(1.0 + overload, 1.0)
    bl = TypeUtilityShedder.from_model(model, rho, seed=3)
    bl.set_amount(x)
    out = {"asked": x / espice.partition_size, "windows": len(want)}
    for name, shedder in (("espice", espice), ("bl", bl)):
        got, kept = run(test, assigner(), pattern, shedder)
        out[f"{name}_fn"] = len(want - got.complex_events()) / len(want)
        out[f"{name}_dropped"] = 1 - kept / work
    print(case, overload, {k: round(v, 4) for k, v in out.items()})
    return out


@pytest.mark.parametrize(("case", "overload"), [
    ("q1_first_count", 0.2), ("q1_first_count", 0.4), ("q1_last_count", 0.2),
    ("q1_last_count", 0.4), ("q1_first_time", 0.2), ("q3_first_count", 0.2),
    ("q3_first_count", 0.4), ("q3_last_count", 0.2)])
def test_espice_loses_fewer_complex_events_than_bl_dropping_at_least_as_much(case, overload):
    """FN eSPICE at most a third of BL's, less 1 point (measured: 3.8x to 280x fewer, or
    none lost; see the module)."""
    r = _false_negatives(case, overload)
    assert r["windows"] > 300
    assert r["bl_fn"] >= 0.2  # BL must drop events that matter for the comparison to bite
    assert 3 * r["espice_fn"] + 0.01 <= r["bl_fn"]
    asked = overload / (1 + overload)
    assert r["asked"] == pytest.approx(asked)
    assert r["espice_dropped"] >= asked - 0.01  # eSPICE drops at least the amount asked
    assert abs(r["bl_dropped"] - asked) < 0.02  # BL drops the amount asked


def test_q1_first_selection_at_20_percent_espice_below_1_percent_bl_above_20_percent():
    """The headline: soccer-Q1-like stream, +20 %: eSPICE 0.2 % FN, BL 25 % FN."""
    r = _false_negatives("q1_first_count", 0.2)
    assert r["espice_fn"] < 0.01 and r["bl_fn"] > 0.2
