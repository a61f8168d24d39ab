"""Where a node's services keep their data (issue 36): the node id follows a moved checkout, a copied
checkout gets its own, a data directory an older Shoal made in the run directory is kept."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from utils.node.data_dirs import data_dirs, node_id, service_data_dir
from utils.node.layout import NodeLayout


def _layout(root: Path, local: tuple[str, ...] = ("redis", "postgres")) -> NodeLayout:
    return NodeLayout(node="default", run_root=root / "run", local=local)


def test_the_node_id_is_made_once_and_kept(tmp_path: Path) -> None:
    layout = _layout(tmp_path / "checkout")
    first = node_id(layout, tmp_path / "system")
    assert first.startswith("default-")
    assert node_id(layout, tmp_path / "system") == first
    assert (layout.run_dir / "node-id").read_text().strip() == first


def test_a_moved_checkout_keeps_its_node_id_and_a_copied_one_gets_its_own(tmp_path: Path) -> None:
    system = tmp_path / "system"
    original = _layout(tmp_path / "a")
    first = node_id(original, system)
    (system / first).mkdir(parents=True)
    (system / first / "owner").write_text(f"{original.run_dir}\n")

    copy = _layout(tmp_path / "copy")
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    assert node_id(copy, system) != first  # the original still holds the id: a copy, not a move

    moved = _layout(tmp_path / "moved")
    (tmp_path / "a").rename(tmp_path / "moved")
    assert node_id(moved, system) == first  # the recorded owner is gone: the same node, moved


def test_service_data_dirs(tmp_path: Path) -> None:
    system = tmp_path / "system"
    layout = _layout(tmp_path / "checkout")
    assert service_data_dir(layout, "redis", system) == layout.run_dir / "redis"
    postgres = service_data_dir(layout, "postgres", system)
    if os.geteuid() == 0:  # PostgreSQL runs as `postgres`: its data under the system root, by node id
        node = node_id(layout, system)
        assert postgres == system / node / "postgres"
        assert (system / node / "owner").read_text().strip() == str(layout.run_dir)
        assert (system / node).stat().st_mode & 0o777 == 0o755
    else:  # PostgreSQL runs as us: its data in the run dir
        assert postgres == layout.run_dir / "postgres"
    assert data_dirs(layout, system) == {"redis": layout.run_dir / "redis", "postgres": postgres}


def test_a_data_directory_made_in_the_run_dir_by_an_older_shoal_is_kept(tmp_path: Path) -> None:
    layout = _layout(tmp_path / "checkout")
    legacy = layout.run_dir / "postgres"
    legacy.mkdir(parents=True)
    (legacy / "PG_VERSION").write_text("15\n")
    assert service_data_dir(layout, "postgres", tmp_path / "system") == legacy
    assert not (tmp_path / "system").exists()
