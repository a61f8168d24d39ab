"""Main-text quality of a crawl's `extract` on a public labelled set, beside the extractor run alone.

The set: Zyte's article-extraction-benchmark (GitHub `scrapinghub/article-extraction-benchmark`: 181
news and blog pages from as many sites, gzip-compressed HTML in `html/`, the article body a person
marked in `ground-truth.json`). Nobody on the project wrote it, its pages are real, and it is the
set published F1 figures for trafilatura and a dozen other extractors come from. The bench reads it
from a clone or from a bare snapshot (`--dataset`, default the snapshot path below); it is never
copied into this repository.

Three runs on the same files:
  1. `trafilatura.extract(html)` with its defaults: the extractor alone, as a user would call it;
  2. Shoal's extraction function (utils/extract/content.py) in this process, for `["text"]` and
     for `["text", "markdown"]` (one trafilatura pass with links, the text read from it unlinked);
  3. a real crawl: the pages served from 127.0.0.1, fetched by one `shoal crawl` process with
     `"extract": ["text"]`, the text read back from the firehose (what survives the transit:
     decoding, the worker pool, the Kafka message).
Score: token F1 of each page's text against its ground truth (tokens are `\\w+` runs, lower-cased,
compared as multisets), averaged over pages; precision and recall likewise; and `shingle_f1`, the
set's own published metric (4-word shingles), to compare with its table. Target: the crawl's
F1 >= 0.95 and no lower than run 2's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.common import bench_cluster, print_checks, write_result

SNAPSHOT = Path("/work/.mirror/scrapinghub+article-extraction-benchmark/repo")
HOST = "127.0.46.1"
_TOKEN = re.compile(r"\w+", re.UNICODE)


class Dataset:
    """The set's files, from a working tree or a bare git directory (read with `git show`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bare = not (path / "ground-truth.json").exists()

    def read(self, name: str) -> bytes:
        if not self.bare:
            return (self.path / name).read_bytes()
        return subprocess.run(["git", "--git-dir", str(self.path), "show", f"HEAD:{name}"], check=True,
                              capture_output=True).stdout  # fmt: skip

    def pages(self) -> dict[str, tuple[bytes, str]]:
        """id -> (HTML bytes, ground-truth article body)."""
        truth = json.loads(self.read("ground-truth.json"))
        return {key: (gzip.decompress(self.read(f"html/{key}.html.gz")), value.get("articleBody") or "")
                for key, value in truth.items()}  # fmt: skip


def tokens(text: str) -> Counter[str]:
    return Counter(_TOKEN.findall(text.lower()))


def score(truth: str, predicted: str) -> tuple[float, float, float]:
    """Token precision, recall and F1 of one page (1.0 each when both are empty)."""
    want, got = tokens(truth), tokens(predicted)
    common = sum((want & got).values())
    if not want and not got:
        return 1.0, 1.0, 1.0
    precision = common / sum(got.values()) if got else 0.0
    recall = common / sum(want.values()) if want else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def shingles(text: str) -> Counter[tuple[str, ...]]:
    words = _TOKEN.findall(text)
    return Counter(tuple(words[i : i + 4]) for i in range(max(1, len(words) - 3)) if words[i : i + 4])


def shingle_f1(truths: dict[str, str], predicted: dict[str, str]) -> float:
    """The set's published metric: 4-word shingles, precision and recall averaged over pages (pages
    with nothing predicted, resp. nothing true, left out of that mean), F1 of the two means."""
    precisions, recalls = [], []
    for key, truth in truths.items():
        want, got = shingles(truth), shingles(predicted.get(key, ""))
        common = sum((want & got).values())
        if not want and not got:
            precisions.append(1.0)
            recalls.append(1.0)
            continue
        if got:
            precisions.append(common / sum(got.values()))
        if want:
            recalls.append(common / sum(want.values()))
    p, r = sum(precisions) / len(precisions), sum(recalls) / len(recalls)
    return round(2 * p * r / (p + r), 4) if p + r else 0.0


def summary(truths: dict[str, str], predicted: dict[str, str]) -> dict[str, float]:
    scores = [score(truths[key], predicted.get(key, "")) for key in truths]
    n = len(scores)
    return {"pages": n, "precision": round(sum(s[0] for s in scores) / n, 4),
            "recall": round(sum(s[1] for s in scores) / n, 4), "f1": round(sum(s[2] for s in scores) / n, 4),
            "shingle_f1": shingle_f1(truths, predicted),
            "missing": sum(1 for key in truths if key not in predicted)}  # fmt: skip


def alone(pages: dict[str, tuple[bytes, str]]) -> tuple[dict[str, str], float]:
    import trafilatura

    started = time.process_time()
    out = {key: trafilatura.extract(html.decode("utf-8"), include_comments=False, include_tables=True) or ""
           for key, (html, _) in pages.items()}
    return out, time.process_time() - started


def shoal_function(pages: dict[str, tuple[bytes, str]], kinds: tuple[str, ...] = ("text",)
                   ) -> tuple[dict[str, str], float]:  # fmt: skip
    from utils.extract.content import extract

    started = time.process_time()
    out = {key: extract(html.decode("utf-8"), f"http://{HOST}/{key}.html", kinds, False)["text"]
           for key, (html, _) in pages.items()}  # fmt: skip
    return out, time.process_time() - started


def crawled(pages: dict[str, tuple[bytes, str]]) -> tuple[dict[str, str], dict[str, Any]]:
    """Every page fetched by a real crawler with `extract: ["text"]`; the text as the firehose carries it."""
    from tests.e2e.test_crawler_helpers import seed
    from tests.support.kafka import TopicReader
    from tests.support.services import wait_until
    from utils.demosite import SiteServer
    from utils.demosite.generator import Page, Site
    from utils.services import free_port

    port = free_port()
    site_pages = {f"http://{HOST}:{port}/{key}.html": Page(url=f"http://{HOST}:{port}/{key}.html", status=200,
                                                            content_type="text/html; charset=utf-8", body=html)
                  for key, (html, _) in pages.items()}  # fmt: skip
    site = Site(hosts=[f"{HOST}:{port}"], port=port, seed=0, crawl_delay=None, pages=site_pages)
    extra = {"QUEUE_HITS": 0, "ZOOKEEPER_ENABLED": "false", "CONCURRENT_REQUESTS": 8,
             "CONCURRENT_REQUESTS_PER_DOMAIN": 8, "ROBOTSTXT_OBEY": "false"}  # fmt: skip
    with bench_cluster(**extra) as cluster, SiteServer(site):
        crawler = cluster.start("crawl", "--spider", "link", name="extract-quality")
        try:
            wait_until(lambda: "Scheduler opened" in crawler.log_path.read_text(), timeout=300)
        except AssertionError:
            print(crawler.log_path.read_text()[-3000:])
            raise
        reader = TopicReader(cluster.settings.get_list("KAFKA_HOSTS")[0], cluster.settings.topic("crawled_firehose"))
        started = time.monotonic()
        for url in site_pages:
            seed(cluster, url, crawlid="quality", extract=["text"])
        reader.wait_for(lambda got: len(got) >= len(site_pages), timeout=600)
        seconds = time.monotonic() - started
        reader.close()
        crawler.stop()
    out: dict[str, str] = {}
    errors = 0
    for message in reader.messages:
        key = message["url"].rsplit("/", 1)[1].removesuffix(".html")
        out[key] = message.get("text") or ""
        errors += "extract_error" in message
    return out, {"seconds": round(seconds, 1), "extract_errors": errors}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=SNAPSHOT, help="a clone or bare snapshot of the set")
    parser.add_argument("--no-crawl", action="store_true", help="runs 1 and 2 only (no services)")
    args = parser.parse_args(argv)
    if not args.dataset.exists():
        print(f"{args.dataset}: no such dataset; clone GitHub's scrapinghub/article-extraction-benchmark and pass "
              "--dataset <its directory> (docs/reference/performance.md)", file=sys.stderr)  # fmt: skip
        return 2
    pages = Dataset(args.dataset).pages()
    truths = {key: truth for key, (_, truth) in pages.items()}
    figures: dict[str, Any] = {"dataset": "scrapinghub/article-extraction-benchmark", "pages": len(pages)}
    out, cpu = alone(pages)
    figures["trafilatura_alone"] = {**summary(truths, out), "cpu_ms_per_page": round(1000 * cpu / len(pages), 1)}
    out, cpu = shoal_function(pages)
    figures["shoal_function"] = {**summary(truths, out), "cpu_ms_per_page": round(1000 * cpu / len(pages), 1)}
    out, cpu = shoal_function(pages, ("text", "markdown"))  # the text of a crawl that also asks for Markdown
    figures["shoal_function_text_markdown"] = {**summary(truths, out),
                                               "cpu_ms_per_page": round(1000 * cpu / len(pages), 1)}  # fmt: skip
    checks = {}
    if not args.no_crawl:
        out, run = crawled(pages)
        figures["shoal_crawl"] = {**summary(truths, out), **run}
        crawl_f1 = figures["shoal_crawl"]["f1"]
        checks["crawl token F1 >= 0.95"] = crawl_f1 >= 0.95
        checks["crawl F1 >= in-process F1 (nothing lost in transit)"] = crawl_f1 >= figures["shoal_function"]["f1"]
    print(json.dumps(figures, indent=2))
    print_checks(checks)
    write_result("extract_quality", figures, checks)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
