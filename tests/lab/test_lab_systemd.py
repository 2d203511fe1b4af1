"""The nspawn lab host is a real systemd machine, not a chroot with a hand-started sshd.

Roles install units, reload systemd and restart sshd; none of that is tested at all unless
PID 1 is systemd and the machine boots to ``running`` (lab-hosts.md: in a chroot, restarting
ssh killed "PID 1" and service tasks failed).
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.nspawn, pytest.mark.root]


def test_pid1_is_systemd(shared_lab_host):
    """Service and unit tasks only mean something when systemd manages them."""
    host = shared_lab_host.testinfra()
    assert host.file("/proc/1/comm").content_string.strip() == "systemd"


def test_boot_finished_without_failed_units(shared_lab_host):
    """A degraded boot would hide which failures a role causes."""
    result = shared_lab_host.run("systemctl is-system-running; systemctl --failed --no-legend --plain")
    assert result.stdout.strip() == "running", result.stdout


def test_virtualization_is_container(shared_lab_host):
    """Tests and facts may branch on it (Ansible: ansible_virtualization_type == container;
    hostcheck: system.virtualization); the lab must not pass for bare metal."""
    assert shared_lab_host.run("systemd-detect-virt").stdout.strip() == "systemd-nspawn"


@pytest.mark.parametrize(("unit", "enabled"), [
    ("ssh.service", True),
    ("dbus.service", None),  # socket-activated: static
    ("systemd-logind.service", None),
    ("systemd-journald.service", None),
])
def test_core_services_running(shared_lab_host, unit, enabled):
    """sshd is how everything reaches the host; logind/journald/dbus are what a standard
    Debian server runs and what the audit's collectors read."""
    service = shared_lab_host.testinfra().service(unit)
    assert service.is_running
    if enabled is not None:
        assert service.is_enabled is enabled


def test_hosts_are_distinct(lab_hosts):
    """Two hosts of one image must still differ where software keys on identity
    (machine-id for journald and DHCP, hostname for Ansible facts, SSH host keys for clients)."""
    first, second = lab_hosts(2)
    probe = "cat /etc/machine-id; hostname; cat /etc/ssh/ssh_host_ed25519_key.pub | cut -d' ' -f2"
    a, b = (h.run(probe, check=True).stdout.split() for h in (first, second))
    assert a[1] == first.name and b[1] == second.name
    assert a[0] != b[0], "machine-id shared"
    assert a[2] != b[2], "SSH host key shared"


def test_reboot_inside_container_comes_back(lab_host):
    """A role may reboot (kernel params, updates): nspawn exits 133 and the lab restarts it
    on the same root, keeping what was written."""
    lab_host.sudo("echo kept > /etc/lab-reboot-marker", check=True)
    lab_host.reboot()
    assert lab_host.boots() == 2
    assert lab_host.run("cat /etc/lab-reboot-marker", check=True).stdout.strip() == "kept"
