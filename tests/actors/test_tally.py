"""The recovery counts of an actor's processes (:mod:`specula.actors.tally`): a count is
stored before its call returns, concurrent calls share writes, and the totals add up
the processes'."""

from __future__ import annotations

import itertools
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import msgpack

from specula.actors.recovery import Checkpoints
from specula.actors.signing import random_key
from specula.actors.tally import COUNTS, Tally


class SlowStore:
    """A store whose writes take a while, as on an object store, and are recorded."""

    def __init__(self, store) -> None:
        self.store, self.writes = store, 0

    def write(self, name: str, data: bytes) -> None:
        time.sleep(random.uniform(0, 0.003))
        self.store.write(name, data)
        self.writes += 1

    def read(self, name: str) -> bytes | None:
        return self.store.read(name)


def test_a_count_is_stored_before_persist_returns_and_concurrent_calls_share_writes(tmp_path):
    store = SlowStore(Checkpoints(str(tmp_path), "run", key=random_key()).store("a"))
    tally, lock, made = Tally(store, 0), threading.Lock(), itertools.count(1)

    def drop(i: int) -> None:
        with lock:
            tally.add("duplicates")
            mine = next(made)  # at least this many are counted
        tally.persist()
        stored = msgpack.unpackb(store.read("tally-0"))
        assert stored["duplicates"] >= mine

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(drop, range(400)))
    assert Tally(store, 1).totals()["duplicates"] == 400
    assert store.writes < 400  # writes on their way took the counts made meanwhile


def test_the_totals_add_up_every_process_of_the_actor(tmp_path):
    """Each process counts its own; one that stored nothing (it dropped nothing) counts
    zero; without storage a tally is the process's alone."""
    store = Checkpoints(str(tmp_path), "run", key=random_key()).store("a")
    rng = random.Random(4)
    want = dict.fromkeys(COUNTS, 0)
    for incarnation in range(5):
        tally = Tally(store, incarnation)
        for _ in range(rng.randint(0, 6) if incarnation != 2 else 0):
            name, n = rng.choice(COUNTS), rng.randint(1, 3)
            tally.add(name, n)
            want[name] += n
        tally.persist()
    assert Tally(store, 5).totals() == want
    alone = Tally()
    alone.add("resent", 2)
    alone.persist()
    assert alone.totals() == {**dict.fromkeys(COUNTS, 0), "resent": 2}
