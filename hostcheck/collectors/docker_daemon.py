"""The Docker daemon's security-relevant settings, from its API or, failing that, daemon.json."""

from __future__ import annotations

import errno
import json
import os
from typing import Any

from hostcheck.collectors._proc import host_processes
from hostcheck.collectors._run import read_text
from hostcheck.facts import Unknown

SECTION = "docker"
TIMEOUT = 3.0

DEFAULT_SOCKET = "/var/run/docker.sock"
DAEMON_JSON = "/etc/docker/daemon.json"
API_TIMEOUT_S = 1.0
DEFAULT_DATA_ROOT = "/var/lib/docker"

# Settings and their dockerd defaults, as named in daemon.json and on dockerd's command line.
BOOL_SETTINGS: dict[str, tuple[str, bool]] = {
    "no_new_privileges": ("no-new-privileges", False),
    "live_restore": ("live-restore", False),
    "icc": ("icc", True),
    "userland_proxy": ("userland-proxy", True),
}


def _causes(exc: BaseException) -> list[BaseException]:
    """Every exception reachable from ``exc``: causes, contexts, wrapped args, urllib3 reasons."""
    seen: list[BaseException] = []
    stack: list[Any] = [exc]
    while stack and len(seen) < 64:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
            continue
        if not isinstance(item, BaseException) or any(item is s for s in seen):
            continue
        seen.append(item)
        stack.extend([item.__cause__, item.__context__, getattr(item, "reason", None)])
        stack.extend(item.args)
    return seen


def classify_error(exc: BaseException) -> str:
    """Why the daemon could not be reached: absent | permission_denied | not_running | text."""
    chain = _causes(exc)
    codes = {c.errno for c in chain if isinstance(c, OSError)}
    if any(isinstance(c, PermissionError) for c in chain) or codes & {errno.EACCES, errno.EPERM}:
        return "permission_denied"
    if any(isinstance(c, ConnectionRefusedError) for c in chain) or errno.ECONNREFUSED in codes:
        return "not_running"
    if any(isinstance(c, FileNotFoundError) for c in chain) or errno.ENOENT in codes:
        return "absent"
    text = str(exc).strip() or type(exc).__name__
    return f"error: {text[:300]}"


def parse_security_options(options: Any) -> dict[str, bool]:
    """Names from info()["SecurityOptions"] (e.g. "name=seccomp,profile=builtin")."""
    names: set[str] = set()
    if isinstance(options, list):
        for item in options:
            if not isinstance(item, str):
                continue
            for part in item.split(","):
                key, _, value = part.partition("=")
                if key == "name":
                    names.add(value)
            if "=" not in item:
                names.add(item)  # very old daemons printed bare names
    return {
        "userns_remap": "userns" in names,
        "rootless": "rootless" in names,
        "seccomp": "seccomp" in names,
        "apparmor": "apparmor" in names,
        "no_new_privileges": "no-new-privileges" in names,
    }


def published_ports(containers: Any) -> list[dict[str, Any]]:
    """Host ports published by running containers, from GET /containers/json."""
    ports: list[dict[str, Any]] = []
    if not isinstance(containers, list):
        return ports
    for c in containers:
        if not isinstance(c, dict):
            continue
        names = c.get("Names")
        name = str(names[0]).lstrip("/") if isinstance(names, list) and names else str(c.get("Id", ""))[:12]
        entries = c.get("Ports")
        for p in entries if isinstance(entries, list) else []:
            if isinstance(p, dict) and p.get("PublicPort"):
                ports.append(
                    {"container": name, "host_ip": p.get("IP", ""), "host_port": p["PublicPort"],
                     "proto": p.get("Type", "tcp")}
                )
    return ports


def _owned_by_root(pid: int) -> bool:
    """Any user can name a process "dockerd"; only root can run one as root."""
    try:
        return os.stat(f"/proc/{pid}").st_uid == 0
    except OSError:
        return False


def dockerd_flags() -> dict[str, str] | None:
    """--option=value flags of a running root dockerd (its cmdline is world-readable); None if none runs."""
    for pid, comm in host_processes():
        if comm != "dockerd" or not _owned_by_root(pid):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().decode("utf-8", "replace").split("\0")
        except OSError:
            continue
        flags: dict[str, str] = {}
        for arg in argv[1:]:
            if arg.startswith("--"):
                key, sep, value = arg[2:].partition("=")
                flags[key] = value if sep else "true"
        return flags
    return None


# The daemon.json keys the checks read, and how each is kept. Nothing else is collected:
# the file also holds proxy URLs with passwords, registry mirrors with tokens, TLS paths
# and "hosts", none of which belongs in facts made for sharing.
DAEMON_JSON_BOOLS = ("no-new-privileges", "live-restore", "icc", "userland-proxy")
DAEMON_JSON_STRINGS = ("data-root", "graph", "default-runtime", "userns-remap")
MAX_DAEMON_JSON_BYTES = 1 << 20


def filter_daemon_json(data: dict[str, Any]) -> dict[str, Any]:
    """Only the settings the checks need; runtimes by name only (their paths and args are not needed)."""
    kept: dict[str, Any] = {}
    for key in DAEMON_JSON_BOOLS:
        value = _as_bool(data.get(key))
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


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "false", "0"):
        return value.lower() in ("true", "1")
    return None


def settings_from_config(config: dict[str, Any], flags: dict[str, str]) -> dict[str, Any]:
    """Daemon settings from daemon.json and dockerd flags, dockerd's defaults for the rest.

    dockerd refuses to start when a flag and daemon.json disagree, so either source is final.
    """
    out: dict[str, Any] = {}
    for fact, (key, default) in BOOL_SETTINGS.items():
        value = _as_bool(flags.get(key, config.get(key)))
        out[fact] = default if value is None else value
    root = flags.get("data-root") or config.get("data-root") or config.get("graph")
    out["data_root"] = root if isinstance(root, str) and root else DEFAULT_DATA_ROOT
    extra = config.get("runtimes")
    runtimes = sorted({"runc", *(str(k) for k in extra)}) if isinstance(extra, dict) else ["runc"]
    out["runtimes"] = runtimes
    default_runtime = flags.get("default-runtime") or config.get("default-runtime")
    out["default_runtime"] = str(default_runtime) if default_runtime else "runc"
    out["nvidia_runtime"] = "nvidia" in runtimes
    out["userns_remap"] = bool(flags.get("userns-remap") or config.get("userns-remap"))
    return out


def _from_api(client: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"reachable": True, "unreachable_reason": None}
    try:
        facts["version"] = str(client.version().get("Version", Unknown("daemon did not report a version")))
    except Exception as exc:  # the daemon answered once; a later failure is only this fact's
        facts["version"] = Unknown(f"GET /version failed: {exc}")
    try:
        info = client.info()
    except Exception as exc:
        info = Unknown(f"GET /info failed: {exc}")
    if isinstance(info, dict):
        runtimes = info.get("Runtimes") or {}
        facts["runtimes"] = sorted(runtimes) if isinstance(runtimes, dict) else []
        facts["default_runtime"] = info.get("DefaultRuntime", Unknown("not in GET /info"))
        facts["nvidia_runtime"] = "nvidia" in facts["runtimes"]
        facts.update(parse_security_options(info.get("SecurityOptions")))
        facts["live_restore"] = bool(info.get("LiveRestoreEnabled", False))
        facts["data_root"] = info.get("DockerRootDir", Unknown("not in GET /info"))
    else:
        for key in ("runtimes", "default_runtime", "nvidia_runtime", "userns_remap", "rootless",
                    "seccomp", "apparmor", "no_new_privileges", "live_restore", "data_root"):
            facts[key] = info
    try:
        facts["published_ports"] = published_ports(client.containers())
    except Exception as exc:
        facts["published_ports"] = Unknown(f"GET /containers/json failed: {exc}")
    return facts


def _connect_and_collect() -> dict[str, Any]:
    if not os.environ.get("DOCKER_HOST") and not os.path.lexists(DEFAULT_SOCKET):
        return {"reachable": False, "unreachable_reason": "absent"}
    try:
        import docker.utils  # deferred: importing the SDK is slow and only needed here
    except ImportError as exc:
        why = Unknown(f"the docker Python SDK is not installed: {exc}")
        return {"reachable": why, "unreachable_reason": why}
    try:
        params = docker.utils.kwargs_from_env()
        params.setdefault("base_url", f"unix://{DEFAULT_SOCKET}")
        # version=None makes the client ask the daemon at once: this is the reachability probe.
        client = docker.APIClient(timeout=API_TIMEOUT_S, version=None, **params)  # type: ignore[arg-type]  # a float is fine; the stubs say int
    except Exception as exc:  # the SDK's errors wrap the OS error we classify
        return {"reachable": False, "unreachable_reason": classify_error(exc)}
    try:
        return _from_api(client)
    finally:
        client.close()


def _is_missing(path: str) -> bool:
    """True only when the file is known not to exist (an untraversable /etc/docker is not "missing")."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


ALL_KEYS = ("version", "runtimes", "default_runtime", "nvidia_runtime", "userns_remap",
            "rootless", "seccomp", "apparmor", "no_new_privileges", "live_restore", "icc",
            "userland_proxy", "data_root", "published_ports")


def _network_docker_host() -> bool:
    """DOCKER_HOST names a daemon reached over the network (tcp://, ssh://), not a local socket."""
    host = os.environ.get("DOCKER_HOST", "")
    return bool(host) and not host.startswith(("unix://", "npipe://", "fd://"))


def collect(ctx: Any) -> dict[str, Any]:
    daemon_json = read_daemon_json()
    running_flags = dockerd_flags()
    flags = running_flags or {}
    if getattr(ctx, "offline", False) and _network_docker_host():
        why = Unknown("not contacted: --offline, and DOCKER_HOST names a daemon on the network")
        facts: dict[str, Any] = {"reachable": why, "unreachable_reason": why}
    else:
        facts = _connect_and_collect()
    json_missing = isinstance(daemon_json, Unknown) and _is_missing(DAEMON_JSON)
    if facts.get("reachable") is True:
        # The API does not report these; daemon.json / dockerd flags do (no file = defaults).
        if isinstance(daemon_json, dict) or json_missing:
            config = settings_from_config(daemon_json if isinstance(daemon_json, dict) else {}, flags)
            facts["icc"], facts["userland_proxy"] = config["icc"], config["userland_proxy"]
            facts["no_new_privileges"] = facts.get("no_new_privileges") is True or config["no_new_privileges"]
        elif isinstance(daemon_json, Unknown):
            for fact in ("icc", "userland_proxy", "no_new_privileges"):
                flag = _as_bool(flags.get(BOOL_SETTINGS[fact][0]))
                if facts.get(fact) is True:
                    continue  # the daemon itself reported it
                facts[fact] = flag if flag is not None else Unknown(
                    f"not reported by the API and {daemon_json.reason}")
        return facts

    reason = facts["unreachable_reason"]
    reason = reason.reason if isinstance(reason, Unknown) else reason
    facts["daemon_json"] = daemon_json
    if isinstance(daemon_json, dict):
        derived = settings_from_config(daemon_json, flags)
    elif json_missing and running_flags is not None:
        derived = settings_from_config({}, flags)  # a running dockerd without daemon.json: flags + defaults
    else:
        derived = {}
    for key in ALL_KEYS:
        if key in derived:
            facts[key] = derived[key]
        else:
            facts[key] = Unknown(f"docker daemon not reachable ({reason})")
    return facts
