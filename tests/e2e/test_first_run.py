"""`make run` wherever a new user clones Shoal (issue 36), checked end to end with real services.

As root, a checkout in a 0700 directory of /root with a space in its path: a first `make run` (the
module's fixture), then, one test each, in any order: a `make run` while the node still runs, one
after `shoal down`, and one after the checkout moved while its node ran (the venv is made again,
the node restarted from the new place, PostgreSQL's data found again). As a throwaway
unprivileged user with sudo and a 0700 home: a first `make run`. Each time the demo crawl must
land in Kafka and in PostgreSQL.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.first_run import (
    FirstRun,
    copy_checkout,
    is_root,
    readable_copy,
    remove_user,
    throwaway_user,
    user_environ,
)
from tests.support.services import wait_until
from utils.services.kafka import kafka_libs

# Beside the other tests: `make test` installs every Debian package `make run` checks for before the
# suite starts (no dpkg lock is taken here), and the system user it adds has a name of its own.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(2400)]

USER = "shoal-first-run"


def _landed(node: FirstRun, crawlid: str) -> int:
    """The demo crawl's pages are on the firehose and every one of them is a row in PostgreSQL."""
    pages = node.firehose_pages(crawlid)
    assert len(pages) >= 50, node.transcript()  # 2 hosts x 25 pages
    wait_until(lambda: node.stored_pages(crawlid) >= len(pages), 30, interval=0.5,
               message=f"crawl {crawlid}: {len(pages)} pages on Kafka, fewer rows in PostgreSQL")  # fmt: skip
    return len(pages)


@pytest.fixture(scope="module")
def root_home() -> Iterator[Path]:
    """A directory of root's own 0700 home (or, run as another user, of a 0700 temp dir)."""
    base = Path(tempfile.mkdtemp(prefix="shoal-first-run-", dir=Path.home() if is_root() else None))
    base.chmod(0o700)
    assert Path.home().stat().st_mode & 0o077 == 0 or not is_root() or base.stat().st_mode & 0o077 == 0
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def root_node(root_home: Path) -> Iterator[FirstRun]:
    """A checkout at "my shoal" in `root_home` whose first `make run` landed its demo crawl; its node
    is stopped, and its PostgreSQL data (kept outside the home when root) removed, after the module.

    The tests below share it in any order: each leaves the node running from wherever the checkout
    now is, with the marker of the first run's data, which is all the next one needs. Apart, each
    stays within the suite's bound for one test (issue 47); sharing the first run, the module makes
    one venv fewer."""
    node = FirstRun.create(copy_checkout(root_home / "my shoal"), os.environ)
    data_root = None
    try:
        _landed(node, node.make_run())
        status = json.loads(node.shoal("status", "--json").stdout)
        data = Path(status["data"]["postgres"])
        assert (data / "PG_VERSION").exists()
        if is_root():  # PostgreSQL runs as `postgres`: its data outside the 0700 home, by node id
            assert not data.is_relative_to(root_home), data
            data_root = data.parent
        node.leave_marker()
        yield node
    finally:
        node.cleanup()
        if data_root is not None:
            shutil.rmtree(data_root, ignore_errors=True)


def test_make_run_as_root_from_a_0700_home_with_a_space_again_while_the_node_runs(root_node: FirstRun) -> None:
    again = root_node.make_run()  # the node is still up: `shoal up` says so, the demo crawls again
    assert "is already running" in root_node.outputs[-1]
    _landed(root_node, again)


def test_make_run_as_root_after_shoal_down_finds_its_postgresql_data_again(root_node: FirstRun) -> None:
    first_place = root_node.marker()
    assert first_place is not None
    assert root_node.shoal("down").returncode == 0, root_node.transcript()
    _landed(root_node, root_node.make_run())
    assert root_node.marker() == first_place  # the same PostgreSQL data directory after down and up


def test_make_run_as_root_after_the_checkout_moved_while_its_node_ran(root_node: FirstRun, root_home: Path) -> None:
    first_place = root_node.marker()
    assert first_place is not None
    moved = root_home / f"moved {uuid.uuid4().hex[:6]}" / "shoal"
    root_node.move_to(moved)  # while the node runs
    _landed(root_node, root_node.make_run())
    assert "the checkout moved from" in root_node.outputs[-1]
    assert "before it moved: restarting it" in root_node.outputs[-1]
    assert root_node.marker() == first_place  # the moved node found its PostgreSQL data again


@pytest.fixture
def unprivileged_user() -> Iterator[tuple[str, Path, Path]]:
    """A throwaway user with sudo and a 0700 home, and a copy of the broker jars it can read."""
    assert is_root(), "this test makes a throwaway user: run the suite as root, as `make test` does in CI"
    base = Path(tempfile.mkdtemp(prefix="shoal-first-run-user-"))
    base.chmod(0o755)
    home = base / "home" / USER
    home.parent.mkdir()
    throwaway_user(USER, home)
    jars = readable_copy(kafka_libs(), base / "kafka-libs")
    yield USER, home, jars
    remove_user(USER)
    shutil.rmtree(base, ignore_errors=True)


def test_make_run_as_a_user_with_sudo_from_a_0700_home(unprivileged_user: tuple[str, Path, Path]) -> None:
    user, home, jars = unprivileged_user
    checkout = copy_checkout(home / "shoal", owner=user)
    assert home.stat().st_mode & 0o777 == 0o700
    node = FirstRun.create(checkout, user_environ(user, home, jars), user=user)
    try:
        _landed(node, node.make_run())
        status = json.loads(node.shoal("status", "--json").stdout)
        assert Path(status["data"]["postgres"]).is_relative_to(checkout)  # PostgreSQL runs as the user
    finally:
        node.cleanup()
