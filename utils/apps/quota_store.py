"""Reading and changing the quotas node (`shoal apps quota`): compare-and-set, so two operators'
changes never overwrite each other (the redis monitor's zookeeper plugin does the same for throttles)."""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError

from utils.apps.quotas import Quotas

CAS_ATTEMPTS = 50  # rounds before giving up (each lost round means another writer won)


def read_quotas(client: KazooClient, path: str) -> Quotas:
    """The node's quotas (none when it is absent); a malformed node raises ValueError."""
    if not client.exists(path):
        return Quotas()
    data, _ = client.get(path)
    return Quotas.parse(data)


def update_quotas(client: KazooClient, path: str, change: Callable[[Quotas], Quotas]) -> Quotas:
    """Apply `change` to the node's quotas with a version check; returns what was written."""
    for _ in range(CAS_ATTEMPTS):
        client.ensure_path(path)
        data, stat = client.get(path)
        updated = change(Quotas.parse(data))
        try:
            client.set(path, updated.to_yaml().encode(), version=stat.version)
            return updated
        except BadVersionError:
            continue
    raise RuntimeError(f"quotas at {path} changed {CAS_ATTEMPTS} times while being written; try again")
