"""initdb's password file (issue 30, finding 11): it exists only ever as mode 0600, owned by the server user."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

from utils.services.postgres import RUN_AS, _write_private


def test_the_password_file_is_0600_from_its_creation_even_under_umask_0(tmp_path: Path) -> None:
    path = tmp_path / ".postgres.initdb.pw"
    path.write_text("stale, world-readable\n")
    path.chmod(0o644)
    old = os.umask(0)
    try:
        _write_private(path, "s3cret\n")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.read_text() == "s3cret\n"
    if os.geteuid() == 0:  # initdb runs as the postgres user and must read it
        assert path.stat().st_uid == pwd.getpwnam(RUN_AS).pw_uid
