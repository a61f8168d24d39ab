"""API keys per app for the REST gateway: each key names its app and its scopes, stored hashed.

A key reads `shoal_<key id>_<secret>`: the id finds its record in `shoal:apikeys` (one HGET), the
secret is checked against the record's salted PBKDF2-SHA256 hash (the secret itself is never
stored; it is shown once, when created). The secret is 256 random bits, so the hash needs no
slowness against guessing: ITERATIONS keeps a check to a few milliseconds, and a gateway caches the
keys it checked (the record is read on every request, so a revoked key stops at once).

Scopes: `feed` (crawl requests), `info` (see crawls, progress, dead letters, figures), `stop` (stop
crawls, replay or purge dead letters), `admin` (every app, stats, ZooKeeper requests, domains,
the dashboard's cluster view). An app's key sees and stops only its app's crawls; the shared
REST_API_KEY is the admin key.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import redis
import ujson

from utils.config.clients import RedisClient
from utils.frontier import keys

SCOPES = ("feed", "info", "stop", "admin")
PREFIX = "shoal"
ITERATIONS = 1000  # PBKDF2 rounds: the secret is random (256 bits), the salt and hash only keep it out of Redis
CACHE_SIZE = 1024  # checked keys remembered per gateway


@dataclass(frozen=True)
class Principal:
    """Who a request is: an app with scopes, or every app (`app` None: the admin key, or no keys at all)."""

    app: str | None
    scopes: frozenset[str]
    key_id: str = ""

    @property
    def admin(self) -> bool:
        return "admin" in self.scopes

    def allows(self, scope: str) -> bool:
        return self.admin or scope in self.scopes

    def sees(self, appid: str | None) -> bool:
        """Whether this principal may see or act on `appid`'s crawls."""
        return self.admin or self.app is None or appid == self.app


ADMIN = Principal(None, frozenset({"admin"}))


def check_scopes(scopes: Iterable[str]) -> frozenset[str]:
    found = frozenset(s.strip() for s in scopes if s.strip())
    unknown = found - set(SCOPES)
    if unknown or not found:
        raise ValueError(f"scopes must be some of {', '.join(SCOPES)}; not {sorted(unknown) or 'none'}")
    return found


def _digest(secret: str, salt: bytes, iterations: int) -> str:
    return hashlib.pbkdf2_hmac("sha256", secret.encode("utf-8", "replace"), salt, iterations).hex()


def create(client: RedisClient, app: str, scopes: Iterable[str], note: str = "") -> tuple[str, str]:
    """A new key for `app`: (key id, the key). The key is not kept anywhere: show it once."""
    checked = check_scopes(scopes)
    if not 3 <= len(app) <= 40:
        raise ValueError("app: an appid of 3 to 40 characters")
    key_id, secret, salt = secrets.token_hex(6), secrets.token_urlsafe(32), secrets.token_bytes(16)
    record = {"app": app, "scopes": sorted(checked), "salt": salt.hex(), "hash": _digest(secret, salt, ITERATIONS),
              "iterations": ITERATIONS, "created": round(time.time(), 3), "note": note}  # fmt: skip
    client.hset(keys.API_KEYS, key_id, ujson.dumps(record))
    return key_id, f"{PREFIX}_{key_id}_{secret}"


def revoke(client: RedisClient, key_id: str) -> bool:
    return bool(client.hdel(keys.API_KEYS, key_id))


def listed(client: RedisClient) -> list[dict[str, Any]]:
    """Every key's id, app, scopes, creation time and note (never its hash)."""
    found = []
    for key_id, raw in client.hgetall(keys.API_KEYS).items():
        record = _record(raw)
        if record is not None:
            found.append({"id": _text(key_id), **{k: record.get(k) for k in ("app", "scopes", "created", "note")}})
    return sorted(found, key=lambda r: (str(r["app"]), r["id"]))


def any_keys(client: RedisClient) -> bool:
    return bool(client.exists(keys.API_KEYS))


class KeyChecker:
    """Checks presented keys against the stored records; remembers those it checked."""

    def __init__(self, client: RedisClient) -> None:
        self.client = client
        self._checked: dict[tuple[str, str], str] = {}  # (record's hash, presented secret's SHA-256) -> ok
        self._keys_exist = False  # what Redis last said: a Redis outage keeps it rather than guessing

    def keys_exist(self) -> bool:
        """Whether any app key is stored; while Redis does not answer, what it answered last.

        Keys on (REST_API_KEY set) never depend on this; without REST_API_KEY, a gateway that has
        never reached Redis takes the cluster for one without app keys (docs/how-to/many-apps.md).
        """
        try:
            self._keys_exist = any_keys(self.client)
        except redis.RedisError:
            pass
        return self._keys_exist

    def principal(self, presented: str) -> Principal | None:
        """The key's app and scopes, or None (unknown, revoked, malformed or wrong secret)."""
        parts = presented.split("_", 2)
        if len(parts) != 3 or parts[0] != PREFIX or not parts[1] or not parts[2]:
            return None
        key_id, secret = parts[1], parts[2]
        record = _record(self.client.hget(keys.API_KEYS, key_id))
        if record is None:
            return None
        if not self._matches(record, secret):
            return None
        try:
            return Principal(str(record["app"]), check_scopes(record["scopes"]), key_id)
        except (KeyError, TypeError, ValueError):
            return None

    def _matches(self, record: dict[str, Any], secret: str) -> bool:
        stored = str(record.get("hash", ""))
        seen = (stored, hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest())
        if seen in self._checked:
            return True
        try:
            salt, iterations = bytes.fromhex(str(record["salt"])), int(record.get("iterations", ITERATIONS))
        except (KeyError, ValueError, TypeError):
            return False
        if not hmac.compare_digest(_digest(secret, salt, iterations), stored):
            return False
        if len(self._checked) >= CACHE_SIZE:
            self._checked.clear()
        self._checked[seen] = stored
        return True


def _record(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        record = ujson.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
