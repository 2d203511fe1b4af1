"""Docker's configuration as dockerd itself would read it: daemon.json, dockerd's flags, and
the data root those settle.

The one reader of /etc/docker/daemon.json and of dockerd's command line, shared by the
docker and storage collectors, so that both describe the same daemon: a ``--data-root`` given
in the systemd unit's ExecStart moves the data root just as ``"data-root"`` in daemon.json
does.
"""

from __future__ import annotations

import glob
import json
import os
import shlex
from dataclasses import dataclass
from typing import Any

from hostcheck.collectors._proc import host_processes
from hostcheck.collectors._run import read_text
from hostcheck.facts import Unknown
from hostcheck.knowledge.docker_settings import BOOL_SETTINGS, DATA_ROOT, DATA_ROOT_KEYS, DEFAULT_RUNTIME, USERNS_REMAP

DAEMON_JSON = "/etc/docker/daemon.json"
DEFAULT_DATA_ROOT = str(DATA_ROOT.default)
MAX_DAEMON_JSON_BYTES = 1 << 20
MAX_UNIT_BYTES = 1 << 16
# Unit search path, highest priority first (systemd.unit(5)): a docker.service in /etc
# replaces the packaged one; drop-ins from all three apply, the first directory winning a name.
UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system")
UNIT = "docker.service"

# The daemon.json keys the checks read, and how each is kept. Nothing else is collected:
# the file also holds proxy URLs with passwords, registry mirrors with tokens, TLS paths
# and "hosts", none of which belongs in facts made for sharing.
DAEMON_JSON_BOOLS = tuple(setting.key for setting in BOOL_SETTINGS)
DAEMON_JSON_STRINGS = (*DATA_ROOT_KEYS, DEFAULT_RUNTIME.key, USERNS_REMAP.key)


def as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "false", "0"):
        return value.lower() in ("true", "1")
    return None


def filter_daemon_json(data: dict[str, Any]) -> dict[str, Any]:
    """Only the settings the checks need; runtimes by name only (their paths and args are not needed)."""
    kept: dict[str, Any] = {}
    for key in DAEMON_JSON_BOOLS:
        value = as_bool(data.get(key))
        if value is not None:
            kept[key] = value
    for key in DAEMON_JSON_STRINGS:
        value = data.get(key)
        if isinstance(value, str) and value and "://" not in value and "@" not in value:
            kept[key] = value[:4096]
    runtimes = data.get("runtimes")
    if isinstance(runtimes, dict):
        kept["runtimes"] = {str(name)[:256]: {} for name in runtimes if "://" not in str(name)}
    return kept


def read_daemon_json(path: str | None = None) -> dict[str, Any] | Unknown:
    path = path or DAEMON_JSON
    text = read_text(path, limit=MAX_DAEMON_JSON_BYTES)
    if isinstance(text, Unknown):
        return text
    try:
        data = json.loads(text) if text.strip() else {}
    except (json.JSONDecodeError, RecursionError, ValueError):
        # The parser's message quotes the offending text, which may be a secret.
        return Unknown(f"{path} is not valid JSON")
    if not isinstance(data, dict):
        return Unknown(f"{path} is not a JSON object")
    return filter_daemon_json(data)


def is_missing(path: str) -> bool:
    """True only when the file is known not to exist (an untraversable /etc/docker is not "missing")."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def parse_dockerd_argv(argv: list[str]) -> dict[str, str]:
    """Long options of a dockerd command line: ``--key=value``, ``--key value``, bare ``--flag``.

    dockerd takes no positional arguments, so a word after an option is that option's value.
    Short options (``-H fd://``) are skipped with their value.
    """
    flags: dict[str, str] = {}
    i = 1
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-") or arg in ("-", "--"):
            continue
        has_value = i < len(argv) and not argv[i].startswith("-")
        if not arg.startswith("--"):
            i += 1 if has_value and "=" not in arg and len(arg) == 2 else 0
            continue
        key, sep, value = arg[2:].partition("=")
        if sep:
            flags[key] = value
        elif has_value:
            flags[key] = argv[i]
            i += 1
        else:
            flags[key] = "true"
    return flags


def _owned_by_root(pid: int) -> bool:
    """Any user can name a process "dockerd"; only root can run one as root."""
    try:
        return os.stat(f"/proc/{pid}").st_uid == 0
    except OSError:
        return False


def dockerd_flags() -> dict[str, str] | None:
    """Flags of a running root dockerd (its cmdline is world-readable); None if none runs."""
    for pid, comm in host_processes():
        if comm != "dockerd" or not _owned_by_root(pid):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        return parse_dockerd_argv([a for a in argv if a])
    return None


def unit_exec_start(texts: list[str]) -> list[str] | None:
    """dockerd's argv from docker.service and its drop-ins, in the order systemd applies them.

    An empty ``ExecStart=`` clears the earlier ones (how drop-ins replace the command);
    the last one left is the daemon's. None when no ExecStart runs dockerd.
    """
    command: str | None = None
    for text in texts:
        section = ""
        for line in text.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
            elif section == "Service" and line.startswith("ExecStart="):
                command = line.partition("=")[2].strip() or None
    if command is None:
        return None
    try:
        argv = shlex.split(command.lstrip("-@:+!"))
    except ValueError:
        return None
    if not argv or os.path.basename(argv[0]) != "dockerd":
        return None
    return argv


def unit_texts(unit_dirs: tuple[str, ...] | None = None) -> list[str]:
    """docker.service (the highest-priority one) followed by its drop-ins, by file name."""
    dirs = unit_dirs or UNIT_DIRS
    texts: list[str] = []
    for d in dirs:
        text = read_text(os.path.join(d, UNIT), limit=MAX_UNIT_BYTES)
        if isinstance(text, str):
            texts.append(text)
            break
    dropins: dict[str, str] = {}
    for d in dirs:
        for path in glob.glob(os.path.join(d, UNIT + ".d", "*.conf")):
            dropins.setdefault(os.path.basename(path), path)
    for name in sorted(dropins):
        text = read_text(dropins[name], limit=MAX_UNIT_BYTES)
        if isinstance(text, str):
            texts.append(text)
    return texts


@dataclass(frozen=True)
class DaemonConfig:
    """What configures dockerd on this host, read once."""

    daemon_json: dict[str, Any] | Unknown
    json_missing: bool
    flags: dict[str, str]
    """dockerd's flags: the running daemon's, else those its systemd unit would start it with."""
    running: bool
    """A root dockerd runs (its flags are the live ones)."""


def read_daemon_config() -> DaemonConfig:
    daemon_json = read_daemon_json()
    running = dockerd_flags()
    if running is None:
        argv = unit_exec_start(unit_texts())
        flags = parse_dockerd_argv(argv) if argv else {}
    else:
        flags = running
    return DaemonConfig(daemon_json, isinstance(daemon_json, Unknown) and is_missing(DAEMON_JSON),
                        flags, running is not None)


def effective_data_root(
    daemon_json: dict[str, Any] | Unknown, json_missing: bool, flags: dict[str, str], api_root: Any = None
) -> str | Unknown:
    """Where dockerd keeps images and containers.

    The daemon's own answer (``docker info``'s DockerRootDir) when there is one; else what
    dockerd would decide: a ``--data-root`` flag, daemon.json's ``data-root`` (``graph``
    before Docker 17.05), dockerd's default. dockerd refuses to start when a flag and
    daemon.json disagree, so either is final.
    """
    if isinstance(api_root, str) and api_root.strip():
        return api_root.strip()
    for key in DATA_ROOT_KEYS:
        flag = flags.get(key, "").strip()
        if flag and flag != "true":
            return flag
    if isinstance(daemon_json, Unknown):
        return DEFAULT_DATA_ROOT if json_missing else daemon_json
    for key in DATA_ROOT_KEYS:
        value = daemon_json.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return DEFAULT_DATA_ROOT


def data_root(config: DaemonConfig, api_root: Any = None) -> str | Unknown:
    return effective_data_root(config.daemon_json, config.json_missing, config.flags, api_root)
