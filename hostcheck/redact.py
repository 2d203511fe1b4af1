"""--redact: remove what identifies the machine or its people from a finished report.

Redaction runs on the JSON-ready report after judging, so verdicts never depend on it. It
works in two steps:

1. Every identifying value the facts hold is learned from where collectors put it: host
   names, user and group names (accounts, group members, home directories, sshd
   AllowUsers/DenyUsers, credential owners), addresses, MACs, serials and UUIDs, container
   names, other machines' names in mount sources.
2. Every string of the report is rewritten in one left-to-right pass that replaces those
   values and anything shaped like an address (IPv4, IPv6 in any notation, MAC, UUID, GPU
   UUID) wherever it appears, in free text too.

Each value gets one placeholder for the whole report (``[user-1]``, ``[ip-2]``), so a
redacted report stays readable: the same address is the same placeholder everywhere.
Loopback and unspecified addresses (127.0.0.1, ::1, 0.0.0.0, ::) identify nobody and stay,
as do version numbers (``1.2.3.4`` after "version" or under a ``*version`` key).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

# Values under these keys are replaced whole, whatever they look like.
KEY_KINDS = {
    "hostname": "host", "serial": "serial", "uuid": "uuid", "mac": "mac", "pci_bus_id": "pci",
    "pci_address": "pci", "address": "ip", "gateway": "ip", "mapped_address": "ip", "host_ip": "ip",
    "server": "host", "user": "user", "container": "container", "machine_id": "uuid",
    "board_serial": "serial", "product_serial": "serial", "product_uuid": "uuid",
}
# Lists whose items are user or group names.
NAME_LISTS = {"docker_group_members", "sudo_group_members", "allowusers", "denyusers", "allowgroups", "denygroups"}
# Keys holding paths that may name a user (/home/NAME/...) or another machine (NAS:/export).
PATH_KEYS = {"home", "path", "unreadable_homes", "device", "files_read"}
# Enumerations the renderers index by: never rewritten (they cannot hold an identifier).
STRUCTURAL_KEYS = {"status", "verdict", "rating", "level", "severity", "op", "id", "check", "blockers",
                   "risks", "unknowns", "exposure", "fix_role", "facts_format", "report_version"}

_HEX4 = "[0-9A-Fa-f]{1,4}"
_V4 = r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
PATTERNS = [
    ("gpu", r"(?<![\w-])(?:GPU|MIG)-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(?![\w])"),
    ("uuid", r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(?![0-9A-Fa-f])"),
    ("mac", r"(?<![\w:-])[0-9A-Fa-f]{2}(?:(?::[0-9A-Fa-f]{2}){5}|(?:-[0-9A-Fa-f]{2}){5})(?![\w:-])"),
    # Anything with two or more colons among hex digits (and an optional dotted IPv4 tail or
    # zone); ipaddress decides whether it really is an address.
    ("ipv6", rf"(?<![\w:.])(?:{_HEX4})?(?::(?:{_HEX4})?){{2,7}}(?::?{_V4})?(?:%[\w.-]+)?(?![\w:]|\.\d)"),
    ("ipv4", rf"(?<![\w.-]){_V4}(?![\w-]|\.\d)"),
]
_VERSION_BEFORE = re.compile(r"(?i)(?:version|ver\.?|release|driver|kernel|v)\s*[:=]?\s*$")
_HOME = re.compile(r"^(?:/home|/Users|/var/home|/export/home)/([^/]+)")
_REMOTE_SOURCE = re.compile(r"^(?://([^/]+)/|([^/:\s][^:/\s]*):/)")  # //server/share, server:/export
_BY_ID = re.compile(r"^/dev/disk/by-(?:id|uuid|partuuid|label|partlabel|path)/(.+)$")


class Redactor:
    """Learns identifying values, then rewrites strings with consistent placeholders."""

    def __init__(self) -> None:
        self.placeholders: dict[tuple[str, str], str] = {}
        self.counts: dict[str, int] = {}
        self.exact: dict[str, str] = {}  # value -> kind, replaced wherever it occurs
        self.addresses: set[str] = set()  # known addresses, replaced as whole tokens
        self.names: dict[str, str] = {}  # value -> kind, replaced as a whole word
        self._names_re: re.Pattern[str] | None = None

    # ---------------------------------------------------------------- placeholders
    def placeholder(self, kind: str, value: str) -> str:
        key = (kind, _normal(kind, value))
        if key not in self.placeholders:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.placeholders[key] = f"[{kind}-{self.counts[kind]}]"
        return self.placeholders[key]

    # ---------------------------------------------------------------- learning
    def learn_name(self, kind: str, value: Any) -> None:
        if isinstance(value, str) and value.strip():
            self.names.setdefault(value.strip(), kind)

    def learn_value(self, kind: str, value: Any) -> None:
        if not isinstance(value, str) or not value.strip():
            return
        if kind == "ip":
            address = _address(value)
            if address is None:
                host = value.rsplit(":", 1)[0] if value.count(":") == 1 else value
                self.learn_name("host", host.strip("[]"))
            elif not _harmless(address):
                self.addresses.add(value)
            return
        if kind in ("host", "user", "container"):
            if kind == "host" and value.count(":") == 1:  # host:port
                value = value.split(":", 1)[0]
            if kind == "host" and _address(value) is not None:  # a server given by address
                self.learn_value("ip", value)
                return
            self.learn_name(kind, value)
            return
        self.exact[value] = kind

    def learn_path(self, value: Any) -> None:
        if not isinstance(value, str):
            return
        home = _HOME.match(value)
        if home:
            self.learn_name("user", home.group(1))
        remote = _REMOTE_SOURCE.match(value)
        if remote:
            self.learn_name("host", remote.group(1) or remote.group(2))
        by_id = _BY_ID.match(value)
        if by_id:
            self.exact[by_id.group(1)] = "device"

    def learn_name_item(self, value: Any) -> None:
        """An AllowUsers-style entry: USER, USER@HOST, or a group name."""
        if not isinstance(value, str):
            return
        for word in value.split():
            user, _, host = word.partition("@")
            self.learn_name("user", user)
            if host:
                self.learn_value("ip", host)

    def learn(self, value: Any, key: str = "", parent: str = "") -> None:
        if isinstance(value, dict):
            if set(value) == {"$unknown"}:
                return
            for child_key, item in value.items():
                self.learn(item, str(child_key), key)
            return
        if isinstance(value, list):
            for item in value:
                if key in NAME_LISTS:
                    self.learn_name_item(item)
                elif key in PATH_KEYS:
                    self.learn_path(item)
                else:
                    self.learn(item, key, parent)
            return
        if key in KEY_KINDS:
            self.learn_value(KEY_KINDS[key], value)
        elif key == "name" and parent == "human_accounts":
            self.learn_name("user", value)
        elif key in NAME_LISTS:
            self.learn_name_item(value)
        if key in PATH_KEYS:
            self.learn_path(value)

    # ---------------------------------------------------------------- rewriting
    def _pattern(self) -> re.Pattern[str]:
        if self._names_re is None:
            parts = [f"(?P<{kind}>{regex})" for kind, regex in PATTERNS]
            exact = sorted(self.exact, key=len, reverse=True)
            addresses = sorted(self.addresses, key=len, reverse=True)
            if addresses:
                alternation = "|".join(re.escape(v) for v in addresses)
                parts.insert(0, rf"(?P<address>(?<![\w.])(?:{alternation})(?!\w|\.\d|:[0-9A-Fa-f]{{0,4}}:))")
            if exact:
                parts.insert(0, "(?P<exact>" + "|".join(re.escape(v) for v in exact) + ")")
            names = sorted(self.names, key=len, reverse=True)
            if names:
                alternation = "|".join(re.escape(n) for n in names)
                parts.append(rf"(?P<name>(?<![\w.-])(?:{alternation})(?![\w-]))")
            self._names_re = re.compile("|".join(parts))
        return self._names_re

    def scrub(self, text: str, versions: bool = False) -> str:
        """``text`` with every identifying value replaced; ``versions``: it is a version field."""
        pattern = self._pattern()

        def replace(match: re.Match[str]) -> str:
            kind = match.lastgroup or ""
            value = match.group()
            if kind == "exact":
                return self.placeholder(self.exact[value], value)
            if kind == "name":
                return self.placeholder(self.names[value], value)
            if kind == "address":
                return self.placeholder("ip", value)
            if kind in ("ipv4", "ipv6"):
                address = _address(value)
                if address is None:
                    return value
                if _harmless(address):
                    return value
                if kind == "ipv4" and (versions or _VERSION_BEFORE.search(match.string[: match.start()])):
                    return value
                return self.placeholder("ip", value)
            return self.placeholder(kind, value)

        return pattern.sub(replace, text)

    def walk(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: (v if k in STRUCTURAL_KEYS and not isinstance(v, (dict, list)) else self.walk(v, str(k)))
                    for k, v in value.items()}
        if isinstance(value, list):
            if key in STRUCTURAL_KEYS:
                return list(value)
            return [self.walk(item, key) for item in value]
        if isinstance(value, str):
            if key in KEY_KINDS and KEY_KINDS[key] not in ("ip",):
                kind = KEY_KINDS[key]
                if kind == "host" and _address(value.rsplit(":", 1)[0] if value.count(":") == 1 else value):
                    return self.scrub(value)
                if kind == "host" and value.count(":") == 1:
                    host, _, port = value.partition(":")
                    return f"{self.placeholder('host', host)}:{port}"
                return self.placeholder(kind, value)
            return self.scrub(value, versions="version" in key)
        return value


def _normal(kind: str, value: str) -> str:
    """One placeholder per value, whatever its notation (2001:DB8::1 is 2001:db8:0::1)."""
    if kind in ("ip", "ipv4", "ipv6"):
        address = _address(value)
        return str(address) if address is not None else value
    if kind in ("mac", "uuid", "gpu"):
        return value.lower().replace("-", ":") if kind == "mac" else value.lower()
    return value


def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    text = value.strip().strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _harmless(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Addresses every machine has: they say nothing about this one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _harmless(address.ipv4_mapped)
    return address.is_loopback or address.is_unspecified


def redact(report: dict[str, Any]) -> dict[str, Any]:
    redactor = Redactor()
    redactor.learn(report)
    redacted = redactor.walk(report)
    redacted["redacted"] = True
    return redacted
