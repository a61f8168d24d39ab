"""A site shaped like the real web's pages, written as static files for nginx to serve.

The demo site's pages (generator.py) are ~2 KB with 5-12 links; real HTML is tens of KB with dozens
of links, and what a crawler pays per byte of body and per extracted link decides its cost. Here
each host has `pages_per_host` HTML pages of 10-100 KB (log-normal, median ~30 KB) with 10-150 links
(median ~50), among them links to missing pages (404), to redirects (301 to a page reachable only
through them), to robots-disallowed pages, to images and to PDFs. Everything comes from one
``random.Random(seed)``: the same arguments write byte-identical files, and the returned `Site`
knows every page's links (not its body: those are on disk) so `Site.reachable` still says which
URLs a crawl requests.

The files are served by Debian's nginx (`NginxSite`), whose CPU per request is negligible next to a
crawler's, so a benchmark measures the crawler and not the server.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from html import escape
from pathlib import Path
from urllib.parse import urlsplit

from utils.demosite.generator import (
    DISALLOWED_PREFIX,
    HTML_TYPE,
    TITLE_WORDS,
    WORDS,
    Page,
    Site,
    _capitalize,
    _Host,
    _Link,
    _link,
)

MIN_SIZE, MEDIAN_SIZE, MAX_SIZE = 10_000, 30_000, 100_000  # bytes of HTML
MIN_LINKS, MEDIAN_LINKS, MAX_LINKS = 10, 50, 150
SIZE_SIGMA, LINKS_SIGMA = 0.55, 0.6  # log-normal spreads: most pages near the median, a long tail
CROSS_HOST_SHARE = 0.15
# Share of a page's links that are not a plain page: (kind, share); what is left links to pages.
SPECIAL_SHARES = (("gone", 0.03), ("go", 0.03), ("private", 0.02), ("img", 0.04), ("pdf", 0.01))
SPECIAL_PATHS = {"gone": "/gone/{}.html", "go": "/go/{}.html", "private": DISALLOWED_PREFIX + "{}.html",
                 "img": "/img/{}.jpg", "pdf": "/files/{}.pdf", "moved": "/moved/{}.html"}  # fmt: skip
SPECIAL_PER_HOST = 0.04  # distinct targets of each special kind, as a share of the host's pages
SENTENCES = 4000  # a pool drawn from for the body text: building each sentence anew would take minutes
FORMAT = 1  # bumped when the written files change for the same arguments


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return int(min(high, max(low, rng.lognormvariate(math.log(median), sigma))))


@dataclass
class _Writer:
    """The host being written: where its files go and what its pages may link to."""

    rng: random.Random
    host: _Host
    root: Path
    sentences: list[str]
    specials: int
    dry: bool = False  # the files are on disk already: the same draws, nothing written

    def target(self, path: str) -> _Link:
        """A link to one page of the site: a special target or a page, maybe on another host."""
        rng, host = self.rng, self.host
        draw = rng.random()
        for kind, share in SPECIAL_SHARES:
            if draw < share:
                special = SPECIAL_PATHS[kind].format(rng.randrange(self.specials))
                return _link(rng, host, path, special, _capitalize(kind) + " " + special.rsplit("/", 1)[1])
            draw -= share
        n = rng.randrange(host.size)
        if host.others and rng.random() < CROSS_HOST_SHARE:
            other = rng.choice(host.others)
            url = host.url(f"/page/{n}.html", other)
            return _Link(url, url, host.titles[other][n])
        return _link(rng, host, path, f"/page/{n}.html", host.titles[host.name][n])

    def page(self, path: str, title: str, fixed: list[_Link], size: int, links: int) -> Page:
        """Write one HTML page of about `size` bytes with `fixed` then random links, `links` in all."""
        rng = self.rng
        chosen = list(fixed)
        seen = {link.url for link in chosen} | {self.host.url(path)}
        for _ in range(4 * links):
            if len(chosen) >= links:
                break
            link = self.target(path)
            if link.url not in seen:
                seen.add(link.url)
                chosen.append(link)
        anchors = [f'<li><a href="{escape(link.href)}">{escape(link.text)}</a></li>' for link in chosen]
        head = (
            f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{escape(title)}</title>\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<link rel="stylesheet" href="/static/site.css">\n</head>\n<body>\n<h1>{escape(title)}</h1>\n'
        )
        tail = f"<footer><p>Shoal realistic site · {self.host.name} · {escape(path)}</p></footer>\n</body>\n</html>\n"
        parts = [head]
        used = len(head) + len(tail) + sum(len(a) for a in anchors) + 20 * (len(anchors) // 8 + 1)
        at = 0
        while used < size or at < len(anchors):  # paragraphs of text with runs of links between them
            text = " ".join(rng.choices(self.sentences, k=rng.randint(3, 8)))
            parts.append(f"<p>{text}</p>\n")
            used += len(text) + 8
            run = anchors[at : at + rng.randint(4, 12)]
            at += len(run)
            if run:
                parts.append("<ul>" + "".join(run) + "</ul>\n")
        parts.append(tail)
        body = "".join(parts).encode()
        self.write(path, body)
        return Page(self.host.url(path), 200, HTML_TYPE, b"", [link.url for link in chosen],
                    [link.text for link in chosen])  # fmt: skip

    def write(self, path: str, body: bytes) -> None:
        if self.dry:
            return
        file = self.root / (path.lstrip("/") or "index.html")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(body)


def realistic_site(
    directory: Path,
    hosts: int = 4,
    pages_per_host: int = 1500,
    seed: int = 43,
    base_ip_octet: int = 180,
    port: int = 8181,
    network: str = "127.0.0",
) -> Site:
    """Write the site's files under `directory` (one folder per host address) and return its `Site`.

    `Site.pages` holds every HTML page with its links (bodies empty: they are on disk), each redirect
    as a 301 whose one link is its target; 404s, images and PDFs are leaves. A directory already
    holding this shape's files is not written again; the port is part of the shape, since the
    links between hosts name it (files kept from a run on another port linked to a closed port).
    """
    if hosts < 1 or pages_per_host < 2 or not 1 <= base_ip_octet <= 255 - hosts:
        raise ValueError(f"bad site shape: hosts={hosts} pages={pages_per_host} octet={base_ip_octet}")
    rng = random.Random(seed)
    names = [f"{network}.{base_ip_octet + i}:{port}" for i in range(hosts)]
    titles = {name: [_title(rng) for _ in range(pages_per_host)] for name in names}
    sentences = [escape(_capitalize(" ".join(rng.choices(WORDS, k=rng.randint(6, 18)))) + ".")
                 for _ in range(SENTENCES)]  # fmt: skip
    specials = max(1, int(pages_per_host * SPECIAL_PER_HOST))
    stamp = directory / "shape.json"
    shape = {"hosts": hosts, "pages_per_host": pages_per_host, "seed": seed, "network": network,
             "base_ip_octet": base_ip_octet, "port": port, "format": FORMAT}  # fmt: skip
    written = stamp.is_file() and json.loads(stamp.read_text()) == shape
    if not written and directory.exists():
        shutil.rmtree(directory)
    pages: dict[str, Page] = {}
    for name in names:
        host = _Host(name, [other for other in names if other != name], pages_per_host, titles)
        root = directory / name.rsplit(":", 1)[0]
        writer = _Writer(random.Random(f"{seed}/{name}"), host, root, sentences, specials, dry=written)
        for page in _host_pages(writer):
            pages[page.url] = page
    if not written:
        stamp.write_text(json.dumps(shape))
    return Site(hosts=names, port=port, seed=seed, crawl_delay=None, pages=pages)


def _host_pages(writer: _Writer) -> list[Page]:
    """Every page of one host, in the order its random draws are made."""
    rng, host = writer.rng, writer.host
    partners = [_Link(host.url("/", other), host.url("/", other), f"Partner {other}") for other in host.others]
    first = [_link(rng, host, "/", f"/page/{n}.html", host.titles[host.name][n]) for n in range(min(20, host.size))]
    pages = [writer.page("/", f"Shoal realistic site — {host.name}", first + partners, 30_000, 60)]
    for n in range(host.size):
        path = f"/page/{n}.html"
        fixed = [
            _link(rng, host, path, "/", "Home"),
            _link(rng, host, path, f"/page/{(n + 1) % host.size}.html", "Next"),
        ]
        size = _lognormal(rng, MEDIAN_SIZE, SIZE_SIGMA, MIN_SIZE, MAX_SIZE)
        links = _lognormal(rng, MEDIAN_LINKS, LINKS_SIGMA, MIN_LINKS, MAX_LINKS)
        pages.append(writer.page(path, host.titles[host.name][n], fixed, size, links))
    for k in range(writer.specials):
        moved = SPECIAL_PATHS["moved"].format(k)
        home = [_link(rng, host, moved, "/", "Home")]
        pages.append(writer.page(moved, f"Moved page {k}", home, _lognormal(rng, MEDIAN_SIZE, SIZE_SIGMA,
                                                                             MIN_SIZE, MAX_SIZE), 20))  # fmt: skip
        pages.append(Page(host.url(SPECIAL_PATHS["go"].format(k)), 301, HTML_TYPE, b"", [host.url(moved)]))
        private = SPECIAL_PATHS["private"].format(k)
        pages.append(writer.page(private, f"Members area {k}", home, MIN_SIZE, MIN_LINKS))
        writer.write(SPECIAL_PATHS["img"].format(k), b"\xff\xd8\xff\xe0" + rng.randbytes(rng.randint(2_000, 30_000)))
        writer.write(SPECIAL_PATHS["pdf"].format(k), b"%PDF-1.4\n" + rng.randbytes(rng.randint(5_000, 60_000)))
    writer.write("/robots.txt", f"User-agent: *\nDisallow: {DISALLOWED_PREFIX}\n".encode())
    writer.write("/static/site.css", b"body { font-family: sans-serif; }\n")
    return pages


def _title(rng: random.Random) -> str:
    return _capitalize(" ".join(rng.sample(TITLE_WORDS, rng.randint(2, 6))))


def written_port(directory: Path) -> int | None:
    """The port the site's files under `directory` were written for (None when none are)."""
    stamp = directory / "shape.json"
    return int(json.loads(stamp.read_text()).get("port") or 0) or None if stamp.is_file() else None


def final_urls(site: Site, requested: dict[str, int] | set[str]) -> set[str]:
    """The URLs a crawler answers pages for, of the `requested` ones: a redirect's is its target's."""
    return {url for url in requested if not (page := site.pages.get(url)) or not 300 <= page.status < 400}


def html_sizes(directory: Path, site: Site) -> list[int]:
    """Bytes of every HTML page of the site as written (for the shape's figures and its test)."""
    sizes = []
    for url, page in site.pages.items():
        if page.status == 200:
            parts = urlsplit(url)
            sizes.append((directory / (parts.hostname or "") / (parts.path.lstrip("/") or "index.html")).stat().st_size)
    return sizes


NGINX = "/usr/sbin/nginx"  # Debian's nginx (the Makefile's BENCH_DEBIAN_PACKAGES)


class NginxSite:
    """nginx serving a site's files on its hosts' addresses and port, started and stopped by pid."""

    def __init__(self, directory: Path, site: Site, run_dir: Path) -> None:
        self.directory, self.site, self.run_dir = directory, site, run_dir
        self.process: subprocess.Popen[bytes] | None = None

    def config(self) -> str:
        run = self.run_dir
        servers = []
        for name in self.site.hosts:
            address = name.rsplit(":", 1)[0]
            servers.append(
                f"  server {{\n    listen {address}:{self.site.port};\n    root {self.directory / address};\n"
                "    index index.html;\n    location /go/ { rewrite ^/go/(\\d+)\\.html$ /moved/$1.html permanent; }\n"
                "  }\n"
            )
        temps = "".join(f"  {kind}_temp_path {run / kind};\n" for kind in ("client_body", "proxy", "fastcgi",
                                                                          "uwsgi", "scgi"))  # fmt: skip
        user = "user root;\n" if os.geteuid() == 0 else ""
        return (
            f"{user}daemon off;\nworker_processes 1;\npid {run / 'nginx.pid'};\nerror_log {run / 'error.log'} warn;\n"
            "events { worker_connections 4096; }\n"
            f"http {{\n  include /etc/nginx/mime.types;\n  default_type application/octet-stream;\n"
            "  charset utf-8;\n  sendfile on;\n  tcp_nopush on;\n  access_log off;\n  absolute_redirect off;\n"
            f"  keepalive_requests 100000;\n{temps}" + "".join(servers) + "}\n"
        )

    def start(self, timeout: float = 30) -> int:
        """Start nginx; its pid once every host answers."""
        if not Path(NGINX).exists():
            raise RuntimeError(f"{NGINX} is missing: `make bench` installs Debian's nginx")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        conf = self.run_dir / "nginx.conf"
        conf.write_text(self.config())
        self.process = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(self.run_dir), "-e",
                                         str(self.run_dir / "error.log")])  # fmt: skip
        deadline = time.monotonic() + timeout
        while not all(_answers(name) for name in self.site.hosts):
            if self.process.poll() is not None or time.monotonic() > deadline:
                log = (self.run_dir / "error.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"nginx did not start: {log}")
            time.sleep(0.1)
        return self.process.pid

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)  # nginx's fast shutdown
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _answers(name: str) -> bool:
    host, port = name.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def shape_key(**shape: object) -> str:
    """A short name for a shape's files (its cache directory)."""
    return hashlib.sha1(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:12]
