"""The CDP engine on GPU, in Numba's CUDA simulator, against the CDP engine on CPU.

``NUMBA_ENABLE_CUDASIM`` must be set before Numba is first imported, so the comparison
runs in a subprocess: this file run as a script. Streams are small and blocks tiny
(2 to 8 threads) so that the simulator, which runs every thread as a Python thread, stays
fast, and so that windows span several blocks (the reduction recurses over them) and
device columns wrap around and grow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # the CUDA simulator in a subprocess

RULES = {
    "r5_last": "define X(s: int) from C(p=$x) and last B(p=$x) within 9 from C "
               "and last A(p=$x) within 9 from B where s=Sum(A(p=$x).v within 9 from B)",
    "r5_each": "define X(s: int) from C(p=$x) and each B(p=$x) within 9 from C "
               "and each A(p=$x) within 9 from B where s=Sum(A(p=$x).v within 9 from B)",
    "first": "define X() from C(p=$x) and first B(v>1) within 7 from C and first A(p=$x) "
             "within 5 from B and not D(p=$x) between A and B",
    "aggregates": "define X(a: float, lo: float, hi: float, n: int) from C(v<3) "
                  "and each A(p=$x) within 6 from C where a=Avg(D(p=$x).f within 8 from A) "
                  "and lo=Min(B(p=$x).v within 12 from C) and hi=Max(D().f within 5 from A) "
                  "and n=Count(B(p=$x) within 12 from C)",
    "floats": "define X() from C() and last B(f=$y) within 10 from C "
              "and each A(f=$y) within 10 from B and not D(f=$y) within 4 from C",
    "no_params": "define X() from D(v>=2) and each C() within 3 from D "
                 "and last B() within 2 from C",
    # predicates between elements, arithmetic, time stamps and a pattern window: the
    # device's predicate programs
    "inequalities": "define X() from C() as c and each B(v > c.v - 2) as b within 6 from c "
                    "and each A(v * 2 >= b.v and ts > b.ts - 4) as a within 6 from b "
                    "within 10",
    "predicates_nonstrict": "define X() from C(p=$x) as c and last B(v >= c.v - 1) as b "
                            "within 6 from c and first A(p=$x and v != b.v and v / 2 < b.v + 1) "
                            "within 5 from b ties nonstrict",
}


def _compare(threads_per_block: int, seed: int, min_gpu_work: int = 0,
             max_pairs: int = 1 << 22) -> list[str]:
    """Run every rule on both engines over one random stream; describe differences.

    With ``min_gpu_work`` above 0, small steps run on the CPU and large ones on the
    device, so the device columns catch up with the CPU ones in between."""
    from specula.detectors.rules import cdp_gpu
    from specula.detectors.rules.cdp import CDPEngine
    from specula.detectors.rules.parser import parse_rule
    from specula.events import TypeRegistry

    cdp_gpu._RING_CAPACITY = 16  # small device columns: wrap around and reallocation
    cdp_gpu._MAX_PAIRS = max_pairs  # small: a multiple selection launches over several runs
    reg = TypeRegistry()
    for name in "ABCD":
        reg.register(name, p="i8", v="i8", f="f8")
    rng = np.random.default_rng(seed)
    n = 120
    events = np.zeros(n, reg.dtype())
    events["type"] = rng.integers(1, 5, n)
    events["ts"] = np.cumsum(rng.integers(0, 3, n))
    events["seq"] = np.arange(n)
    events["p"] = rng.integers(0, 3, n)
    events["v"] = rng.integers(0, 4, n)
    events["f"] = rng.choice([0.0, -0.0, 1.5, 2.25, np.nan], n)
    cuts = sorted(rng.choice(np.arange(1, n), 10, replace=False).tolist())
    problems = []
    for name, text in RULES.items():
        rule = parse_rule(text)
        cpu = CDPEngine(rule, reg)
        gpu = cdp_gpu.GPUCDPEngine(rule, reg, threads_per_block=threads_per_block,
                                   min_gpu_work=min_gpu_work)
        spans = list(zip([0, *cuts], [*cuts, n], strict=True))
        states, total = [], 0
        for a, b in spans:
            states.append(cpu.snapshot())
            want, got = cpu.process(events[a:b]), gpu.process(events[a:b])
            total += len(want)
            why = _difference(want, got)
            if why:
                problems.append(f"{name}, tpb {threads_per_block}, batch {a}:{b}: {why}")
                break
        else:  # every batch agreed: the states, then replays from any of them
            if cpu.snapshot() != gpu.snapshot():
                problems.append(f"{name}: snapshots differ")
            problems += _replays(name, cpu, gpu, events, spans, states, rng)
        if total == 0:
            problems.append(f"{name}: no matches at all; the stream does not exercise it")
    return problems


def _replays(name, cpu, gpu, events, spans, states, rng) -> list[str]:
    """Restore both engines to random earlier states (older and newer than the one the
    GPU engine holds, so that its device columns keep some events and upload others)
    and replay the stream from there; outputs must stay equal."""
    problems = []
    before = gpu.uploaded
    gpu.restore(gpu.snapshot())
    if gpu.uploaded != before:
        problems.append(f"{name}: restoring the state it holds uploaded events")
    for start in rng.choice(len(spans), 4):
        cpu.restore(states[start])
        gpu.restore(states[start])
        for a, b in spans[start:start + 3]:
            why = _difference(cpu.process(events[a:b]), gpu.process(events[a:b]))
            if why:
                problems.append(f"{name}, replay from batch {spans[start][0]}, {a}:{b}: {why}")
                break
        if cpu.snapshot() != gpu.snapshot():
            problems.append(f"{name}: snapshots differ after a replay")
    return problems


def _resync_cases(seed: int) -> list[str]:
    """A device column told that its CPU column went from one slice of a stream to
    another (overlapping either way, disjoint, changed in a value) holds exactly the new
    slice and uploads only the events it did not hold."""
    from numba import cuda

    from specula.detectors.rules._cdp_columns import Store
    from specula.detectors.rules._cdp_gpu_buffers import Ring

    rng = np.random.default_rng(seed)
    dtype = np.dtype([("ts", "i8"), ("key", "i8"), ("producer", "i4"), ("seq", "i8")])
    n = 40
    rows = np.zeros(n, dtype)
    rows["ts"], rows["seq"] = np.arange(n) // 2, np.arange(n)
    enc = rng.integers(0, 5, (2, n))
    num = rng.random((1, n))

    def store(a: int, b: int, changed: int | None = None) -> Store:
        s = Store(dtype, 2, 1)
        e = enc[:, a:b].copy()
        if changed is not None:
            e[0, changed - a] += 1
        s.append(rows[a:b], e, num[:, a:b])
        return s

    problems = []
    cases = {"newer": ((5, 20), (12, 30), 10), "older": ((12, 30), (5, 20), 7),
             "same": ((3, 9), (3, 9), 0), "disjoint": ((0, 10), (20, 30), 10),
             "changed": ((0, 20), (5, 20, 11), 9), "empty": ((0, 10), (0, 0), 0)}
    for name, ((a, b, *c0), (x, y, *c1), uploads) in cases.items():
        ring = Ring(2, 1, cuda.stream(), 32)
        ring.head = int(rng.integers(0, 32))  # start anywhere in the circle
        old, new = store(a, b, *c0), store(x, y, *c1)
        ring.fill(old.live_ts, old.live_enc, old.live_num)
        got = ring.resync(old, new) + ring.sync(new)
        phys = (ring.head + np.arange(ring.size)) % ring.capacity
        held_enc = ring.enc.copy_to_host()[:, phys]
        held_num = ring.num.copy_to_host()[:, phys]
        held_ts = ring.ts.copy_to_host()[phys]
        if not (np.array_equal(held_enc, new.live_enc) and np.array_equal(held_num,
                                                                          new.live_num)
                and np.array_equal(held_ts, new.live_ts)):
            problems.append(f"resync {name}: the device column differs from the CPU one")
        if got != uploads:
            problems.append(f"resync {name}: {got} events uploaded, {uploads} expected")
    return problems


def _one_launch_per_step() -> list[str]:
    """A batch's terminators share each step's launches: the steps of a batch with many
    terminators launch as often as those of a batch with one (one for ``last``; three
    for ``each``: counts, their scan, the pairs)."""
    from specula.detectors.rules.cdp_gpu import GPUCDPEngine
    from specula.detectors.rules.parser import parse_rule
    from specula.events import TypeRegistry

    reg = TypeRegistry()
    for name in "ABC":
        reg.register(name, v="i8")
    rule = parse_rule("define X() from C() as c and last B(v > c.v) as b within 90 from c "
                      "and each A(v < b.v) within 90 from b")
    n = 60
    events = np.zeros(n, reg.dtype())
    events["type"] = np.tile([reg.id("A"), reg.id("B"), reg.id("C")], n // 3)
    events["ts"] = events["seq"] = np.arange(n)
    events["v"] = np.arange(n) % 7
    counts = []
    for terminators in (1, n // 3):
        engine = GPUCDPEngine(rule, reg, threads_per_block=8)
        engine.process(events[:n - 3 * terminators])
        before = engine.launches
        found = engine.process(events[n - 3 * terminators:])
        counts.append((engine.launches - before, len(found)))
    (one, found_one), (many, found_many) = counts
    if not (one == many == 4 and 0 < found_one < found_many):
        return [f"launches per batch: {one} for one terminator ({found_one} matches), "
                f"{many} for {n // 3} ({found_many} matches); 4 each expected"]
    return []


def _abcd_stream(n: int, seed: int):
    """Types A to D with parameters ``p`` (two values) and ``v`` (four), ``n`` events
    of random types, one per tick."""
    from specula.events import TypeRegistry

    reg = TypeRegistry()
    for name in "ABCD":
        reg.register(name, p="i8", v="i8", f="f8")
    rng = np.random.default_rng(seed)
    events = np.zeros(n, reg.dtype())
    events["type"] = rng.integers(1, 5, n)
    events["ts"] = events["seq"] = np.arange(n)
    events["p"] = rng.integers(0, 2, n)
    events["v"] = rng.integers(0, 4, n)
    return reg, events


def _bars_case() -> list[str]:
    """With the default bars, steps and reductions the CPU engine looks up in an
    equality index stay on the CPU copy (their bar is None) while scans above their bar
    launch; the answers are the CPU engine's either way."""
    from specula.detectors.rules import cdp_gpu
    from specula.detectors.rules.cdp import CDPEngine
    from specula.detectors.rules.parser import parse_rule

    reg, events = _abcd_stream(90, seed=5)
    n = len(events)
    bars = {"MIN_GPU_WORK_INDEXED": None, "MIN_GPU_WORK_SCAN_LAST": 20,
            "MIN_GPU_WORK_SCAN_EACH": 20, "MIN_GPU_WORK_REDUCE": 20}
    saved = {name: getattr(cdp_gpu, name) for name in bars}
    problems = []
    try:
        for name, value in bars.items():
            setattr(cdp_gpu, name, value)
        for name, launch in (("r5_last", False), ("r5_each", False), ("inequalities", True),
                             ("aggregates", True)):
            rule = parse_rule(RULES[name])
            gpu = cdp_gpu.GPUCDPEngine(rule, reg, threads_per_block=4)
            gpu.min_gpu_work = None  # the bars of the kinds, as on a GPU
            cpu = CDPEngine(rule, reg)
            for a in range(0, n, 30):
                why = _difference(cpu.process(events[a:a + 30]), gpu.process(events[a:a + 30]))
                if why:
                    problems.append(f"bars, {name}: {why}")
            if (gpu.launches > 0) != launch:
                problems.append(f"bars, {name}: {gpu.launches} launches")
    finally:
        for name, value in saved.items():
            setattr(cdp_gpu, name, value)
    return problems


def _one_call_case() -> list[str]:
    """Under the bars of the kinds, a detection in which no step may reach its bar runs
    in the CPU engine's one call: in batches of one event and of 30, at bars from 2 to
    30 pairs, it costs exactly the launches the steps one at a time cost (none), and the
    answers are the CPU engine's."""
    from specula.detectors.rules import cdp_gpu
    from specula.detectors.rules.cdp import CDPEngine
    from specula.detectors.rules.parser import parse_rule

    class Placed(cdp_gpu.GPUCDPEngine):  # records how each detection ran
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.apart: list[bool] = []

        def _steps_apart(self, terminators: int) -> bool:
            self.apart.append(super()._steps_apart(terminators))
            return self.apart[-1]

    class Apart(cdp_gpu.GPUCDPEngine):  # every detection step by step
        def _steps_apart(self, terminators: int) -> bool:
            return True

    reg, events = _abcd_stream(90, seed=6)
    sizes = [1] * 10 + [30, 30] + [1] * 5 + [0, 15]
    rules = {"inequalities": RULES["inequalities"], "no_params": RULES["no_params"],
             "wide_each": "define X() from C() as c and each B(v >= c.v) as b within 30 "
                          "from c and last A(v > b.v) as a within 30 from b"}
    kinds = ("MIN_GPU_WORK_SCAN_LAST", "MIN_GPU_WORK_SCAN_EACH", "MIN_GPU_WORK_REDUCE")
    saved = {name: getattr(cdp_gpu, name) for name in kinds}
    problems, ways = [], set()
    try:
        for bar in (2, 5, 12, 30):
            for name in kinds:
                setattr(cdp_gpu, name, bar)
            for name, text in rules.items():
                rule = parse_rule(text)
                placed, apart = Placed(rule, reg, threads_per_block=4), Apart(rule, reg)
                placed.min_gpu_work = apart.min_gpu_work = None  # the bars, as on a GPU
                cpu, at = CDPEngine(rule, reg), 0
                for size in sizes:
                    part = events[at:at + size]
                    at += size
                    want = cpu.process(part)
                    for engine in (placed, apart):
                        why = _difference(want, engine.process(part))
                        if why:
                            problems.append(f"one call, {name}, bar {bar}: {why}")
                    if placed.launches != apart.launches:
                        problems.append(f"one call, {name}, bar {bar}: {placed.launches} "
                                        f"launches, {apart.launches} step by step")
                ways.update(placed.apart)
    finally:
        for name, value in saved.items():
            setattr(cdp_gpu, name, value)
    if ways != {False, True}:
        problems.append(f"one call: detections apart {ways}, both expected")
    return problems


def _scan_cases(seed: int) -> list[str]:
    """The device's count and scan of slots against numpy's, for lengths around the
    block's and chunk sizes (empty, one, fewer slots than threads, uneven chunks) and
    slots of one and of three flags."""
    from numba import cuda

    from specula.detectors.rules._cdp_gpu_kernels import scans

    rng = np.random.default_rng(seed)
    problems = []
    for tpb in (1, 4, 8):
        for width in (1, 3, 100):  # 100: counts beyond a byte's
            for n in (0, 1, 3, tpb, tpb + 1, 5 * tpb - 1, 37):
                flags = rng.integers(0, 2, (n + 2) * width).astype(np.int32)
                counts = flags[:n * width].reshape(n, width).sum(axis=1)
                want = np.concatenate([[0], np.cumsum(counts)])
                offsets = cuda.to_device(np.full(n + 2, -1, np.int64))
                total = cuda.to_device(np.full(1, -1, np.int64))
                scans(tpb)[1, tpb](cuda.to_device(flags), width, n, offsets, total)
                got, got_total = offsets.copy_to_host(), total.copy_to_host()[0]
                if (got[:n].tolist() != want[:n].tolist() or got_total != want[n]
                        or got[n:].tolist() != [-1, -1]):
                    problems.append(f"scan of {n} slots of {width} with {tpb} threads: "
                                    f"{got.tolist()}, total {got_total}")
    return problems


def _pairs_cases() -> list[str]:
    """A multiple selection's pairs come back with their total in one wait when they fit
    the previous launch's size, in two when they do not, and whole either way."""
    from numba import cuda

    from specula.detectors.rules._cdp_gpu_buffers import Pairs

    pairs = Pairs(cuda.stream())
    problems = []
    for n, waits in ((10, 1), (12, 1), (3000, 2), (2500, 1), (0, 1)):
        pairs.grow(n, 1, 1)
        want = np.arange(2 * n, dtype=np.int64).reshape(n, 2)
        if n:
            pairs.out[:n].copy_to_device(want)
        pairs.total.copy_to_device(np.array([n], np.int64))
        before = pairs.waits
        got = pairs.download()
        if not np.array_equal(got, want) or pairs.waits - before != waits:
            problems.append(f"pairs: {n} pairs came back as {len(got)} in "
                            f"{pairs.waits - before} waits, {waits} expected")
    return problems


def _difference(want, got) -> str:
    if len(want) != len(got):
        return f"{len(want)} matches on CPU, {len(got)} on GPU"
    if not np.array_equal(want.terminator, got.terminator):
        return "terminators differ"
    for j, (w, g) in enumerate(zip(want.elements, got.elements, strict=True)):
        if w.dtype != g.dtype or w.tobytes() != g.tobytes():  # bytes: NaN fields too
            return f"element {j} differs"
    if not np.allclose(want.aggregates, got.aggregates, rtol=1e-12, equal_nan=True):
        return f"aggregates differ: {want.aggregates.tolist()} != {got.aggregates.tolist()}"
    if not np.array_equal(want.negations, got.negations):
        return "negation counts differ"
    return ""


def _main() -> None:
    from numba import config

    assert config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
    problems = (_compare(2, 0) + _resync_cases(0) + _resync_cases(1)
                + _one_launch_per_step() + _scan_cases(0) + _pairs_cases() + _bars_case()
                + _one_call_case())
    problems += _compare(2, 1, max_pairs=6)  # multiple selections in runs of 6 pairs
    problems += _compare(8, 2, min_gpu_work=40)  # larger blocks, device and CPU steps mixed
    print(json.dumps(problems))


def test_gpu_engine_in_the_simulator_agrees_with_the_cpu_engine():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    root = Path(__file__).resolve().parents[3]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, __file__], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    problems = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not problems, "\n".join(problems)


def test_without_a_gpu_the_engine_says_so():
    from numba import cuda

    from specula.detectors.rules.cdp_gpu import GPUCDPEngine
    from specula.detectors.rules.parser import parse_rule
    from specula.events import TypeRegistry

    if cuda.is_available():
        pytest.skip("this machine has a GPU (or runs the simulator)")
    reg = TypeRegistry()
    reg.register("A")
    with pytest.raises(RuntimeError, match=r"finds none .*use CDPEngine"):
        GPUCDPEngine(parse_rule("define X() from A()"), reg)


def test_the_gpu_benchmark_without_a_gpu_says_it_needs_one_in_its_json_line():
    from numba import cuda

    if cuda.is_available():
        pytest.skip("this machine has a GPU (or runs the simulator)")
    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    proc = subprocess.run([sys.executable, str(root / "benchmarks/rules_gpu.py"), "--quick"],
                          env=env, capture_output=True, text=True, timeout=120)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 3, proc.stderr[-2000:]
    assert "need a CUDA GPU" in lines[0]
    last = json.loads(lines[-1])
    assert set(last) == {"measured", "reason"} and last["measured"] is False
    assert "no CUDA GPU" in last["reason"]


if __name__ == "__main__":
    _main()
