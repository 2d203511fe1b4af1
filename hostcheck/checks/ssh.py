"""SSH checks (SSH-*): the effective sshd settings a public host needs."""

from __future__ import annotations

from typing import Any, NamedTuple

from hostcheck.checks.base import Outcome, check, family, is_macos, need, pass_if, passed, setting
from hostcheck.checks.readers import SSH_SETTINGS as _SETTINGS
from hostcheck.checks.readers import listening_sockets, ssh_ports
from hostcheck.errors import Missing
from hostcheck.facts import Unknown, lookup

SSH = family("SSH", "SSH", order=70)

SAFE_ROOT_LOGIN = frozenset({"no", "prohibit-password", "without-password", "forced-commands-only"})
_INSTALLED = "ssh.installed"


def _remote_login_off(facts: dict[str, Any]) -> bool:
    """macOS with sshd not running and nothing listening on its port: Remote Login is off
    (launchd listens on the port itself while it is on, and starts sshd per connection)."""
    if not is_macos(facts) or lookup(facts, "ssh.running") is not False:
        return False
    try:
        listening = listening_sockets(facts)
    except Missing:
        return True  # sshd not running is all there is to go on
    if not isinstance(listening, list):
        return True
    ports = ssh_ports(facts)
    return not any(isinstance(s, dict) and str(s.get("port")) in ports and s.get("proto") == "tcp" for s in listening)


def _ssh_setting(facts: dict[str, Any], key: str) -> str | None:
    """The effective sshd value, or None when no sshd is installed (nothing to harden)."""
    if lookup(facts, _INSTALLED) is False or _remote_login_off(facts):
        return None
    settings = need(facts, _SETTINGS)
    value = settings.get(key)
    if isinstance(value, Unknown) or value is None:
        raise Missing(f"{_SETTINGS}.{key}", "not in the effective configuration")
    return str(value).lower()


def _ssh_rule(key: str, good: frozenset[str]) -> Any:
    def judge(facts: dict[str, Any], _threshold: Any) -> Outcome:
        value = _ssh_setting(facts, key)
        if value is None:
            return passed("no sshd installed" if lookup(facts, _INSTALLED) is False
                          else "sshd not running, nothing listening on its port (macOS Remote Login off)")
        source = lookup(facts, "ssh.source")
        origin = f"effective value from {source}" if isinstance(source, str) else ""
        origins = lookup(facts, "ssh.origins")
        where = origins.get(key) if isinstance(origins, dict) else None
        if isinstance(where, str):
            origin = f"{origin}, set in {where}" if origin else f"set in {where}"
        if value not in good and lookup(facts, "ssh.socket_activated") is True:
            origin += "; sshd is started by ssh.socket (after a change: restart ssh.service, a reload stops it)"
        return pass_if(value in good, value, origin)

    return judge


class SshRule(NamedTuple):
    """An SSH-* check that one effective sshd setting has a safe value."""

    id: str
    title: str
    setting: str
    """As sshd_config(5) spells it (the report names it so); ``sshd -T`` prints it in lower case."""
    safe: frozenset[str]
    """The safe values, in lower case as ``sshd -T`` prints them."""
    why: str
    fix: str
    fix_role: str
    requirement: str


SSH_RULES = (
    SshRule("SSH-1010", "SSH password login off", "PasswordAuthentication", frozenset({"no"}),
            "Password logins are brute-forced within hours of a host appearing in a public listing.",
            "`PasswordAuthentication no` in a drop-in that sshd reads first (sshd keeps the first value; "
            "cloud-init's 50-cloud-init.conf can re-enable it)", "ssh_hardening: ssh_hardening_enabled",
            "SSH password login must be off"),
    SshRule("SSH-1020", "No root login with a password", "PermitRootLogin", SAFE_ROOT_LOGIN,
            "Root with a password is the first account every scanner tries.",
            "`PermitRootLogin prohibit-password` (or `no`)", "ssh_hardening: ssh_hardening_permit_root_login",
            "root must not log in over SSH with a password"),
    SshRule("SSH-1030", "No empty SSH passwords", "PermitEmptyPasswords", frozenset({"no"}),
            "An account without a password would be open to anyone.",
            "`PermitEmptyPasswords no`", "ssh_hardening: ssh_hardening_enabled",
            "SSH must refuse empty passwords"),
    SshRule("SSH-1040", "SSH keyboard-interactive login off", "KbdInteractiveAuthentication", frozenset({"no"}),
            "Keyboard-interactive is password login by another name when PAM asks for a password.",
            "`KbdInteractiveAuthentication no`", "ssh_hardening: ssh_hardening_enabled",
            "SSH keyboard-interactive login must be off"),
)

for _rule in SSH_RULES:
    check(_rule.id, title=_rule.title, op="in", threshold="none", why=_rule.why, fix=_rule.fix,
          fix_role=_rule.fix_role, shown=setting(_rule.setting), requirement=_rule.requirement)(_ssh_rule(_rule.setting.lower(), _rule.safe))
