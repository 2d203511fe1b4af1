"""Accounts on the lab host look like a cloud server's: one human admin with sudo, root locked."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.nspawn, pytest.mark.root]


@pytest.mark.parametrize(("attribute", "expected", "why"), [
    ("uid", 1000, "the first human account: hostcheck counts uid >= 1000 as human"),
    ("shell", "/bin/bash", "a real login shell, so the audit sees a human account"),
    ("home", "/home/admin", "authorized_keys live there"),
])
def test_admin_account(shared_lab_host, attribute, expected, why):
    """Each row's reason is in ``why``."""
    user = shared_lab_host.testinfra().user("admin")
    assert user.exists
    assert getattr(user, attribute) == expected, why


def test_admin_in_sudo_group(shared_lab_host):
    """Debian's sudoers grants the sudo group; hostcheck reports its members."""
    assert "sudo" in shared_lab_host.testinfra().user("admin").groups


def test_admin_sudo_without_password(shared_lab_host):
    """Ansible's become and testinfra's sudo cannot type a password: NOPASSWD is required."""
    result = shared_lab_host.run("sudo -n id -u", check=True)
    assert result.stdout.strip() == "0"


def test_sudoers_dropin_safe(shared_lab_host):
    """sudo ignores (and warns about) drop-ins that are writable by others or not root's."""
    dropin = shared_lab_host.testinfra("root").file("/etc/sudoers.d/90-lab-admin")
    assert (dropin.user, dropin.group, dropin.mode) == ("root", "root", 0o440)
    assert shared_lab_host.sudo("visudo -c -q", check=True).ok


def test_root_password_locked(shared_lab_host):
    """Root has no usable password: only the session key reaches it."""
    status = shared_lab_host.sudo("passwd -S root", check=True).stdout.split()
    assert status[1] == "L", status


def test_admin_has_a_real_password(shared_lab_host):
    """admin does have a password (random per host): the password-login test is only
    meaningful when there is a correct password to refuse."""
    status = shared_lab_host.sudo("passwd -S admin", check=True).stdout.split()
    assert status[1] == "P", status
