"""The revisit loop: claim due rows (revisit/claims.py), send them as crawl requests, repeat.

Requests go through `<prefix>.incoming` like any client's, so the kafka monitor applies every rule
(schema, address policy, blacklist); `refetch` takes them past the dupefilter and the page limit.
A batch is sent and flushed before the next claim; rows whose send failed are released at once.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import psycopg
import ujson
from kafka import KafkaProducer
from kafka.errors import KafkaError

from revisit.claims import Connection, Due, claim, release
from revisit.requests import crawl_request
from utils.config.clients import kafka_producer
from utils.config.postgres import close_quietly, operation_deadline, postgres_conninfo, postgres_target
from utils.config.settings import Settings
from utils.freshness import state
from utils.observability.metrics import mark_loop, record_produced, set_dependency_up

log = logging.getLogger(__name__)

SEND_TIMEOUT = 30.0  # seconds a batch of requests may take to be confirmed by Kafka


class Revisit:
    def __init__(self, settings: Settings, producer: KafkaProducer, conninfo: str) -> None:
        self.producer = producer
        self.conninfo = conninfo
        self.schema = settings.get_str("SINK_DB_SCHEMA")
        self.topic = settings.incoming_topic
        self.batch = max(settings.get_int("REVISIT_BATCH"), 1)
        self.lease = settings.get_float("REVISIT_LEASE")
        self.poll = settings.get_float("REVISIT_POLL")
        self.priority_drop = settings.get_int("REVISIT_PRIORITY_DROP")
        self.target = postgres_target(settings)
        self.operation_timeout = settings.get_float("SINK_POSTGRES_OPERATION_TIMEOUT")
        self.connection: Connection | None = None
        self.fed = 0  # requests sent since start
        self._waiting_for_tables = False

    @classmethod
    def from_settings(cls, settings: Settings) -> Revisit:
        return cls(settings, kafka_producer(settings), postgres_conninfo(settings))

    def connect(self) -> Connection:
        if self.connection is None or self.connection.closed:
            self.connection = psycopg.connect(self.conninfo, autocommit=True)
            with operation_deadline(self.connection, self.operation_timeout):
                self.connection.execute("SET TIME ZONE 'UTC'")
        return self.connection

    def run_once(self, max_items: int | None = None) -> int:
        """Claim and send one batch; returns the requests sent (0: nothing was due)."""
        mark_loop()
        connection = self.connect()
        with operation_deadline(connection, self.operation_timeout):
            rows = claim(connection, self.schema, min(max_items or self.batch, self.batch), self.lease)
        if not rows:
            return 0
        try:
            self._send(rows)
        except KafkaError:
            with operation_deadline(connection, self.operation_timeout):
                release(connection, self.schema, rows)
            raise
        self.fed += len(rows)
        log.info("Revisits fed", extra={"requests": len(rows), "topic": self.topic})
        return len(rows)

    def _send(self, rows: list[Due]) -> None:
        futures = [self.producer.send(self.topic, ujson.dumps(crawl_request(row, self.priority_drop)).encode())
                   for row in rows]  # fmt: skip
        self.producer.flush(timeout=SEND_TIMEOUT)
        for future in futures:
            future.get(timeout=0)
        record_produced(self.topic, n=len(futures))

    def run(self, stop: threading.Event) -> None:
        """Feed until `stop`; PostgreSQL or Kafka down: logged, retried after REVISIT_POLL."""
        log.info("Revisit started", extra={"postgres": self.target, "topic": self.topic})
        while not stop.is_set():
            try:
                sent = self.run_once()
                set_dependency_up("postgres", True)
            except psycopg.errors.UndefinedTable:  # no sink has migrated the schema yet: wait, quietly
                if not self._waiting_for_tables:
                    log.info("Waiting for the sink to create its tables", extra={"schema": self.schema})
                self._waiting_for_tables = True
                sent = 0
            except psycopg.Error as exc:
                log.error("PostgreSQL unavailable; retrying", extra={"error": str(exc).strip()[:300]})
                set_dependency_up("postgres", False)
                self.close_connection()
                sent = 0
            except KafkaError as exc:
                log.error("Kafka error; the claimed revisits were released", extra={"error": repr(exc)})
                set_dependency_up("kafka", False)
                sent = 0
            if sent == 0:
                stop.wait(self.poll)
        self.close()

    def summaries(self) -> list[dict[str, Any]]:
        """Every crawl's figures (for the metrics), on a connection of their own (scrapes run in a thread)."""
        with psycopg.connect(self.conninfo, autocommit=True) as connection, \
                operation_deadline(connection, self.operation_timeout):
            return [state.summary(connection, self.schema, a, c) for a, c in state.crawls(connection, self.schema)]

    def close_connection(self) -> None:
        close_quietly(self.connection)
        self.connection = None

    def close(self) -> None:
        self.producer.flush(timeout=10)
        self.producer.close(timeout=10)
        self.close_connection()
        log.info("Revisit stopped", extra={"fed": self.fed})
