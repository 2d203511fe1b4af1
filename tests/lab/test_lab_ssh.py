"""SSH on the lab host: keys work, passwords do not, and sshd's effective settings are known.

The effective configuration is read with ``sshd -T`` (what sshd will really do after every
Include and drop-in), never by grepping sshd_config: drop-ins re-enabling passwords are the
classic way hardening silently does not apply.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.nspawn, pytest.mark.root]

# the lab's starting point, which roles build on (Debian 12 defaults + the lab drop-in)
SSHD_EFFECTIVE = [
    ("passwordauthentication", "no", "a leaked or guessed password must not open the host"),
    ("kbdinteractiveauthentication", "no", "PAM keyboard-interactive is password login by another name"),
    ("pubkeyauthentication", "yes", "keys are the only way in; without them the lab is unreachable"),
    ("permitrootlogin", "without-password", "Debian's default: root by key only (shown as without-password)"),
    ("permitemptypasswords", "no", "an account without a password must never log in"),
    ("usepam", "yes", "account locks and limits are enforced through PAM on Debian"),
    ("port", "22", "the audit and the inventory both expect sshd on 22"),
]


@pytest.mark.parametrize(("keyword", "expected", "why"), SSHD_EFFECTIVE, ids=[k for k, _, _ in SSHD_EFFECTIVE])
def test_sshd_effective_setting(shared_lab_host, keyword, expected, why):
    """Each setting's reason is in the table (``why``)."""
    effective = shared_lab_host.sudo("sshd -T", check=True).stdout.splitlines()
    values = [line.split(None, 1)[1] for line in effective if line.split(None, 1)[0] == keyword]
    assert values == [expected], f"{keyword}: {values} ({why})"


@pytest.mark.parametrize("user", ["admin", "root"])
def test_key_login_works(shared_lab_host, user):
    """The session key reaches admin (Ansible's user) and root (recovery when sudo breaks)."""
    result = shared_lab_host.run("id -un", user=user, check=True)
    assert result.stdout.strip() == user


def test_password_login_refused(lab_hosts):
    """admin's correct password is refused by the lab host, and accepted by a control host
    whose sshd allows passwords: so the refusal comes from sshd's setting, not from a
    broken password test."""
    strict, lenient = lab_hosts(1)[0], lab_hosts(1, password_auth=True)[0]
    refused = strict.password_login(strict.admin_password)
    assert refused.rc == 255 and "Permission denied" in refused.stderr, refused
    accepted = lenient.password_login(lenient.admin_password)
    assert accepted.rc == 0 and accepted.stdout.strip() == "admin", accepted
