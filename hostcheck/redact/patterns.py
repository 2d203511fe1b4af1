"""What identifying values look like: the regular expressions and word lists of --redact."""

from __future__ import annotations

import ipaddress
import re

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
PERMUTED_BLOCKS = tuple(ipaddress.ip_network(n) for n in (
    "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "fc00::/7", "fe80::/64", "fe80::/10",
))
GLOBAL_V4_BLOCKS = tuple(ipaddress.ip_network(n) for n in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "198.18.0.0/15"))
GLOBAL_V6_BLOCK = ipaddress.ip_network("2001:db8::/32")
SUBSTITUTE_PUBLIC_RANGES = [str(n) for n in (*GLOBAL_V4_BLOCKS, GLOBAL_V6_BLOCK)]
OTHER_V4_BLOCK = ipaddress.ip_network("240.0.0.0/4")
OTHER_V6_BLOCK = ipaddress.ip_network("100::/64")

HEX4 = "[0-9A-Fa-f]{1,4}"
V4 = r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
V6 = rf"(?:{HEX4})?(?::(?:{HEX4})?){{2,7}}(?::?{V4})?"
V4_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
V4_HYPHENS = rf"{V4_OCTET}(?:-{V4_OCTET}){{3}}"
HOME_DIRS = r"(?:/home|/Users|/var/home|/export/home|/usr/home)"
USER_NAME = r"[A-Za-z0-9_][A-Za-z0-9._-]*\$?"
LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# systemd.net-naming-scheme(7): en/ib/sl/wl/ww + "x" + the 12 hex digits of the MAC.
MAC_IFACE = r"(?P<mac_iface_prefix>en|ib|sl|wl|ww)x(?P<mac_iface_hex>[0-9A-Fa-f]{12})"
VERSION_BEFORE = re.compile(r"(?i)(?<![a-z])(?:version|ver\.?|release|driver|kernel|v)\s*[:=]?\s*$")

# One left-to-right pass; earlier alternatives win.
PATTERNS = [
    # scheme://[user[:password]@]host[:port][/path][?query][#fragment]
    ("url", r"(?P<url_scheme>[A-Za-z][A-Za-z0-9+.-]{1,15}://)(?:[^\s/@?#]*@)?(?P<url_host>\[[0-9A-Fa-f:.%\w]+\]|[^\s/:?#]+)"
            r"(?P<url_port>:\d{1,5})?(?P<url_path>/[^\s?#]*)?(?:[?#][^\s]*)?"),
    ("gpu", r"(?<![\w-])(?i:GPU|MIG)-[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(?!\w)"),
    ("uuid", r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}(?:-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}(?![0-9A-Fa-f])"),
    ("mac_iface", rf"(?<![A-Za-z0-9]){MAC_IFACE}(?![A-Za-z0-9])"),
    ("mac", r"(?<![\w:-])[0-9A-Fa-f]{2}(?:(?::[0-9A-Fa-f]{2}){5}|(?:-[0-9A-Fa-f]{2}){5})(?![\w:-])"),
    # Twelve hex digits with a letter among them (a byte count has none), or Cisco's 0011.2233.4455.
    ("mac_bare", r"(?<![\w.:-])(?:(?=[0-9]*[A-Fa-f])[0-9A-Fa-f]{12}|[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4}\.[0-9A-Fa-f]{4})(?![\w:-]|\.\w)"),
    # An address inside a reverse-DNS style host name: ip-10-44-3-21.ec2.internal, 203-0-113-5.isp.example.
    ("rdns", rf"(?:(?<=[A-Za-z]-)|(?<![\w-])){V4_HYPHENS}(?![\w-])"),
    ("home", rf"(?<![\w.-]){HOME_DIRS}/(?P<home_user>[^/\s:'\"]+)"),
    ("userhost", rf"(?<![\w.+%-])(?P<uh_user>{USER_NAME})@(?P<uh_host>\[[0-9A-Fa-f:.]+\]|{V4}|{LABEL}(?:\.{LABEL})*)(?![\w-])"),
    ("ipv6", rf"(?<![\w:.]){V6}(?:%[\w.-]+)?(?:/\d{{1,3}})?(?![\w:]|\.\d)"),
    ("ipv4", rf"(?<![\w.]){V4}(?:/\d{{1,2}})?(?![\w]|\.\d)"),
]
PATTERN_RE = re.compile("|".join(f"(?P<{kind}>{regex})" for kind, regex in PATTERNS))
LABELS = re.compile(rf"(?<![\w-]){LABEL}(?:\.{LABEL})*(?![\w-])")
REMOTE_PATH = re.compile(rf"(?<![\w.@/:-])(?P<host>{LABEL}(?:\.{LABEL})*):/(?!/)")
PATH_SEGMENT = re.compile(r"(?<=/)[^/\s:'\"\[\]]+(?=/|$|[\s:'\",;)])")
HOSTPORT = re.compile(rf"(?<![\w.@/-])(?P<host>{LABEL}(?:\.{LABEL})+):\d{{1,5}}(?!\d)")


def parse_address(text: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def kept_address(address: IPAddress) -> bool:
    """Addresses every machine has or every network uses alike: they say nothing about this one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return kept_address(address.ipv4_mapped)
    return (address.is_loopback or address.is_unspecified or address.is_multicast
            or address == ipaddress.IPv4Address("255.255.255.255"))


def in_ranges(address: IPAddress, ranges: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    return any(address.version == net.version and address in net for net in ranges)


def public_host(name: str) -> bool:
    name = name.lower().rstrip(".")
    return any(name == domain or name.endswith("." + domain) for domain in PUBLIC_DOMAINS)


URL_SCHEMES = frozenset({"http", "https", "ftp", "file", "ssh", "git", "tcp", "udp", "unix"})
