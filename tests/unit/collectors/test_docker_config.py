"""Docker's data root and daemon settings, decided once for the docker and storage facts.

The cases a host meets: the data root in daemon.json (``data-root``, or ``graph`` before
Docker 17.05), as a dockerd flag (on the running daemon's command line, or in the systemd
unit's ExecStart or a drop-in replacing it), reported by the daemon itself, or nowhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hostcheck.collectors import docker_config as dc
from hostcheck.collectors import docker_daemon
from hostcheck.facts import Unknown

UNREADABLE = Unknown("permission denied reading /etc/docker/daemon.json (needs root)")


@pytest.mark.parametrize(("daemon_json", "missing", "flags", "api", "root"), [
    # nothing configured: dockerd's default
    (Unknown("/etc/docker/daemon.json does not exist"), True, {}, None, "/var/lib/docker"),
    ({}, False, {}, None, "/var/lib/docker"),
    ({"live-restore": True}, False, {}, None, "/var/lib/docker"),
    # daemon.json
    ({"data-root": "/data/docker"}, False, {}, None, "/data/docker"),
    ({"graph": "/srv/docker"}, False, {}, None, "/srv/docker"),
    ({"data-root": "  "}, False, {}, None, "/var/lib/docker"),
    # a dockerd flag (running daemon or ExecStart), with or without daemon.json
    (Unknown("/etc/docker/daemon.json does not exist"), True, {"data-root": "/mnt/nvme/docker"}, None,
     "/mnt/nvme/docker"),
    ({"live-restore": True}, False, {"data-root": "/mnt/nvme/docker"}, None, "/mnt/nvme/docker"),
    ({}, False, {"graph": "/old/docker"}, None, "/old/docker"),
    # a flag cannot be read from an unreadable daemon.json, but settles the root by itself
    (UNREADABLE, False, {"data-root": "/mnt/nvme/docker"}, None, "/mnt/nvme/docker"),
    # unreadable daemon.json and no flag: not known, never the default
    (UNREADABLE, False, {}, None, UNREADABLE),
    # the daemon's own answer wins over what the files say
    ({"data-root": "/data/docker"}, False, {}, "/var/lib/docker-rootful", "/var/lib/docker-rootful"),
    (UNREADABLE, False, {}, "/data/docker", "/data/docker"),
    ({"data-root": "/data/docker"}, False, {}, Unknown("GET /info failed"), "/data/docker"),
])
def test_effective_data_root(daemon_json: Any, missing: bool, flags: dict[str, str], api: Any, root: Any) -> None:
    assert dc.effective_data_root(daemon_json, missing, flags, api) == root


@pytest.mark.parametrize(("argv", "flags"), [
    (["dockerd", "-H", "fd://", "--containerd=/run/containerd/containerd.sock"],
     {"containerd": "/run/containerd/containerd.sock"}),
    (["dockerd", "--data-root=/srv/docker", "--live-restore"], {"data-root": "/srv/docker", "live-restore": "true"}),
    (["dockerd", "--data-root", "/srv/docker", "--icc=false"], {"data-root": "/srv/docker", "icc": "false"}),
    (["dockerd", "--live-restore", "--data-root", "/srv/docker"], {"live-restore": "true", "data-root": "/srv/docker"}),
    (["/usr/bin/dockerd", "-D", "--graph", "/old"], {"graph": "/old"}),
    (["dockerd"], {}),
])
def test_dockerd_argv(argv: list[str], flags: dict[str, str]) -> None:
    assert dc.parse_dockerd_argv(argv) == flags


PACKAGED = """\
[Unit]
Description=Docker Application Container Engine

[Service]
Type=notify
ExecStart=/usr/bin/dockerd -H fd:// --containerd=/run/containerd/containerd.sock
"""
DROPIN = """\
[Service]
ExecStart=
ExecStart=/usr/bin/dockerd -H fd:// \\
    --data-root /mnt/nvme/docker
"""


def _units(tmp_path: Path, etc: dict[str, str], lib: dict[str, str]) -> tuple[str, ...]:
    for base, files in (("etc", etc), ("lib", lib)):
        for name, text in files.items():
            path = tmp_path / base / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return (str(tmp_path / "etc"), str(tmp_path / "lib"))


@pytest.mark.parametrize(("etc", "lib", "root"), [
    # the packaged unit alone: the default root
    ({}, {"docker.service": PACKAGED}, "/var/lib/docker"),
    # a drop-in that clears ExecStart and restarts dockerd with --data-root
    ({"docker.service.d/override.conf": DROPIN}, {"docker.service": PACKAGED}, "/mnt/nvme/docker"),
    # a full copy of the unit in /etc replaces the packaged one
    ({"docker.service": PACKAGED.replace("-H fd://", "--data-root=/srv/docker -H fd://")},
     {"docker.service": PACKAGED}, "/srv/docker"),
    # a drop-in in /etc wins over one of the same name in /lib
    ({"docker.service.d/10-root.conf": DROPIN},
     {"docker.service": PACKAGED, "docker.service.d/10-root.conf": DROPIN.replace("/mnt/nvme", "/lib")},
     "/mnt/nvme/docker"),
    # no unit at all
    ({}, {}, "/var/lib/docker"),
])
def test_data_root_from_the_systemd_unit(tmp_path: Path, etc: dict[str, str], lib: dict[str, str], root: str) -> None:
    argv = dc.unit_exec_start(dc.unit_texts(_units(tmp_path, etc, lib)))
    flags = dc.parse_dockerd_argv(argv) if argv else {}
    assert dc.effective_data_root(Unknown("/etc/docker/daemon.json does not exist"), True, flags) == root


def test_an_execstart_that_is_not_dockerd_sets_nothing() -> None:
    assert dc.unit_exec_start(["[Service]\nExecStart=/usr/bin/env FOO=1 /usr/bin/dockerd --data-root /x\n"]) is None
    assert dc.unit_exec_start(["[Unit]\nExecStart=/usr/bin/dockerd --data-root /x\n"]) is None


def test_docker_settings_and_storage_agree_on_the_root() -> None:
    # settings_from_config (the docker section without a daemon) goes through the same function.
    assert docker_daemon.settings_from_config({}, {"data-root": "/mnt/nvme/docker"})["data_root"] == "/mnt/nvme/docker"
    assert docker_daemon.settings_from_config({"graph": "/srv/docker"}, {})["data_root"] == "/srv/docker"


@pytest.mark.parametrize(("text", "kept"), [
    ('{"data-root": "/data/docker", "live-restore": true}', {"data-root": "/data/docker", "live-restore": True}),
    ('{"graph": "/srv/docker", "proxies": {"http-proxy": "http://u:secret@proxy"}}', {"graph": "/srv/docker"}),
    ("", {}),
])
def test_daemon_json_keeps_only_the_checked_keys(tmp_path: Path, text: str, kept: dict[str, Any]) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(text)
    assert dc.read_daemon_json(str(path)) == kept


@pytest.mark.parametrize("text", ["[1]", "{oops", json.dumps({"a": [[[[[]]]]]})[:-1]])
def test_bad_daemon_json_is_unknown_without_quoting_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "daemon.json"
    path.write_text(text)
    got = dc.read_daemon_json(str(path))
    assert isinstance(got, Unknown) and str(path) in got.reason and "oops" not in got.reason
