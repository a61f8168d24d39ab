"""Where a process under a node's supervisord leaves its metrics URL, for `shoal status --json`.

Supervisord gives every child SUPERVISOR_PROCESS_NAME (`crawler-00`, `rest`, ...) and
SUPERVISOR_SERVER_URL (`unix://<RUN_DIR>/<node>/supervisor.sock`, the node's socket), documented in
its "Subprocess Environment". So a process needs no extra setting: it writes
`<RUN_DIR>/<node>/metrics/<program>.json` = {"url", "pid", "component"}, and status shows the URL
only while that pid is the program's current one, so a dead process's file is never reported.
Outside supervisord (docker, by hand) nothing is written: Prometheus finds those by address.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

METRICS_DIR = "metrics"  # under the node's run dir
SOCKET_SCHEME = "unix://"


def url_file(run_dir: Path, program: str) -> Path:
    """`<run_dir>/metrics/<program>.json`."""
    return run_dir / METRICS_DIR / f"{program}.json"


def supervised_program(environ: Mapping[str, str]) -> tuple[Path, str] | None:
    """(node run dir, program name) when a node's supervisord runs this process, else None."""
    server = environ.get("SUPERVISOR_SERVER_URL", "")
    program = environ.get("SUPERVISOR_PROCESS_NAME", "")
    if not server.startswith(SOCKET_SCHEME) or not program or "/" in program:
        return None
    return Path(server[len(SOCKET_SCHEME) :]).parent, program


def publish(url: str, component: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Write this process's URL file (atomically); None when not under supervisord or on error."""
    found = supervised_program(os.environ if environ is None else environ)
    if found is None:
        return None
    path = url_file(*found)
    record = {"url": url, "pid": os.getpid(), "component": component}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(json.dumps(record) + "\n", encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        log.warning("Cannot publish metrics URL", extra={"path": str(path), "error": str(exc)})
        return None
    return path


def unpublish(path: Path) -> None:
    """Remove our URL file if it is still ours (a restarted program may have replaced it)."""
    if read_url(path, os.getpid()) is not None:
        with contextlib.suppress(OSError):
            path.unlink()


def read_url(path: Path, pid: int) -> str | None:
    """The URL in `path` if the file was written by `pid`, else None."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("pid") != pid or pid <= 0:
        return None
    url = record.get("url")
    return url if isinstance(url, str) else None
