"""Kafka security settings become the same client options for every producer, consumer and admin."""

from __future__ import annotations

from pathlib import Path

import pytest

from utils.config.clients import kafka_security
from utils.config.errors import ConfigError
from utils.config.settings import Settings


def _settings(**values: str) -> Settings:
    return Settings.load(environ={f"SHOAL_{name}": value for name, value in values.items()})


def test_plaintext_by_default() -> None:
    assert kafka_security(_settings()) == {"security_protocol": "PLAINTEXT"}


def test_sasl_ssl_with_scram_takes_the_password_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n", encoding="utf-8")

    config = kafka_security(_settings(
        KAFKA_SECURITY_PROTOCOL="sasl_ssl", KAFKA_SASL_MECHANISM="SCRAM-SHA-512", KAFKA_SASL_USERNAME="shoal",
        KAFKA_SASL_PASSWORD_FILE=str(secret), KAFKA_SSL_CAFILE="/ca.pem",
    ))  # fmt: skip

    assert config["security_protocol"] == "SASL_SSL"
    assert config["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (config["sasl_plain_username"], config["sasl_plain_password"]) == ("shoal", "s3cret")
    assert config["ssl_cafile"] == "/ca.pem"
    assert config["ssl_check_hostname"] is True


def test_a_password_in_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    config = kafka_security(_settings(
        KAFKA_SECURITY_PROTOCOL="SASL_PLAINTEXT", KAFKA_SASL_USERNAME="u", KAFKA_SASL_PASSWORD="from-env",
        KAFKA_SASL_PASSWORD_FILE=str(tmp_path / "absent"),
    ))  # fmt: skip

    assert config["sasl_plain_password"] == "from-env"
    assert "ssl_cafile" not in config


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"KAFKA_SECURITY_PROTOCOL": "TLS"}, "KAFKA_SECURITY_PROTOCOL"),
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "GSSAPI"}, "KAFKA_SASL_MECHANISM"),
        ({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_PASSWORD_FILE": "/nonexistent/pw"}, "_FILE"),
    ],
)
def test_bad_security_settings_are_a_config_error_naming_the_setting(values: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        kafka_security(_settings(**values))
