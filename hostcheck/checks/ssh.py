"""SSH checks (SSH-*): the effective sshd settings a public host needs."""

from __future__ import annotations

from typing import Any

from hostcheck.checks.base import Missing, Outcome, check, need, pass_if, passed, setting
from hostcheck.facts import Unknown, lookup

SAFE_ROOT_LOGIN = {"no", "prohibit-password", "without-password", "forced-commands-only"}


def _ssh_setting(facts: dict[str, Any], key: str) -> str | None:
    """The effective sshd value, or None when no sshd is installed (nothing to harden)."""
    if lookup(facts, "ssh.installed") is False:
        return None
    settings = need(facts, "ssh.settings")
    value = settings.get(key)
    if isinstance(value, Unknown) or value is None:
        raise Missing(f"ssh.settings.{key}", "not in the effective configuration")
    return str(value).lower()


def _ssh_rule(key: str, good: set[str]) -> Any:
    def judge(facts: dict[str, Any], _threshold: Any) -> Outcome:
        value = _ssh_setting(facts, key)
        if value is None:
            return passed("no sshd installed")
        source = lookup(facts, "ssh.source")
        origin = f"effective value from {source}" if isinstance(source, str) else ""
        return pass_if(value in good, value, origin)

    return judge


SSH_RULES = [
    ("SSH-1010", "SSH password login off", "passwordauthentication", {"no"},
     "Password logins are brute-forced within hours of a host appearing in a public listing.",
     "`PasswordAuthentication no` in a drop-in that sshd reads first (sshd keeps the first value; "
     "cloud-init's 50-cloud-init.conf can re-enable it)", "ssh_hardening: ssh_hardening_enabled"),
    ("SSH-1020", "No root login with a password", "permitrootlogin", SAFE_ROOT_LOGIN,
     "Root with a password is the first account every scanner tries.",
     "`PermitRootLogin prohibit-password` (or `no`)", "ssh_hardening: ssh_hardening_permit_root_login"),
    ("SSH-1030", "No empty SSH passwords", "permitemptypasswords", {"no"},
     "An account without a password would be open to anyone.",
     "`PermitEmptyPasswords no`", "ssh_hardening: ssh_hardening_enabled"),
    ("SSH-1040", "SSH keyboard-interactive login off", "kbdinteractiveauthentication", {"no"},
     "Keyboard-interactive is password login by another name when PAM asks for a password.",
     "`KbdInteractiveAuthentication no`", "ssh_hardening: ssh_hardening_enabled"),
]

SSHD_NAMES = {
    "passwordauthentication": "PasswordAuthentication", "permitrootlogin": "PermitRootLogin",
    "permitemptypasswords": "PermitEmptyPasswords", "kbdinteractiveauthentication": "KbdInteractiveAuthentication",
}
"""sshd -T prints keys in lower case; the report names them as sshd_config(5) spells them."""

for _id, _title, _key, _good, _why, _fix, _role in SSH_RULES:
    check(_id, title=_title, op="in", threshold="none", why=_why, fix=_fix, fix_role=_role,
          shown=setting(SSHD_NAMES[_key]))(_ssh_rule(_key, _good))
