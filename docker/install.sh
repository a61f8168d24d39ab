#!/bin/sh
# Install Shoal from a source tree into a new virtual environment: the image's install step.
#
#   docker/install.sh VENV SOURCE      (PYTHON=python3 by default)
#
# docker/Dockerfile runs it in its build stage; tests/unit/test_docker_image.py runs the same script
# on a copy of exactly what the Dockerfile copies, so a missing file or dependency fails a test here
# rather than a `docker build` somewhere else. Nothing is installed editable: the image holds no source.
set -eu

if [ "$#" -ne 2 ]; then
    echo "usage: $0 VENV SOURCE" >&2
    exit 2
fi
venv="$1"
source_dir="$2"
python="${PYTHON:-python3}"

"$python" -m venv "$venv"
venv="$(cd "$venv" && pwd)"
# uv does the install (pip only installs uv): parallel fetches and a wheel cache, as `make install` does.
"$venv/bin/python" -m pip install --quiet 'uv==0.13.9'
UV_SYSTEM_CERTS=1 "$venv/bin/uv" pip install --quiet --compile-bytecode --python "$venv/bin/python" "$source_dir[s3]"  # warc may upload to S3
# Fail the build now if a package did not make it into the install (from /, not the source tree).
cd /
"$venv/bin/python" -c "import utils.cli.main, utils.observability.metrics, kafka_monitor.main, redis_monitor.main, rest.main, crawler.main, sink.main"
"$venv/bin/shoal" --help >/dev/null
