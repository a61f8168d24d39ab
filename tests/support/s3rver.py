"""s3rver (npm, services/s3rver/package.json), a real S3-compatible server, on a loopback port.

`make install-test` installs it into services/s3rver/node_modules; the launcher runs the same `npm ci`
when it is missing, so a test never skips for want of it. s3rver has one account (S3RVER / S3RVER):
another access key id is refused (InvalidAccessKeyId) as AWS refuses it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.cluster import REPO
from utils.services import free_port
from utils.services.process import LocalService

HOME = REPO / "services" / "s3rver"
KEY_ID = SECRET = "S3RVER"  # s3rver's account


def binary() -> Path:
    script = HOME / "node_modules" / ".bin" / "s3rver"
    if not script.exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=HOME, check=True,
                       timeout=600)  # fmt: skip
    return script


def _answers(host: str, port: int) -> bool:
    import httpx

    try:
        return httpx.get(f"http://{host}:{port}/", timeout=1).status_code < 500
    except httpx.HTTPError:
        return False


def s3rver(data_dir: Path, bucket: str, port: int | None = None) -> LocalService:
    """An s3rver (not yet started) serving `bucket` from `data_dir` on `port` (a free one by default)."""
    port = port or free_port()
    argv = [str(binary()), "-d", str(data_dir / "data"), "-a", "127.0.0.1", "-p", str(port),
            "--configure-bucket", bucket]  # fmt: skip
    return LocalService("s3rver", argv, port, data_dir / "s3rver.log", data_dir, _answers)
