"""Collectors for isolation, docker, ssh, packages and the local network view.

Parsers are checked on canned inputs with exact expectations; the system-facing parts run
against real components built by the tests: unix sockets, a real HTTP server speaking the
Docker API, a real sshd -T, real nftables and interfaces inside a throwaway network
namespace, a real TCP listener, and real permission checks as the unprivileged user nobody.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import pickle
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.collectors import (
    CollectContext,
    _proc,
    accounts,
    docker_config,
    docker_daemon,
    network_local,
    packages,
    sshd,
)
from hostcheck.facts import Unknown, from_jsonable, to_jsonable
from hostcheck.firewall import ruleset, summary
from hostcheck.judge import run_check
from hostcheck.knowledge.netaddr import classify_address
from hostcheck.knowledge.routes import parse_proc_net_ipv6_route, parse_proc_net_route
from hostcheck.netprobe.gateway import default_gateway_v4

REPO = Path(__file__).resolve().parent.parent
IS_ROOT = os.geteuid() == 0
REGISTRY = load_registry()
NOBODY = 65534
root_only = pytest.mark.skipif(not IS_ROOT, reason="needs root (namespaces, mounts)")


def run_unprivileged(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` in a forked child that has dropped to uid/gid nobody (when root).

    The kernel's own permission checks then apply, exactly as for a non-root audit. The
    result (or the exception) comes back pickled through a pipe.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        status = 0
        try:
            os.close(read_fd)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setresgid(NOBODY, NOBODY, NOBODY)
                os.setresuid(NOBODY, NOBODY, NOBODY)
            try:
                payload = ("ok", fn(*args))
            except BaseException as exc:  # reported to the parent, which fails the test
                payload = ("raised", f"{type(exc).__name__}: {exc}")
            with os.fdopen(write_fd, "wb") as out:
                pickle.dump(payload, out)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as inp:
        data = inp.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0 and data, "unprivileged child failed to report"
    kind, value = pickle.loads(data)
    assert kind == "ok", f"unprivileged child raised {value}"
    return value


@pytest.fixture
def world_tmp() -> Iterator[Path]:
    """A temp dir nobody can traverse into (pytest's own tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="hc-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def process_named(directory: Path, name: str, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """A real process whose /proc/PID/comm is ``name`` (a copy of sh that sleeps)."""
    binary = directory / name
    shutil.copy2(shutil.which("sh") or "/bin/sh", binary)
    # "; :" keeps sh alive as the parent instead of exec'ing sleep in its place.
    proc = subprocess.Popen([str(binary), "-c", "sleep 60; :", name, *args], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if Path(f"/proc/{proc.pid}/comm").read_text().strip() == name:
                    break
            time.sleep(0.02)
        yield proc
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # its own group: sh and the sleep it started
        proc.wait(timeout=10)


def assert_jsonable(facts: dict[str, Any]) -> None:
    json.dumps(to_jsonable(facts))


# ============================================================ accounts / isolation

PASSWD = textwrap.dedent("""\
    root:x:0:0:root:/root:/bin/bash
    daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
    alice:x:1000:1000:Alice,,,:/home/alice:/bin/bash
    bob:x:1001:999::/home/bob:/usr/bin/zsh
    svc:x:1002:1002::/srv/svc:/usr/sbin/nologin
    ci:x:1003:1003::/home/ci:/bin/false
    nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
    weird:x:notanumber:1:::/bin/sh
    short:x:1004
    +@netgroup::::::
    carol:x:2000:2000::/home/carol:/bin/sh
    """)

GROUP = textwrap.dedent("""\
    root:x:0:
    sudo:x:27:alice
    wheel:x:10:carol,
    docker:x:999:alice
    admin:x:115:
    alice:x:1000:
    broken:x:zz:alice
    """)


def test_parse_passwd_and_human_accounts() -> None:
    entries = accounts.parse_passwd(PASSWD)
    assert [e.name for e in entries] == ["root", "daemon", "alice", "bob", "svc", "ci", "nobody", "carol"]
    assert accounts.human_accounts(entries) == [
        {"name": "alice", "uid": 1000, "home": "/home/alice", "shell": "/bin/bash"},
        {"name": "bob", "uid": 1001, "home": "/home/bob", "shell": "/usr/bin/zsh"},
        {"name": "carol", "uid": 2000, "home": "/home/carol", "shell": "/bin/sh"},
    ]


def test_group_members_include_primary_group_users() -> None:
    passwd = accounts.parse_passwd(PASSWD)
    groups = accounts.parse_group(GROUP)
    assert [g.name for g in groups] == ["root", "sudo", "wheel", "docker", "admin", "alice"]
    # bob is in docker through his primary gid 999 only.
    assert accounts.group_members(groups, passwd, ("docker",)) == ["alice", "bob"]
    assert accounts.group_members(groups, passwd, accounts.SUDO_GROUPS) == ["alice", "carol"]
    assert accounts.group_members(groups, passwd, ("nosuchgroup",)) == []


def _make(path: Path, directory: bool = False) -> None:
    if directory:
        path.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("secret-not-to-be-read\n")


def test_scan_credentials_finds_presence_only(tmp_path: Path) -> None:
    alice, bob = tmp_path / "alice", tmp_path / "bob"
    for rel in (".ssh/id_ed25519", ".ssh/id_rsa", ".ssh/id_rsa.pub", ".ssh/known_hosts",
                ".aws/credentials", ".kube/config"):
        _make(alice / rel)
    for rel in (".azure", ".config/gcloud", ".mozilla/firefox", ".config/BraveSoftware",
                ".password-store", ".local/share/keyrings"):
        _make(bob / rel, directory=True)
    _make(bob / ".aws/config")  # not a credentials file
    found, unreadable = accounts.scan_credentials(
        [("alice", str(alice)), ("bob", str(bob)), ("ghost", str(tmp_path / "missing")),
         ("alias", str(alice))]  # a second account sharing a home is scanned once
    )
    assert unreadable == []
    assert found == [
        {"kind": "ssh_private_key", "user": "alice", "path": str(alice / ".ssh/id_ed25519")},
        {"kind": "ssh_private_key", "user": "alice", "path": str(alice / ".ssh/id_rsa")},
        {"kind": "aws", "user": "alice", "path": str(alice / ".aws/credentials")},
        {"kind": "kube", "user": "alice", "path": str(alice / ".kube/config")},
        {"kind": "azure", "user": "bob", "path": str(bob / ".azure")},
        {"kind": "gcloud", "user": "bob", "path": str(bob / ".config/gcloud")},
        {"kind": "browser_profile", "user": "bob", "path": str(bob / ".mozilla/firefox")},
        {"kind": "browser_profile", "user": "bob", "path": str(bob / ".config/BraveSoftware")},
        {"kind": "password_store", "user": "bob", "path": str(bob / ".password-store")},
        {"kind": "password_store", "user": "bob", "path": str(bob / ".local/share/keyrings")},
    ]


def test_unreadable_home_is_reported_not_guessed(world_tmp: Path) -> None:
    private, open_home = world_tmp / "private", world_tmp / "open"
    _make(private / ".ssh/id_ed25519")
    _make(open_home / ".kube/config")
    private.chmod(0o700)
    if not IS_ROOT:
        private.chmod(0o000)  # the test user owns it; take its own access away
    open_home.chmod(0o755)
    (open_home / ".kube").chmod(0o755)
    (open_home / ".kube/config").chmod(0o600)  # presence is visible without reading it
    try:
        found, unreadable = run_unprivileged(
            accounts.scan_credentials, [("root", str(private)), ("alice", str(open_home))]
        )
    finally:
        private.chmod(0o700)
    assert unreadable == [str(private)]
    assert found == [{"kind": "kube", "user": "alice", "path": str(open_home / ".kube/config")}]


def test_graphical_session_and_display_manager_from_real_processes(tmp_path: Path) -> None:
    assert accounts.graphical_session(["bash", "Xwayland"]) is True
    with process_named(tmp_path, "Xorg"):
        facts = accounts.collect(CollectContext())
    assert facts["graphical_session"] is True
    if not os.path.lexists(accounts.DISPLAY_MANAGER_UNIT):
        assert accounts.display_manager(["bash"]) is None
        with process_named(tmp_path, "sddm"):
            assert accounts.collect(CollectContext())["display_manager"] == "sddm"
        assert accounts.display_manager(["gdm3"]) == "gdm"


def test_display_manager_from_the_unit_symlink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    unit = tmp_path / "display-manager.service"
    unit.symlink_to("/lib/systemd/system/gdm3.service")
    monkeypatch.setattr(accounts, "DISPLAY_MANAGER_UNIT", str(unit))
    assert accounts.display_manager([]) == "gdm"
    unit.unlink()
    unit.symlink_to("/usr/lib/systemd/system/lightdm.service")
    assert accounts.display_manager(["sddm"]) == "lightdm"  # the enabled one, not a stray process
    unit.unlink()
    unit.symlink_to("/dev/null")  # masked
    assert accounts.display_manager([]) is None


def test_accounts_collect_contract() -> None:
    facts = accounts.collect(CollectContext())
    assert set(facts) == {"graphical_session", "display_manager", "human_accounts",
                          "docker_group_members", "sudo_group_members", "credentials",
                          "unreadable_homes", "apparmor_enabled", "cloud_accounts", "sudoers"}
    expected_humans = accounts.human_accounts(accounts.parse_passwd(Path("/etc/passwd").read_text()))
    assert facts["human_accounts"] == expected_humans
    assert isinstance(facts["graphical_session"], (bool, Unknown))
    assert facts["display_manager"] is None or isinstance(facts["display_manager"], str)
    apparmor = Path("/sys/module/apparmor/parameters/enabled")
    if apparmor.exists():
        assert facts["apparmor_enabled"] is (apparmor.read_text().strip() == "Y")
    elif not Path("/sys/module/apparmor").exists():
        assert facts["apparmor_enabled"] is False
    assert_jsonable(facts)


# ============================================================ docker daemon

VERSION_JSON = {
    "Platform": {"Name": "Docker Engine - Community"},
    "Components": [
        {"Name": "Engine", "Version": "24.0.7",
         "Details": {"ApiVersion": "1.43", "Arch": "amd64", "BuildTime": "2023-10-26T09:07:41.000000000+00:00",
                     "Experimental": "false", "GitCommit": "311b9ff", "GoVersion": "go1.20.10",
                     "KernelVersion": "6.5.0-14-generic", "MinAPIVersion": "1.12", "Os": "linux"}},
        {"Name": "containerd", "Version": "1.6.26", "Details": {"GitCommit": "3dd1e886e55dd695541fdcd67420c2888645a495"}},
        {"Name": "runc", "Version": "1.1.10", "Details": {"GitCommit": "v1.1.10-0-g18a0cb0"}},
        {"Name": "docker-init", "Version": "0.19.0", "Details": {"GitCommit": "de40ad0"}},
    ],
    "Version": "24.0.7", "ApiVersion": "1.43", "MinAPIVersion": "1.12", "GitCommit": "311b9ff",
    "GoVersion": "go1.20.10", "Os": "linux", "Arch": "amd64", "KernelVersion": "6.5.0-14-generic",
    "BuildTime": "2023-10-26T09:07:41.000000000+00:00",
}
INFO_JSON = {
    "ID": "7TRN:IPZB:QYBB:VPBQ:UWRB:2YU4:ML6B:SDSZ:O3CD:GIMM:KZZU:5W42",
    "Containers": 2, "ContainersRunning": 1, "ContainersPaused": 0, "ContainersStopped": 1,
    "Images": 3, "Driver": "overlay2",
    "DriverStatus": [["Backing Filesystem", "extfs"], ["Supports d_type", "true"],
                     ["Using metacopy", "false"], ["Native Overlay Diff", "true"], ["userxattr", "false"]],
    "Plugins": {"Volume": ["local"], "Network": ["bridge", "host", "ipvlan", "macvlan", "null", "overlay"],
                "Authorization": None, "Log": ["awslogs", "fluentd", "gcplogs", "gelf", "journald",
                                               "json-file", "local", "logentries", "splunk", "syslog"]},
    "MemoryLimit": True, "SwapLimit": False, "CpuCfsPeriod": True, "CpuCfsQuota": True,
    "CPUShares": True, "CPUSet": True, "PidsLimit": True, "IPv4Forwarding": True,
    "BridgeNfIptables": True, "BridgeNfIp6tables": True, "Debug": False, "NFd": 36,
    "OomKillDisable": False, "NGoroutines": 48, "SystemTime": "2024-01-12T10:22:31.554394321Z",
    "LoggingDriver": "json-file", "CgroupDriver": "systemd", "CgroupVersion": "2", "NEventsListener": 0,
    "KernelVersion": "6.5.0-14-generic", "OperatingSystem": "Ubuntu 22.04.3 LTS", "OSVersion": "22.04",
    "OSType": "linux", "Architecture": "x86_64", "IndexServerAddress": "https://index.docker.io/v1/",
    "NCPU": 16, "MemTotal": 67276349440, "GenericResources": None,
    "DockerRootDir": "/data/docker", "HttpProxy": "", "HttpsProxy": "", "NoProxy": "",
    "Name": "gpu-host-01", "Labels": [], "ExperimentalBuild": False, "ServerVersion": "24.0.7",
    "Runtimes": {"io.containerd.runc.v2": {"path": "runc"},
                 "nvidia": {"path": "nvidia-container-runtime"}, "runc": {"path": "runc"}},
    "DefaultRuntime": "nvidia", "Swarm": {"NodeID": "", "NodeAddr": "", "LocalNodeState": "inactive",
                                          "ControlAvailable": False, "Error": "", "RemoteManagers": None},
    "LiveRestoreEnabled": True, "Isolation": "", "InitBinary": "docker-init",
    "ContainerdCommit": {"ID": "3dd1e886e55dd695541fdcd67420c2888645a495", "Expected": "3dd1e886e55dd695541fdcd67420c2888645a495"},
    "RuncCommit": {"ID": "v1.1.10-0-g18a0cb0", "Expected": "v1.1.10-0-g18a0cb0"},
    "InitCommit": {"ID": "de40ad0", "Expected": "de40ad0"},
    "SecurityOptions": ["name=apparmor", "name=seccomp,profile=builtin", "name=cgroupns"],
    "Warnings": None,
}
CONTAINERS_JSON = [
    {"Id": "8dfafdbc3a40d3b2e0fa3f5c1b4a1f5e9b8f0c2d6e7a9b1c3d5e7f9a1b3c5d7e",
     "Names": ["/C.8123456"], "Image": "vastai/base:cuda-12.1", "ImageID": "sha256:6b8e",
     "Command": "/bin/sh -c 'bash /root/onstart.sh'", "Created": 1705053751,
     "Ports": [{"IP": "0.0.0.0", "PrivatePort": 22, "PublicPort": 40022, "Type": "tcp"},
               {"IP": "::", "PrivatePort": 22, "PublicPort": 40022, "Type": "tcp"},
               {"PrivatePort": 8080, "Type": "tcp"},
               {"IP": "127.0.0.1", "PrivatePort": 6006, "PublicPort": 6006, "Type": "udp"}],
     "Labels": {}, "State": "running", "Status": "Up 2 hours",
     "HostConfig": {"NetworkMode": "default"}, "Mounts": []},
]

# GET /containers/{id}/json for the container above, in Docker 24's shape (keys the collector
# does not read trimmed: State, NetworkSettings, GraphDriver, and Config but for its Image).
INSPECT_JSON = {
    "Id": CONTAINERS_JSON[0]["Id"], "Created": "2024-01-12T10:02:31.554394321Z", "Path": "/bin/sh",
    "Name": "/C.8123456", "RestartCount": 0, "Driver": "overlay2", "Platform": "linux",
    "Config": {"Image": "vastai/base:cuda-12.1"},
    "HostConfig": {"Binds": ["/var/lib/vastai_kaalia/data/C.8123456:/workspace"], "NetworkMode": "default",
                   "PortBindings": {"22/tcp": [{"HostIp": "", "HostPort": "40022"}]}, "IpcMode": "private",
                   "PidMode": "", "Privileged": False, "ShmSize": 67108864, "Runtime": "nvidia",
                   "CapAdd": None, "SecurityOpt": None},
    "Mounts": [{"Type": "bind", "Source": "/var/lib/vastai_kaalia/data/C.8123456", "Destination": "/workspace",
                "Mode": "", "RW": True, "Propagation": "rprivate"}],
}


class _DockerAPIHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    routes = {"/_ping": "OK", "/version": VERSION_JSON, "/info": INFO_JSON,
              "/containers/json": CONTAINERS_JSON, f"/containers/{INSPECT_JSON['Id']}/json": INSPECT_JSON}

    def do_GET(self) -> None:  # the stdlib's name
        path = re.sub(r"^/v1\.\d+", "", self.path.split("?", 1)[0])
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        if path in self.routes:
            body = self.routes[path]
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
            self.send_header("Api-Version", "1.43")
        else:
            data = json.dumps({"message": f"page not found: {path}"}).encode()
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # unix peers have no address
        pass


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@contextlib.contextmanager
def fake_docker_daemon(sock_path: Path) -> Iterator[_UnixHTTPServer]:
    server = _UnixHTTPServer(str(sock_path), _DockerAPIHandler)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def docker_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[[Path], None]:
    for var in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT"):
        monkeypatch.delenv(var, raising=False)
    # daemon.json is read from a file the test controls, never this machine's /etc.
    monkeypatch.setattr(docker_config, "DAEMON_JSON", str(tmp_path / "daemon.json"))
    monkeypatch.setattr(docker_config, "UNIT_DIRS", (str(tmp_path / "systemd"),))

    def point_at(sock: Path) -> None:
        monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    return point_at


def test_docker_absent_when_socket_path_does_not_exist(docker_env: Any, tmp_path: Path) -> None:
    docker_env(tmp_path / "nowhere" / "docker.sock")
    facts = docker_daemon.collect(CollectContext())
    assert facts["reachable"] is False
    assert facts["unreachable_reason"] == "absent"
    assert facts["daemon_json"] == Unknown(f"{tmp_path / 'daemon.json'} does not exist")
    for key in ("version", "seccomp", "apparmor", "rootless", "published_ports"):
        assert facts[key] == Unknown("docker daemon not reachable (absent)")
    if docker_config.dockerd_flags() is None:  # else a running dockerd's flags settle some
        assert all(facts[k] == Unknown("docker daemon not reachable (absent)") for k in docker_daemon.ALL_KEYS)
    assert_jsonable(facts)


def test_docker_not_running_when_socket_refuses(docker_env: Any, tmp_path: Path) -> None:
    sock_path = tmp_path / "docker.sock"
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(sock_path))  # a stale socket file: nobody listens, connect is refused
    leftover.close()
    (tmp_path / "daemon.json").write_text(json.dumps({
        "data-root": "/mnt/docker", "icc": False, "no-new-privileges": True,
        "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}, "default-runtime": "nvidia",
    }))
    docker_env(sock_path)
    facts = docker_daemon.collect(CollectContext())
    assert facts["reachable"] is False
    assert facts["unreachable_reason"] == "not_running"
    assert facts["daemon_json"]["data-root"] == "/mnt/docker"
    # What daemon.json settles is reported; what only the API knows stays Unknown.
    assert facts["data_root"] == "/mnt/docker"
    assert facts["icc"] is False
    assert facts["no_new_privileges"] is True
    assert facts["live_restore"] is False
    assert facts["userland_proxy"] is True
    assert facts["runtimes"] == ["nvidia", "runc"]
    assert facts["default_runtime"] == "nvidia"
    assert facts["nvidia_runtime"] is True
    assert facts["userns_remap"] is False
    for key in ("version", "seccomp", "apparmor", "rootless", "published_ports"):
        assert facts[key] == Unknown("docker daemon not reachable (not_running)")


def test_docker_permission_denied_for_unprivileged_user(world_tmp: Path) -> None:
    sock_path = world_tmp / "docker.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(4)
    sock_path.chmod(0o000)  # like a root:docker 0660 socket seen by a non-member

    def probe() -> dict[str, Any]:
        os.environ["DOCKER_HOST"] = f"unix://{sock_path}"
        return docker_daemon._connect_and_collect()
    try:
        facts = run_unprivileged(probe)
    finally:
        listener.close()
    assert facts == {"reachable": False, "unreachable_reason": "permission_denied"}


def test_docker_hung_daemon_times_out_quickly(docker_env: Any, tmp_path: Path) -> None:
    sock_path = tmp_path / "docker.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(4)  # accepts into the backlog, never answers
    docker_env(sock_path)
    started = time.monotonic()
    try:
        facts = docker_daemon.collect(CollectContext())
    finally:
        listener.close()
    assert time.monotonic() - started < docker_daemon.TIMEOUT
    assert facts["reachable"] is False
    assert facts["unreachable_reason"].startswith("error: ")
    assert "timed out" in facts["unreachable_reason"].lower()


def test_docker_reachable_through_the_sdk(docker_env: Any, tmp_path: Path) -> None:
    sock_path = tmp_path / "docker.sock"
    (tmp_path / "daemon.json").write_text(json.dumps({"icc": False, "userland-proxy": False}))
    docker_env(sock_path)
    with fake_docker_daemon(sock_path) as server:
        facts = docker_daemon.collect(CollectContext())
    assert facts == {
        "reachable": True,
        "unreachable_reason": None,
        "version": "24.0.7",
        "runtimes": ["io.containerd.runc.v2", "nvidia", "runc"],
        "default_runtime": "nvidia",
        "nvidia_runtime": True,
        "userns_remap": False,
        "rootless": False,
        "seccomp": True,
        "apparmor": True,
        "no_new_privileges": False,
        "live_restore": True,
        "icc": False,
        "userland_proxy": False,
        "data_root": "/data/docker",
        "published_ports": [
            {"container": "C.8123456", "host_ip": "0.0.0.0", "host_port": 40022, "proto": "tcp"},
            {"container": "C.8123456", "host_ip": "::", "host_port": 40022, "proto": "tcp"},
            {"container": "C.8123456", "host_ip": "127.0.0.1", "host_port": 6006, "proto": "udp"},
        ],
        # read from GET /containers/{id}/json: a bind mount of the platform's own data
        # directory is not host-level access
        "containers": [{"name": "C.8123456", "image": "vastai/base:cuda-12.1", "network_mode": "default",
                        "host_network": False, "privileged": False, "pid_mode": "", "ipc_mode": "private",
                        "host_mounts": []}],
    }
    paths = [re.sub(r"^/v1\.\d+", "", p.split("?", 1)[0]) for p in server.requests]
    assert paths[0] == "/version" and {"/info", "/containers/json", f"/containers/{INSPECT_JSON['Id']}/json"} <= set(paths)


def test_docker_settings_from_running_dockerd_flags(docker_env: Any, tmp_path: Path) -> None:
    docker_env(tmp_path / "nowhere" / "docker.sock")
    with process_named(tmp_path, "dockerd", "--icc=false", "--live-restore", "--data-root=/srv/docker"):
        facts = docker_daemon.collect(CollectContext())
    assert facts["reachable"] is False and facts["unreachable_reason"] == "absent"
    # No daemon.json, but the running daemon's flags plus dockerd's defaults settle these.
    assert facts["icc"] is False
    assert facts["live_restore"] is True
    assert facts["data_root"] == "/srv/docker"
    assert facts["userland_proxy"] is True
    assert facts["runtimes"] == ["runc"]
    assert facts["version"] == Unknown("docker daemon not reachable (absent)")


def test_docker_security_options_and_error_classification() -> None:
    assert docker_daemon.parse_security_options(
        ["name=seccomp,profile=builtin", "name=rootless", "name=userns", "name=cgroupns"]
    ) == {"userns_remap": True, "rootless": True, "seccomp": True, "apparmor": False,
          "no_new_privileges": False}
    assert docker_daemon.parse_security_options(None)["seccomp"] is False

    def wrapped(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except OSError as exc:
                raise RuntimeError(("Connection aborted.", exc)) from exc
        except RuntimeError as outer:
            return outer
    assert docker_daemon.classify_error(wrapped(PermissionError(13, "Permission denied"))) == "permission_denied"
    assert docker_daemon.classify_error(wrapped(ConnectionRefusedError(111, "refused"))) == "not_running"
    assert docker_daemon.classify_error(wrapped(FileNotFoundError(2, "No such file"))) == "absent"
    assert docker_daemon.classify_error(ValueError("bad")) == "error: bad"


# ============================================================ sshd

SSHD_T_SAMPLE = textwrap.dedent("""\
    port 22
    port 2222
    addressfamily any
    listenaddress [::]:22
    listenaddress 0.0.0.0:22
    usepam yes
    permitrootlogin without-password
    passwordauthentication no
    kbdinteractiveauthentication no
    pubkeyauthentication yes
    permitemptypasswords no
    x11forwarding no
    maxauthtries 3
    allowusers alice
    allowusers bob@10.0.0.0/8
    subsystem sftp /usr/lib/openssh/sftp-server
    authorizedkeysfile .ssh/authorized_keys .ssh/authorized_keys2
    """)


def test_parse_sshd_T_exact() -> None:
    assert sshd.parse_sshd_T(SSHD_T_SAMPLE) == {
        "port": ["22", "2222"],
        "addressfamily": "any",
        "listenaddress": ["[::]:22", "0.0.0.0:22"],
        "usepam": "yes",
        "permitrootlogin": "prohibit-password",  # sshd -T prints the old synonym
        "passwordauthentication": "no",
        "kbdinteractiveauthentication": "no",
        "pubkeyauthentication": "yes",
        "permitemptypasswords": "no",
        "x11forwarding": "no",
        "maxauthtries": "3",
        "allowusers": ["alice", "bob@10.0.0.0/8"],
        "subsystem": "sftp /usr/lib/openssh/sftp-server",
        "authorizedkeysfile": ".ssh/authorized_keys .ssh/authorized_keys2",
    }


def _ssh_tree(root: Path) -> Path:
    """An /etc/ssh-like tree: cloud-init's drop-in sorts first and wins, as on real clouds."""
    conf_d = root / "sshd_config.d"
    conf_d.mkdir(parents=True)
    (conf_d / "50-cloud-init.conf").write_text("PasswordAuthentication yes\n")
    (conf_d / "60-hardening.conf").write_text(textwrap.dedent("""\
        # hardening that comes too late for PasswordAuthentication
        PasswordAuthentication no
        PermitRootLogin no
        X11Forwarding=no
        AllowUsers alice
        Match User backup
            PermitRootLogin yes
        """))
    (conf_d / "README").write_text("PermitRootLogin yes\n")  # not *.conf: never read
    main = root / "sshd_config"
    main.write_text(textwrap.dedent(f"""\
        Include {conf_d}/*.conf
        Port 22
        Port 2222
        PasswordAuthentication no
        PermitRootLogin yes
        ChallengeResponseAuthentication no
        X11Forwarding yes   # trailing comment
        AllowUsers "bob" carol
        Match Address 10.0.0.0/8
            PasswordAuthentication yes
            MaxAuthTries 2
        Match all
        MaxAuthTries 4
        """))
    return main


def test_sshd_files_drop_in_order(tmp_path: Path) -> None:
    main = _ssh_tree(tmp_path)
    settings, files_read, problems = sshd.effective_from_files(main)
    assert problems == []
    assert files_read == [str(main), str(tmp_path / "sshd_config.d/50-cloud-init.conf"),
                          str(tmp_path / "sshd_config.d/60-hardening.conf")]
    assert settings == {
        "passwordauthentication": "yes",     # 50-cloud-init.conf beats 60-hardening and the main file
        "permitrootlogin": "no",             # first set in 60-hardening.conf; Match block ignored
        "x11forwarding": "no",
        "allowusers": ["alice", "bob", "carol"],   # lists accumulate
        "port": ["22", "2222"],
        "kbdinteractiveauthentication": "no",      # via the deprecated alias
        "maxauthtries": "4",                       # after "Match all", global again
        "pubkeyauthentication": "yes",             # OpenSSH defaults from here on
        "permitemptypasswords": "no",
    }


def test_sshd_files_defaults_relative_include_and_unreadable(tmp_path: Path) -> None:
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "a.conf").write_text("Port 2200\n")
    main = tmp_path / "sshd_config"
    main.write_text("Include extra/*.conf\nInclude nothing/*.conf\n")
    settings, files_read, problems = sshd.effective_from_files(main)
    assert files_read == [str(main), str(tmp_path / "extra" / "a.conf")]
    assert problems == []
    assert settings == {**sshd.DEFAULTS, "port": "2200"}
    _settings, files_read, problems = sshd.effective_from_files(tmp_path / "absent")
    assert files_read == [] and problems == [f"{tmp_path / 'absent'}: No such file or directory"]


def _sshd_T(config: Path) -> str:
    """Real `sshd -T`, given the privilege-separation dir it insists on in a private /run."""
    script = 'mount -t tmpfs hc-test /run && mkdir -m 0755 /run/sshd && exec "$0" -T -f "$1"'
    binary = sshd.find_sshd()
    assert binary, "openssh-server is a test dependency"
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                           binary, str(config)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.root
@root_only
def test_real_sshd_T_agrees_with_file_parser(tmp_path: Path) -> None:
    main = _ssh_tree(tmp_path)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "hostkey")],
                   check=True, timeout=30)
    with main.open("a") as fh:
        # Global keywords after "Match all" are global again; sshd needs a host key.
        fh.write(f"HostKey {tmp_path / 'hostkey'}\n")
    real = sshd.parse_sshd_T(_sshd_T(main))
    from_files, _files, _problems = sshd.effective_from_files(main)
    for key in ("passwordauthentication", "permitrootlogin", "x11forwarding", "allowusers", "port",
                "kbdinteractiveauthentication", "maxauthtries", "pubkeyauthentication",
                "permitemptypasswords"):
        assert real[key] == from_files[key], key
    assert real["passwordauthentication"] == "yes"
    assert real["port"] == ["22", "2222"]
    assert real["hostkey"] == str(tmp_path / "hostkey")


def test_sshd_running_sees_a_real_process(tmp_path: Path) -> None:
    with process_named(tmp_path, "sshd"):
        assert sshd.sshd_running() is True
        assert sshd.collect(CollectContext())["running"] is True


@pytest.mark.root
@root_only
def test_processes_in_a_container_pid_namespace_are_not_the_hosts(tmp_path: Path) -> None:
    # A rented container's own sshd must not read as the host's sshd.
    binary = tmp_path / "sshd"
    shutil.copy2(shutil.which("sh") or "/bin/sh", binary)
    inner: int | None = None
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", str(binary), "-c", "sleep 60; :"],
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and inner is None:
            for pid in os.listdir("/proc"):
                with contextlib.suppress(OSError):
                    if pid.isdigit() and Path(f"/proc/{pid}/comm").read_text().strip() == "sshd" \
                            and Path(f"/proc/{pid}/exe").resolve() == binary.resolve():
                        inner = int(pid)
            time.sleep(0.02)
        assert inner is not None, "the namespaced process did not start"
        assert inner not in {pid for pid, _comm in _proc.host_processes()}
        assert proc.pid in {pid for pid, _comm in _proc.host_processes()}  # unshare itself is ours
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # unshare, the namespaced sh and its sleep
        proc.wait(timeout=10)


def test_sshd_collect_contract() -> None:
    facts = sshd.collect(CollectContext())
    assert set(facts) == {"installed", "running", "source", "settings", "files_read", "origins", "socket_activated"}
    assert facts["installed"] is (sshd.find_sshd() is not None)
    assert facts["source"] in ("sshd -T", "config files")
    if isinstance(facts["settings"], dict):
        assert facts["settings"]["passwordauthentication"] in ("yes", "no")
        assert facts["files_read"][0] == sshd.MAIN_CONFIG
    if isinstance(facts["origins"], dict):
        assert set(facts["origins"].values()) <= set(facts["files_read"])
    assert_jsonable(facts)


# ============================================================ packages

DPKG_STATUS = textwrap.dedent("""\
    Package: unattended-upgrades
    Status: install ok installed
    Priority: optional
    Architecture: all
    Version: 2.9.1+nmu3
    Description: automatic installation of security upgrades
     This package can download and install security upgrades automatically.

    Package: nvidia-driver-535
    Status: hold ok installed
    Architecture: amd64
    Version: 535.154.05-0ubuntu0.22.04.1

    Package: libnvidia-compute-535
    Status: hold ok installed
    Architecture: amd64

    Package: libnvidia-compute-535
    Status: hold ok installed
    Architecture: i386

    Package: cuda-drivers-535
    Status: install ok installed

    Package: nvidia-driver-470
    Status: deinstall ok config-files

    Package: nvidia-settings
    Status: hold ok not-installed

    Package: bash
    Status: install ok installed
    """)


def test_parse_dpkg_status_and_nvidia_packages() -> None:
    pkgs = packages.parse_dpkg_status(DPKG_STATUS)
    assert len(pkgs) == 8
    assert packages.installed_names(pkgs) == {
        "unattended-upgrades", "nvidia-driver-535", "libnvidia-compute-535", "cuda-drivers-535", "bash"}
    assert packages.nvidia_packages(pkgs) == (
        ["cuda-drivers-535", "libnvidia-compute-535", "nvidia-driver-535"],
        ["libnvidia-compute-535", "nvidia-driver-535"],
    )


def test_parse_apt_conf_flat_nested_and_comments() -> None:
    assert packages.parse_apt_conf(textwrap.dedent("""\
        // from 20auto-upgrades
        APT::Periodic::Update-Package-Lists "1";
        APT::Periodic::Unattended-Upgrade "1"; # trailing
        /* APT::Periodic::Unattended-Upgrade "0"; */
        """)) == {"apt::periodic::update-package-lists": "1", "apt::periodic::unattended-upgrade": "1"}
    assert packages.parse_apt_conf('APT { Periodic { Unattended-Upgrade "7"; }; };') == {
        "apt::periodic::unattended-upgrade": "7"}


def test_unattended_enabled_follows_apt_file_order(tmp_path: Path) -> None:
    conf_d = tmp_path / "apt.conf.d"
    conf_d.mkdir()
    (conf_d / "20auto-upgrades").write_text('APT::Periodic::Unattended-Upgrade "1";\n')
    (conf_d / "99-disable.conf").write_text('APT::Periodic::Unattended-Upgrade "0";\n')
    (conf_d / "99zz.dpkg-old").write_text('APT::Periodic::Unattended-Upgrade "1";\n')  # apt skips it
    files = packages.apt_conf_files(str(conf_d), str(tmp_path / "apt.conf"))
    assert files == [str(conf_d / "20auto-upgrades"), str(conf_d / "99-disable.conf")]
    assert packages.unattended_enabled(files) is False
    (tmp_path / "apt.conf").write_text('APT::Periodic::Unattended-Upgrade "1";\n')  # read last
    files = packages.apt_conf_files(str(conf_d), str(tmp_path / "apt.conf"))
    assert packages.unattended_enabled(files) is True
    assert packages.unattended_enabled([str(conf_d / "20auto-upgrades")]) is True
    missing = packages.unattended_enabled([str(conf_d / "20auto-upgrades"), str(tmp_path / "gone")])
    assert isinstance(missing, Unknown) and str(tmp_path / "gone") in missing.reason


def test_packages_collect_contract() -> None:
    facts = packages.collect(CollectContext())
    assert set(facts) == {"unattended_upgrades", "nvidia_packages", "nvidia_held", "nvidia_versions", "reboot_required"}
    if Path(packages.DPKG_STATUS).exists():
        pkgs = packages.parse_dpkg_status(Path(packages.DPKG_STATUS).read_text(errors="replace"))
        assert facts["unattended_upgrades"]["installed"] is (
            "unattended-upgrades" in packages.installed_names(pkgs))
        assert isinstance(facts["nvidia_packages"], list)
    else:
        assert isinstance(facts["nvidia_packages"], Unknown)
    assert_jsonable(facts)


# ============================================================ network

@pytest.mark.parametrize(("addr", "scope"), [
    ("127.0.0.1", "loopback"), ("::1", "loopback"), ("::ffff:127.0.0.1", "loopback"),
    ("169.254.10.1", "link-local"), ("fe80::1%eth0", "link-local"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.32.0.1", "global"),
    ("192.168.1.10", "private"), ("fd00::2", "private"),
    ("100.64.0.1", "cgnat"), ("100.127.255.254", "cgnat"), ("100.128.0.1", "global"),
    ("8.8.8.8", "global"), ("2606:4700::1111", "global"),
    ("192.0.2.1", "other"), ("2001:db8::1", "other"), ("224.0.0.1", "other"), ("0.0.0.0", "other"),
    ("not-an-ip", "other"), ("", "other"),
])
def test_classify_address(addr: str, scope: str) -> None:
    assert classify_address(addr) == scope


def test_classify_address_public_ranges_override() -> None:
    lab = ["198.51.100.0/24", "2001:db8::/32", "garbage"]
    assert classify_address("198.51.100.7", lab) == "global"
    assert classify_address("2001:db8::5", lab) == "global"
    assert classify_address("203.0.113.1", lab) == "other"
    assert classify_address("10.0.0.1", ["10.0.0.0/8"]) == "global"


PROC_NET_ROUTE = (
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    "wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
    "eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
    "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
    "tun0\t00000000\t00000000\t0201\t0\t0\t0\t00000000\t0\t0\t0\n"
)
PROC_NET_IPV6_ROUTE = textwrap.dedent("""\
    fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
    00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000002 00000000 00000003     eth0
    00000000000000000000000000000000 00 00000000000000000000000000000000 00 00000000000000000000000000000000 ffffffff 00000001 00000000 00200200       lo
    """)


def test_parse_routes() -> None:
    assert parse_proc_net_route(PROC_NET_ROUTE) == [
        {"interface": "eth0", "gateway": "192.0.2.1", "metric": 100},
        {"interface": "wlan0", "gateway": "192.168.1.1", "metric": 600},
    ]
    assert parse_proc_net_ipv6_route(PROC_NET_IPV6_ROUTE) == [
        {"interface": "eth0", "gateway": "fe80::1", "metric": 1024},
    ]


ROUTE_HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"


@pytest.mark.parametrize(("rows", "gateway"), [
    # the best (lowest metric) default route wins
    (["eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000", "wlan0\t00000000\t0102A8C0\t0003\t0\t0\t600\t00000000"],
     "192.168.1.1"),
    # a route that is not up (no RTF_UP) is not the way out
    (["eth0\t00000000\t0101A8C0\t0002\t0\t0\t0\t00000000", "wlan0\t00000000\t0102A8C0\t0003\t0\t0\t600\t00000000"],
     "192.168.2.1"),
    # neither is a reject ("unreachable default") route
    (["eth0\t00000000\t0101A8C0\t0203\t0\t0\t0\t00000000", "wlan0\t00000000\t0102A8C0\t0003\t0\t0\t600\t00000000"],
     "192.168.2.1"),
    # 0.0.0.0 with a netmask is not the default route
    (["eth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t000000FF", "wlan0\t00000000\t0102A8C0\t0003\t0\t0\t600\t00000000"],
     "192.168.2.1"),
    # a tunnel's device route has no gateway: the router is behind the next route
    (["tun0\t00000000\t00000000\t0001\t0\t0\t0\t00000000", "eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000"],
     "192.168.1.1"),
    (["eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF"], None),
])
def test_default_gateway_is_read_with_the_same_rules_as_the_route_facts(
        tmp_path: Path, rows: list[str], gateway: str | None) -> None:
    table = tmp_path / "route"
    table.write_text(ROUTE_HEADER + "".join(r + "\t0\t0\t0\n" for r in rows))
    got = default_gateway_v4(str(table))
    if gateway is None:
        assert isinstance(got, Unknown) and "no IPv4 default route" in got.reason
    else:
        assert got == gateway


def test_parse_proc_net_sockets() -> None:
    tcp = textwrap.dedent("""\
          sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
           0: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1569 1
           1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1570 1
           2: 0100007F:0016 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 1571 1
        """)
    assert network_local.parse_proc_net_sockets(tcp, "tcp", 4) == [
        {"proto": "tcp", "address": "127.0.0.1", "port": 631},
        {"proto": "tcp", "address": "0.0.0.0", "port": 22},
    ]
    tcp6 = (" sl local rem st\n"
            " 0: 00000000000000000000000001000000:0016 00000000000000000000000000000000:0000 0A 0 0 0\n")
    assert network_local.parse_proc_net_sockets(tcp6, "tcp", 6) == [
        {"proto": "tcp", "address": "::1", "port": 22}]
    udp = (" sl local rem st\n"
           " 0: 00000000:14E9 00000000:0000 07 0 0 0\n"
           " 1: 0A00000A:A1B2 08080808:0035 01 0 0 0\n")
    assert network_local.parse_proc_net_sockets(udp, "udp", 4) == [
        {"proto": "udp", "address": "0.0.0.0", "port": 5353}]


def test_real_listeners_and_exposure() -> None:
    """Real sockets of another process are listed with their owner; the audit's own are not."""
    import psutil

    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import socket, sys\n"
            "t = socket.socket(); t.bind(('127.0.0.1', 0)); t.listen(1)\n"
            "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('0.0.0.0', 0))\n"
            "print(t.getsockname()[1], u.getsockname()[1], flush=True)\n"
            "sys.stdin.read()\n"
        )],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    own = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        assert holder.stdout is not None
        tcp_port, udp_port = map(int, holder.stdout.readline().split())
        own.bind(("0.0.0.0", 0))
        own_port = own.getsockname()[1]
        listening = network_local.collect_listening()
        from_proc = network_local._listeners_from_proc()
        other = psutil.Process(holder.pid).name()
    finally:
        own.close()
        holder.communicate("", timeout=30)
    assert {"proto": "tcp", "address": "127.0.0.1", "port": tcp_port, "process": other,
            "exposure": "loopback"} in listening
    assert {"proto": "udp", "address": "0.0.0.0", "port": udp_port, "process": other,
            "exposure": "all"} in listening
    assert all(s["port"] != own_port for s in listening if s["proto"] == "udp")
    proc_entries = {(s["proto"], s["address"], s["port"], s["exposure"]) for s in from_proc}
    assert ("tcp", "127.0.0.1", tcp_port, "loopback") in proc_entries
    assert ("udp", "0.0.0.0", udp_port, "all") in proc_entries
    assert all(port != own_port for _, _, port, _ in proc_entries)
    assert network_local.exposure("::") == "all"
    assert network_local.exposure("::ffff:127.0.0.1") == "loopback"
    assert network_local.exposure("192.0.2.5") == "specific"


NFT_JSON_FIREWALLD_LIKE = {"nftables": [
    {"metainfo": {"version": "1.0.6", "release_name": "Lester Gooch #5", "json_schema_version": 1}},
    {"table": {"family": "inet", "name": "firewalld", "handle": 1}},
    {"chain": {"family": "inet", "table": "firewalld", "name": "filter_INPUT", "handle": 1,
               "type": "filter", "hook": "input", "prio": 10, "policy": "accept"}},
    {"chain": {"family": "inet", "table": "firewalld", "name": "filter_FORWARD", "handle": 2,
               "type": "filter", "hook": "forward", "prio": 10, "policy": "accept"}},
    {"rule": {"family": "inet", "table": "firewalld", "chain": "filter_INPUT", "handle": 3, "expr": [
        {"match": {"op": "in", "left": {"ct": {"key": "state"}}, "right": ["established", "related"]}},
        {"accept": None}]}},
    {"rule": {"family": "inet", "table": "firewalld", "chain": "filter_INPUT", "handle": 4, "expr": [
        {"reject": {"type": "icmpx", "expr": "admin-prohibited"}}]}},
    {"table": {"family": "ip", "name": "filter", "handle": 2}},
    {"chain": {"family": "ip", "table": "filter", "name": "FORWARD", "handle": 1, "type": "filter",
               "hook": "forward", "prio": 0, "policy": "drop"}},
    {"chain": {"family": "ip", "table": "filter", "name": "DOCKER-USER", "handle": 2}},
    {"rule": {"family": "ip", "table": "filter", "chain": "FORWARD", "handle": 5,
              "expr": [{"counter": {"packets": 0, "bytes": 0}}, {"jump": {"target": "DOCKER-USER"}}]}},
    {"rule": {"family": "ip", "table": "filter", "chain": "DOCKER-USER", "handle": 6,
              "expr": [{"counter": {"packets": 0, "bytes": 0}}, {"return": None}]}},
]}


def _nft_summary(text: str) -> dict[str, Any] | Unknown:
    """What the checks make of `nft -j list ruleset` output as the collector records it."""
    return summary.summarise({"nftables": ruleset.parse_nft_ruleset(text), "iptables": None})


def test_nft_json_summary_canned() -> None:
    assert _nft_summary(json.dumps(NFT_JSON_FIREWALLD_LIKE)) == {
        "backend": "nftables", "readable": True,
        "ufw": False, "profile_table": False,  # neither ufw's chains nor the profile's inet hostcheck table
        "input_policy": "drop",       # accept policy, but an unconditional final reject
        "forward_policy": "accept",   # only IPv4 forwarding is dropped
        "rule_count": 4,
        "docker_user_chain_filters": False,  # Docker's own bare "return"
    }
    empty = {"nftables": [{"metainfo": {"version": "1.0.6", "json_schema_version": 1}}]}
    assert _nft_summary(json.dumps(empty)) == {
        "backend": "none", "readable": True, "ufw": False, "profile_table": False, "input_policy": "none",
        "forward_policy": "none", "rule_count": 0, "docker_user_chain_filters": False}
    assert isinstance(_nft_summary("not json"), Unknown)
    assert isinstance(_nft_summary("[1, 2]"), Unknown)


def test_iptables_save_summary_canned() -> None:
    text = textwrap.dedent("""\
        # Generated by iptables-save v1.8.7 on Fri Jan 12 10:00:00 2024
        *nat
        :PREROUTING ACCEPT [0:0]
        :DOCKER - [0:0]
        -A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
        COMMIT
        *filter
        :INPUT DROP [0:0]
        :FORWARD DROP [0:0]
        :OUTPUT ACCEPT [0:0]
        :DOCKER-USER - [0:0]
        -A INPUT -i lo -j ACCEPT
        -A INPUT -p tcp --dport 22 -j ACCEPT
        -A FORWARD -j DOCKER-USER
        -A DOCKER-USER -i eth0 -o docker0 -s 192.168.0.0/16 -j DROP
        -A DOCKER-USER -j RETURN
        COMMIT
        """)
    assert summary.summarise({"nftables": None, "iptables": ruleset.keep_iptables_save(text)}) == {
        "backend": "iptables", "readable": True, "ufw": False, "profile_table": False,  # no ufw-user-input chain
        "input_policy": "drop", "forward_policy": "drop", "rule_count": 6, "docker_user_chain_filters": True}


def test_iptables_rule_comments_are_not_kept_and_do_not_hide_a_final_drop() -> None:
    text = textwrap.dedent("""\
        *filter
        :INPUT ACCEPT [0:0]
        :DOCKER-USER - [0:0]
        -A INPUT -p tcp --dport 22 -m comment --comment "admin: alice, vpn key rotated" -j ACCEPT
        -A INPUT -m comment --comment "default deny" -j DROP
        -A DOCKER-USER -m comment --comment docker -j RETURN
        COMMIT
        """)
    kept = ruleset.keep_iptables_save(text)
    assert isinstance(kept, dict) and "alice" not in json.dumps(kept)
    judged = summary.summarise({"nftables": None, "iptables": kept})
    assert isinstance(judged, dict)
    assert judged["input_policy"] == "drop" and judged["docker_user_chain_filters"] is False


def test_firewall_evidence_is_bounded() -> None:
    items = [{"rule": {"family": "inet", "table": "t", "chain": "c", "expr": [{"accept": None}]}}] * (ruleset.MAX_ITEMS + 1)
    kept = ruleset.parse_nft_ruleset(json.dumps({"nftables": items}))
    assert isinstance(kept, Unknown) and "at most" in kept.reason
    judged = summary.summarise({"nftables": kept, "iptables": None})
    assert isinstance(judged, Unknown) and judged.reason == kept.reason


def test_firewall_is_unknown_without_root() -> None:
    result = run_unprivileged(network_local.collect_firewall)
    assert result == Unknown("reading the firewall ruleset needs root")


NFT_RULESET = textwrap.dedent("""\
    table inet hc_host {
        chain input {
            type filter hook input priority 0; policy drop;
            iif "lo" accept
            ct state established,related accept
            tcp dport 22 accept
        }
        chain forward {
            type filter hook forward priority -10; policy accept;
            ip daddr 192.168.0.0/16 drop
        }
    }
    table ip filter {
        chain FORWARD {
            type filter hook forward priority 0; policy accept;
            counter jump DOCKER-USER
        }
        chain DOCKER-USER {
            counter return
        }
    }
    """)


@contextlib.contextmanager
def network_namespace() -> Iterator[str]:
    name = f"hc-test-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True, timeout=30)
    try:
        yield name
    finally:
        subprocess.run(["ip", "netns", "delete", name], timeout=30)


def _in_netns(ns: str, argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                          input=stdin, timeout=60)
    assert proc.returncode == 0, f"{argv}: {proc.stderr}"
    return proc


@pytest.mark.root
@root_only
def test_real_nft_ruleset_in_namespace(tmp_path: Path) -> None:
    ruleset = tmp_path / "ruleset.nft"
    ruleset.write_text(NFT_RULESET)
    with network_namespace() as ns:
        _in_netns(ns, ["nft", "-f", str(ruleset)])
        listed = _in_netns(ns, ["nft", "-j", "list", "ruleset"]).stdout
    assert _nft_summary(listed) == {
        "backend": "nftables", "readable": True,
        "ufw": False, "profile_table": False,  # the table is not the profile's inet hostcheck
        "input_policy": "drop",
        "forward_policy": "accept",
        "rule_count": 6,
        # the inet table's forward chain drops traffic to 192.168/16 whatever Docker allows
        "docker_user_chain_filters": True,
    }


COLLECT_IN_NS = textwrap.dedent("""\
    import json, sys
    from hostcheck.collectors import CollectContext, network_local
    from hostcheck.facts import to_jsonable
    ctx = CollectContext(public_ranges=json.loads(sys.argv[1]))
    print(json.dumps(to_jsonable(network_local.collect(ctx))))
    """)


@pytest.mark.root
@root_only
def test_network_collect_in_namespace(tmp_path: Path) -> None:
    ruleset = tmp_path / "ruleset.nft"
    ruleset.write_text(NFT_RULESET)
    with network_namespace() as ns:
        for argv in (["ip", "link", "set", "lo", "up"],
                     ["ip", "link", "add", "hc0", "type", "veth", "peer", "name", "hc1"],
                     ["ip", "link", "set", "hc0", "address", "02:00:00:00:00:42"],
                     ["ip", "addr", "add", "100.64.1.2/24", "dev", "hc0"],
                     ["ip", "-6", "addr", "add", "2001:db8::2/64", "dev", "hc0", "nodad"],
                     ["ip", "link", "set", "hc0", "up"],
                     ["ip", "link", "set", "hc1", "up"],
                     ["ip", "route", "add", "default", "via", "100.64.1.1", "dev", "hc0"],
                     ["nft", "-f", str(ruleset)]):
            _in_netns(ns, argv)
        run = [sys.executable, "-c", COLLECT_IN_NS]
        env_cwd = {"cwd": str(REPO)}
        plain = json.loads(subprocess.run(["ip", "netns", "exec", ns, *run, "[]"], capture_output=True,
                                          text=True, timeout=60, check=True, **env_cwd).stdout)
        lab = json.loads(subprocess.run(["ip", "netns", "exec", ns, *run, '["2001:db8::/32"]'],
                                        capture_output=True, text=True, timeout=60, check=True,
                                        **env_cwd).stdout)
        # The kernel's own answer for the route's link, read in the same namespace (a veth
        # reads 10000/full on recent kernels; a kernel that gives none fails the read).
        kernel = {key: subprocess.run(["ip", "netns", "exec", ns, "cat", f"/sys/class/net/hc0/{key}"],
                                      capture_output=True, text=True, timeout=30)
                  for key in ("speed", "duplex")}
    by_name = {i["name"]: i for i in plain["interfaces"]}
    assert set(by_name) == {"lo", "hc0", "hc1"}
    assert by_name["hc1"]["kind"] == "virtual" and by_name["hc1"]["up"] is True
    assert by_name["lo"]["kind"] == "loopback" and by_name["lo"]["up"] is True
    hc0 = by_name["hc0"]
    assert hc0["kind"] == "virtual" and hc0["up"] is True and hc0["mac"] == "02:00:00:00:00:42"
    addrs = {(a["address"], a["family"], a["prefixlen"], a["scope"]) for a in hc0["addresses"]}
    assert ("100.64.1.2", 4, 24, "cgnat") in addrs
    assert ("2001:db8::2", 6, 64, "other") in addrs
    route = from_jsonable(plain["default_route"])
    assert {k: route[k] for k in ("interface", "gateway", "kind")} == {
        "interface": "hc0", "gateway": "100.64.1.1", "kind": "virtual"}
    speed, duplex = kernel["speed"], kernel["duplex"]
    if speed.returncode == 0 and int(speed.stdout) > 0:
        assert route["speed_mbps"] == int(speed.stdout)
    else:
        assert isinstance(route["speed_mbps"], Unknown) and "hc0" in route["speed_mbps"].reason
    if duplex.returncode == 0 and duplex.stdout.strip() in ("full", "half"):
        assert route["duplex"] == duplex.stdout.strip()
    else:
        assert isinstance(route["duplex"], Unknown)
    # A veth's figure is its driver's, not a cable's: the link checks say so rather than judge it.
    facts = {"network": {"default_route": route}}
    for check_id in ("NET-1150", "NET-1160"):
        judged = run_check(REGISTRY[check_id], facts, 500)
        assert judged.status == "unknown" and judged.detail.startswith("hc0 is virtual"), judged
    # The same figures on a wired NIC are judged: at least 500 Mb/s passes, full duplex passes.
    wired = {"network": {"default_route": {**route, "kind": "wired"}}}
    speed_judged = run_check(REGISTRY["NET-1150"], wired, 500)
    if isinstance(route["speed_mbps"], int):
        assert speed_judged.status == ("pass" if route["speed_mbps"] >= 500 else "fail")
    else:
        assert speed_judged.status == "unknown"
    assert run_check(REGISTRY["NET-1160"], wired, None).status == (
        {"full": "pass", "half": "fail"}.get(route["duplex"], "unknown") if isinstance(route["duplex"], str) else "unknown")
    assert plain["ipv6_global"] is False
    assert lab["ipv6_global"] is True  # documentation range counted as public, as in the NAT lab
    assert plain["listening"] == []
    # recorded raw, without nft's handles; judged from that record
    assert plain["firewall"]["iptables"] is None  # nftables holds the rules: iptables-save not needed
    assert all("handle" not in body for item in plain["firewall"]["nftables"] for body in item.values())
    judged = summary.summarise(from_jsonable(plain["firewall"]))
    assert isinstance(judged, dict)
    assert judged["input_policy"] == "drop"
    assert judged["docker_user_chain_filters"] is True


def test_network_collect_contract() -> None:
    facts = network_local.collect(CollectContext())
    assert set(facts) == {"interfaces", "default_route", "ipv6_global", "listening", "firewall"}
    assert any(i["name"] == "lo" and i["kind"] == "loopback" for i in facts["interfaces"])
    if not IS_ROOT:
        assert facts["firewall"] == Unknown(network_local.FIREWALL_NEEDS_ROOT)
    assert_jsonable(facts)


# ============================================================ all collectors, unprivileged

def _collect_all_json() -> dict[str, Any]:
    ctx = CollectContext()
    return {m.SECTION: json.dumps(to_jsonable(m.collect(ctx)))
            for m in (accounts, docker_daemon, sshd, packages, network_local)}


def test_collectors_run_unprivileged_without_raising() -> None:
    out = {k: json.loads(v) for k, v in run_unprivileged(_collect_all_json).items()}
    assert out["network"]["firewall"] == {"$unknown": network_local.FIREWALL_NEEDS_ROOT}
    assert set(out["isolation"]) >= {"human_accounts", "credentials", "unreadable_homes"}
    if IS_ROOT:
        # nobody cannot look into /root (0700): reported, never silently "no credentials".
        if not os.stat("/root").st_mode & 0o004:
            assert "/root" in out["isolation"]["unreadable_homes"]
    for mod in (accounts, docker_daemon, sshd, packages, network_local):
        assert mod.TIMEOUT <= 5


def test_container_settings_keep_only_host_level_access() -> None:
    """From an inspect of a container run with --network host --privileged --pid host
    -v /:/host -v /var/run/docker.sock:/var/run/docker.sock: what the checks read, and nothing
    of its environment or command line."""
    inspected = {
        "Id": "f" * 64, "Name": "/tools", "Config": {"Env": ["TOKEN=secret"], "Cmd": ["sleep", "1"], "Image": "debian:12"},
        "HostConfig": {"NetworkMode": "host", "Privileged": True, "PidMode": "host", "IpcMode": "private"},
        "Mounts": [{"Type": "bind", "Source": "/", "Destination": "/host"},
                   {"Type": "bind", "Source": "/var/run/docker.sock", "Destination": "/var/run/docker.sock"},
                   {"Type": "bind", "Source": "/srv/data/", "Destination": "/data"},
                   {"Type": "volume", "Name": "cache", "Source": "/var/lib/docker/volumes/cache/_data"}],
    }
    assert docker_daemon.container_settings(inspected) == {
        "name": "tools", "image": "debian:12", "network_mode": "host", "host_network": True, "privileged": True,
        "pid_mode": "host", "ipc_mode": "private",
        "host_mounts": ["/", "/var/run/docker.sock"]}
    assert docker_daemon.container_settings("not a container") is None
    odd = docker_daemon.container_settings({"Name": "/" + "x" * 5000, "HostConfig": None, "Mounts": "?"})
    assert odd is not None and len(odd["name"]) <= 128 and odd["host_mounts"] == [] and odd["privileged"] is False


def _binds(*sources: str) -> dict[str, Any]:
    return {"Name": "/c", "HostConfig": {"NetworkMode": "bridge"},
            "Mounts": [{"Type": "bind", "Source": src, "Destination": f"/m{i}"} for i, src in enumerate(sources)]}


@pytest.mark.parametrize("source", ["/", "/run", "/var/run", "/run/", "//run", "/var/run/../run", "/proc", "/sys",
                                    "/dev", "/etc", "/root", "/home", "/var/lib/docker", "/var/lib", "/var",
                                    "/run/containerd", "/var/run/docker.sock"])
def test_a_bind_of_what_holds_the_host_counts(source: str) -> None:
    """The Docker socket's directories (/run, /var/run), the kernel's and devices' interfaces,
    configuration, homes and the engine's data count, as do directories above any of them."""
    got = docker_daemon.container_settings(_binds(source))
    assert got is not None and got["host_mounts"] == ["/" + os.path.normpath(source).lstrip("/")]


@pytest.mark.parametrize("source", ["/srv/data", "/home/alice/models", "/opt/app", "/mnt/scratch", "relative/path"])
def test_a_bind_of_other_data_does_not_count(source: str) -> None:
    got = docker_daemon.container_settings(_binds(source))
    assert got is not None and got["host_mounts"] == []


def test_a_bind_of_the_engines_own_data_root_counts(tmp_path: Path) -> None:
    root = str(tmp_path / "docker-data")
    inspected = _binds(root, str(tmp_path / "other"))
    got = docker_daemon.container_settings(inspected, data_root=root)
    assert got is not None and got["host_mounts"] == [root]
    got = docker_daemon.container_settings(inspected)
    assert got is not None and got["host_mounts"] == []


def test_a_bind_through_a_symbolic_link_counts(tmp_path: Path) -> None:
    (tmp_path / "etc-link").symlink_to("/etc")
    got = docker_daemon.container_settings(_binds(str(tmp_path / "etc-link")))
    assert got is not None and got["host_mounts"] == [str(tmp_path / "etc-link")]


class InspectOnly:
    """Stands in for docker's APIClient: the two calls running_containers makes, on a fixed
    set of inspect answers (running ones listed; others only inspected on request)."""

    def __init__(self, running: list[dict[str, Any]], others: tuple[dict[str, Any], ...] = ()) -> None:
        self.by_key = {key: c for c in [*running, *others] for key in (c["Id"], c["Name"].lstrip("/"))}
        self.running = running
        self.asked: list[str] = []

    def containers(self) -> list[dict[str, Any]]:
        return [{"Id": c["Id"]} for c in self.running]

    def inspect_container(self, ident: str) -> dict[str, Any]:
        self.asked.append(ident)
        if ident not in self.by_key:
            raise RuntimeError(f"404 Client Error: No such container: {ident}")
        return self.by_key[ident]


def _container(ident: str, name: str, mode: str) -> dict[str, Any]:
    return {"Id": ident * 64, "Name": "/" + name, "HostConfig": {"NetworkMode": mode}, "Mounts": []}


def test_a_container_on_a_host_network_containers_network_is_on_the_host_network() -> None:
    """--network container:X is the host's network when X's is, however X is named (full id,
    name) and whether X is running (listed) or only inspected on request; chains are followed."""
    hostnet = _container("a", "hostnet", "host")
    web = _container("b", "web", "bridge")
    stopped_host = _container("c", "old", "host")
    running = [hostnet, web,
               _container("d", "by-id", "container:" + "a" * 64), _container("e", "by-name", "container:hostnet"),
               _container("f", "on-web", "container:" + "b" * 64),
               _container("g", "on-stopped", "container:" + "c" * 64),
               _container("h", "chained", "container:by-name"),
               _container("i", "gone", "container:" + "9" * 64)]
    client = InspectOnly(running, (stopped_host,))
    got = docker_daemon.running_containers(client)
    assert isinstance(got, list)
    network = {c["name"]: c["host_network"] for c in got}
    assert {k: v for k, v in network.items() if not isinstance(v, Unknown)} == {
        "hostnet": True, "web": False, "by-id": True, "by-name": True, "on-web": False, "on-stopped": True,
        "chained": True}
    assert isinstance(network["gone"], Unknown) and "could not be inspected" in network["gone"].reason
    # only the containers not listed were inspected a second time
    assert client.asked.count("c" * 64) == 1 and client.asked.count("a" * 64) == 1


def test_a_loop_of_container_network_modes_ends_unknown() -> None:
    loop = [_container("a", "one", "container:two"), _container("b", "two", "container:one")]
    got = docker_daemon.running_containers(InspectOnly(loop))
    assert isinstance(got, list) and all(isinstance(c["host_network"], Unknown) for c in got)


def test_sshd_origins_name_the_file_whose_value_wins(tmp_path: Path) -> None:
    """cloud-init's drop-in turns passwords back on: the fact names that file, and a later file
    setting the keyword again does not move it (sshd keeps the first value)."""
    (tmp_path / "sshd_config.d").mkdir()
    main = tmp_path / "sshd_config"
    main.write_text("Include sshd_config.d/*.conf\nPasswordAuthentication no\nPort 22\n")
    cloud = tmp_path / "sshd_config.d" / "50-cloud-init.conf"
    cloud.write_text("PasswordAuthentication yes\n")
    (tmp_path / "sshd_config.d" / "90-late.conf").write_text("PasswordAuthentication no\nPermitRootLogin no\n")
    settings, _files, problems, origins = sshd._walk_files(main)
    assert problems == [] and settings["passwordauthentication"] == "yes"
    assert origins["passwordauthentication"] == str(cloud)
    assert origins["permitrootlogin"] == str(tmp_path / "sshd_config.d" / "90-late.conf")
    assert origins["port"] == str(main)
    assert "kbdinteractiveauthentication" not in origins, "a compiled-in default comes from no file"


def test_cloud_accounts_record_what_sudo_matches_them_by_and_the_sudoers_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector keeps each default cloud account's name, uid, groups and gids and the
    sudoers files as read, not a verdict: ISO-1070 finds cloud-init's rule for ubuntu, with its
    file and line, in the record. An account that is not a default cloud account is not kept;
    with no such account present, sudoers is not read."""
    from hostcheck.knowledge.sudoers import includes

    (tmp_path / "sudoers.d").mkdir()
    main = tmp_path / "sudoers"
    main.write_text(f"root ALL=(ALL:ALL) ALL\n@includedir {tmp_path}/sudoers.d\n")
    rule = tmp_path / "sudoers.d" / "90-cloud-init-users"
    rule.write_text("# Created by cloud-init\n\n# User rules for ubuntu\nubuntu ALL=(ALL) NOPASSWD:ALL\n")
    monkeypatch.setattr(includes, "SUDOERS", str(main))
    passwd_text = "ubuntu:x:1000:1000::/home/ubuntu:/bin/bash\nalice:x:1001:1001::/home/alice:/bin/bash\n"
    group_text = "sudo:x:27:ubuntu\nubuntu:x:1000:\nalice:x:1001:\n"
    texts = {"/etc/passwd": passwd_text, "/etc/group": group_text}
    real_read_text = accounts.read_text
    monkeypatch.setattr(accounts, "read_text", lambda path, **kw: texts[path] if path in texts
                        else real_read_text(path, **kw))
    facts = accounts.collect(CollectContext())
    assert facts["cloud_accounts"] == [{"name": "ubuntu", "uid": 1000, "groups": ["sudo", "ubuntu"],
                                        "gids": [27, 1000]}], facts["cloud_accounts"]
    recorded = facts["sudoers"]
    assert recorded["root"] == str(main)  # the patched main file, not /etc/sudoers
    assert [(f["path"], f["text"]) for f in recorded["files"]] == [(str(main), main.read_text()),
                                                                  (str(rule), rule.read_text())]
    assert recorded["dirs"] == [{"path": f"{tmp_path}/sudoers.d", "names": [rule.name], "unreadable": None}]
    assert "sudo_scope" not in json.dumps(to_jsonable(facts)), "no verdict is frozen into the facts"
    outcome = run_check(REGISTRY["ISO-1070"], {"isolation": facts}, None)
    assert (outcome.status, outcome.measured) == ("fail", f"ubuntu: NOPASSWD ({rule}:4)"), outcome.detail

    texts["/etc/passwd"] = passwd_text.splitlines()[1] + "\n"
    alone = accounts.collect(CollectContext())
    assert alone["cloud_accounts"] == [] and alone["sudoers"] is None
