"""`shoal service <name>`: become one local service, as supervisord's program for it.

The process execs the service (no child, no pid file) so that supervisord's signals, exit status
and pid are the service's own; the port is resolved from the settings exactly as `shoal up` does.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from utils.config.errors import ConfigError
from utils.config.postgres import postgres_password
from utils.config.settings import Settings
from utils.node.data_dirs import service_data_dir
from utils.node.layout import resolve_layout
from utils.services.argv import service_argv
from utils.services.postgres import postgres_argv


def service_command(settings: Settings, args: argparse.Namespace) -> int:
    """Exec service `args.name` on its configured port with data where utils/node/data_dirs.py says.

    Returns only on failure: 2 for bad settings, 1 when its command line cannot be built, 127 when
    the program cannot be executed.
    """
    try:
        layout = resolve_layout(settings, args.node)
    except ConfigError as exc:
        print(f"shoal service: {exc}", file=sys.stderr)
        return 2
    try:
        data_dir = service_data_dir(layout, args.name, Path(settings.get_str("SERVICE_DATA_ROOT")))
        data_dir.mkdir(parents=True, exist_ok=True)
        if args.name == "postgres":  # initdb on first start; the password the sink will log in with
            argv = postgres_argv(layout.port("postgres"), data_dir, postgres_password(settings))
        else:
            argv = service_argv(args.name, layout.port(args.name), data_dir, settings.get_str("LOCAL_KAFKA"),
                                settings.get_str("LOCAL_REDIS_MAXMEMORY"))  # fmt: skip
    except (OSError, RuntimeError, ValueError, ConfigError, subprocess.SubprocessError) as exc:  # jars not cached
        print(f"shoal service {args.name}: {exc}", file=sys.stderr)
        return 1
    print(f"shoal service {args.name}: exec {' '.join(argv)}", flush=True)
    sys.stderr.flush()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"shoal service {args.name}: cannot run {argv[0]}: {exc}", file=sys.stderr)
    return 127
