"""The realistic site's shape: page sizes and link counts like the real web's, from the seed alone."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from utils.demosite import Site
from utils.demosite.realistic import final_urls, html_sizes, realistic_site, written_port


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Site]:
    directory = tmp_path_factory.mktemp("realistic")
    return directory, realistic_site(directory, hosts=2, pages_per_host=300, seed=5, port=8999)


def test_sizes_and_links_spread_around_the_real_webs_medians(written: tuple[Path, Site]) -> None:
    directory, site = written
    sizes = html_sizes(directory, site)
    links = [len(page.links) for page in site.pages.values() if page.status == 200]
    assert min(sizes) >= 9_000
    assert max(sizes) <= 110_000
    assert 25_000 <= statistics.median(sizes) <= 36_000
    assert max(sizes) > 60_000  # a spread, not one size
    assert min(sizes) < 15_000
    assert min(links) >= 10
    assert max(links) <= 150
    assert 40 <= statistics.median(links) <= 60


def test_a_crawl_meets_404s_redirects_robots_and_non_html(written: tuple[Path, Site]) -> None:
    directory, site = written
    requested = site.reachable(site.seed_urls(), 100, obey_robots=True)
    paths = {url.split("/", 3)[3].split("/")[0] for url in requested}
    assert {"gone", "go", "moved", "img", "files", "page"} <= paths
    assert "private" not in paths
    everything = site.reachable(site.seed_urls(), 100, obey_robots=False)
    assert any("/private/" in url for url in everything)
    answered = final_urls(site, requested)
    assert not any("/go/" in url for url in answered)
    assert any("/moved/" in url for url in answered)
    assert (directory / "127.0.0.180" / "robots.txt").read_text() == "User-agent: *\nDisallow: /private/\n"


def test_the_seed_alone_decides_the_files(written: tuple[Path, Site], tmp_path: Path) -> None:
    directory, site = written
    again = realistic_site(tmp_path / "again", hosts=2, pages_per_host=300, seed=5, port=8999)
    realistic_site(tmp_path / "other", hosts=2, pages_per_host=300, seed=6, port=8999)
    page = Path("127.0.0.181/page/17.html")
    assert (tmp_path / "again" / page).read_bytes() == (directory / page).read_bytes()
    assert (tmp_path / "other" / page).read_bytes() != (directory / page).read_bytes()
    assert {u: p.links for u, p in again.pages.items()} == {u: p.links for u, p in site.pages.items()}
    rewritten = realistic_site(directory, hosts=2, pages_per_host=300, seed=5, port=8999)  # kept files: same links
    assert {u: p.links for u, p in rewritten.pages.items()} == {u: p.links for u, p in site.pages.items()}


def test_files_kept_from_another_port_are_written_again_for_this_one(tmp_path: Path) -> None:
    """The links between hosts name the port: kept files of a run on 8999 linked a run on 9001 to a closed port."""
    realistic_site(tmp_path, hosts=2, pages_per_host=20, seed=5, port=8999)
    assert written_port(tmp_path) == 8999
    site = realistic_site(tmp_path, hosts=2, pages_per_host=20, seed=5, port=9001)
    assert written_port(tmp_path) == 9001
    home = (tmp_path / "127.0.0.180" / "index.html").read_text()
    assert "127.0.0.181:9001/" in home
    assert ":8999" not in home
    assert all(":9001/" in url for url in site.pages)
