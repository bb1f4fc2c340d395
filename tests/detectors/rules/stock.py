"""OpenCEP's stock example as a Specula rule, minute-resolution quotes to run it on,
and its skip-till-any-match answer computed directly from the definition.

``SEQ(AAPL a, AMZN b, AVID c) WHERE a.open > b.open > c.open WITHIN 5 minutes`` under
skip-till-any-match takes every triple of quotes in time order (equal minutes may
follow each other), whatever came between them. Written naturally in the rule
language: aliases, predicates inside the pattern, a window on the whole pattern,
non-strict ties and ``each``.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from specula.events import TypeRegistry

STOCK_RULE = """define Rising(a_open: double, b_open: double, c_open: double, a_ts: int)
from AVID() as c
 and each AMZN(open > c.open) as b from c
 and each AAPL(open > b.open) as a from b
within {minutes} min
ties nonstrict
where a_open=a.open and b_open=b.open and c_open=c.open and a_ts=a.ts"""

SYMBOLS = ("AAPL", "AMZN", "AVID")


def stock_registry() -> TypeRegistry:
    """One type per symbol, with the minute's opening price; time stamps in seconds."""
    registry = TypeRegistry(ticks_per_second=1.0)
    for name in SYMBOLS:
        registry.register(name, open="f8")
    return registry


def quotes(registry: TypeRegistry, minutes: int, *, seed: int,
           present: float = 0.8) -> np.ndarray:
    """Minute quotes of the three symbols in stream order: each symbol quotes a minute
    with probability ``present``, at a common random walk plus noise of its own (so
    the prices of the three cross often); rows of one minute come in
    a random symbol order (so equal time stamps arrive in every order)."""
    rng = np.random.default_rng(seed)
    rows = []
    market = 100.0
    for minute in range(minutes):
        market += rng.normal(0, 0.5)
        for s in rng.permutation(SYMBOLS):
            if rng.random() < present:
                rows.append((str(s), minute * 60, round(market + rng.normal(0, 1), 2)))
    events = np.zeros(len(rows), registry.dtype(SYMBOLS))
    for i, (symbol, ts, open_) in enumerate(rows):
        events[i]["type"] = registry.id(symbol)
        events[i]["ts"] = ts
        events[i]["open"] = open_
    events["seq"] = np.arange(len(rows))
    return events


def skip_till_any_match(registry: TypeRegistry, events: np.ndarray,
                        minutes: int) -> list[tuple[float, float, float, int]]:
    """Every (a, b, c) with a.ts <= b.ts <= c.ts, c.ts - a.ts <= the window and
    a.open > b.open > c.open, as ``(a.open, b.open, c.open, a.ts)``, sorted."""
    by_type = {s: events[events["type"] == registry.id(s)] for s in SYMBOLS}
    window = minutes * 60
    found = []
    for c in by_type["AVID"]:
        bs = by_type["AMZN"]
        bs = bs[(bs["ts"] <= c["ts"]) & (bs["ts"] >= c["ts"] - window)
                & (bs["open"] > c["open"])]
        as_ = by_type["AAPL"]
        as_ = as_[(as_["ts"] >= c["ts"] - window)]
        for b, a in product(bs, as_):
            if a["ts"] <= b["ts"] and a["open"] > b["open"]:
                found.append((float(a["open"]), float(b["open"]), float(c["open"]),
                              int(a["ts"])))
    return sorted(found)


def check(engine_class: type, *, seed: int, minutes: int = 240) -> str:
    """Empty if ``engine_class`` gives the skip-till-any-match set on random batches of
    the quotes of ``seed``; else what differs."""
    from rules_reference import engine_output, random_batches

    from specula.detectors.rules import parse_rule

    registry = stock_registry()
    events = quotes(registry, minutes, seed=seed)
    expected = skip_till_any_match(registry, events, 5)
    engine = engine_class(parse_rule(STOCK_RULE.format(minutes=5)), registry,
                          ticks_per_second=1.0)
    out = engine_output(engine, random_batches(events, seed=seed, max_size=40))
    got = sorted((a, b, c, a_ts) for _, _, a, b, c, a_ts in out)
    if got == expected:
        return ""
    missing = sorted(set(expected) - set(got))[:5]
    extra = sorted(set(got) - set(expected))[:5]
    return (f"seed {seed}: {len(expected)} matches expected, {len(got)} produced; "
            f"missing {missing}, extra {extra}")


if __name__ == "__main__":  # the GPU engine, in a process started with NUMBA_ENABLE_CUDASIM=1
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from specula.detectors.rules.cdp_gpu import GPUCDPEngine

    problems = [p for p in (check(GPUCDPEngine, seed=s) for s in (0, 1)) if p]
    print("\n".join(problems) or "ok")
    sys.exit(1 if problems else 0)
