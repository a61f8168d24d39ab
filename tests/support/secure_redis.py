"""A redis-server as managed Redis services run it: TLS only (client certificates required) and an
ACL user that may touch only Shoal's keys with no admin or dangerous commands.

Certificates (a CA, the server's for 127.22.0.30, a client's) are made with `cryptography`; the
server is Debian's redis-server (TLS since 6.0), on a free port, stopped by pid.
"""

from __future__ import annotations

import datetime
import ipaddress
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from utils.services import LocalService, ServiceError, free_ports

HOST = "127.22.0.30"
USER = "shoal"
ADMIN = "admin"
SERVER_NAME = "redis.shoal.test"  # also in the server certificate: REDIS_SSL_SERVER_NAME's tests
# Shoal's key space (docs/reference/redis-keys.md): the spiders' frontier keys, stats, jobs, timeouts, REST
# polls and the proxy pool. `link` and `wandering` are the spiders the project ships; on a Redis
# Cluster the frontier's keys start with their shard's hash tag (`{0.13}...`).
KEY_PATTERNS = ("link:*", "wandering:*", "stats:*", "shoal:*", "timeout:*", "rest:*", "proxy:*", "{*")
# Everything but the admin and dangerous groups; INFO back for the kafka monitor's memory check.
COMMANDS = ("+@all", "-@admin", "-@dangerous", "+info")


@dataclass(frozen=True)
class Tls:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_certificates(directory: Path, host: str = HOST) -> Tls:
    """A CA and the server's and a client's certificates signed by it (PEM files in `directory`)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Shoal test CA")])
    ca = _certificate(ca_name, ca_name, ca_key, ca_key, ca=True, san=None)
    paths = Tls(*(directory / name for name in ("ca.pem", "server.pem", "server.key", "client.pem", "client.key")))
    _write(paths.ca, ca.public_bytes(serialization.Encoding.PEM))
    server_san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(host)), x509.DNSName(SERVER_NAME)])
    for cert_path, key_path, name, san in (
        (paths.server_cert, paths.server_key, host, server_san),
        (paths.client_cert, paths.client_key, "shoal-client", None),
    ):  # fmt: skip
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        cert = _certificate(subject, ca_name, key, ca_key, ca=False, san=san)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        _write(key_path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    return paths


def _certificate(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey, signer: ec.EllipticCurvePrivateKey,
    ca: bool, san: x509.SubjectAlternativeName | None,
) -> x509.Certificate:  # fmt: skip
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )  # fmt: skip
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    return builder.sign(signer, hashes.SHA256())


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


@dataclass
class SecureRedis:
    """The running server, its certificates and the passwords of the Shoal user and the admin."""

    service: LocalService
    tls: Tls
    password: str
    admin_password: str

    @property
    def port(self) -> int:
        return self.service.port

    def settings(self, password_file: Path) -> dict[str, str]:
        """Shoal settings (SHOAL_* values) that reach this server as the restricted user."""
        password_file.write_text(self.password + "\n")
        password_file.chmod(0o600)
        return {
            "REDIS_HOST": HOST, "REDIS_PORT": str(self.port), "REDIS_DB": "0", "REDIS_USERNAME": USER,
            "REDIS_PASSWORD_FILE": str(password_file), "REDIS_SSL": "true", "REDIS_SSL_CA_FILE": str(self.tls.ca),
            "REDIS_SSL_CERTFILE": str(self.tls.client_cert), "REDIS_SSL_KEYFILE": str(self.tls.client_key),
        }  # fmt: skip

    def client(self, username: str = ADMIN, password: str | None = None, **tls: object) -> redis.Redis:
        settings = {"ssl_ca_certs": str(self.tls.ca), "ssl_certfile": str(self.tls.client_cert),
                    "ssl_keyfile": str(self.tls.client_key), **tls}  # fmt: skip
        return redis.Redis(host=HOST, port=self.port, ssl=True, username=username, socket_timeout=5,
                           password=self.admin_password if password is None else password, **settings)  # type: ignore[arg-type]  # fmt: skip


def start_secure_redis(run_dir: Path, password: str, admin_password: str) -> SecureRedis:
    """TLS on a free port of HOST (no plain port), `default` user off, USER limited to Shoal's keys."""
    tls = make_certificates(run_dir / "tls")
    return _start_node(run_dir, tls, password, admin_password, "secure-redis", cluster=False)


def start_secure_redis_cluster(
    run_dir: Path, password: str, admin_password: str, masters: int = 3
) -> list[SecureRedis]:
    """`masters` such servers joined as a Redis Cluster whose bus also speaks TLS (`tls-cluster`)."""
    tls = make_certificates(run_dir / "tls")
    nodes: list[SecureRedis] = []
    try:
        for index in range(masters):
            name = f"secure-cluster-{index}"
            nodes.append(_start_node(run_dir / name, tls, password, admin_password, name, cluster=True))
        argv = ["redis-cli", "--tls", "--cacert", str(tls.ca), "--cert", str(tls.client_cert), "--key",
                str(tls.client_key), "--user", ADMIN, "--pass", admin_password, "--no-auth-warning", "--cluster",
                "create", *(f"{HOST}:{n.port}" for n in nodes), "--cluster-replicas", "0", "--cluster-yes"]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
        if done.returncode != 0:
            raise ServiceError(f"redis-cli --cluster create exited {done.returncode}:\n{done.stdout}{done.stderr}")
        deadline = time.monotonic() + 30
        while not all(_cluster_ok(n) for n in nodes):
            if time.monotonic() > deadline:
                raise ServiceError("the secure Redis Cluster never reported cluster_state:ok")
            time.sleep(0.1)
    except BaseException:
        for node in nodes:
            node.service.stop()
        raise
    return nodes


def _cluster_ok(node: SecureRedis) -> bool:
    with node.client() as client:
        return bool(client.cluster("INFO").get("cluster_state") == "ok")


def _start_node(run_dir: Path, tls: Tls, password: str, admin_password: str, name: str, cluster: bool) -> SecureRedis:
    run_dir.mkdir(parents=True, exist_ok=True)
    port, bus = free_ports(2, HOST)
    lines = [
        "port 0", f"tls-port {port}", f"bind {HOST}", "daemonize no", "save \"\"", "appendonly no",
        f"dir {run_dir.absolute()}", f"tls-cert-file {tls.server_cert}", f"tls-key-file {tls.server_key}",
        f"tls-ca-cert-file {tls.ca}", "tls-auth-clients yes",
        "user default off",
        f"user {USER} on >{password} resetchannels {' '.join('~' + p for p in KEY_PATTERNS)} {' '.join(COMMANDS)}",
        f"user {ADMIN} on >{admin_password} ~* &* +@all",
    ]  # fmt: skip
    if cluster:
        lines += ["cluster-enabled yes", f"cluster-port {bus}", "tls-cluster yes", "cluster-config-file nodes.conf",
                  f"masteruser {ADMIN}", f"masterauth {admin_password}", f"cluster-announce-ip {HOST}"]  # fmt: skip
    config = run_dir / "redis.conf"
    config.write_text("\n".join(lines) + "\n")
    config.chmod(0o600)
    secure = SecureRedis(None, tls, password, admin_password)  # type: ignore[arg-type]

    def ready(_host: str, _port: int) -> bool:
        try:
            with secure.client() as probe:
                return bool(probe.ping())
        except redis.RedisError:
            return False

    secure.service = LocalService(name, ["redis-server", str(config)], port, run_dir / "redis.log", run_dir, ready,
                                  host=HOST)  # fmt: skip
    secure.service.start()
    secure.service.wait_ready(30)
    return secure
