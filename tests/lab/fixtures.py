"""pytest fixtures for the lab (registered in tests/conftest.py through ``pytest_plugins``).

A lab that cannot run here is reported, never faked: without root the lab tests are
skipped with the reason; with root but missing tools they fail with the apt packages to
install.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.lab.nspawn import LabHost
from tests.lab.rootfs import Rootfs, ensure_rootfs
from tests.lab.session import Lab

TOOLS = {
    "debootstrap": "debootstrap", "systemd-nspawn": "systemd-container", "slirp4netns": "slirp4netns",
    "qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils", "ssh": "openssh-client",
    "ssh-keygen": "openssh-client", "scp": "openssh-client", "ip": "iproute2", "nsenter": "util-linux",
    "unshare": "util-linux", "mkfs.ext4": "e2fsprogs", "openssl": "openssl",
}


def require_lab() -> None:
    """Skip (with the reason) without root; fail loudly when a tool is missing."""
    if os.geteuid() != 0:
        pytest.skip("lab hosts need root (namespaces, nspawn, mounts): run the suite as root")
    missing = sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})
    if missing:
        pytest.fail(f"lab tools missing: apt-get install {' '.join(missing)}", pytrace=False)


@pytest.fixture(scope="session")
def lab_rootfs() -> Rootfs:
    """The cached Debian 12 rootfs (built by debootstrap on first use, ~70 s)."""
    require_lab()
    return ensure_rootfs()


@pytest.fixture(scope="session")
def lab(lab_rootfs: Rootfs) -> Iterator[Lab]:
    """This session's lab: hub namespace, SSH key, ssh_config, inventory of all hosts."""
    session = Lab(lab_rootfs)
    try:
        yield session
    finally:
        session.close()


@pytest.fixture
def lab_hosts(lab: Lab) -> Iterator[Callable[..., list[LabHost]]]:
    """Factory: ``lab_hosts(n, **options) -> [LabHost]``; every host is stopped after the test."""
    started: list[LabHost] = []

    def factory(count: int = 1, **options: Any) -> list[LabHost]:
        hosts = lab.start_hosts(count, **options)
        started.extend(hosts)
        return hosts

    try:
        yield factory
    finally:
        lab.stop_hosts(started)


@pytest.fixture
def lab_host(lab_hosts: Callable[..., list[LabHost]]) -> LabHost:
    """One fresh nspawn host, private to this test."""
    return lab_hosts(1)[0]


@pytest.fixture(scope="session")
def shared_lab_host(lab: Lab) -> Iterator[LabHost]:
    """One nspawn host for the whole session: read-only tests only (do not change it)."""
    host = lab.start_hosts(1)[0]
    try:
        yield host
    finally:
        lab.stop_hosts([host])
