"""The Redactor: learns identifying values from the facts, then rewrites every string by what
each value is (see :mod:`hostcheck.redact`)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from typing import Any

from hostcheck.fact_paths import declared_child
from hostcheck.facts import hostname
from hostcheck.redact.addresses import AddressMap
from hostcheck.redact.kinds import kind_of, vocabulary
from hostcheck.redact.patterns import (
    COMMON_DOMAINS,
    HOSTPORT,
    LABEL,
    LABELS,
    MIN_HYPHEN_LABEL,
    MIN_WORD_LABEL,
    NON_VALUES,
    PATH_SEGMENT,
    PATTERN_RE,
    REMOTE_PATH,
    UNIVERSAL_USERS,
    UNKNOWN_KEY,
    URL_SCHEMES,
    VERSION_BEFORE,
    parse_address,
    public_host,
)


class Redactor(AddressMap):
    """Learns identifying values from the facts, then rewrites them with consistent replacements.

    One Redactor can redact several hosts' facts (``hostcheck fleet --redact``): the same value
    gets the same replacement across all of them.
    """

    def __init__(self, key: bytes | None = None) -> None:
        super().__init__(key)
        self.placeholders: dict[tuple[str, str], str] = {}
        self.counts: dict[str, int] = {}
        self.exact: dict[str, str] = {}  # value -> kind, replaced wherever it occurs
        self.hosts: dict[str, str] = {}  # lower-case label sequence -> kind ("host", "domain")
        self.users: set[str] = set()  # user names the facts name: replaced as a segment of any path
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
        return PATH_SEGMENT.sub(lambda m: self.user(m.group()) if m.group() in self.users else m.group(), text)

    def mac(self, value: str) -> str:
        hexdigits = re.sub(r"[^0-9A-Fa-f]", "", value).lower()
        return self.placeholder("mac", ":".join(hexdigits[i:i + 2] for i in range(0, len(hexdigits), 2)))

    # ---------------------------------------------------------------- addresses
    def address_text(self, text: str) -> str:
        """An address written as text (``[v6]:port``, ``v4:port``, ``v6%zone``, ``addr/len``)
        replaced; anything else in an address field is taken as a host name (``host:port``)."""
        match = re.fullmatch(r"(\[)?([0-9A-Fa-f:.]+)(%[\w.-]+)?(\])?(:\d{1,5}|/\d{1,3})?", text.strip())
        if match and bool(match.group(1)) == bool(match.group(4)):
            address = parse_address(match.group(2))
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
        if not name or parse_address(name) is not None or not re.fullmatch(rf"{LABEL}(?:\.{LABEL})*", name):
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
        if parse_address(name) is not None:
            return self.address_text(name)
        if re.fullmatch(r"\[(?:host|domain)-\d+\]", name.strip()):
            return name  # redacted already (a redacted report in a fleet)
        if not re.fullmatch(rf"{LABEL}(?:\.{LABEL})*\.?", name.strip()):
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

        return LABELS.sub(replace, text)

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
                host = self.address_text(host) if parse_address(host) is not None else (
                    self._replace_hosts(host, dotted=not names) if public_host(host) else self.host(host))
                path = self.scrub(match.group("url_path") or "", names=names)
                return f"{match.group('url_scheme')}{host}{match.group('url_port') or ''}{path}"
            if kind == "home":
                return value[: match.start("home_user") - match.start()] + self.user(match.group("home_user"))
            if kind == "userhost":
                host = match.group("uh_host")
                host = self.address_text(host) if parse_address(host) is not None else (
                    self.host(host) if names else self._replace_hosts(host, dotted=True))
                return f"{self.user(match.group('uh_user'))}@{host}"
            if kind == "mac_iface":
                return f"{match.group('mac_iface_prefix')}x{self.mac(match.group('mac_iface_hex'))}"
            if kind in ("mac", "mac_bare"):
                return self.mac(value)
            if kind == "rdns":
                return "-".join(self.address_text(value.replace("-", ".")).split("."))
            if kind in ("ipv4", "ipv6"):
                if parse_address(value.split("/", 1)[0]) is None:
                    return value
                if kind == "ipv4" and (versions or VERSION_BEFORE.search(match.string[: match.start()])):
                    return value
                return self.address_text(value)
            return self.placeholder(kind, value)

        out = PATTERN_RE.sub(replace, text)
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
        for match in (*HOSTPORT.finditer(text), *REMOTE_PATH.finditer(text)):
            host = match.group("host")
            if "." in host or (len(host) >= MIN_WORD_LABEL and host.lower() not in URL_SCHEMES):
                self.learn_host(host)
        for match in PATTERN_RE.finditer(text):
            if match.lastgroup == "url" and parse_address(match.group("url_host")) is None:
                if not public_host(match.group("url_host")):
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
            return self.address_text(text) if parse_address(text.rsplit(":", 1)[0].strip("[]")) is not None else self.host_port(text)
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
            if parse_address(host) is None:
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
