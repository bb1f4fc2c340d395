"""Hybrid load shedding against RI, SI, RS and SS: the hybrid paper's DS1 / Q1 (and Q4)
at a latency bound of 50 % of the unshed latency (Zhao et al., ICDE 2020, Fig. 4).

Set-up, read from the paper (sec. VI-A, VI-B):

* **DS1** (Table II): types uniform over A, B, C, D; ``id`` uniform on 1..10; ``v``
  uniform on 1..10, for C on 2..10 (the Fig. 4 set-up: A, B partial matches with
  a.v + b.v > 10 never complete). One event every 10 µs.
* **Q1** ``SEQ(A a, B b, C c) WHERE a.id = b.id = c.id AND a.v + b.v = c.v WITHIN w``,
  skip-till-any-match (``each`` steps); **Q4** ``SEQ(A a, NEG B b, C c)``, non-monotonic
  (input shedding of B events makes false positives: precision is reported).
* **Latency.** The paper's μ is the time to evaluate f_Q per event, a sliding mean over
  1,000 events. To keep runs deterministic on a shared machine, an event's latency here
  is the engine's *work* for its batch (candidate partial matches scanned plus matches
  made, counted by the AIP kernel, plus one unit per event) per event *processed*
  (a dropped event is evaluated by nothing and has no latency); θ is 50 % of the unshed
  mean after a warm-up of ``WARMUP`` events (the paper's 1,033 µs is a steady state).
  The trigger is :mod:`specula.shedding.overload`'s latency trigger with that μ, which
  holds μ at θ; ``latency_ratio_*`` is the mean after the warm-up over the unshed one,
  to read the recall figures against (a strategy that cannot get down to the bound is
  not comparable). Every state shedder drops at most once per ``COOLDOWN`` events, half
  the quick window: partial matches live a window, so a state drop once per window or
  less can never take the latency down by half.
* **Throughput** is wall-clock: events offered per second of engine + shedder time (the
  hashing of the matches' identities, which only this harness needs, is not timed).
* **Cost model**: learned offline on a second DS1 stream of the same law (another
  seed): 4 time slices, 10 classes per state (k-means, trees of depth 10), adapted
  online (w = 0.5).

``python benchmarks/shedding_hybrid.py --quick`` prints a table and, last, one JSON
line; ``evaluate(quick, seed)`` returns the same figures as a dict.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from specula.detectors.rules import RuleDetector
from specula.detectors.rules.engine import compose
from specula.events import TypeRegistry
from specula.events.hashing import event_ids, fold64
from specula.options import Shedding
from specula.shedding import OverloadDetector
from specula.shedding._hybrid_model import learn
from specula.shedding.base import KEEP_ALL
from specula.shedding.baselines import (
    RandomInput,
    RandomState,
    SelectivityState,
    selectivity_input,
)
from specula.shedding.hybrid import HybridShedder

GAP_US = 10  # µs between events
#: Events between two state drops (every state shedder): half the quick window
COOLDOWN = 200
#: Events before the latency is compared with the bound: two smoothing windows, the
#: time the trigger takes to reach its level
WARMUP = 2_000

Q1 = """define Q1(id: int)
from C(id=$i) as c and each B(id=$i) as b within {w} from c
  and each A(id=$i and v + b.v = c.v) as a within {w} from b
within {w} where id=$i"""

Q4 = """define Q4(id: int)
from C(id=$i) as c and each A(id=$i) as a within {w} from c
  and not B(id=$i) between a and c
where id=$i"""

#: What the paper's text states for DS1/Q1 at a 50 % bound (sec. VI-B: hybrid "keeps
#: 100 % recall for a 900 µs - 500 µs latency bound"; the baselines' values are only in
#: Fig. 4a's plot, not in the text we have, so they are not given here).
PAPER = {"recall_hybrid": 1.0}


def registry() -> TypeRegistry:
    """A, B, C, D with ``id`` and ``v``, time stamps in µs."""
    reg = TypeRegistry(ticks_per_second=1e6)
    for t in "ABCD":
        reg.register(t, id="i8", v="i8")
    return reg


def ds1(reg: TypeRegistry, n: int, seed: int, c_low: int = 2) -> np.ndarray:
    """DS1 of Table II: ``n`` events, one every 10 µs; C's ``v`` on ``c_low``..10."""
    rng = np.random.default_rng(seed)
    ev = np.zeros(n, reg.dtype(list("ABCD")))
    ids = np.array([reg[t].id for t in "ABCD"])
    ev["type"] = ids[rng.integers(0, 4, n)]
    ev["ts"] = np.arange(n, dtype=np.int64) * GAP_US
    ev["seq"] = np.arange(n)
    ev["key"] = np.arange(n)
    ev["id"] = rng.integers(1, 11, n)
    ev["v"] = rng.integers(1, 11, n)
    c = ev["type"] == reg["C"].id
    ev["v"][c] = rng.integers(c_low, 11, int(c.sum()))
    return ev


def run(det: RuleDetector, events: np.ndarray, shedder: object = None,
        theta: float | None = None, batch: int = 50) -> dict:
    """Process ``events`` in batches, shedding with ``shedder`` at bound ``theta`` (work
    units per event); the matches (identity hashes), mean work per event, wall time."""
    overload = OverloadDetector(Shedding(latency_bound_s=theta or 1.0, trigger="latency",
                                         smoothing=1000)) if shedder is not None else None
    if shedder is not None and hasattr(shedder, "attach"):
        shedder.attach(det)
    engines = det.engines()
    found, wall, shed = [], 0.0, 0
    work_done = np.zeros((2, -(-len(events) // batch)))  # per batch: work, events processed
    for i, lo in enumerate(range(0, len(events), batch)):
        part = events[lo:lo + batch]
        t0 = time.perf_counter()
        if shedder is not None:
            keep = shedder.keep(part, overload.command(len(part)) if theta else KEEP_ALL)
            shed += int(len(part) - keep.sum())
            part = part[keep]
        w0 = det.work
        for e in engines:
            m = e.process(part)
            if len(m):  # what the rule emits: negations and filters applied
                found.append(m.select(compose(e.rule, m)[0]).elements)
        wall += time.perf_counter() - t0
        work = det.work - w0 + len(part)  # each event costs one unit, plus its scans
        work_done[:, i] = work, len(part)
        if overload is not None and len(part):
            overload.completed(work / len(part), len(part))  # μ: per event processed
    # the matches' identities, for recall: bookkeeping of this harness, not timed
    keys = np.unique(np.concatenate([
        fold64(np.stack([event_ids(x) for x in elements], axis=1)) for elements in found])
    ) if found else np.zeros(0, np.uint64)
    settled = work_done[:, WARMUP // batch:].sum(axis=1)
    return {"keys": keys, "work_per_event": work_done[0].sum() / max(work_done[1].sum(), 1),
            "settled_work_per_event": settled[0] / max(settled[1], 1), "wall_s": wall,
            "throughput_eps": len(events) / wall, "shed_events": shed,
            "shed_pms": getattr(shedder, "dropped", 0)}


def train(reg: TypeRegistry, rule: str, events: np.ndarray) -> tuple:
    """The cost model, SI's type selectivities and frequencies, learned on ``events``."""
    det = RuleDetector(rule, reg)
    det.watch(True)
    for lo in range(0, len(events), 200):
        for e in det.engines():
            e.process(events[lo:lo + 200])
    made = det.watch(False)
    model = learn(made, slices=4, clusters=10, seed=0, end_ts=int(events["ts"][-1]))
    in_match = np.concatenate([v.eids.ravel() for v in made if v.element == 0] or
                              [np.zeros(0, np.uint64)])
    took = np.isin(event_ids(events), in_match)
    size = int(events["type"].max()) + 1
    seen = np.bincount(events["type"], minlength=size).astype(float)
    matched = np.bincount(events["type"], weights=took, minlength=size)
    selectivity = np.where(seen > 0, matched / np.maximum(seen, 1), 0.0)
    return model, selectivity, seen / seen.sum()


def evaluate(quick: bool = True, seed: int = 0, bound: float = 0.5,
             query: str = "q1", repeat: int = 3) -> dict:
    """Recall (precision for Q4) and throughput of hybrid, RI, SI, RS and SS on DS1 at
    ``bound`` times the unshed latency; HyI and HyS beside them. Each run is repeated
    ``repeat`` times, one strategy after another: the throughputs are the medians (a
    run takes well under a second), the rest is the same every time."""
    reg = registry()
    n_train, n_eval = (8_000, 16_000) if quick else (40_000, 100_000)
    window = 4_000 if quick else 8_000  # µs: 400 (800) events per window
    rule = (Q1 if query == "q1" else Q4).format(w=window)
    train_events = ds1(reg, n_train, seed + 1)
    events = ds1(reg, n_eval, seed)
    model, selectivity, frequency = train(reg, rule, train_events)
    unshed = run(RuleDetector(rule, reg), events)
    walls = {"unshed": [unshed["throughput_eps"]]}
    theta = bound * unshed["settled_work_per_event"]
    strategies = {
        "hybrid": lambda: HybridShedder(_copy(model), "hybrid", cooldown=COOLDOWN),
        "hyi": lambda: HybridShedder(_copy(model), "input", cooldown=COOLDOWN),
        "hys": lambda: HybridShedder(_copy(model), "state", cooldown=COOLDOWN),
        "ri": lambda: RandomInput(seed),
        "si": lambda: selectivity_input(selectivity, frequency, seed=seed),
        "rs": lambda: RandomState(seed, COOLDOWN),
        "ss": lambda: SelectivityState({s: m.selectivity for s, m in model.states.items()},
                                       seed, COOLDOWN),
    }
    out = {"query": query, "events": n_eval, "window_us": window, "bound": bound,
           "unshed_matches": len(unshed["keys"]),
           "unshed_work_per_event": round(unshed["settled_work_per_event"], 2)}
    for name, make in strategies.items():
        r = run(RuleDetector(rule, reg), events, make(), theta)
        walls[name] = [r["throughput_eps"]]
        hit = np.isin(r["keys"], unshed["keys"]).sum()
        out[f"recall_{name}"] = round(hit / max(len(unshed["keys"]), 1), 4)
        out[f"precision_{name}"] = round(hit / max(len(r["keys"]), 1), 4)
        out[f"work_ratio_{name}"] = round(r["work_per_event"] / unshed["work_per_event"], 3)
        out[f"latency_ratio_{name}"] = round(
            r["settled_work_per_event"] / unshed["settled_work_per_event"], 3)
        out[f"shed_events_{name}"] = r["shed_events"]
        out[f"shed_pms_{name}"] = r["shed_pms"]
    for _ in range(repeat - 1):  # rounds over every strategy, so that noise hits all alike
        walls["unshed"].append(run(RuleDetector(rule, reg), events)["throughput_eps"])
        for name, make in strategies.items():
            walls[name].append(
                run(RuleDetector(rule, reg), events, make(), theta)["throughput_eps"])
    for name, eps in walls.items():
        out[f"throughput_{name}"] = round(float(np.median(eps)))
    return out


def _copy(model: object) -> object:
    import copy

    return copy.deepcopy(model)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--q4", action="store_true", help="also run the non-monotonic Q4")
    args = ap.parse_args()
    t0 = time.perf_counter()
    res = evaluate(args.quick, args.seed)
    if args.q4:
        q4 = evaluate(args.quick, args.seed, query="q4")
        res.update({f"q4_{k}": v for k, v in q4.items() if k.startswith(("recall", "precision"))})
    print(f"DS1/Q1, bound 50 % of the unshed work per event ({res['unshed_work_per_event']}),"
          f" {res['unshed_matches']} matches unshed")
    print(f"{'strategy':>8} {'recall':>7} {'paper':>6} {'events/s':>9} {'latency':>7} "
          f"{'shed ev':>8} {'shed pm':>8}")
    for s in ("hybrid", "hyi", "hys", "ri", "si", "rs", "ss"):
        paper = PAPER.get(f"recall_{s}")
        print(f"{s:>8} {res[f'recall_{s}']:>7.3f} {paper if paper else '':>6} "
              f"{res[f'throughput_{s}']:>9} {res[f'latency_ratio_{s}']:>7} "
              f"{res[f'shed_events_{s}']:>8} {res[f'shed_pms_{s}']:>8}")
    res["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(res))


if __name__ == "__main__":
    main()
