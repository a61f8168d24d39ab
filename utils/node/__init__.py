"""The node manager behind `shoal up`, `down`, `status` and `service`: one supervisord per node.

`layout` says where a node lives and what it runs, `config` renders the repository's
`supervisord.conf` template, `control` talks to supervisord; one module per command.
May import: `utils.services`, `utils.frontier`, `utils.schemas`, `utils.observability`, `utils.config`.
"""

from __future__ import annotations

from utils.node.down import down_command
from utils.node.service import service_command
from utils.node.status import status_command
from utils.node.up import up_command

__all__ = ["down_command", "service_command", "status_command", "up_command"]
