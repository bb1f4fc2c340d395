"""Starting or joining Ray: embedded on this machine by default, or an existing cluster."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


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
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus or os.cpu_count(), **kwargs)
    try:
        yield
    finally:
        ray.shutdown()
