"""Ray's key-value store (the GCS's), in specula's namespace.

Ray keeps small values for a cluster's lifetime in its GCS, where every process of the
cluster can read them, and outlives any actor that wrote them. It offers that store
only through ``ray.experimental.internal_kv``'s underscored functions; this module is
the one place that calls them, so a change in Ray's spelling is mended here.
"""

from __future__ import annotations

__all__ = ["delete", "get", "put"]

_NAMESPACE = "specula"


def put(key: str, value: bytes) -> None:
    """Store ``value`` under ``key``, replacing what was there."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(key.encode(), value, overwrite=True, namespace=_NAMESPACE)


def get(key: str) -> bytes | None:
    """The value under ``key``; None if there is none."""
    from ray.experimental import internal_kv

    return internal_kv._internal_kv_get(key.encode(), namespace=_NAMESPACE)


def delete(key: str) -> None:
    """Remove ``key`` and its value (nothing happens when there is none)."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_del(key.encode(), namespace=_NAMESPACE)
