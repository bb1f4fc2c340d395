"""Starting or joining Ray: embedded on this machine by default, or an existing cluster."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit


class ClusterError(RuntimeError):
    """Spark or Ray could not be started or reached; the message says what to check."""


def check_reachable(address: str, what: str, *, timeout: float = 5.0) -> None:
    """Raise :class:`ClusterError` unless something accepts connections at ``address``
    (``host:port`` or ``scheme://host:port``); a quick, clear answer for a wrong address
    or a port nobody listens on, where the clients would retry for minutes."""
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise ClusterError(f"{what} address {address!r} is not host:port")
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterError(f"cannot reach the {what} at {host}:{port}: "
                           f"{exc.strerror or exc}") from None


def check_joinable(address: str) -> None:
    """Raise :class:`ClusterError` unless the Ray cluster at ``address`` answers
    (:func:`check_reachable`) and takes this process's authentication token
    (:func:`~specula.cluster.ray_access.check_token`): one line at once, where
    ``ray.init`` would retry for 20 s and say only that it failed to connect."""
    check_reachable(address, "Ray cluster")
    from specula.cluster.ray_access import check_token

    check_token(address)


_interrupted = False  # see interrupt


def interrupt(signum: int, frame: Any) -> None:
    """The command line's handler of Ctrl-C and SIGTERM: raise ``KeyboardInterrupt``,
    so that every context manager shuts its cluster down, and remember it. Code that
    catches every exception would lose it otherwise: a finalizer the signal lands in
    (Python prints "Exception ignored in" and goes on), which :func:`check_interrupt`
    makes up for."""
    global _interrupted
    _interrupted = True
    raise KeyboardInterrupt


def check_interrupt() -> None:
    """Raise ``KeyboardInterrupt`` if :func:`interrupt` ran (since
    :func:`clear_interrupt`): called where a job starts a phase, so that an interrupt
    swallowed in the last one still ends the job."""
    if _interrupted:
        raise KeyboardInterrupt


def clear_interrupt() -> None:
    """Forget an interrupt (a command starts)."""
    global _interrupted
    _interrupted = False


@contextmanager
def keep_sigterm_handler() -> Iterator[None]:
    """Keep the caller's SIGTERM handler in charge through the block, and put it back
    after it.

    ``ray.init`` installs a SIGTERM handler that ends the process on the spot
    (``sys.exit(15)``) as it starts connecting; the caller's (``specula``'s unwinds like
    Ctrl-C, so that clusters are shut down) must stay in charge, also while ``ray.init``
    runs: a SIGTERM then would end the process with Ray and Spark left running. Ray
    installs it through ``ray._private.utils.set_sigterm_handler``, which does nothing
    within the block. Any other handler installed in the block is replaced after it.
    """
    from ray._private import utils

    handler, install = signal.getsignal(signal.SIGTERM), utils.set_sigterm_handler
    utils.set_sigterm_handler = lambda _handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = install
        _install_sigterm(handler)


def follow_ray_auth_mode() -> None:
    """Make this process's Ray read ``RAY_AUTH_MODE`` again before it starts or joins a
    cluster.

    Ray reads the authentication mode and token into its process-wide config and token
    cache once (a local ``ray.init()`` turns token mode on and sets the variable). Ray on
    Spark sets a token of its own for its block and puts the settings back after it
    (:func:`specula.cluster.ray_access.private_token`), and a joined cluster takes the
    token the environment names now: a driver whose caches disagree with the cluster
    loses every actor at creation (the driver refuses its GCS's token-less calls) or is
    refused. Both caches are refreshed here, as Ray's own ``ray.init`` does when it
    turns token mode on. Nothing to do while connected, or before Ray was imported, or
    on a Ray without token authentication.
    """
    ray = sys.modules.get("ray")
    if ray is None or ray.is_initialized():
        return
    try:
        from ray import _raylet
    except ImportError:
        return
    # both exist only in Ray versions with token authentication
    config = getattr(_raylet, "Config", None)
    loader = getattr(_raylet, "AuthenticationTokenLoader", None)
    if config is None or loader is None:
        return
    config.initialize("")
    loader.instance().reset_cache()


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None,
                modules: Sequence[ModuleType] = ()) -> Iterator[None]:
    """Use the Ray cluster at ``address``, or start one embedded on this machine (a new
    one even where ``RAY_ADDRESS`` names another: embedded means embedded), listening on
    loopback only (:func:`~specula.cluster.ray_access.loopback_only`).

    Workers import the user's modules as the driver does: on this machine through the
    driver's ``PYTHONPATH``; on a joined cluster, whose other hosts have none of the
    driver's files, ``modules`` (those the graph's detectors come from) are also shipped
    with the job's ``runtime_env`` (``py_modules``: Ray uploads them once and puts them
    on every worker's path). An already connected driver is reused as it is. A cluster
    this function started is shut down on exit, on errors and on Ctrl-C; a joined one is
    only disconnected.
    """
    import ray
    from ray.exceptions import RayError

    if ray.is_initialized():
        yield
        return
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    runtime_env: dict[str, object] = {
        "env_vars": {"PYTHONPATH": os.pathsep.join([os.getcwd(), *paths])}}
    if address and modules:
        runtime_env["py_modules"] = list(modules)
    kwargs: dict[str, Any] = dict(include_dashboard=False, configure_logging=False,
                                  log_to_driver=True, runtime_env=runtime_env)
    follow_ray_auth_mode()
    with keep_sigterm_handler():
        if address:
            check_joinable(address)
            try:
                with joining(address):
                    ray.init(address=address, **kwargs)
            except (ConnectionError, RuntimeError, ValueError, RayError) as exc:
                raise ClusterError(f"cannot join the Ray cluster at {address}: "
                                   f"{str(exc).splitlines()[0] if str(exc) else exc!r}") from exc
        else:  # "local": a new cluster, whatever RAY_ADDRESS names
            from specula.cluster.ray_access import loopback_only

            with loopback_only():
                ray.init(address="local", num_cpus=num_cpus or os.cpu_count(), **kwargs)
    try:
        yield
    finally:
        ray.shutdown()
        reinstall_sigterm_handler()


def reinstall_sigterm_handler() -> None:
    """Install Python's SIGTERM handler again after ``ray.shutdown``: Ray's core worker
    puts the signal's default action back in native code as the driver disconnects,
    behind Python's back (``signal.getsignal`` still names the handler), so a SIGTERM
    after it (Spark persisting a run's output) ended the process on the spot, its
    clean-up undone."""
    _install_sigterm(signal.getsignal(signal.SIGTERM))


def _install_sigterm(handler: Any) -> None:
    """Make ``handler`` SIGTERM's (only the main thread may; None: not Python's, left)."""
    if threading.current_thread() is threading.main_thread() and handler is not None:
        signal.signal(signal.SIGTERM, handler)


def joining(address: str) -> AbstractContextManager[None]:
    """How to join the cluster at ``address``. Ray replaces a loopback host by this
    machine's outbound address (``services.resolve_ip_for_localhost``); a cluster that
    listens there too (``ray start --head``) is joined so. One that listens on loopback
    only (Ray on Spark on one machine) is joined within
    :func:`~specula.cluster.ray_access.loopback_only`, where the driver takes 127.0.0.1
    as its own address as the cluster's nodes do. A Ray Client address (``ray://``)
    is joined as it is."""
    from ray._private import services

    from specula.cluster.ray_access import loopback_only

    if "://" in address:  # a Ray Client address is connected to as it is
        return nullcontext()
    parts = urlsplit(f"tcp://{address}")
    host = parts.hostname or ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback or parts.port is None:
        return nullcontext()
    try:
        with socket.create_connection((services.get_node_ip_address(), parts.port),
                                      timeout=2):
            return nullcontext()
    except OSError:
        return loopback_only()


def gpus_available() -> int:
    """GPUs in the Ray cluster this process is connected to; 0 when Ray is not running.

    >>> import ray
    >>> gpus_available() if not ray.is_initialized() else 0
    0
    """
    try:
        import ray
    except ImportError:
        return 0
    if not ray.is_initialized():
        return 0
    return int(ray.cluster_resources().get("GPU", 0))
