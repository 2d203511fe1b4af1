"""dockerd's settings that the audit reads, mapped once: the fact each becomes
(``docker.<fact>``), its key in daemon.json (dockerd's command-line flag has the same name) and
dockerd's default. The docker collectors read daemon.json and dockerd's flags by these keys,
and the DOC-* checks fall back to them when the daemon itself did not answer.

The docker_host role writes the same keys (``roles/docker_host/templates/daemon.json.j2``).
"""

from __future__ import annotations

from typing import NamedTuple


class DaemonSetting(NamedTuple):
    fact: str
    """The fact under ``docker.``."""
    key: str
    """The daemon.json key, and dockerd's flag (``--<key>``)."""
    default: bool | str
    """What dockerd does when neither daemon.json nor a flag sets it."""


NO_NEW_PRIVILEGES = DaemonSetting("no_new_privileges", "no-new-privileges", False)
LIVE_RESTORE = DaemonSetting("live_restore", "live-restore", False)
ICC = DaemonSetting("icc", "icc", True)
USERLAND_PROXY = DaemonSetting("userland_proxy", "userland-proxy", True)
BOOL_SETTINGS = (NO_NEW_PRIVILEGES, LIVE_RESTORE, ICC, USERLAND_PROXY)
"""The on/off settings, read alike from daemon.json and from dockerd's flags."""

USERNS_REMAP = DaemonSetting("userns_remap", "userns-remap", "")
DEFAULT_RUNTIME = DaemonSetting("default_runtime", "default-runtime", "runc")
DATA_ROOT = DaemonSetting("data_root", "data-root", "/var/lib/docker")
DATA_ROOT_KEYS = (DATA_ROOT.key, "graph")
"""Where dockerd's data root is set: ``graph`` is its name before Docker 17.05."""
