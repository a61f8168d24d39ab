"""Everything one gateway process holds: clients, the outbound consumer, streams, samplers."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rest.alerting import Alerts, KafkaFigures
from rest.health import Health, Housekeeper
from rest.outbound import Outbound
from rest.pages import PageHub
from rest.sampler import Sampler
from utils.apps.api_keys import KeyChecker
from utils.apps.gate import QuotaGate
from utils.config.clients import RedisClient, redis_client
from utils.config.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Gateway:
    settings: Settings
    redis: RedisClient
    outbound: Outbound
    pages: PageHub
    health: Health
    sampler: Sampler
    housekeeper: Housekeeper
    alerts: Alerts  # the dashboard's alert conditions, held since when (issue 33)
    alert_figures: KafkaFigures
    keys: KeyChecker  # the API keys per app
    gate: QuotaGate  # /feed's early quota answer (the kafka monitor checks again)

    @classmethod
    def from_settings(cls, settings: Settings) -> Gateway:
        redis = redis_client(settings, decode=True)
        outbound = Outbound(settings, redis)
        health = Health(settings, redis, outbound)
        sampler = Sampler(settings, redis)
        outbound.on_ready = health.probe  # GREEN as soon as Kafka is there, not at the next probe

        def probe_and_beat() -> None:
            health.probe()
            health.beat()

        def sample() -> None:
            if health.redis_connected:
                sampler.sample()

        housekeeper = Housekeeper(
            [
                (settings.get_float("REST_HEARTBEAT_INTERVAL"), probe_and_beat),
                (settings.get_float("REST_SAMPLE_INTERVAL"), sample),
            ]
        )
        alerts, figures = Alerts.from_settings(settings)
        return cls(settings, redis, outbound, PageHub(settings), health, sampler, housekeeper, alerts, figures,
                   KeyChecker(redis), QuotaGate(redis))  # fmt: skip

    def start(self) -> None:
        self.outbound.start()
        self.housekeeper.start()
        log.info("REST gateway started", extra={"my_id": self.health.my_id, "port": self.settings.get_int("REST_PORT")})

    def close(self) -> None:
        log.info("Closing Rest Service", extra={"my_id": self.health.my_id})
        self.housekeeper.close()
        self.pages.close()
        self.outbound.close()
        self.alert_figures.close()
        self.redis.close()
