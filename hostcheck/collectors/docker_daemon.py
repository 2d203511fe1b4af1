"""The Docker daemon's security-relevant settings, from its API or, failing that, its configuration
(daemon.json and dockerd's flags, read by :mod:`hostcheck.collectors.docker_config`)."""

from __future__ import annotations

import errno
import os
from typing import Any

from hostcheck.collectors.docker_config import (
    DEFAULT_DATA_ROOT,
    as_bool,
    data_root,
    effective_data_root,
    read_daemon_config,
)
from hostcheck.facts import Unknown
from hostcheck.knowledge.docker_settings import (
    BOOL_SETTINGS,
    DEFAULT_RUNTIME,
    ICC,
    NO_NEW_PRIVILEGES,
    USERLAND_PROXY,
    USERNS_REMAP,
)

SECTION = "docker"
TIMEOUT = 3.0

DEFAULT_SOCKET = "/var/run/docker.sock"
API_TIMEOUT_S = 1.0

NOT_IN_API = (ICC, USERLAND_PROXY, NO_NEW_PRIVILEGES)
"""Settings GET /info does not report (no-new-privileges only when it is on): read from
daemon.json and dockerd's flags even when the daemon answers."""


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


MAX_CONTAINERS = 200
# Host paths whose bind mount hands a container the host: its root, the kernel's and devices'
# interfaces, its configuration and home directories, an engine's socket, and the engine's data
# (every other container's files). A bind of a directory above one of them hands it over too:
# /run and /var/run hold docker.sock, /var holds /var/lib/docker.
HOST_CONTROL_PATHS = ("/", "/proc", "/sys", "/dev", "/etc", "/root", "/home", "/run", "/var/run",
                      "/var/lib/docker", "/var/run/docker.sock", "/run/docker.sock",
                      "/run/containerd/containerd.sock", "/var/run/containerd/containerd.sock",
                      "/run/podman/podman.sock")
# --network container:X chains end here: X is itself inspected, and so on.
MAX_NETWORK_HOPS = 5


def _above_or_at(path: str, sensitive: str) -> bool:
    return sensitive == path or sensitive.startswith(path.rstrip("/") + "/")


def hands_over_host(source: str, extra: tuple[str, ...] = ()) -> bool:
    """Whether a bind of host path ``source`` is one of HOST_CONTROL_PATHS (or ``extra``, the
    engine's data root where it is not the default) or a directory above one, as written or
    once its symbolic links are resolved on this host."""
    if not source.startswith("/"):
        return False
    path = "/" + os.path.normpath(source).lstrip("/")
    try:
        resolved = os.path.realpath(path)
    except (OSError, ValueError):
        resolved = path
    return any(_above_or_at(p, sensitive) for p in {path, resolved} for sensitive in HOST_CONTROL_PATHS + extra)


def container_settings(inspected: Any, data_root: str | None = None) -> dict[str, Any] | None:
    """The host-level access of one container, from GET /containers/{id}/json: only the keys
    the isolation checks read (no environment, no command line, no labels). ``host_network``
    is filled in by :func:`running_containers`, which can look up the container whose network
    a ``container:`` network mode joins."""
    if not isinstance(inspected, dict):
        return None
    host = inspected.get("HostConfig")
    host = host if isinstance(host, dict) else {}
    mounts = inspected.get("Mounts")
    sources = sorted({"/" + os.path.normpath(m["Source"]).lstrip("/") for m in mounts if isinstance(m, dict)
                      and m.get("Type") == "bind" and isinstance(m.get("Source"), str) and m["Source"].startswith("/")}
                     if isinstance(mounts, list) else set())
    extra = (data_root,) if isinstance(data_root, str) and data_root.startswith("/") else ()
    name = str(inspected.get("Name") or inspected.get("Id", ""))[:128].lstrip("/")
    config = inspected.get("Config")
    image = config.get("Image") if isinstance(config, dict) else None
    mode = str(host.get("NetworkMode") or "default")[:128]
    return {
        "name": name,
        "image": str(image or "")[:256],
        "network_mode": mode,
        "host_network": mode == "host",
        "privileged": host.get("Privileged") is True,
        "pid_mode": str(host.get("PidMode") or "")[:128],
        "ipc_mode": str(host.get("IpcMode") or "")[:128],
        "host_mounts": [src for src in sources if hands_over_host(src, extra)],
    }


def _network_mode(inspected: Any) -> str | None:
    host = inspected.get("HostConfig") if isinstance(inspected, dict) else None
    mode = host.get("NetworkMode") if isinstance(host, dict) else None
    return mode if isinstance(mode, str) else None


def joined_host_network(mode: str, known: dict[str, str], inspect: Any) -> bool | Unknown:
    """Whether network mode ``mode`` ends on the host's network: "host", or "container:X" where
    X's own mode does. ``known`` maps the ids and names of containers already inspected to
    their mode; any other X is inspected through ``inspect`` (the API takes an id, a prefix of
    one or a name)."""
    for _hop in range(MAX_NETWORK_HOPS):
        if not mode.startswith("container:"):
            return mode == "host"
        target = mode.split(":", 1)[1]
        found = known.get(target) or next((m for ident, m in known.items() if len(target) >= 12
                                           and ident.startswith(target)), None)
        if found is None:
            try:
                found = _network_mode(inspect(target))
            except Exception as exc:
                return Unknown(f"the container whose network it joins ({target[:64]}) could not be inspected: {exc}")
            if found is None:
                return Unknown(f"the container whose network it joins ({target[:64]}) has no network mode")
            known[target] = found
        mode = found
    return Unknown(f"more than {MAX_NETWORK_HOPS} containers joined in a chain of container: network modes")


def running_containers(client: Any, data_root: str | None = None) -> list[dict[str, Any]] | Unknown:
    """Every running container's host-level access (the first MAX_CONTAINERS), read through
    the API: nothing runs inside a container."""
    try:
        listed = client.containers()
    except Exception as exc:
        return Unknown(f"GET /containers/json failed: {exc}")
    if not isinstance(listed, list):
        return Unknown("GET /containers/json did not return a list")
    out: list[dict[str, Any]] = []
    modes: dict[str, str] = {}
    for entry in listed[:MAX_CONTAINERS]:
        ident = entry.get("Id") if isinstance(entry, dict) else None
        if not isinstance(ident, str):
            continue
        try:
            inspected = client.inspect_container(ident)
        except Exception as exc:
            if "404" in str(exc) or "No such container" in str(exc):
                continue  # stopped and removed between the list and the inspect
            return Unknown(f"GET /containers/{ident[:12]}/json failed: {exc}")
        settings = container_settings(inspected, data_root)
        if settings is not None:
            out.append(settings)
            modes[ident] = modes[settings["name"]] = settings["network_mode"]
    for settings in out:
        settings["host_network"] = joined_host_network(settings["network_mode"], modes, client.inspect_container)
    return out


def settings_from_config(config: dict[str, Any], flags: dict[str, str]) -> dict[str, Any]:
    """Daemon settings from daemon.json and dockerd flags, dockerd's defaults for the rest.

    dockerd refuses to start when a flag and daemon.json disagree, so either source is final.
    """
    out: dict[str, Any] = {}
    for setting in BOOL_SETTINGS:
        value = as_bool(flags.get(setting.key, config.get(setting.key)))
        out[setting.fact] = setting.default if value is None else value
    root = effective_data_root(config, False, flags)
    out["data_root"] = root if isinstance(root, str) else DEFAULT_DATA_ROOT
    extra = config.get("runtimes")
    runtimes = sorted({"runc", *(str(k) for k in extra)}) if isinstance(extra, dict) else ["runc"]
    out["runtimes"] = runtimes
    default_runtime = flags.get(DEFAULT_RUNTIME.key) or config.get(DEFAULT_RUNTIME.key)
    out[DEFAULT_RUNTIME.fact] = str(default_runtime) if default_runtime else DEFAULT_RUNTIME.default
    out["nvidia_runtime"] = "nvidia" in runtimes
    out[USERNS_REMAP.fact] = bool(flags.get(USERNS_REMAP.key) or config.get(USERNS_REMAP.key))
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
    root = facts.get("data_root")
    facts["containers"] = running_containers(client, root if isinstance(root, str) else None)
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


ALL_KEYS = ("version", "runtimes", "default_runtime", "nvidia_runtime", "userns_remap",
            "rootless", "seccomp", "apparmor", "no_new_privileges", "live_restore", "icc",
            "userland_proxy", "data_root", "published_ports", "containers")


def _network_docker_host() -> bool:
    """DOCKER_HOST names a daemon reached over the network (tcp://, ssh://), not a local socket."""
    host = os.environ.get("DOCKER_HOST", "")
    return bool(host) and not host.startswith(("unix://", "npipe://", "fd://"))


def collect(ctx: Any) -> dict[str, Any]:
    config = read_daemon_config()
    daemon_json, json_missing = config.daemon_json, config.json_missing
    # Only a running daemon's flags are settings in force; the unit's decide the data root
    # (docker_config.data_root) but not what an absent daemon would enforce.
    flags = config.flags if config.running else {}
    if getattr(ctx, "offline", False) and _network_docker_host():
        why = Unknown("not contacted: --offline, and DOCKER_HOST names a daemon on the network")
        facts: dict[str, Any] = {"reachable": why, "unreachable_reason": why}
    else:
        facts = _connect_and_collect()
    if facts.get("reachable") is True:
        facts["data_root"] = data_root(config, api_root=facts.get("data_root"))
        # The API does not report these; daemon.json / dockerd flags do (no file = defaults).
        if isinstance(daemon_json, dict) or json_missing:
            settings = settings_from_config(daemon_json if isinstance(daemon_json, dict) else {}, flags)
            for setting in NOT_IN_API:
                facts[setting.fact] = facts.get(setting.fact) is True or settings[setting.fact]
        elif isinstance(daemon_json, Unknown):
            for setting in NOT_IN_API:
                flag = as_bool(flags.get(setting.key))
                if facts.get(setting.fact) is True:
                    continue  # the daemon itself reported it
                facts[setting.fact] = flag if flag is not None else Unknown(
                    f"not reported by the API and {daemon_json.reason}")
        return facts

    reason = facts["unreachable_reason"]
    reason = reason.reason if isinstance(reason, Unknown) else reason
    facts["daemon_json"] = daemon_json
    if isinstance(daemon_json, dict):
        derived = settings_from_config(daemon_json, flags)
    elif json_missing and config.running:
        derived = settings_from_config({}, flags)  # a running dockerd without daemon.json: flags + defaults
    else:
        derived = {}
    if "data_root" in derived:
        derived["data_root"] = data_root(config)
    for key in ALL_KEYS:
        if key in derived:
            facts[key] = derived[key]
        else:
            facts[key] = Unknown(f"docker daemon not reachable ({reason})")
    return facts
