"""Scripted pages of the demo site: their text and links exist only after JavaScript runs.

`add_scripted_pages(site, n)` adds to every host `/js/0.html` … `/js/<n-1>.html`: each is an empty
shell whose script (`/js/app.js`) fetches `/js/<k>.json` and writes the page's paragraph and links
into the DOM, then adds `<div id="ready">` (the selector a crawl may wait for). A plain fetch sees
no link at all; a browser sees `Page.rendered_links` (always the next page, so `/js/0.html` of a
host reaches all of that host's scripted pages, plus a few random ones). `/js/never.html` never
settles: its script fetches `/js/ping.json` every 100 ms, so the network is never idle and the
`#ready` element never appears.
"""

from __future__ import annotations

import json
import random
from html import escape

from utils.demosite.generator import HTML_TYPE, WORDS, Page, Site

SCRIPT_PATH = "/js/app.js"
NEVER_PATH = "/js/never.html"
READY_SELECTOR = "#ready"
JS_TYPE = "application/javascript; charset=utf-8"
JSON_TYPE = "application/json; charset=utf-8"
EXTRA_LINKS = 3  # random same-host scripted links per page, besides the next page

APP_JS = b"""
(async () => {
  const data = await (await fetch(location.pathname.replace(/\\.html$/, ".json"))).json();
  const main = document.getElementById("content");
  const p = document.createElement("p");
  p.textContent = data.text;
  main.appendChild(p);
  const list = document.createElement("ul");
  for (const link of data.links) {
    const a = document.createElement("a");
    a.href = link.href;
    a.textContent = link.text;
    const item = document.createElement("li");
    item.appendChild(a);
    list.appendChild(item);
  }
  main.appendChild(list);
  const ready = document.createElement("div");
  ready.id = "ready";
  document.body.appendChild(ready);
})();
"""

NEVER_JS = b"setInterval(() => fetch('/js/ping.json?t=' + Date.now()).catch(() => {}), 100);\n"


def add_scripted_pages(site: Site, pages_per_host: int, seed: int = 1) -> list[str]:
    """Add the scripted pages to `site` (before its server starts); returns their seed URLs."""
    rng = random.Random(seed)
    for host in site.hosts:
        for page in _host_pages(rng, f"http://{host}", pages_per_host):
            site.pages[page.url] = page
    return scripted_seeds(site)


def scripted_seeds(site: Site) -> list[str]:
    """`/js/0.html` of every host."""
    return [f"http://{host}/js/0.html" for host in site.hosts]


def scripted_urls(site: Site) -> list[str]:
    """Every scripted HTML page of the site (never.html excepted), in host then number order."""
    return [url for url, page in site.pages.items() if page.rendered_links]


def _host_pages(rng: random.Random, base: str, count: int) -> list[Page]:
    pages = [Page(base + SCRIPT_PATH, 200, JS_TYPE, APP_JS),
             Page(base + "/js/ping.json", 200, JSON_TYPE, b"{}"),
             _shell(base + NEVER_PATH, "Never settles", "/js/never.js"),
             Page(base + "/js/never.js", 200, JS_TYPE, NEVER_JS)]  # fmt: skip
    for n in range(count):
        targets = {(n + 1) % count, *(rng.randrange(count) for _ in range(EXTRA_LINKS))} - {n}
        links = [{"href": f"/js/{k}.html", "text": f"Scripted page {k}"} for k in sorted(targets)]
        text = " ".join(rng.choices(WORDS, k=20))
        data = json.dumps({"text": text, "links": links}).encode()
        shell = _shell(base + f"/js/{n}.html", f"Scripted page {n}", SCRIPT_PATH)
        pages.append(Page(shell.url, 200, HTML_TYPE, shell.body,
                          rendered_links=[base + link["href"] for link in links]))  # fmt: skip
        pages.append(Page(base + f"/js/{n}.json", 200, JSON_TYPE, data))
    return pages


def _shell(url: str, title: str, script: str) -> Page:
    body = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
            f'<script src="{script}" defer></script></head>\n<body><main id="content"></main>'
            f'<img src="/js/pixel.png" alt=""></body></html>\n')  # fmt: skip
    return Page(url, 200, HTML_TYPE, body.encode())
