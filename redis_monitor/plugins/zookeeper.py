"""`zookeeper`: domain and blacklist updates applied to the YAML config node (§3.4).

Scrapy Cluster read, changed and wrote the node with no version check, so of two concurrent
updates one was lost. Here the write carries the version that was read (compare-and-set) and is
retried on BadVersionError. A ZooKeeper failure is answered with Scrapy Cluster's "error" field;
a domain-update without hits or window is answered with an error (Scrapy Cluster sent nothing).
"""

from __future__ import annotations

import logging
from typing import Any

import yaml
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException
from kazoo.handlers.threading import KazooTimeoutError

from redis_monitor.context import Context
from utils.config.clients import zookeeper_client
from utils.config.settings import Settings
from utils.jobs.stream import Job
from utils.schemas import answers

log = logging.getLogger(__name__)

CAS_ATTEMPTS = 50  # compare-and-set rounds before giving up (each lost round means another writer won)
ZK_ERRORS = (KazooException, KazooTimeoutError, TimeoutError)


class ZookeeperError(Exception):
    """ZooKeeper could not be read or written; the message is the answer's "error"."""


def apply_change(config: Any, request: dict[str, Any]) -> dict[str, Any]:
    """The YAML config (parsed) with one update applied; a broken node starts from empty."""
    config = dict(config) if isinstance(config, dict) else {}
    domains = dict(config.get("domains") or {})
    blacklist = list(config.get("blacklist") or [])
    domain, action = request["domain"], request["action"]
    if action == "domain-update":
        domains[domain] = {"window": request["window"], "hits": request["hits"], "scale": request.get("scale", 1.0)}
    elif action == "domain-remove":
        domains.pop(domain, None)
    elif action == "blacklist-update" and domain not in blacklist:
        blacklist.append(domain)
    elif action == "blacklist-remove" and domain in blacklist:
        blacklist.remove(domain)
    config["domains"], config["blacklist"] = domains, blacklist
    return config


class ZookeeperMonitor:
    rank = 500

    def __init__(self, client: KazooClient, path: str, timeout: float) -> None:
        self.client = client
        self.path = path
        self.timeout = timeout

    @classmethod
    def from_settings(cls, settings: Settings, context: Context) -> ZookeeperMonitor:
        path = settings.zookeeper_config_path
        return cls(zookeeper_client(settings), path, settings.get_float("ZOOKEEPER_TIMEOUT"))

    def accepts(self, job: Job) -> bool:
        return job.kind == "zookeeper"

    def handle(self, job: Job) -> list[dict[str, Any]]:
        request = job.request
        fields = {
            "appid": job.appid,
            "uuid": job.uuid,
            "action": request.get("action"),
            "domain": request.get("domain"),
        }
        log.info("Received zookeeper request", extra=fields)
        if request.get("action") == "domain-update" and not (request.get("hits") and request.get("window")):
            log.error("'hits' and 'window' not set for domain update", extra=fields)
            return [answers.error_answer(request, "'hits' and 'window' not set for domain update",
                                         "hits and window must be positive")]  # fmt: skip
        answer = {"action": request["action"], "domain": request["domain"], "uuid": job.uuid,
                  "appid": job.appid, "server_time": answers.server_time()}  # fmt: skip
        try:
            self.update(request)
        except ZookeeperError as exc:
            log.error("Zookeeper update failed", extra={**fields, "error": str(exc)})
            answer["error"] = str(exc)
        log.info("Sent zookeeper update to kafka", extra=fields)
        return [answer]

    def update(self, request: dict[str, Any]) -> None:
        """Read, change, write with the version read; a concurrent writer makes us read again."""
        for _ in range(CAS_ATTEMPTS):
            data, version = self._read()
            try:
                config = yaml.safe_load(data) if data else {}
            except yaml.YAMLError:
                config = {}
            text = yaml.safe_dump(apply_change(config, request), default_flow_style=False)
            try:
                self.client.set(self.path, text.encode(), version=version)
                return
            except BadVersionError:
                log.debug("Zookeeper config changed by another writer; reading it again", extra={"path": self.path})
                continue
            except ZK_ERRORS as exc:
                raise ZookeeperError("Unable to store Zookeeper config") from exc
        raise ZookeeperError("Unable to store Zookeeper config")

    def close(self) -> None:
        try:
            self.client.stop()
            self.client.close()
        except ZK_ERRORS:
            log.warning("ZooKeeper client did not stop cleanly")

    def _read(self) -> tuple[bytes, int]:
        try:
            if not self.client.connected:
                self.client.start(timeout=self.timeout)
            self.client.ensure_path(self.path)
            data, stat = self.client.get(self.path)
        except ZK_ERRORS as exc:
            raise ZookeeperError("Unable to load Zookeeper config") from exc
        return data or b"", stat.version
