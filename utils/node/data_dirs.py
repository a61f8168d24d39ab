"""Where each local service of a node keeps its data (see docs/decisions/service-data-outside-checkout.md).

Services that run as the invoking user keep their data in the node's run directory,
`<RUN_DIR>/<node>/<service>`. A service that drops privileges (PostgreSQL refuses to run as root,
so as root it runs as the `postgres` user) may not be able to reach that directory: `/root` and
every home directory Debian 12 creates have mode 0700. Such a service keeps its data under
SERVICE_DATA_ROOT (default `/var/lib/shoal`), in a directory of the node's own:
`<SERVICE_DATA_ROOT>/<node id>/<service>`.

The node id is a random name written once into the run directory (`node-id`), so the data follows
the checkout when it moves, `shoal down`/`up` find it again, and two checkouts never share it: the
id's directory records the run directory that last used it (`owner`), and a second run directory
that holds the same id while the first still does (a copied checkout) gets an id of its own.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from utils.node.layout import NodeLayout, recorded_local

NODE_ID_FILE = "node-id"
OWNER_FILE = "owner"
PRIVILEGE_DROPPING = frozenset({"postgres"})  # services run as another user when we are root


def runs_as_other_user(service: str) -> bool:
    """True when `service` will not run as us: a privilege-dropping service started by root."""
    return service in PRIVILEGE_DROPPING and os.geteuid() == 0


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _new_node_id(layout: NodeLayout) -> str:
    node_id = f"{layout.node}-{secrets.token_hex(8)}"
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    (layout.run_dir / NODE_ID_FILE).write_text(node_id + "\n", encoding="utf-8")
    return node_id


def _is_copy(node_id: str, owner: str, here: Path) -> bool:
    """Another run directory still holds `node_id`: this one is a copy of it, not the same node moved."""
    if not owner or Path(owner) == here:
        return False
    return _read(Path(owner) / NODE_ID_FILE) == node_id


def node_id(layout: NodeLayout, system_root: Path) -> str:
    """The node's id, made on first use; a new one when the run directory is a copy of another's."""
    found = _read(layout.run_dir / NODE_ID_FILE)
    if not found or "/" in found or found in (".", ".."):
        return _new_node_id(layout)
    if _is_copy(found, _read(system_root / found / OWNER_FILE), layout.run_dir):
        return _new_node_id(layout)
    return found


def _claim(home: Path, run_dir: Path) -> None:
    """Create the node's system directory (root-owned, enterable by the service user) and record
    which run directory uses it."""
    home.mkdir(parents=True, exist_ok=True)
    for path in (home.parent, home):
        path.chmod(0o755)  # the service user must enter it; the service's own directory is 0700
    owner = home / OWNER_FILE
    staged = home / f".{OWNER_FILE}.{os.getpid()}"
    staged.write_text(f"{run_dir}\n", encoding="utf-8")
    staged.replace(owner)


def service_data_dir(layout: NodeLayout, service: str, system_root: Path) -> Path:
    """The directory `service` keeps its data in (not created here, but its system parent is).

    A data directory an older Shoal made in the run directory is kept while it is in use there, so
    an upgrade loses nothing.
    """
    local = layout.run_dir / service
    if not runs_as_other_user(service) or (local / "PG_VERSION").exists():
        return local
    home = system_root / node_id(layout, system_root)
    _claim(home, layout.run_dir)
    return home / service


def data_dirs(layout: NodeLayout, system_root: Path) -> dict[str, Path]:
    """Where each local service of the node (as `shoal up` recorded them) keeps its data, without
    creating anything."""
    found = _read(layout.run_dir / NODE_ID_FILE)
    dirs: dict[str, Path] = {}
    for service in recorded_local(layout):
        local = layout.run_dir / service
        moved = runs_as_other_user(service) and not (local / "PG_VERSION").exists()
        dirs[service] = system_root / (found or "<node id, made at first start>") / service if moved else local
    return dirs
