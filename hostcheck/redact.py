"""--redact: remove what identifies the machine or its people, by what each value IS.

Redaction works on the facts, by kind. Each fact path declares its kind in
:mod:`hostcheck.fact_paths` (``meta.hostname=host``, ``isolation.human_accounts.*.name=user``,
``network.path.local_ipv4=addr`` ...; see :data:`KINDS`). A user name is replaced where the facts
say it is a user name (account fields, the name after ``/home/``, the user part of ``user@host``
and of URL credentials), never as a word of unrelated text; the host's name is replaced by its
labels (the full name, the short name, the domain) in free text; values the checks compare
(``system.os_id``, GPU model names, verdict words) lose only what is shaped like an identifier
and dotted names, never a learned single word, so a user (or a host) called ``ubuntu`` leaves
``os_id: ubuntu`` alone.

The redacted report is then judged again from the redacted facts (see :func:`redacted_report`), so
policy text (titles, why, fix) is never touched and every measured value comes from redacted
facts. Addresses are replaced by addresses of the same scope, so the checks that classify them
(CGNAT, double NAT, IPv4/IPv6) judge the redacted facts as they judged the originals:

* private, shared (100.64/10), link-local and unique-local addresses get a keyed,
  prefix-preserving permutation of the bits after their block (10.1.2.3 stays in 10/8, two
  addresses of one /24 stay in one /24, a network keeps its members);
* global addresses become documentation addresses (192.0.2.0/24, 198.51.100.0/24,
  203.0.113.0/24, 2001:db8::/32), counted in order, and ``network.path.public_ranges`` names
  those blocks so that they still count as public; other reserved addresses become 240.0.0.N
  or 100::N;
* loopback, unspecified, multicast and broadcast addresses identify nobody and stay.

Everything else is a placeholder, one per value for the whole report (``[user-1]``,
``[host-2]``, ``[mac-1]``, ``enx[mac-1]`` for an interface named after its MAC), so the same
value reads the same everywhere. URLs lose their credentials and their query string.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
from collections.abc import Callable
from functools import cache
from typing import Any

from hostcheck.fact_paths import DECLARED, KINDS, TABLE, declared_child
from hostcheck.facts import hostname
from hostcheck.models import Finding, Host, Policy, Report

UNKNOWN_KEY = "$unknown"

MIN_WORD_LABEL = 3
"""A learned short host name shorter than this is replaced only inside its dotted name."""
MIN_HYPHEN_LABEL = 4
"""A host name inside a hyphen-joined word is replaced when it is at least this long."""

# Accounts every Unix system has: their names say nothing about this machine or its people.
UNIVERSAL_USERS = frozenset({"root"})
# Domains that name no organisation (the default of home routers and mDNS).
COMMON_DOMAINS = frozenset({"lan", "local", "home", "localdomain", "internal", "home.arpa", "localhost", "intranet"})

# Public distribution and registry hosts: a URL naming one (an APT mirror, Docker Hub) says
# nothing about this machine; every other URL's host is another machine's name and goes.
PUBLIC_DOMAINS = ("debian.org", "ubuntu.com", "canonical.com", "launchpad.net", "launchpadcontent.net", "nvidia.com",
                  "docker.com", "docker.io", "ghcr.io", "quay.io", "github.com", "githubusercontent.com", "pypi.org",
                  "pythonhosted.org", "vast.ai", "salad.com", "kernel.org", "fedoraproject.org")

# What firmware and drivers write where they have no serial: the same on every machine.
NON_VALUES = frozenset({"n/a", "[n/a]", "na", "none", "null", "unknown", "not specified", "not available", "default string",
                        "to be filled by o.e.m.", "system serial number", "0", "123456789", "0123456789"})

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Blocks whose members keep their block (and their shared prefixes) under a keyed permutation.
_PERMUTED_BLOCKS = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/64", "fe80::/10",
))
_GLOBAL_V4_BLOCKS = tuple(ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "198.18.0.0/15"))
_GLOBAL_V6_BLOCK = ipaddress.ip_network("2001:db8::/32")
SUBSTITUTE_PUBLIC_RANGES = [str(n) for n in (*_GLOBAL_V4_BLOCKS, _GLOBAL_V6_BLOCK)]
_OTHER_V4_BLOCK = ipaddress.ip_network("240.0.0.0/4")
_OTHER_V6_BLOCK = ipaddress.ip_network("100::/64")

_HEX4 = "[0-9A-Fa-f]{1,4}"
_V4 = r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_V6 = rf"(?:{_HEX4})?(?::(?:{_HEX4})?){{2,7}}(?::?{_V4})?"
_V4_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_V4_HYPHENS = rf"{_V4_OCTET}(?:-{_V4_OCTET}){{3}}"
_HOME = r"(?:/home|/Users|/var/home|/export/home|/usr/home)"
_USER = r"[A-Za-z0-9_][A-Za-z0-9._-]*\$?"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# systemd.net-naming-scheme(7): en/ib/sl/wl/ww + "x" + the 12 hex digits of the MAC.
_MAC_IFACE = r"(?P<mac_iface_prefix>en|ib|sl|wl|ww)x(?P<mac_iface_hex>[0-9A-Fa-f]{12})"
_VERSION_BEFORE = re.compile(r"(?i)(?<![a-z])(?:version|ver\.?|release|driver|kernel|v)\s*[:=]?\s*$")

# One left-to-right pass; earlier alternatives win.
_PATTERNS = [
    # scheme://[user[:password]@]host[:port][/path][?query][#fragment]
    ("url", r"(?P<url_scheme>[A-Za-z][A-Za-z0-9+.-]{1,15}://)(?:[^\s/@?#]*@)?(?P<url_host>\[[0-9A-Fa-f:.%\w]+\]|[^\s/:?#]+)"
            r"(?P<url_port>:\d{1,5})?(?P<url_path>/[^\s?#]*)?(?:[?#][^\s]*)?"),
    ("gpu", r"(?<![\w-])(?i:GPU|MIG)-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(?!\w)"),
    ("uuid", r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(?![0-9A-Fa-f])"),
    ("mac_iface", rf"(?<![A-Za-z0-9]){_MAC_IFACE}(?![A-Za-z0-9])"),
    ("mac", r"(?<![\w:-])[0-9A-Fa-f]{2}(?:(?::[0-9A-Fa-f]{2}){5}|(?:-[0-9A-Fa-f]{2}){5})(?![\w:-])"),
    # Twelve hex digits with a letter among them (a byte count has none), or Cisco's 0011.2233.4455.
    ("mac_bare", r"(?<![\w.:-])(?:(?=[0-9]*[A-Fa-f])[0-9A-Fa-f]{12}|[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4})(?![\w:-]|\.\w)"),
    # An address inside a reverse-DNS style host name: ip-10-44-3-21.ec2.internal, 203-0-113-5.isp.example.
    ("rdns", rf"(?:(?<=[A-Za-z]-)|(?<![\w-])){_V4_HYPHENS}(?![\w-])"),
    ("home", rf"(?<![\w.-]){_HOME}/(?P<home_user>[^/\s:'\"]+)"),
    ("userhost", rf"(?<![\w.+%-])(?P<uh_user>{_USER})@(?P<uh_host>\[[0-9A-Fa-f:.]+\]|{_V4}|{_LABEL}(?:\.{_LABEL})*)(?![\w-])"),
    ("ipv6", rf"(?<![\w:.]){_V6}(?:%[\w.-]+)?(?:/\d{{1,3}})?(?![\w:]|\.\d)"),
    ("ipv4", rf"(?<![\w.]){_V4}(?:/\d{{1,2}})?(?![\w]|\.\d)"),
]
_PATTERN_RE = re.compile("|".join(f"(?P<{kind}>{regex})" for kind, regex in _PATTERNS))
_LABELS = re.compile(rf"(?<![\w-]){_LABEL}(?:\.{_LABEL})*(?![\w-])")
_REMOTE_PATH = re.compile(rf"(?<![\w.@/:-])(?P<host>{_LABEL}(?:\.{_LABEL})*):/(?!/)")
_PATH_SEGMENT = re.compile(r"(?<=/)[^/\s:'\"\[\]]+(?=/|$|[\s:'\",;)])")
_HOSTPORT = re.compile(rf"(?<![\w.@/-])(?P<host>{_LABEL}(?:\.{_LABEL})+):\d{{1,5}}(?!\d)")


def _address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _kept(address: IPAddress) -> bool:
    """Addresses every machine has or every network uses alike: they say nothing about this one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _kept(address.ipv4_mapped)
    return (address.is_loopback or address.is_unspecified or address.is_multicast
            or address == ipaddress.IPv4Address("255.255.255.255"))


def _in_ranges(address: IPAddress, ranges: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    return any(address.version == net.version and address in net for net in ranges)


class Redactor:
    """Learns identifying values from the facts, then rewrites them with consistent replacements.

    One Redactor can redact several hosts' facts (``hostcheck fleet --redact``): the same value
    gets the same replacement across all of them.
    """

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key if key is not None else os.urandom(32)
        self.placeholders: dict[tuple[str, str], str] = {}
        self.counts: dict[str, int] = {}
        self.addresses: dict[IPAddress, IPAddress] = {}
        self.exact: dict[str, str] = {}  # value -> kind, replaced wherever it occurs
        self.hosts: dict[str, str] = {}  # lower-case label sequence -> kind ("host", "domain")
        self.users: set[str] = set()  # user names the facts name: replaced as a segment of any path
        self.public_ranges: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        self.substitute_blocks: set[str] = set()  # documentation blocks handed out as public addresses
        self._exact_re: re.Pattern[str] | None = None

    # ---------------------------------------------------------------- placeholders
    def placeholder(self, kind: str, value: str) -> str:
        key = (kind, value.lower() if kind in ("host", "domain", "mac", "uuid", "gpu") else value)
        if key not in self.placeholders:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.placeholders[key] = f"[{kind}-{self.counts[kind]}]"
        return self.placeholders[key]

    def user(self, name: str) -> str:
        if not name or name in UNIVERSAL_USERS or name.startswith("[user-"):
            return name
        self.users.add(name)
        return self.placeholder("user", name)

    def _path_users(self, text: str) -> str:
        """A known user name as a segment of any path (``/mnt/alice/``, ``nas:/export/alice``)."""
        if not self.users or "/" not in text:
            return text
        return _PATH_SEGMENT.sub(lambda m: self.user(m.group()) if m.group() in self.users else m.group(), text)

    def mac(self, value: str) -> str:
        hexdigits = re.sub(r"[^0-9A-Fa-f]", "", value).lower()
        return self.placeholder("mac", ":".join(hexdigits[i:i + 2] for i in range(0, len(hexdigits), 2)))

    # ---------------------------------------------------------------- addresses
    def address(self, address: IPAddress) -> IPAddress:
        """The same-scope replacement of one address (itself when it identifies nobody)."""
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            inner = self.address(address.ipv4_mapped)
            return ipaddress.IPv6Address(int(address) & ~0xFFFFFFFF | int(inner))
        if _kept(address):
            return address
        if address not in self.addresses:
            self.addresses[address] = self._substitute(address)
        return self.addresses[address]

    def _substitute(self, address: IPAddress) -> IPAddress:
        if not _in_ranges(address, self.public_ranges):
            for block in _PERMUTED_BLOCKS:
                if address.version == block.version and address in block:
                    return self._permute(address, block.prefixlen)
        scope_global = _in_ranges(address, self.public_ranges) or address.is_global
        count_key = f"{'global' if scope_global else 'other'}{address.version}"
        self.counts[count_key] = self.counts.get(count_key, 0) + 1
        number = self.counts[count_key]
        if address.version == 6:
            block6 = _GLOBAL_V6_BLOCK if scope_global else _OTHER_V6_BLOCK
            if scope_global:
                self.substitute_blocks.add(str(block6))
            return ipaddress.IPv6Address(int(block6.network_address) + number)
        if not scope_global:
            return ipaddress.IPv4Address(int(_OTHER_V4_BLOCK.network_address) + number)
        for block4 in _GLOBAL_V4_BLOCKS:  # skip each block's network and broadcast address
            usable = block4.num_addresses - 2
            if number <= usable:
                self.substitute_blocks.add(str(block4))
                return ipaddress.IPv4Address(int(block4.network_address) + number)
            number -= usable
        return ipaddress.IPv4Address(int(_OTHER_V4_BLOCK.network_address) + number)  # beyond 131k addresses

    def _permute(self, address: IPAddress, keep: int) -> IPAddress:
        """Prefix-preserving (Crypto-PAn style): bit i flips by a keyed function of bits 0..i-1."""
        bits = address.max_prefixlen
        value = int(address)
        out = value
        for i in range(keep, bits):
            prefix = f"{address.version}/{i}/{value >> (bits - i) if i else 0}".encode()
            if hmac.new(self._key, prefix, hashlib.sha256).digest()[0] & 1:
                out ^= 1 << (bits - 1 - i)
        return type(address)(out)

    def address_text(self, text: str) -> str:
        """An address written as text (``[v6]:port``, ``v4:port``, ``v6%zone``, ``addr/len``)
        replaced; anything else in an address field is taken as a host name (``host:port``)."""
        match = re.fullmatch(r"(\[)?([0-9A-Fa-f:.]+)(%[\w.-]+)?(\])?(:\d{1,5}|/\d{1,3})?", text.strip())
        if match and bool(match.group(1)) == bool(match.group(4)):
            address = _address(match.group(2))
            if address is not None:
                zone = self.scrub(match.group(3) or "", names=False)
                suffix = match.group(5) or ""
                replaced = self.address(address)
                length = int(suffix[1:]) if suffix.startswith("/") else address.max_prefixlen
                if length < address.max_prefixlen and replaced != address:
                    # A network stays a network: the host bits of its address stay zero.
                    network = ipaddress.ip_network(f"{address}/{length}", strict=False)
                    if address == network.network_address:
                        replaced = ipaddress.ip_network(f"{replaced}/{length}", strict=False).network_address
                body = f"{replaced}{zone}"
                return f"[{body}]{suffix}" if match.group(1) else f"{body}{suffix}"
        if text.count(":") == 1:  # host:port
            host, _, port = text.partition(":")
            if port.isdigit():
                return f"{self.host(host)}:{port}"
        return self.host(text)

    # ---------------------------------------------------------------- host names
    def learn_host(self, name: str, own: bool = False) -> None:
        """A host name, replaced wherever it appears as labels of text. ``own``: this machine's
        name, whose short name and domain go too (other machines' names go whole)."""
        name = name.strip().strip(".").lower()
        if not name or _address(name) is not None or not re.fullmatch(rf"{_LABEL}(?:\.{_LABEL})*", name):
            return
        self.hosts.setdefault(name, "host")
        short, _, domain = name.partition(".")
        if own and len(short) >= MIN_WORD_LABEL:
            # A one- or two-letter short name is a word of ordinary text ("a", "x"): it goes
            # only as part of the dotted name.
            self.hosts.setdefault(short, "host")
            labels = domain.split(".") if domain else []
            # The domain and each parent with two labels or more (the organisation's own name).
            for start in range(0, max(len(labels) - 1, 1)):
                parent = ".".join(labels[start:])
                if parent and parent not in COMMON_DOMAINS:
                    self.hosts.setdefault(parent, "domain")


    def host(self, name: str) -> str:
        """A host-name value, whole: one placeholder per name (any case), an address by its own kind."""
        if not name.strip():
            return name
        if _address(name) is not None:
            return self.address_text(name)
        if re.fullmatch(r"\[(?:host|domain)-\d+\]", name.strip()):
            return name  # redacted already (a redacted report in a fleet)
        if not re.fullmatch(rf"{_LABEL}(?:\.{_LABEL})*\.?", name.strip()):
            return self.placeholder("host", name)  # not a host name, but in a host field: whole
        self.learn_host(name)
        return self.placeholder("host", name.strip().strip(".").lower())

    def _replace_hosts(self, text: str, dotted: bool = False) -> str:
        """Learned host names replaced as labels of ``text`` (never inside another word), the
        longest known run of labels first; ``dotted``: only names of two labels or more (a
        single label could be a word of a value the checks compare)."""
        if not self.hosts:
            return text

        def replace(match: re.Match[str]) -> str:
            labels = match.group().split(".")
            out: list[str] = []
            i = 0
            while i < len(labels):
                for j in range(len(labels), i, -1):
                    name = ".".join(labels[i:j]).lower()
                    kind = self.hosts.get(name)
                    if kind is not None and (not dotted or "." in name):
                        out.append(self.placeholder(kind, name))
                        i = j
                        break
                else:
                    out.append(hyphen_parts(labels[i]))
                    i += 1
            return ".".join(out)

        def hyphen_parts(label: str) -> str:
            """A host name joined to other words by hyphens ("backup-rig7") goes too, for names
            long enough not to be an ordinary part of such words."""
            if "-" not in label or dotted:
                return label
            parts = label.split("-")
            return "-".join(self.placeholder(self.hosts[p.lower()], p.lower())
                            if len(p) >= MIN_HYPHEN_LABEL and p.lower() in self.hosts else p for p in parts)

        return _LABELS.sub(replace, text)

    # ---------------------------------------------------------------- exact values
    def learn_exact(self, kind: str, value: str) -> None:
        if len(value.strip()) >= 3 and value.strip().lower() not in NON_VALUES and value.strip() not in self.exact:
            self.exact[value.strip()] = kind
            self._exact_re = None

    def _replace_exact(self, text: str) -> str:
        if not self.exact:
            return text
        if self._exact_re is None:
            values = sorted(self.exact, key=len, reverse=True)
            self._exact_re = re.compile(r"(?<![\w])(?:" + "|".join(re.escape(v) for v in values) + r")(?![\w])")
        def replace(match: re.Match[str]) -> str:
            kind = self.exact[match.group()]
            gpu = kind == "uuid" and re.match(r"(?i)(?:GPU|MIG)-", match.group())
            return self.placeholder("gpu" if gpu else kind, match.group())

        return self._exact_re.sub(replace, text)

    # ---------------------------------------------------------------- free text
    def scrub(self, text: str, names: bool = True, versions: bool = False, url_hosts: bool = True) -> str:
        """``text`` with every identifying value replaced. ``names``: also the learned host labels
        (free text; not values the checks compare). ``versions``: dotted quads are versions.
        ``url_hosts``: a URL's host is another machine's name (False: only a learned name goes,
        as in APT sources, whose hosts are public mirrors)."""

        def replace(match: re.Match[str]) -> str:
            kind = match.lastgroup or ""
            value = match.group()
            if kind == "url":
                host = match.group("url_host")
                host = self.address_text(host) if _address(host) is not None else (
                    self._replace_hosts(host, dotted=not names) if _public_host(host) else self.host(host))
                path = self.scrub(match.group("url_path") or "", names=names)
                return f"{match.group('url_scheme')}{host}{match.group('url_port') or ''}{path}"
            if kind == "home":
                return value[: match.start("home_user") - match.start()] + self.user(match.group("home_user"))
            if kind == "userhost":
                host = match.group("uh_host")
                host = self.address_text(host) if _address(host) is not None else (
                    self.host(host) if names else self._replace_hosts(host, dotted=True))
                return f"{self.user(match.group('uh_user'))}@{host}"
            if kind == "mac_iface":
                return f"{match.group('mac_iface_prefix')}x{self.mac(match.group('mac_iface_hex'))}"
            if kind in ("mac", "mac_bare"):
                return self.mac(value)
            if kind == "rdns":
                return "-".join(self.address_text(value.replace("-", ".")).split("."))
            if kind in ("ipv4", "ipv6"):
                if _address(value.split("/", 1)[0]) is None:
                    return value
                if kind == "ipv4" and (versions or _VERSION_BEFORE.search(match.string[: match.start()])):
                    return value
                return self.address_text(value)
            return self.placeholder(kind, value)

        out = _PATTERN_RE.sub(replace, text)
        out = self._path_users(self._replace_exact(out))
        return self._replace_hosts(out, dotted=not names)

    def learn_server(self, text: str) -> None:
        """A server the user named (URL or HOST[:PORT]): its name goes wherever it appears."""
        url = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/@]*@)?(\[[^\]]*\]|[^/:?#]+)", text.strip())
        host = url.group(1) if url else text.strip().rsplit(":", 1)[0] if text.count(":") == 1 else text.strip()
        self.learn_host(host)

    def learn_text(self, text: str) -> None:
        """Host names written as ``host:port``, ``host:/path`` or in a URL of free text are host
        names; the user after ``/home/`` or before ``@host`` is a user name."""
        for match in (*_HOSTPORT.finditer(text), *_REMOTE_PATH.finditer(text)):
            host = match.group("host")
            if "." in host or (len(host) >= MIN_WORD_LABEL and host.lower() not in URL_SCHEMES):
                self.learn_host(host)
        for match in _PATTERN_RE.finditer(text):
            if match.lastgroup == "url" and _address(match.group("url_host")) is None:
                if not _public_host(match.group("url_host")):
                    self.learn_host(match.group("url_host"))
            elif match.lastgroup in ("home", "userhost"):
                self.user(match.group("home_user" if match.lastgroup == "home" else "uh_user"))

    # ---------------------------------------------------------------- by kind
    def value(self, kind: str, text: str, keyword: str = "", path: str = "") -> str:
        """One string of kind ``kind`` at fact ``path``; ``keyword``: the key the data chose above
        it (an sshd keyword)."""
        if kind == "host" and "://" in text:
            return self.scrub(text)
        if kind == "host":
            return self.address_text(text) if _address(text.rsplit(":", 1)[0].strip("[]")) is not None else self.host_port(text)
        if kind == "addr":
            return self.address_text(text) if text.strip() else text
        if kind == "user":
            return self.user(text)
        if kind == "users":
            return " ".join(self._user_entry(word) for word in text.split(" "))
        if kind == "mac":
            return self.mac(text) if re.search(r"[0-9A-Fa-f]", text) else text
        if kind in ("serial", "uuid", "container"):
            if not text.strip() or text.strip().lower() in NON_VALUES:
                return text
            if kind == "uuid" and re.match(r"(?i)(?:GPU|MIG)-", text):
                kind = "gpu"  # the placeholder free text gives it
            return self.placeholder(kind, text)
        if kind == "sshd":
            keyword = keyword.lower()
            if keyword in ("allowusers", "denyusers", "allowgroups", "denygroups"):
                return " ".join(self._user_entry(word) for word in text.split(" "))
            if keyword == "listenaddress":
                return self.address_text(text)
            return self.scrub(text, names=False)
        if kind == "iface":
            return self.scrub(text, names=False)
        if kind == "path":
            return self._path(text)
        if kind == "value":
            return self.compared(text, path)
        if kind == "uri":
            return self.scrub(text, url_hosts=False)
        return self.scrub(text, versions="version" in keyword)

    def compared(self, text: str, path: str) -> str:
        """A value the checks may compare: what is shaped like an identifier goes, and a value
        that is wholly a learned host or user name, unless it is one of the field's own words
        (a user called ubuntu leaves ``os_id: ubuntu`` alone)."""
        whole = text.strip()
        if whole.lower() not in vocabulary(path):
            if whole in self.users:
                return self.user(whole)
            if whole.lower() in self.hosts:
                return self.host(whole)
        return self.scrub(text, names=False)

    def host_port(self, text: str) -> str:
        if text.count(":") == 1 and text.partition(":")[2].isdigit():
            host, _, port = text.partition(":")
            return f"{self.host(host)}:{port}"
        return self.host(text)

    def _user_entry(self, word: str) -> str:
        """An AllowUsers-style entry: USER, USER@HOST, or a group name (patterns stay patterns)."""
        user, at, host = word.partition("@")
        user = user if set(user) <= set("*?!") else self.user(user)
        if not at:
            return user
        if any(c in host for c in "*?/"):
            return f"{user}@{self.scrub(host)}"
        return f"{user}@{self.host(host)}"

    def _path(self, text: str) -> str:
        remote = re.match(r"^(//)([^/]+)(/.*)?$|^([^/:\s][^:/\s]*):(/.*)$", text)
        if remote:
            if remote.group(1):
                return f"//{self.host(remote.group(2))}{self._path(remote.group(3) or '')}"
            return f"{self.host(remote.group(4))}:{self._path(remote.group(5))}"
        by_id = re.match(r"^(/dev/disk/by-(?:id|uuid|partuuid|label|partlabel|path)/)(.+)$", text)
        if by_id:
            return by_id.group(1) + self.placeholder("device", by_id.group(2))
        return self.scrub(text, names=True)

    # ---------------------------------------------------------------- walking the facts
    def learn(self, facts: Any) -> None:
        """First pass: what the facts say is a host, a user, a serial (so free text loses it too)."""
        path = (facts.get("network") or {}).get("path") if isinstance(facts, dict) else None
        if isinstance(path, dict) and isinstance(path.get("public_ranges"), list):
            for item in path["public_ranges"]:
                try:
                    self.public_ranges.append(ipaddress.ip_network(str(item), strict=False))
                except ValueError:
                    continue
        own = hostname(facts)
        if own is not None:
            self.learn_host(own, own=True)
        self._visit(facts, "", self._learn_one)

    def _learn_one(self, kind: str, text: str, path: str) -> None:
        if kind == "host" and "://" in text:
            self.learn_server(text)
        elif kind == "host":
            host = text.rsplit(":", 1)[0] if text.count(":") == 1 else text
            if _address(host) is None:
                self.learn_host(host)
        elif kind in ("serial", "uuid", "container"):
            self.learn_exact(kind, text)
        elif kind in ("user", "users"):
            for word in text.split(" "):
                self.user(word.partition("@")[0].strip("*?!"))
        elif kind in ("text", "path"):
            self.learn_text(text)
            remote = re.match(r"^//([^/]+)/|^([^/:\s][^:/\s]*):/", text)
            if kind == "path" and remote:
                self.learn_host(remote.group(1) or remote.group(2))

    def _visit(self, value: Any, path: str, on_string: Callable[[str, str, str], None]) -> None:
        if isinstance(value, dict):
            if set(value) == {UNKNOWN_KEY}:
                if isinstance(value[UNKNOWN_KEY], str):
                    on_string("text", value[UNKNOWN_KEY], path)
                return
            for key, item in value.items():
                child, is_data = declared_child(path, str(key))
                if is_data:
                    on_string("text", str(key), child)
                self._visit(item, child, on_string)
        elif isinstance(value, list):
            for item in value:
                self._visit(item, f"{path}.*", on_string)
        elif isinstance(value, str):
            on_string(kind_of(path), value, path)

    def redact(self, value: Any, path: str = "", keyword: str = "") -> Any:
        """Second pass: ``value`` (facts, or a part of them at ``path``) rewritten by kind."""
        if isinstance(value, dict):
            if set(value) == {UNKNOWN_KEY}:
                reason = value[UNKNOWN_KEY]
                return {UNKNOWN_KEY: self.scrub(reason) if isinstance(reason, str) else reason}
            out: dict[str, Any] = {}
            for key, item in value.items():
                child, is_data = declared_child(path, str(key))
                name = str(key)
                if is_data:
                    name = self.scrub(name) if kind_of(child) == "text" else self.compared(name, child)
                if child == "network.path.public_ranges":
                    out[name] = []  # filled in once every address is replaced: see redact_facts
                    continue
                out[name] = self.redact(item, child, str(key) if is_data else keyword)
            return out
        if isinstance(value, list):
            return [self.redact(item, f"{path}.*", keyword) for item in value]
        if isinstance(value, str):
            return self.value(kind_of(path), value, keyword, path)
        return value


def _public_host(name: str) -> bool:
    name = name.lower().rstrip(".")
    return any(name == domain or name.endswith("." + domain) for domain in PUBLIC_DOMAINS)


URL_SCHEMES = frozenset({"http", "https", "ftp", "file", "ssh", "git", "tcp", "udp", "unix"})


@cache
def vocabulary(path: str) -> frozenset[str]:
    """The words a declared fact holds by its declaration (its choices and the quoted examples
    of its meaning): a value among them is the field's own word, never a learned name."""
    fact = TABLE.get(_declared_leaf(path))
    if fact is None:
        return frozenset()
    return frozenset(w.lower() for w in (*fact.choices, *re.findall(r'"([^"]+)"', fact.meaning)))


def _declared_leaf(path: str) -> str:
    parts = path.strip(".").split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in DECLARED:
            return prefix
    return ""


def kind_of(path: str) -> str:
    """The redaction kind of a fact path: the one declared on it or on its nearest declared
    parent; ``value`` under a declared fact without a kind; ``text`` for what is not declared."""
    parts = path.strip(".").split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        kind = KINDS.get(prefix)
        if kind is not None:
            return kind
        if prefix in DECLARED:
            return "value"
    return "text"


def redact_facts(facts: dict[str, Any], redactor: Redactor | None = None) -> dict[str, Any]:
    """JSON-ready facts with every identifying value replaced (see the module docstring)."""
    redactor = redactor or Redactor()
    redactor.learn(facts)
    redacted = redactor.redact(facts)
    assert isinstance(redacted, dict)
    network = redacted.get("network")
    path = network.get("path") if isinstance(network, dict) else None
    if isinstance(path, dict) and UNKNOWN_KEY not in path:
        # The blocks public addresses were replaced from count as public, as the originals did.
        path["public_ranges"] = [block for block in SUBSTITUTE_PUBLIC_RANGES if block in redactor.substitute_blocks]
    return redacted


def redact(report: Report, redactor: Redactor | None = None) -> Report:
    """A finished report with its facts redacted and the host name replaced. Verdicts and
    findings stay as they are: :func:`redacted_report` judges the redacted facts afresh instead
    (what ``--redact`` prints)."""
    redactor = redactor or Redactor()
    facts = redact_facts(report.facts, redactor)
    # What a finding measured came from the facts: what is shaped like an identifier, and the
    # names learned from the facts, go from it too (the fleet view shows verdicts, not these).
    policies = [p.model_copy(update={"findings": [_scrub_finding(f, redactor) for f in p.findings]})
                for p in report.policies]
    return report.model_copy(update={"facts": facts, "policies": policies, "redacted": True,
                                     "host": Host(hostname=hostname(facts))})


def _scrub_finding(finding: Finding, redactor: Redactor) -> Finding:
    def scrub(value: Any) -> Any:
        if isinstance(value, str):
            return redactor.scrub(value)
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    return finding.model_copy(update={"measured": scrub(finding.measured), "detail": redactor.scrub(finding.detail)})


def outcomes(report: Report) -> dict[str, Any]:
    """What re-judging must preserve: each policy's verdict, score and each finding's status."""
    return {p.id: (p.verdict, p.score, sorted((f.id, f.status) for f in p.findings)) for p in report.policies}


def redacted_report(facts: dict[str, Any], policies: list[Policy], original: Report,
                    servers: list[str] | None = None) -> tuple[Report, list[str]]:
    """The report of the redacted ``facts`` (judged afresh, so policy text is untouched and every
    measured value comes from redacted facts), and the policies whose outcome redaction changed
    (none: a test holds every snapshot to it; named so that the CLI can say so if it happens)."""
    from hostcheck.facts import from_jsonable, to_jsonable
    from hostcheck.report import build_report

    redactor = Redactor()
    for server in servers or []:  # --probe URL, --stun-server HOST[:PORT]: named in error texts too
        redactor.learn_server(server)
    redacted_facts = redact_facts(to_jsonable(facts), redactor)
    report = build_report(from_jsonable(redacted_facts), policies).model_copy(update={"redacted": True})
    before, after = outcomes(original), outcomes(report)
    changed = sorted(pid for pid in before if before[pid] != after.get(pid))
    return report, changed
