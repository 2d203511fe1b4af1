"""Collectors facing a hostile host: secrets in config files, impostor processes, stuck probes.

Real files, real processes and real sockets on loopback; nothing reads this machine's /etc.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hostcheck.collectors import CollectContext, docker_config, docker_daemon, sshd
from hostcheck.facts import Unknown, to_jsonable
from tests.helpers import REPO

SECRETS = ("pa55w0rd", "s3cr3t-token", "hunter2", "BEGIN PRIVATE")
DAEMON_JSON = {
    "icc": False,
    "live-restore": True,
    "no-new-privileges": "true",
    "data-root": "/srv/docker",
    "default-runtime": "nvidia",
    "runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime", "runtimeArgs": ["--auth=hunter2"]}},
    "proxies": {"http-proxy": "http://alice:pa55w0rd@proxy.internal:3128", "no-proxy": "*.internal"},
    "registry-mirrors": ["https://robot:s3cr3t-token@mirror.internal"],
    "insecure-registries": ["registry.internal:5000"],
    "hosts": ["unix:///var/run/docker.sock", "tcp://0.0.0.0:2375"],
    "tlskey": "/etc/docker/key.pem",
    "log-opts": {"tag": "BEGIN PRIVATE KEY"},
    "authorization-plugins": ["authz"],
}


@pytest.fixture
def docker_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(docker_config, "DAEMON_JSON", str(tmp_path / "daemon.json"))
    monkeypatch.setattr(docker_config, "UNIT_DIRS", (str(tmp_path / "systemd"),))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'nowhere' / 'docker.sock'}")
    return tmp_path


def test_daemon_json_secrets_never_reach_the_facts(docker_env: Path) -> None:
    """Daemon unreachable (the usual case without root): only the checked keys are kept."""
    (docker_env / "daemon.json").write_text(json.dumps(DAEMON_JSON))
    facts = docker_daemon.collect(CollectContext())
    text = json.dumps(to_jsonable(facts))
    for secret in (*SECRETS, "proxy.internal", "mirror.internal", "2375", "key.pem", "authz"):
        assert secret not in text, secret
    assert facts["daemon_json"] == {
        "icc": False, "live-restore": True, "no-new-privileges": True, "data-root": "/srv/docker",
        "default-runtime": "nvidia", "runtimes": {"nvidia": {}},
    }
    assert (facts["icc"], facts["live_restore"], facts["no_new_privileges"]) == (False, True, True)
    assert facts["runtimes"] == ["nvidia", "runc"]


def test_broken_daemon_json_does_not_quote_its_text(docker_env: Path) -> None:
    (docker_env / "daemon.json").write_text('{"proxies": {"http-proxy": "http://a:pa55w0rd@p"}, oops}')
    facts = docker_daemon.collect(CollectContext())
    assert facts["daemon_json"] == Unknown(f"{docker_env / 'daemon.json'} is not valid JSON")


def test_sshd_settings_keep_only_what_checks_need(tmp_path: Path) -> None:
    config = tmp_path / "sshd_config"
    config.write_text(
        "PasswordAuthentication no\nAllowUsers alice bob@10.0.0.5\n"
        "AuthorizedKeysCommand /usr/bin/fetch --token=s3cr3t-token\nBanner /etc/issue.net\n"
    )
    settings, _files, problems = sshd.effective_from_files(config)
    kept = sshd.collected(settings)
    assert problems == []
    assert kept["passwordauthentication"] == "no" and kept["allowusers"] == ["alice", "bob@10.0.0.5"]
    assert "authorizedkeyscommand" not in kept and "banner" not in kept
    assert "s3cr3t-token" not in json.dumps(kept)


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A directory user nobody can traverse (pytest's tmp_path is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="hostcheck-impostor-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process as another user needs root")
def test_a_users_process_named_dockerd_is_not_the_daemon(docker_env: Path, world_dir: Path) -> None:
    """Any user can call a process dockerd and give it --icc=false --live-restore: ignored."""
    binary = world_dir / "dockerd"
    shutil.copy2(shutil.which("sh") or "/bin/sh", binary)
    binary.chmod(0o755)
    impostor = subprocess.Popen(
        [str(binary), "-c", "sleep 60; :", "dockerd", "--icc=false", "--live-restore", "--no-new-privileges"],
        user=65534, group=65534, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while Path(f"/proc/{impostor.pid}/comm").read_text().strip() != "dockerd" and time.monotonic() < deadline:
            time.sleep(0.02)
        flags = docker_config.dockerd_flags()
        facts = docker_daemon.collect(CollectContext())
    finally:
        os.killpg(impostor.pid, signal.SIGKILL)
        impostor.wait(timeout=10)
    assert flags is None or flags.get("live-restore") is None  # a real root dockerd may run here
    if flags is None:
        assert facts["live_restore"] == Unknown("docker daemon not reachable (absent)")
        assert facts["no_new_privileges"] == Unknown("docker daemon not reachable (absent)")


def test_offline_never_contacts_a_tcp_docker_host(docker_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{listener.getsockname()[1]}")
    try:
        facts = docker_daemon.collect(CollectContext(offline=True))
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finally:
        listener.close()
    assert isinstance(facts["reachable"], Unknown) and "--offline" in facts["reachable"].reason
    assert isinstance(facts["version"], Unknown)


STUCK = """
import threading, time
from hostcheck.collectors import CollectContext, CollectorSpec, collect_facts
spec = CollectorSpec("stuck", "stuck", 1.0, False, lambda ctx: threading.Event().wait())
facts = collect_facts(CollectContext(budget_s=1.0), specs=[spec])
print(facts["stuck"].reason, flush=True)
"""


def test_a_stuck_collector_does_not_keep_the_process_alive() -> None:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", STUCK], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "timed out after 1s" in proc.stdout or "budget" in proc.stdout
    assert time.monotonic() - started < 20  # 1 s budget: the stuck thread must not be joined at exit


def test_collectors_refuse_a_fifo_where_a_config_file_should_be(docker_env: Path) -> None:
    """A FIFO as daemon.json would block the collector until its timeout; it is an Unknown at once."""
    os.mkfifo(docker_env / "daemon.json")
    started = time.monotonic()
    facts = docker_daemon.collect(CollectContext())
    assert time.monotonic() - started < docker_daemon.TIMEOUT
    assert facts["daemon_json"] == Unknown(f"cannot read {docker_env / 'daemon.json'}: not a regular file")
