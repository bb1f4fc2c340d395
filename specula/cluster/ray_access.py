"""Who can reach the Ray that specula starts or joins.

Embedded on one machine, Ray listens on loopback only (:func:`loopback_only`). Ray 2.60
binds its gRPC servers (GCS, raylet, object manager, every worker's) to loopback when
the node's address is loopback, and to all interfaces otherwise; a new cluster takes
the machine's outbound address as its node's, unless Ray runs in its single-machine
mode (the one it keeps for Windows and macOS, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``),
where the node's address is 127.0.0.1. ``ray.init(_node_ip_address="127.0.0.1")`` does
not do it: Ray replaces a loopback address by the outbound one
(``services.resolve_ip_for_localhost``).

Ray on Spark on one machine (a ``local`` or ``local-cluster`` master) listens on
loopback only too (:func:`loopback_nodes`). Its nodes are started by ``ray start``
(the head with ``--node-ip-address`` the Spark driver's, 127.0.0.1; the worker nodes
with ``--address`` the head's), which Ray turns into the machine's outbound address
(``services.resolve_ip_for_localhost``), and single-machine mode cannot help: a
worker node's ``ray start --address`` refuses to run in it. So the nodes run the
``ray`` command through a launcher (:data:`LAUNCHER`, found first on the ``PATH``
that Ray on Spark's start hook gives them, :class:`TokenHook`) that makes Ray take
127.0.0.1 as this machine's address before it runs ``ray start``. On many machines
the nodes listen on every interface. Either way the cluster runs with token
authentication and a token of its own (:func:`private_token`): the driver, the head
node and the worker nodes know it; nothing else does.

A cluster joined by address is the operator's: this process sends the token Ray finds
(``RAY_AUTH_MODE=token`` with ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token``), and :func:`check_token` turns a refusal into one clear line
before ``ray.init`` spends 20 s retrying.
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ray.util.spark.start_hook_base import RayOnSparkStartHook

from specula.cluster import ClusterError, follow_ray_auth_mode

#: Ray's single-machine switch: "0" makes a new node take 127.0.0.1 as its address.
SINGLE_MACHINE_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
#: Ray's token authentication settings (docs.ray.io, "Ray token authentication").
AUTH_MODE, AUTH_TOKEN, AUTH_TOKEN_PATH = "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
#: Where Ray on Spark looks for the class of its start hook.
START_HOOK = "RAY_ON_SPARK_START_HOOK"
#: The folder of the ``ray`` launcher of :func:`loopback_nodes`, while it runs.
LOOPBACK_BIN = "SPECULA_RAY_LOOPBACK_BIN"
#: The ``ray`` command that Ray on Spark's nodes run within :func:`loopback_nodes`:
#: Ray's own, with 127.0.0.1 as this machine's address (Ray asks
#: ``services.get_node_ip_address`` for it wherever it picks a node's address,
#: ``resolve_ip_for_localhost`` included).
LAUNCHER = """import sys
from ray._common.network_utils import get_localhost_ip
from ray._private import services
services.get_node_ip_address = lambda address=None: get_localhost_ip()
from ray.scripts.scripts import main
sys.exit(main())
"""


@contextmanager
def loopback_only() -> Iterator[None]:
    """Within the block, a new Ray node takes 127.0.0.1 as its address, so its servers
    and the processes it starts listen on loopback only.

    Ray reads the switch from the environment once, when it is imported
    (``ray_constants.ENABLE_RAY_CLUSTER``), and looks at that constant whenever it picks
    a node's address (``services.get_node_ip_address``); both are set for the block, the
    environment so that the node's processes inherit it.
    """
    from ray._private import ray_constants

    saved_env, saved = os.environ.get(SINGLE_MACHINE_SWITCH), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[SINGLE_MACHINE_SWITCH] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved
        _restore({SINGLE_MACHINE_SWITCH: saved_env})


@contextmanager
def loopback_nodes() -> Iterator[None]:
    """Within the block, the Ray on Spark nodes started on this machine, and this
    process's Ray, take 127.0.0.1 as their address: their servers and the processes
    they start listen on loopback only (see the module). The ``ray`` launcher lives in
    a private folder of its own, removed after the block."""
    with tempfile.TemporaryDirectory(prefix="specula-ray-") as folder:
        launcher = Path(folder, "ray")
        launcher.write_text(LAUNCHER)
        launcher.chmod(0o700)  # ``shutil.which`` takes executable files only
        saved = os.environ.get(LOOPBACK_BIN)
        os.environ[LOOPBACK_BIN] = folder
        try:
            with loopback_only():
                yield
        finally:
            _restore({LOOPBACK_BIN: saved})


@contextmanager
def private_token() -> Iterator[str]:
    """Within the block, token authentication with a new random token: in this process's
    environment (read again by its Ray, :func:`~specula.cluster.follow_ray_auth_mode`,
    and inherited by the Ray on Spark head node it starts) and in that of the worker
    nodes Spark starts (:class:`TokenHook`). Yields the token; the settings before the
    block come back after it."""
    names = (AUTH_MODE, AUTH_TOKEN, START_HOOK)
    saved = {name: os.environ.get(name) for name in names}
    token = secrets.token_hex(32)
    os.environ.update({AUTH_MODE: "token", AUTH_TOKEN: token,
                       START_HOOK: f"{TokenHook.__module__}.{TokenHook.__qualname__}"})
    follow_ray_auth_mode()
    try:
        yield token
    finally:
        _restore(saved)
        follow_ray_auth_mode()


class TokenHook(RayOnSparkStartHook):
    """Ray on Spark's start hook (``RAY_ON_SPARK_START_HOOK``, loaded by class path and
    made without arguments): its environment for the head and worker nodes carries the
    token of :func:`private_token` and, within :func:`loopback_nodes`, a ``PATH`` that
    finds its ``ray`` launcher first. Ray on Spark starts a worker node with
    ``ray start --address``, which turns token mode on only when told to."""

    def __init__(self, is_global: bool = False) -> None:
        super().__init__(is_global)

    def custom_environment_variables(self) -> dict[str, str]:
        env = {AUTH_MODE: "token", AUTH_TOKEN: os.environ[AUTH_TOKEN]}
        if LOOPBACK_BIN in os.environ:
            env["PATH"] = os.pathsep.join([os.environ[LOOPBACK_BIN], os.environ.get("PATH", "")])
        return env


def check_token(address: str, *, timeout: float = 5.0) -> None:
    """Raise :class:`ClusterError` if the Ray cluster whose GCS is at ``address``
    refuses this process's token (``InvalidAuthToken``: none sent, or not the
    cluster's). One call to the GCS, with the token ``ray.init`` would send; any other
    failure is left to ``ray.init``, which says more. A Ray Client address
    (``ray://``) is not a GCS and is not checked.

    Ray has no public call for it: the channel and the stub are Ray's own
    (``ray._private.grpc_utils``, ``ray.core.generated``), as its dashboard and state
    API use them.
    """
    if "://" in address:
        return
    import grpc  # type: ignore[import-untyped]
    from ray._private.grpc_utils import init_grpc_channel
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    from ray.exceptions import AuthenticationError

    follow_ray_auth_mode()
    try:
        channel = init_grpc_channel(address)
        try:
            gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel).GetClusterId(
                gcs_service_pb2.GetClusterIdRequest(),  # type: ignore[attr-defined]
                timeout=timeout)
        finally:
            channel.close()
    except AuthenticationError:  # token mode, and no token to send
        raise ClusterError(f"cannot join the Ray cluster at {address}: {AUTH_MODE}=token "
                           f"but no token was found: set {AUTH_TOKEN} or "
                           f"{AUTH_TOKEN_PATH}, or put it in ~/.ray/auth_token") from None
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.UNAUTHENTICATED:
            raise ClusterError(f"the Ray cluster at {address} refused this driver "
                               f"(InvalidAuthToken): {_token_hint()}") from None


def _token_hint() -> str:
    """What to set, given what this process sent."""
    if os.environ.get(AUTH_MODE, "").lower() != "token":
        return (f"it has token authentication on and no token was sent; set {AUTH_MODE}=token "
                f"and the cluster's token in {AUTH_TOKEN} or {AUTH_TOKEN_PATH} "
                "(or ~/.ray/auth_token)")
    source = next((name for name in (AUTH_TOKEN, AUTH_TOKEN_PATH) if os.environ.get(name)),
                  "~/.ray/auth_token")
    return f"the token sent (from {source}) is not the cluster's"


def _restore(saved: dict[str, str | None]) -> None:
    """Put environment variables back as ``saved`` has them (None: unset)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
