"""One factory per client: Redis, Kafka producer, Kafka consumer, Kafka admin, ZooKeeper.

Timeouts, the fast consumer-group settings (joins take ~3 s instead of ~20 s) and the fail-fast
ping live here only, so every component talks to the services the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import redis
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError
from kazoo.client import KazooClient
from kazoo.security import make_digest_acl
from redis.backoff import NoBackoff
from redis.retry import Retry

from utils.config.errors import ConfigError, ShoalError
from utils.config.settings import Settings

log = logging.getLogger(__name__)

TOPIC_READY_TIMEOUT = 10.0  # seconds ensure_topics waits for new topics' partition leaders
MESSAGE_OVERHEAD = 64 * 1024  # bytes a page message may exceed KAFKA_PRODUCER_MAX_REQUEST_SIZE by (JSON, batch)
# How long a broker may hold a consumer's fetch that finds nothing. Apache Kafka answers a waiting
# fetch as soon as a record arrives, so a long wait delays nothing and only sets how often an idle
# consumer and the broker wake: at 50 ms each idle consumer cost itself and the broker 20 fetches/s
# (issue 37: the sink idled at 5 % of a core). Tansu does not wake a waiting fetch early: there
# every message would wait up to the full wait, so it keeps 50 ms.
FETCH_MAX_WAIT_MS = 500  # Apache Kafka's own default
TANSU_FETCH_MAX_WAIT_MS = 50
CONSUMER_REQUEST_TIMEOUT_MS = 10000  # longest wait for any one broker answer to a consumer

T = TypeVar("T")
RedisClient = Any  # redis.Redis or redis.RedisCluster; both speak the same command API


def redis_client(settings: Settings, ping: bool = False, decode: bool = False) -> RedisClient:
    """A pooled Redis client (hiredis parser when installed); `ping` fails fast if Redis is down."""
    timeout = settings.get_float("REDIS_SOCKET_TIMEOUT")
    common: dict[str, Any] = {
        "host": settings.get_str("REDIS_HOST"),
        "port": settings.get_int("REDIS_PORT"),
        "username": settings.get_str("REDIS_USERNAME") or None,
        "password": redis_password(settings),
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "decode_responses": decode,
        "encoding_errors": "replace",  # a decoding client reads bytes no one checked (a stream's values) as U+FFFD
        # Never re-sent by the client: redis-py 6+ retries a timed-out command (10 times in 8.x), so a
        # cut link held a caller for minutes, and a Lua script whose reply was lost ran again. One
        # attempt bounded by the socket timeout; the caller's loop retries what it knows is safe.
        "retry": Retry(NoBackoff(), 0),
        **redis_tls(settings),
    }
    client: RedisClient
    cluster = settings.get_bool("REDIS_CLUSTER")
    server_name = settings.get_str("REDIS_SSL_SERVER_NAME")
    if common.get("ssl") and server_name:
        client = _named_tls_client(common, server_name, cluster, settings.get_int("REDIS_DB"))
    elif cluster:
        client = redis.RedisCluster(**common)
    else:
        client = redis.Redis(db=settings.get_int("REDIS_DB"), health_check_interval=30, **common)
    if ping:
        client.ping()
    return client


def redis_password(settings: Settings) -> str | None:
    """REDIS_PASSWORD_FILE's first line, else REDIS_PASSWORD (SHOAL_REDIS_PASSWORD); None = no AUTH."""
    path = settings.get_str("REDIS_PASSWORD_FILE")
    if path:
        with open(path, encoding="utf-8") as file:
            return file.readline().rstrip("\r\n") or None
    return settings.get_str("REDIS_PASSWORD") or None


def redis_tls(settings: Settings) -> dict[str, Any]:
    """redis-py's TLS arguments (the same for one server and a cluster); empty without REDIS_SSL."""
    if not settings.get_bool("REDIS_SSL"):
        return {}
    return {
        "ssl": True,
        "ssl_ca_certs": settings.get_str("REDIS_SSL_CA_FILE") or None,
        "ssl_certfile": settings.get_str("REDIS_SSL_CERTFILE") or None,
        "ssl_keyfile": settings.get_str("REDIS_SSL_KEYFILE") or None,
        "ssl_check_hostname": settings.get_bool("REDIS_SSL_CHECK_HOSTNAME"),
        "ssl_cert_reqs": "required",
    }


class _NamedSSLConnection(redis.SSLConnection):
    """A TLS connection whose SNI and certificate check use `server_name`, not the address dialled:
    managed Redis and cluster nodes are reached by IP (or an announced address) while their
    certificate names the service. redis-py has no such option; it names the dialled host."""

    server_name = ""

    def _wrap_socket_with_ssl(self, sock: Any) -> Any:
        dialled, self.host = self.host, self.server_name or self.host
        try:
            return super()._wrap_socket_with_ssl(sock)  # type: ignore[misc]  # redis-py 5+, not in its stubs
        finally:
            self.host = dialled


def _named_tls_client(common: dict[str, Any], server_name: str, cluster: bool, db: int) -> RedisClient:
    """A client whose every connection (to any cluster node, later ones too) expects `server_name`.
    Built from a URL so redis-py takes our connection class (its `ssl=True` would force its own)."""
    named = type("NamedSSLConnection", (_NamedSSLConnection,), {"server_name": server_name})
    options = {k: v for k, v in common.items() if k not in ("host", "port", "ssl")}
    url = f"redis://{common['host']}:{common['port']}"
    if cluster:
        return redis.RedisCluster.from_url(url, connection_class=named, **options)
    single: Any = redis.Redis  # the stubs predate `connection_class` in from_url
    return single.from_url(f"{url}/{db}", connection_class=named, health_check_interval=30, **options)


class KafkaUnreachable(KafkaError, ShoalError):  # still a KafkaError for the callers that catch those
    """A Kafka client could not bootstrap: the broker is down, or refuses our TLS or credentials."""

    retriable = True


def _connected(settings: Settings, kind: str, build: Callable[[], T]) -> T:
    """`build()`, its failure to bootstrap told in one line naming address and protocol, no secret."""
    try:
        return build()
    except KafkaError as exc:
        hosts = ",".join(settings.get_list("KAFKA_HOSTS"))
        protocol = settings.get_str("KAFKA_SECURITY_PROTOCOL").upper()
        hint = " (check the credentials, KAFKA_SASL_MECHANISM and KAFKA_SSL_CAFILE)" if protocol != "PLAINTEXT" else ""
        raise KafkaUnreachable(
            f"Kafka {kind} cannot connect to {hosts} over {protocol}{hint}: {type(exc).__name__}"
        ) from exc


KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
KAFKA_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _secret(settings: Settings, name: str) -> str | None:
    """Setting `name`, else the first line of the file `<name>_FILE` names; None when neither is set."""
    value = settings.get_str(name)
    if value:
        return value
    path = settings.get_str(f"{name}_FILE")
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").splitlines()[0]
    except (OSError, IndexError) as exc:
        raise ConfigError(f"{name}_FILE {path}: cannot read the secret: {type(exc).__name__}") from None


def kafka_security(settings: Settings) -> dict[str, Any]:
    """The security settings of every Kafka client (kafka-python names): protocol, TLS files, SASL.

    Secrets come from the settings (so from `SHOAL_*` environment variables) or from files; they are
    handed to the client only, never logged (a ConfigError names the setting, not its value).
    """
    protocol = settings.get_str("KAFKA_SECURITY_PROTOCOL").upper()
    if protocol not in KAFKA_PROTOCOLS:
        raise ConfigError(f"KAFKA_SECURITY_PROTOCOL {protocol!r}: expected one of {', '.join(KAFKA_PROTOCOLS)}")
    config: dict[str, Any] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        config.update({
            "ssl_cafile": settings.get_str("KAFKA_SSL_CAFILE") or None,
            "ssl_certfile": settings.get_str("KAFKA_SSL_CERTFILE") or None,
            "ssl_keyfile": settings.get_str("KAFKA_SSL_KEYFILE") or None,
            "ssl_password": _secret(settings, "KAFKA_SSL_KEY_PASSWORD"),
            "ssl_check_hostname": settings.get_bool("KAFKA_SSL_CHECK_HOSTNAME"),
        })  # fmt: skip
    if protocol.startswith("SASL_"):
        mechanism = settings.get_str("KAFKA_SASL_MECHANISM").upper()
        if mechanism not in KAFKA_SASL_MECHANISMS:
            raise ConfigError(
                f"KAFKA_SASL_MECHANISM {mechanism!r}: expected one of {', '.join(KAFKA_SASL_MECHANISMS)}"
            )
        config.update({
            "sasl_mechanism": mechanism,
            "sasl_plain_username": settings.get_str("KAFKA_SASL_USERNAME"),
            "sasl_plain_password": _secret(settings, "KAFKA_SASL_PASSWORD"),
        })  # fmt: skip
    return config


def kafka_producer(settings: Settings, **overrides: Any) -> KafkaProducer:
    """A producer of raw bytes with Shoal's durability and batching settings."""
    config = {**producer_config(settings), **overrides}
    return _connected(settings, "producer", lambda: KafkaProducer(**config))


def producer_config(settings: Settings) -> dict[str, Any]:
    """kafka_producer's configuration (its timeouts are docs/reference/timeouts.md's table)."""
    acks: Any = settings.get_str("KAFKA_PRODUCER_ACKS")
    compression = settings.get_str("KAFKA_PRODUCER_COMPRESSION")
    config: dict[str, Any] = {
        "bootstrap_servers": settings.get_list("KAFKA_HOSTS"),
        "acks": acks if acks == "all" else int(acks),
        "linger_ms": settings.get_int("KAFKA_PRODUCER_BATCH_LINGER_MS"),
        "batch_size": settings.get_int("KAFKA_PRODUCER_BATCH_BYTES"),
        "max_request_size": settings.get_int("KAFKA_PRODUCER_MAX_REQUEST_SIZE") + MESSAGE_OVERHEAD,
        "compression_type": None if compression == "none" else compression,
        "enable_idempotence": True,  # broker retries never duplicate or reorder a partition
        "retries": 2**31 - 1,  # a stalled broker is waited for, bounded by delivery_timeout_ms
        "request_timeout_ms": 15000,
        "delivery_timeout_ms": 120000,
        "max_block_ms": 30000,
        **kafka_security(settings),
    }
    return config


def fetch_max_wait_ms(settings: Settings) -> int:
    """The broker's most wait on a consumer's empty fetch (ms): see FETCH_MAX_WAIT_MS."""
    return TANSU_FETCH_MAX_WAIT_MS if settings.get_str("LOCAL_KAFKA") == "tansu" else FETCH_MAX_WAIT_MS


def kafka_consumer(
    settings: Settings, topics: list[str], group_id: str | None, **overrides: Any
) -> KafkaConsumer:
    """A consumer of raw bytes; offsets are committed by the caller, never automatically."""
    config = {**consumer_config(settings, group_id), **overrides}
    consumer = _connected(settings, "consumer", lambda: KafkaConsumer(**config))
    if topics:
        subscribe(consumer, topics)
    return consumer


def consumer_config(settings: Settings, group_id: str | None) -> dict[str, Any]:
    """kafka_consumer's configuration (its timeouts are docs/reference/timeouts.md's table)."""
    config: dict[str, Any] = {
        "bootstrap_servers": settings.get_list("KAFKA_HOSTS"),
        "group_id": group_id,
        "auto_offset_reset": settings.get_str("KAFKA_CONSUMER_AUTO_OFFSET_RESET"),
        "enable_auto_commit": False,
        "max_partition_fetch_bytes": settings.get_int("KAFKA_CONSUMER_FETCH_MESSAGE_MAX_BYTES"),
        "max_poll_records": settings.get_int("KAFKA_CONSUMER_MAX_RECORDS"),
        "session_timeout_ms": settings.get_int("KAFKA_CONSUMER_SESSION_TIMEOUT_MS"),
        "heartbeat_interval_ms": settings.get_int("KAFKA_CONSUMER_HEARTBEAT_MS"),
        "max_poll_interval_ms": settings.get_int("KAFKA_CONSUMER_MAX_POLL_INTERVAL_MS"),
        "fetch_max_wait_ms": fetch_max_wait_ms(settings),
        # A fetch, commit or heartbeat the broker never answers (a cut or half-open link) fails after
        # this long and the client reconnects, and the group coordinator is marked dead: that is when
        # the component's health can say Kafka is down. A join waits longer (the rebalance timeout + 5 s).
        "request_timeout_ms": CONSUMER_REQUEST_TIMEOUT_MS,
        **kafka_security(settings),
    }
    return config


def subscribe(consumer: KafkaConsumer, topics: list[str], listener: Any = None, timeout: float = 10.0) -> None:
    """Subscribe, then wait until the group coordinator's metadata snapshot holds every topic's
    partitions, so the first join (made in the first poll) assigns them and stays valid.

    kafka-python 3.0.12 joins with the snapshot it has; a snapshot taken before the subscription
    (or before a new topic's partitions were known) makes the leader assign from it and then
    rebalance again when the next metadata refresh differs, and that second join could end without
    the assignment being applied: the consumer then read nothing, for good (seen on Apache Kafka
    with the kafka monitor and the sink). The snapshot is private to the client, hence the guards.
    """
    if listener is None:
        consumer.subscribe(topics)
    else:
        consumer.subscribe(topics, listener=listener)
    cluster = getattr(getattr(consumer, "_client", None), "cluster", None)
    coordinator: Any = getattr(consumer, "_coordinator", None)
    if cluster is None or not hasattr(coordinator, "_metadata_snapshot"):
        return
    cluster.request_update()
    deadline = time.monotonic() + timeout
    while not all(coordinator._metadata_snapshot.get(topic) for topic in topics):
        if time.monotonic() >= deadline:
            log.warning("Subscribed topics have no partitions in the metadata yet", extra={"topics": topics})
            return
        time.sleep(0.02)
        if not cluster.need_update:
            cluster.request_update()


PAGE_TOPICS = ("crawled_", "robots_firehose")  # suffix starts of the page topics: the firehoses, per-appid copies


def topic_configs(settings: Settings, topic: str) -> dict[str, str]:
    """The configs a topic Shoal creates carries: a message size that admits the largest page the
    producer sends, and for page topics (the firehose) their own retention."""
    configs = {"max.message.bytes": str(settings.get_int("KAFKA_PRODUCER_MAX_REQUEST_SIZE") + MESSAGE_OVERHEAD)}
    suffix = topic.removeprefix(f"{settings.get_str('KAFKA_TOPIC_PREFIX')}.")
    if suffix.startswith(PAGE_TOPICS):
        configs["retention.ms"] = str(settings.get_int("KAFKA_FIREHOSE_RETENTION_MS"))
        configs["retention.bytes"] = str(settings.get_int("KAFKA_FIREHOSE_RETENTION_BYTES"))
    return configs


def kafka_admin(settings: Settings) -> KafkaAdminClient:
    """An admin client (topic creation) with the same address and security as the others."""
    config = kafka_admin_config(settings)
    return _connected(settings, "admin client", lambda: KafkaAdminClient(**config))


def kafka_admin_config(settings: Settings) -> dict[str, Any]:
    """kafka_admin's configuration (its timeout is docs/reference/timeouts.md's table)."""
    config = {"bootstrap_servers": settings.get_list("KAFKA_HOSTS"), "request_timeout_ms": 10000}
    return {**config, **kafka_security(settings)}


def ensure_topics(settings: Settings, topics: list[str], partitions: int | None = None) -> None:
    """Create the topics that are missing: KAFKA_TOPIC_PARTITIONS partitions, replication factor
    KAFKA_TOPIC_REPLICATION_FACTOR and topic_configs(). Existing topics are left as they are."""
    count = partitions or settings.get_int("KAFKA_TOPIC_PARTITIONS")
    replicas = settings.get_int("KAFKA_TOPIC_REPLICATION_FACTOR")
    admin = kafka_admin(settings)
    try:
        existing = set(admin.list_topics())
        missing = [
            NewTopic(t, num_partitions=count, replication_factor=replicas, topic_configs=topic_configs(settings, t))
            for t in topics
            if t not in existing
        ]
        if missing:
            try:
                admin.create_topics(missing)
                log.info(
                    "Created topics",
                    extra={"topics": [t.name for t in missing], "partitions": count, "replication_factor": replicas},
                )
            except TopicAlreadyExistsError:
                pass  # another process created them first
            _await_leaders(admin, [t.name for t in missing])
    finally:
        admin.close()


def _await_leaders(admin: KafkaAdminClient, topics: list[str], timeout: float = TOPIC_READY_TIMEOUT) -> None:
    """Return once the broker's metadata shows every partition of `topics` with a leader. Apache
    Kafka answers a moment after CreateTopics with the topic but no partitions; a consumer group
    joined from such metadata is assigned nothing until a later rebalance."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            described = admin.describe_topics(topics)
        except KafkaError:
            described = []
        if len(described) == len(topics) and all(_led(topic) for topic in described):
            return
        time.sleep(0.05)
    log.warning("Created topics have no leader yet; going on", extra={"topics": topics, "waited_s": timeout})


def _led(topic: dict[str, Any]) -> bool:
    partitions = topic.get("partitions") or []
    leaders = [p.get("leader_id", p.get("leader", -1)) for p in partitions]
    return not topic.get("error_code") and bool(leaders) and all((leader or 0) >= 0 for leader in leaders)


def zookeeper_client(settings: Settings) -> KazooClient:
    """An unstarted kazoo client; callers start it (and may run without it when it fails).

    With ZOOKEEPER_AUTH (`user:password`) the client authenticates with ZooKeeper's digest scheme and
    every node it creates gets an ACL for that user alone: nobody else reads or rewrites the throttle
    config (an open node let anyone on the network blacklist or unthrottle domains).
    """
    auth = settings.get_str("ZOOKEEPER_AUTH")
    secured: dict[str, Any] = {}
    if auth:
        user, _, password = auth.partition(":")
        if not user or not password:
            raise ConfigError("ZOOKEEPER_AUTH must be user:password")
        secured = {"auth_data": [("digest", auth)], "default_acl": [make_digest_acl(user, password, all=True)]}
    return KazooClient(
        hosts=settings.get_str("ZOOKEEPER_HOSTS"),
        timeout=settings.get_float("ZOOKEEPER_TIMEOUT"),
        connection_retry={"max_tries": -1, "max_delay": 5.0},
        **secured,
    )
