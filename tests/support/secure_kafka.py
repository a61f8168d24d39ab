"""Apache Kafka with a SASL_SSL listener for tests: a throwaway CA, a broker certificate for
127.0.0.1 and a SCRAM user, all made here (no files checked in, nothing fetched)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from utils.services import LocalService, free_ports
from utils.services.argv import HOST
from utils.services.kafka import kafka_argv
from utils.services.probes import broker_ready

MECHANISM = "SCRAM-SHA-256"
USER = "shoal"


@dataclass
class SecureKafka:
    """The started broker: its plain port (readiness only), the SASL_SSL address, CA and password."""

    service: LocalService
    secure_address: str
    ca_file: Path
    password: str

    def settings(self, password: str | None = None) -> dict[str, str]:
        """Shoal settings that reach the broker over SASL_SSL with SCRAM."""
        return {
            "KAFKA_HOSTS": self.secure_address,
            "KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "KAFKA_SASL_MECHANISM": MECHANISM,
            "KAFKA_SASL_USERNAME": USER,
            "KAFKA_SASL_PASSWORD": self.password if password is None else password,
            "KAFKA_SSL_CAFILE": str(self.ca_file),
        }


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_certificates(directory: Path) -> tuple[Path, Path]:
    """A CA (ca.pem) and a broker key+certificate for 127.0.0.1 signed by it (broker.pem)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder().subject_name(_name("shoal test CA")).issuer_name(_name("shoal test CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(_name(HOST)).issuer_name(ca.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    broker_file = directory / "broker.pem"
    pkcs8 = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    broker_file.write_bytes(pkcs8 + cert.public_bytes(serialization.Encoding.PEM))
    return ca_file, broker_file


def start_secure_kafka(run_dir: Path, password: str, timeout: float = 120) -> SecureKafka:
    """Apache Kafka with PLAINTEXT (for the readiness probe) and SASL_SSL/SCRAM listeners."""
    ca_file, broker_file = make_certificates(run_dir / "tls")
    port, secure_port = free_ports(2)
    extra = {
        "listeners": f"PLAINTEXT://{HOST}:{port},SASL_SSL://{HOST}:{secure_port},CONTROLLER://{HOST}:{{controller}}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port},SASL_SSL://{HOST}:{secure_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(broker_file),
    }  # fmt: skip
    controller = free_ports(1)[0]
    extra["listeners"] = extra["listeners"].replace("{controller}", str(controller))
    data_dir = run_dir / "kafka"
    argv = kafka_argv(
        HOST, port, data_dir, controller_port=controller, extra=extra,
        scram_users=[f"{MECHANISM}=[name={USER},password={password}]"],
    )  # fmt: skip
    service = LocalService(
        name="kafka-sasl-ssl", argv=argv, port=port, log_path=run_dir / "kafka.log", data_dir=data_dir,
        probe=broker_ready, host=HOST, pid_path=run_dir / "kafka.pid",
    )  # fmt: skip
    service.start()
    try:
        service.wait_ready(timeout)
    except BaseException:
        service.stop()
        raise
    return SecureKafka(service, f"{HOST}:{secure_port}", ca_file, password)
