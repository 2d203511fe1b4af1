"""The forwarded port range: read where the agent keeps it, and sampled the way a platform tests it.

Vast's agent reads its direct port range from ``/var/lib/vastai_kaalia/host_port_range``, a
file holding only ``FIRST-LAST`` (the headless install guide writes it with ``echo -n
"40000-40799"``); the owner may name the range with ``--port-range FIRST-LAST`` instead. The
self-test reaches ports anywhere in that range, so checking one port proves little: the
probe asks for the first, the last and evenly spaced ports between them, each over TCP and
UDP, as many as one probe request may carry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck.errors import InputError, PortRangeError
from hostcheck.facts import Unknown
from hostcheck.models import InboundResult
from hostcheck.safeio import read_text

AGENT_RANGE_FILE = "/var/lib/vastai_kaalia/host_port_range"
MAX_RANGE_FILE_BYTES = 64
"""``65535-65535`` and a newline fit many times over; anything longer is not a range file."""
_RANGE_RE = re.compile(r"^\s*(\d{1,12})\s*-\s*(\d{1,12})\s*$")
PROTOS = ("tcp", "udp")


@dataclass(frozen=True)
class PortRange:
    first: int
    last: int
    source: str
    """``agent`` (the agent's range file) or ``owner`` (``--port-range``)."""

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    def facts(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last, "count": self.count, "source": self.source}


def parse_port_range(text: str, source: str) -> PortRange:
    """``FIRST-LAST`` (1-65535, FIRST <= LAST) or :class:`PortRangeError` saying what is wrong."""
    if len(text) > MAX_RANGE_FILE_BYTES:
        raise PortRangeError(f"{len(text)} characters; a range is FIRST-LAST (at most {MAX_RANGE_FILE_BYTES})")
    match = _RANGE_RE.match(text)
    if match is None:
        shown = text.strip()[:32].encode("unicode_escape").decode("ascii")
        raise PortRangeError(f"{shown!r} is not FIRST-LAST (two port numbers joined by '-')")
    first, last = int(match.group(1)), int(match.group(2))
    for port in (first, last):
        if not 1 <= port <= 65535:
            raise PortRangeError(f"port {port} is outside 1-65535")
    if first > last:
        raise PortRangeError(f"{first}-{last} is reversed (the first port is above the last)")
    return PortRange(first, last, source)


def read_agent_range(path: str = AGENT_RANGE_FILE) -> PortRange | Unknown | None:
    """The agent's range; None when the file does not exist; :class:`Unknown` (with the
    reason) when it cannot be read or is not a range (read bounded, regular files only)."""
    try:
        text = read_text(Path(path), MAX_RANGE_FILE_BYTES)
    except InputError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return None
        if isinstance(exc.__cause__, PermissionError):
            return Unknown(f"{path}: permission denied")
        return Unknown(f"{path}: {exc}")
    try:
        return parse_port_range(text, "agent")
    except PortRangeError as exc:
        return Unknown(f"{path}: {exc}")


def configured_range(owner: str | None, path: str = AGENT_RANGE_FILE) -> PortRange | Unknown:
    """The range the agent is configured for (its file, when present), else the owner's
    ``--port-range``; :class:`Unknown` saying why when neither gives one.

    A range file that is present but unusable is reported as such even when the owner named a
    range: the agent reads that file, not the command line. A file this user may not read
    falls back to the owner's range."""
    agent = read_agent_range(path)
    if isinstance(agent, PortRange):
        return agent
    if isinstance(agent, Unknown) and not agent.reason.endswith("permission denied"):
        return agent
    if owner is not None:
        try:
            return parse_port_range(owner, "owner")
        except PortRangeError as exc:
            return Unknown(f"--port-range: {exc}")
    if isinstance(agent, Unknown):
        return Unknown(f"{agent.reason}; name the range with --port-range FIRST-LAST")
    return Unknown(f"no port range configured ({path} is absent); name it with --port-range FIRST-LAST")


def sample_ports(port_range: PortRange, count: int) -> list[int]:
    """The first, the last and ``count - 2`` evenly spaced ports between them (all of a range
    no bigger than ``count``); ``count`` must be at least 2."""
    if count < 2:
        raise ValueError("a sample needs at least the first and the last port")
    if port_range.count <= count:
        return list(range(port_range.first, port_range.last + 1))
    span = port_range.count - 1
    return sorted({port_range.first + round(i * span / (count - 1)) for i in range(count)})


def probe_list(port_range: PortRange | None, extra: list[int], max_entries: int) -> list[tuple[int, str]]:
    """(port, proto) pairs for one probe request: the owner's ``extra`` ports, then the range's
    sample in the room left (never fewer than its first and last port), each over TCP and UDP.
    The caller refuses a list longer than ``max_entries`` (the owner asked for too many)."""
    ports = list(dict.fromkeys(extra))
    if port_range is not None:
        size = max_entries // len(PROTOS)
        for count in range(max(2, size), 1, -1):
            added = [p for p in sample_ports(port_range, count) if p not in ports]
            if len(ports) + len(added) <= size:
                break
        ports += added
    return [(p, proto) for p in ports for proto in PROTOS]


@dataclass(frozen=True)
class RangeVerdict:
    """What a probe of the forwarded range found, per port and protocol (a pure judgement of
    ``network.port_range`` and ``network.inbound``, shared by the audit and the recorder)."""

    port_range: PortRange
    probed: tuple[tuple[int, str], ...]
    """The (port, proto) pairs of the range that were probed."""
    missed: tuple[tuple[int, str], ...]
    """Probed from outside, not reached."""
    unverified: tuple[tuple[int, str], ...]
    """In use on this host, so the probe could not tell."""

    @property
    def reached(self) -> int:
        return len(self.probed) - len(self.missed) - len(self.unverified)


def judge_range(port_range: PortRange, results: list[dict[str, Any]]) -> RangeVerdict:
    """Sort the probe's results (``network.inbound.ports``) for the ports inside the range."""
    probed, missed, unverified = [], [], []
    for item in results:
        port, proto = item.get("port"), item.get("proto")
        if type(port) is not int or proto not in PROTOS or not port_range.first <= port <= port_range.last:
            continue
        key = (port, str(proto))
        probed.append(key)
        if item.get("result") == InboundResult.UNVERIFIED:
            unverified.append(key)
        elif item.get("result") != InboundResult.REACHABLE:
            missed.append(key)
    return RangeVerdict(port_range, tuple(probed), tuple(missed), tuple(unverified))


def name_ports(pairs: tuple[tuple[int, str], ...]) -> str:
    """``TCP 40000, 40199; UDP 40000`` (per protocol, in port order)."""
    parts = []
    for proto in PROTOS:
        ports = sorted(p for p, pr in pairs if pr == proto)
        if ports:
            parts.append(f"{proto.upper()} {', '.join(map(str, ports))}")
    return "; ".join(parts)
