"""Chain processes that outlive a run, as Flink's task managers hold their slots.

A chain actor's process costs about a CPU second before its first event (a Ray worker,
specula's imports, the first Numba kernels from the cache), and a run that starts new
ones pays it every time. Every chain therefore runs in a :class:`ChainHost`: a Ray actor
that hosts the run's :class:`~.chain.ChainWorker` and, once the run has ended cleanly,
drops it and waits in this driver's :class:`HostPool` for the next run, with its imports
and kernels loaded. A chain that asks Ray for resources of its own (CPUs, GPUs:
:func:`~.placement.chain_options`) gets a host for its run only.

What a host runs is not in its constructor's arguments, which Ray keeps from the host's
creation: the driver writes the chain (the :class:`~.chain.ChainWorker`'s arguments) to
Ray's key-value store under the host's name, and the host builds it from there, when it
is made and when the driver calls :meth:`ChainHost.open` for a later run. So a host
that crashes mid-run and is restarted by Ray (which runs the constructor again) builds
the chain of the run in progress, whose instances restore their checkpoints as a
restarted chain's do (:mod:`.recovery`). A restarted host has spent one of its restarts
and serves no later run.

A driver's first run finds the pool empty, and its hosts start cold. A job that knows
its graph before it runs it (the main job knows it before Spark ingests the log) has
:meth:`HostPool.prestart` start them as soon as Ray is up, as Flink's task managers are
up before a job is submitted: a prestarted host loads the kernels of the chain it was
started for (:meth:`~specula.detectors.graph.Instance.warm_up`) and waits in the pool,
filed under the Ray options the run will ask for, while the job's earlier phases run.
A run takes it as it takes a host of an earlier run, waiting for it if it is still
loading: that wait is the run's start-up.
"""

from __future__ import annotations

import gc
import itertools
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from specula.actors.chain import ChainWorker
from specula.actors.channels import Reply
from specula.actors.placement import demand
from specula.cluster import ray_store
from specula.detectors.graph import Instance
from specula.events import TypeRegistry

__all__ = ["IDLE_HOSTS", "POOL", "ChainHost", "HostPool", "pool_key"]

#: Hosts the pool keeps idle at most (the oldest beyond are ended): enough for a run of
#: one actor per instance of a small graph beside the chains of another.
IDLE_HOSTS = 8

#: Seconds a call waits for its host to build the chain (:meth:`ChainHost._running`).
OPEN_WAIT_S = 60.0

def _put_chain(name: str, spec: tuple[str, dict[str, Any]] | None) -> None:
    """Write (``spec``: its version and the chain's arguments) or delete (None) the
    chain of host ``name`` in Ray's key-value store."""
    from ray import cloudpickle

    if spec is None:
        ray_store.delete(name)
    else:
        ray_store.put(name, cloudpickle.dumps(spec))


def _get_chain(name: str) -> tuple[str, dict[str, Any]] | None:
    """The chain of host ``name`` (its version and arguments), None if it has none."""
    from ray import cloudpickle

    found = ray_store.get(name)
    return None if found is None else cloudpickle.loads(found)


def _collect() -> None:
    """Collect what a run left in cycles, then freeze what lives (:meth:`ChainHost._settled`):
    a host does it while it waits in the pool, off the next run's start."""
    gc.collect()
    gc.freeze()


def pool_key(chain: list[Instance], options: dict[str, Any]) -> Hashable | None:
    """How the pool files a host for ``chain`` made with the Ray ``options``: those
    options, with the node a node-affinity strategy names; None for a chain whose
    instances ask for resources (a host for its run only)."""
    if any(demand(i) for i in chain):
        return None
    strategy: Any = options.get("scheduling_strategy")
    if hasattr(strategy, "node_id"):  # NodeAffinitySchedulingStrategy
        strategy = ("node", strategy.node_id, strategy.soft)
    return tuple(sorted((k, strategy if k == "scheduling_strategy" else v)
                        for k, v in options.items()))


class ChainHost:
    """The Ray actor called ``name`` that runs a chain: the chain the key-value store
    holds for it (:func:`_get_chain`), built at once; :meth:`call`, :meth:`push_all`,
    :meth:`deliver` and :meth:`status` are the chain's (:class:`~.chain.ChainWorker`).
    A host started before its run (``warm``: the instances of the chain it is meant
    for, and their registry) loads their kernels instead, when the store holds no
    chain for it yet."""

    def __init__(self, name: str,
                 warm: tuple[list[Instance], TypeRegistry] | None = None) -> None:
        import ray

        self.name = name
        #: made again by Ray after a crash: its restarts are spent, it is not pooled
        self.restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self._chain: ChainWorker | None = None
        self._version: str | None = None
        self._opened = threading.Condition()
        self._settling: threading.Thread | None = None  # the collection after a run
        self.open()
        if warm is not None and self._chain is None:
            instances, registry = warm
            for instance in instances:
                instance.warm_up(registry)

    def open(self) -> None:
        """Build the chain the store holds, unless it is the one running (a retried
        call, or one that a restart's constructor came before, finds it built)."""
        spec = _get_chain(self.name)
        if spec is None or spec[0] == self._version:
            return
        version, kwargs = spec
        self._settled()
        chain = ChainWorker(**kwargs)
        with self._opened:
            self._chain, self._version = chain, version
            self._opened.notify_all()

    def close(self) -> bool:
        """The run has ended: drop its chain. Returns whether this host may serve
        another run (it was not restarted). What the run left is collected on
        :meth:`collect`, once this answer is sent: a collection holds the interpreter's
        lock for tens of milliseconds, and the answer would wait for it."""
        with self._opened:
            chain, self._chain, self._version = self._chain, None, None
        if chain is not None:
            chain.close()
        return not self.restarted

    def collect(self) -> None:
        """Collect, on a thread of its own, what the last run left, then freeze what
        lives (:func:`_collect`); the next run's chain is built once it is done
        (:meth:`_settled`). The driver asks it after :meth:`close` has answered and does
        not wait; a host that runs a chain already (a call come late) skips it."""
        with self._opened:
            if self._chain is not None or self._settling is not None:
                return
            self._settling = threading.Thread(target=_collect, name="specula-gc", daemon=True)
            self._settling.start()

    def _settled(self) -> None:
        """Before a run's chain is built: wait for the collection after the last run
        (:meth:`collect`), then move every object alive to the collector's permanent
        generation (:func:`gc.freeze`, at once): Ray's worker, the imports, the loaded
        kernels. A full collection scans every object tracked, and a run triggers several
        as its net outputs and logs grow (in-process, this graph of benchmarks/ray_graph.py
        spent half its processor time in them, with a heap of ~115k objects); frozen, the
        host's own objects are no longer scanned. A frozen object is still freed when its
        last reference goes; a cycle among frozen ones is not, hence the collection
        before each freeze of a pooled host (a first freeze takes the imports' few)."""
        with self._opened:
            settling, self._settling = self._settling, None
        if settling is not None:
            settling.join()
        gc.freeze()

    def serves(self) -> bool:
        """Whether this idle host may take a run: not restarted, no chain held (a host
        Ray made again while it waited has spent a restart and is ended instead)."""
        return not self.restarted and self._chain is None

    def call(self, producer: int, method: str, *args: Any) -> Any:
        return self._running().call(producer, method, *args)

    def push_all(self, members: list[tuple[int, int, int]], batch: np.ndarray, sender: int,
                 incarnation: int) -> list[Reply]:
        return self._running().push_all(members, batch, sender, incarnation)

    def deliver(self, pushes: list[tuple[int, tuple[Any, ...]]]) -> list[Reply]:
        return self._running().deliver(pushes)

    def status(self) -> dict[str, Any]:
        return self._running().status()

    def _running(self) -> ChainWorker:
        """The chain, waiting up to :data:`OPEN_WAIT_S` for it: the members of a chain
        that resumes or recovers call their peers from their constructors, and a peer's
        host may not have built its chain yet (a new host's constructor builds it before
        any call runs; an idle one's ``open`` may come after the call)."""
        with self._opened:
            if not self._opened.wait_for(lambda: self._chain is not None, OPEN_WAIT_S):
                raise RuntimeError(f"{self.name} runs no chain")
            assert self._chain is not None
            return self._chain


class HostPool:
    """This driver's idle chain hosts, by what they were made with (``key``: their Ray
    options and concurrency), for the session they belong to (a new Ray session starts
    an empty pool)."""

    def __init__(self, idle: int = IDLE_HOSTS) -> None:
        self.idle = idle
        self._lock = threading.Lock()
        self._session: tuple[str, str] | None = None
        self._hosts: dict[Hashable, list[tuple[str, Any]]] = {}
        self._order: list[tuple[Hashable, str]] = []  # idle hosts, oldest first
        self._names = (f"specula.host-{uuid.uuid4().hex[:8]}-{k}" for k in itertools.count())

    def take(self, key: Hashable | None) -> tuple[str, Any]:
        """A host for a chain made with ``key``: an idle one that still serves (its
        name and handle), or the name a new one is to have and None. A ``key`` of None:
        a host for this run only, always new. An idle host that died or was restarted
        while it waited is ended and the next one tried."""
        while True:
            with self._lock:
                self._follow_session()
                idle = self._hosts.get(key, []) if key is not None else []
                if not idle:
                    return next(self._names), None
                name, handle = idle.pop()
                self._order.remove((key, name))
            if _serves(handle):
                return name, handle
            _end(name, handle)

    def prestart(self, hosts: list[tuple[Hashable, Callable[[str], Any]]]) -> list[str]:
        """Start the hosts a run will ask for before it asks: ``hosts`` gives, per host
        the run will take, its pool key and how to make it (``make(name)``, which
        returns at once while the host starts). Only those the pool lacks are made (a
        key of which it holds n idle hosts gets n fewer), no more than it keeps idle,
        and they wait idle as hosts of an earlier run do, the newest: the oldest idle
        hosts beyond :attr:`idle` are ended. Returns the names of those made."""
        with self._lock:
            self._follow_session()
            have = Counter({key: len(idle) for key, idle in self._hosts.items()})
        made: list[tuple[Hashable, str, Any]] = []
        for key, make in hosts:
            if have[key] > 0:
                have[key] -= 1
            elif len(made) < self.idle:
                name = next(self._names)
                made.append((key, name, make(name)))
        self._file(made, [])
        return [name for _, name, _ in made]

    @staticmethod
    def start(name: str, handle: Any, kwargs: dict[str, Any],
              make: Callable[[str], Any]) -> tuple[Any, Any]:
        """Have host ``name`` (``handle``; None: not made yet) run the chain ``kwargs``
        (a :class:`~.chain.ChainWorker`'s arguments but ``address``, the host's name).
        Returns its handle and, for a host that was idle, the reference of its
        :meth:`ChainHost.open` call, to wait for before the chain is called (a new one's
        constructor builds it before any call runs)."""
        _put_chain(name, (uuid.uuid4().hex, dict(kwargs, address=name)))
        if handle is None:
            return make(name), None
        return handle, handle.open.remote()

    def release(self, hosts: list[tuple[Hashable | None, str, Any]], clean: bool) -> None:
        """The run of ``hosts`` (key, name, handle) has ended (``clean``: without an
        error): each drops its chain and waits for the next run, or is ended (a host of
        one run, a restarted one, any after an error, the oldest beyond :attr:`idle`)."""

        kept: list[tuple[Hashable, str, Any]] = []
        if clean:
            poolable = [(k, n, h) for k, n, h in hosts if k is not None]
            closing = [h.close.remote() for _, _, h in poolable]
            kept = [host for host, ref in zip(poolable, closing, strict=True)
                    if _closed(ref)]
            for _, _, handle in kept:  # the collection after the run, not waited for
                handle.collect.remote()
        names = {n for _, n, _ in kept}
        for _, name, _ in kept:  # a host Ray restarts while it waits builds no chain
            _put_chain(name, None)
        self._file(kept, [(n, h) for _, n, h in hosts if n not in names])

    def _file(self, hosts: list[tuple[Hashable, str, Any]], ended: list[tuple[str, Any]]
              ) -> None:
        """File ``hosts`` (key, name, handle) as idle, then end ``ended`` (name,
        handle) and the oldest idle hosts beyond :attr:`idle`."""
        with self._lock:
            for key, name, handle in hosts:
                self._hosts.setdefault(key, []).append((name, handle))
                self._order.append((key, name))
            while len(self._order) > self.idle:
                key, name = self._order.pop(0)
                idle = self._hosts[key]
                ended.append(idle.pop(next(i for i, (n, _) in enumerate(idle) if n == name)))
        for name, handle in ended:
            _end(name, handle)

    def idle_hosts(self) -> list[Any]:
        """The handles of the hosts waiting for a run, oldest first."""
        with self._lock:
            return [h for key, name in self._order for n, h in self._hosts[key] if n == name]

    def _follow_session(self) -> None:
        """Under the lock: forget the hosts of an earlier Ray session (they ended with
        it)."""
        import ray

        context = ray.get_runtime_context()
        session = (context.get_job_id(), context.get_node_id())
        if session != self._session:
            self._session, self._hosts, self._order = session, {}, []


def _serves(handle: Any) -> bool:
    """Whether the idle host ``handle`` answers that it may take a run
    (:meth:`ChainHost.serves`); False if it died."""
    import ray
    from ray.exceptions import RayError

    try:
        return bool(ray.get(handle.serves.remote(), timeout=OPEN_WAIT_S))
    except RayError:
        return False


def _end(name: str, handle: Any) -> None:
    """End host ``name`` and forget its chain."""
    import ray

    ray.kill(handle)
    _put_chain(name, None)


def _closed(ref: Any) -> bool:
    """Whether a host's :meth:`ChainHost.close` (``ref``) says it may serve another run;
    False if the host died meanwhile (it is ended, not pooled)."""
    import ray
    from ray.exceptions import RayError

    try:
        return bool(ray.get(ref))
    except RayError:
        return False


#: The pool of this driver process.
POOL = HostPool()
