"""Starting or joining Ray: embedded on this machine by default, or an existing cluster."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def keep_sigterm_handler() -> Iterator[None]:
    """Put the SIGTERM handler back after the block.

    ``ray.init`` installs a SIGTERM handler that ends the process on the spot; the
    caller's (``specula``'s unwinds like Ctrl-C, so that clusters are shut down) must
    stay in charge.
    """
    handler = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if threading.current_thread() is threading.main_thread() and handler is not None:
            signal.signal(signal.SIGTERM, handler)


@contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[None]:
    """Use the Ray cluster at ``address``, or start one embedded on this machine.

    An already connected driver is reused as it is. A cluster this function started is
    shut down on exit, on errors and on Ctrl-C; a joined one is only disconnected.
    """
    import ray

    if ray.is_initialized():
        yield
        return
    # Workers must import the user's modules as the driver does.
    paths = [p for p in sys.path if p and os.path.isdir(p)]
    env = {"PYTHONPATH": os.pathsep.join([os.getcwd(), *paths])}
    kwargs = dict(include_dashboard=False, configure_logging=False, log_to_driver=True,
                  runtime_env={"env_vars": env})
    with keep_sigterm_handler():
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count(), **kwargs)
    try:
        yield
    finally:
        ray.shutdown()


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
