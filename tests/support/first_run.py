"""A throwaway copy of this checkout that runs the README's first command, `make run`, as a new user would.

The copy holds every file git would (tracked and untracked-not-ignored, as they are in the working
tree), so the test runs what is about to be committed. Its node listens on free ports (the settings
reach `make run` as `SHOAL_*` variables) and its demo site on a free port (`DEMO_ARGS`); everything
it starts is stopped with `shoal down` and what it made is removed by `cleanup`.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import ujson
from kafka import KafkaConsumer, TopicPartition

from utils.services import free_ports

REPO = Path(__file__).resolve().parents[2]
MAKE_TIMEOUT = 900  # seconds: a cold venv downloads every wheel from PyPI
_MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR")
_CRAWLID = re.compile(r"feeding crawl (demo-[0-9a-f]+)")


def checkout_files() -> list[str]:
    """The repository's files as a fresh clone plus the working tree's changes would have them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout.decode()  # fmt: skip
    return [path for path in listed.split("\0") if path and (REPO / path).is_file()]


def copy_checkout(dest: Path, owner: str | None = None) -> Path:
    """Copy the checkout's files into `dest` (modes kept), owned by `owner` when given."""
    for relative in checkout_files():
        target = dest / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / relative, target)
    if owner:
        subprocess.run(["chown", "-R", f"{owner}:{owner}", str(dest)], check=True)
    return dest


@dataclass
class FirstRun:
    """One checkout, its node's ports and the environment `make` runs with (as root or as `user`)."""

    checkout: Path
    user: str | None = None
    environ: dict[str, str] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, checkout: Path, base_env: Mapping[str, str], user: str | None = None) -> FirstRun:
        redis, kafka, zookeeper, rest, postgres, demo = free_ports(6)
        ports = {"redis": redis, "kafka": kafka, "zookeeper": zookeeper, "rest": rest, "postgres": postgres}
        environ = {key: value for key, value in base_env.items()
                   if not key.startswith("SHOAL_") and key not in _MAKE_VARIABLES and key != "VIRTUAL_ENV"}  # fmt: skip
        environ.update({
            "SHOAL_REDIS_PORT": str(redis), "SHOAL_KAFKA_HOSTS": f"127.0.0.1:{kafka}",
            "SHOAL_ZOOKEEPER_HOSTS": f"127.0.0.1:{zookeeper}", "SHOAL_REST_PORT": str(rest),
            "SHOAL_SINK_POSTGRES_DSN": f"postgresql://shoal@127.0.0.1:{postgres}/shoal",
            "DEMO_ARGS": f"--port {demo} --hosts 2 --pages 25 --timeout 180",
            "PIP_NO_COMPILE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1",  # a faster venv; nothing tested needs .pyc
        })  # fmt: skip
        for name in ("SHOAL_KAFKA_LIBS", "SHOAL_SERVICE_DATA_ROOT"):
            if name in base_env:
                environ[name] = base_env[name]
        return cls(checkout=checkout, user=user, environ=environ, ports=ports)

    def _argv(self, argv: list[str]) -> list[str]:
        if self.user is None:
            return argv
        return ["runuser", "-u", self.user, "--", "env", "-i", *(f"{k}={v}" for k, v in self.environ.items()), *argv]

    def run(self, *argv: str, timeout: float = MAKE_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """Run a command in the checkout; its output is kept for the failure message."""
        began = time.monotonic()
        done = subprocess.run(self._argv(list(argv)), cwd=self.checkout, env=self.environ, capture_output=True,
                              text=True, timeout=timeout, check=False)  # fmt: skip
        took = time.monotonic() - began
        self.outputs.append(f"$ {' '.join(argv)}  (exit {done.returncode}, {took:.1f} s)\n{done.stdout}{done.stderr}")
        return done

    def make_run(self) -> str:
        """`make run`; the demo's crawl id once it succeeded."""
        done = self.run("make", "run")
        assert done.returncode == 0, self.transcript()
        found = _CRAWLID.search(done.stdout)
        assert found, self.transcript()
        return found.group(1)

    def shoal(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.checkout / ".venv" / "bin" / "shoal"), *args, timeout=180)

    def move_to(self, dest: Path) -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        self.checkout.rename(dest)
        self.checkout = dest

    def transcript(self) -> str:
        return "\n".join(self.outputs)[-20000:]

    def firehose_pages(self, crawlid: str) -> set[str]:
        """URLs of the crawl's pages on the node's firehose topic, read from its start."""
        consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{self.ports['kafka']}", enable_auto_commit=False,
                                 consumer_timeout_ms=3000)  # fmt: skip
        try:
            topic = "demo.crawled_firehose"
            partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or {0})]
            consumer.assign(partitions)
            consumer.seek_to_beginning(*partitions)
            pages = (ujson.loads(record.value) for record in consumer)
            return {page["url"] for page in pages if page.get("crawlid") == crawlid}
        finally:
            consumer.close()

    def stored_pages(self, crawlid: str) -> int:
        """Rows of the crawl in the node's PostgreSQL (the sink's pages table)."""
        with psycopg.connect(self._dsn(), connect_timeout=5) as connection:
            row = connection.execute("SELECT count(*) FROM shoal.pages WHERE crawlid = %s", (crawlid,)).fetchone()
        return int(row[0]) if row else 0

    def leave_marker(self) -> None:
        """A table of our own in the node's PostgreSQL, to find the same data directory again later."""
        with psycopg.connect(self._dsn(), connect_timeout=5, autocommit=True) as connection:
            connection.execute("CREATE TABLE first_run_marker (checkout text)")
            connection.execute("INSERT INTO first_run_marker VALUES (%s)", (str(self.checkout),))

    def marker(self) -> str | None:
        """The checkout path the marker recorded; None when the node's PostgreSQL has no marker."""
        with psycopg.connect(self._dsn(), connect_timeout=5) as connection:
            try:
                row = connection.execute("SELECT checkout FROM first_run_marker").fetchone()
            except psycopg.errors.UndefinedTable:
                return None
        return str(row[0]) if row else None

    def _dsn(self) -> str:
        return f"postgresql://shoal@127.0.0.1:{self.ports['postgres']}/shoal"

    def cleanup(self) -> None:
        """Stop the node (if its venv still runs) and remove the checkout."""
        if (self.checkout / ".venv" / "bin" / "shoal").exists():
            self.shoal("down")
        shutil.rmtree(self.checkout, ignore_errors=True)


def throwaway_user(name: str, home: Path) -> str:
    """A new unprivileged user with a 0700 home and password-less sudo, as Debian 12's adduser makes them."""
    remove_user(name)
    subprocess.run(["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/bash", name], check=True)
    home.chmod(0o700)
    sudoers = Path("/etc/sudoers.d") / name
    sudoers.write_text(f"{name} ALL=(ALL) NOPASSWD:ALL\n", encoding="utf-8")
    sudoers.chmod(0o440)
    return name


def remove_user(name: str) -> None:
    """Remove the user, its processes' leftovers and its sudoers entry; nothing when it does not exist."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        return
    subprocess.run(["pkill", "-KILL", "-u", name], check=False)
    subprocess.run(["userdel", "--remove", name], capture_output=True, check=False)
    (Path("/etc/sudoers.d") / name).unlink(missing_ok=True)


def user_environ(name: str, home: Path, kafka_libs: Path) -> dict[str, str]:
    """A login-like environment for `name`: Debian's Python on PATH, the broker jars it may read."""
    return {
        "HOME": str(home), "USER": name, "LOGNAME": name, "LANG": "C.UTF-8",
        "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin",
        "SHOAL_KAFKA_LIBS": str(kafka_libs),
    }  # fmt: skip


def readable_copy(source: Path, dest: Path) -> Path:
    """`source` copied to `dest` with every directory and file readable by all (for another user)."""
    shutil.copytree(source, dest)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    for parent in dest.parents:
        if parent == Path("/tmp") or parent == Path("/"):
            break
        parent.chmod(parent.stat().st_mode | 0o005)
    return dest


def is_root() -> bool:
    return os.geteuid() == 0
