"""The probe server's limits (what one caller and all callers may ask) and its counters.

Pure bookkeeping, no sockets: the server (:mod:`hostcheck.probeserver.server`) consults it
before doing any work for a request.
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from hostcheck.errors import InputError
from hostcheck.netprobe.probe_protocol import DEFAULT_MAX_PORTS
from hostcheck.netprobe.speed_protocol import DEFAULT_STREAM_BYTES, MAX_SECONDS, MAX_STREAM_BYTES

MAX_CONCURRENT_PROBES = 4
DEFAULT_SPEED_BUDGET = 4 * 10**9
"""A few full speed tests an hour (each moves at most the client's 1 GB cap by default)."""
MAX_SPEED_BUDGET = 10**13
MAX_PORTS_PER_REQUEST = 256
PREFIX_V4_BITS = (8, 32)
PREFIX_V6_BITS = (16, 128)


@dataclass(frozen=True)
class Limits:
    max_ports: int = DEFAULT_MAX_PORTS
    rate_per_min: int = 30
    """Authenticated requests per caller per minute."""
    overall_per_min: int = 300
    max_connections: int = 64
    max_connections_per_source: int = 8
    """Connections from one address."""
    max_connections_per_prefix: int = 16
    """Connections from one network prefix (``prefix_v4`` / ``prefix_v6``): one host that owns
    a /24 or rotates through its IPv6 /64 is still one caller."""
    prefix_v4: int = 24
    prefix_v6: int = 56
    """An IPv6 home or VPS customer is routinely given a /56 (or a /64 within one)."""
    max_handshakes: int = 16
    """TLS connections that have not finished their handshake, all callers together."""
    handshake_deadline_s: float = 3.0
    shed_after_s: float = 1.0
    """How long a connection may go without showing the token before a newcomer from its own
    address or prefix may take its slot: long enough for a client on a slow link to finish its
    handshake and send its request, short against an attacker who holds slots for the whole
    request deadline."""
    request_deadline_s: float = 10.0
    """A whole request, from the first byte of the connection to the last of the answer."""
    summary_interval_s: float = 300.0
    speed_max_seconds: float = 15.0
    """Longest speed-test stream."""
    speed_max_bytes: int = DEFAULT_STREAM_BYTES
    """Most bytes one speed-test stream may move."""
    speed_max_streams: int = 8
    """Speed-test streams at once, all callers together."""
    speed_budget_bytes_per_hour: int = DEFAULT_SPEED_BUDGET
    """Bytes the token's speed tests may move (both directions) in any hour; 429 past it."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_ports <= MAX_PORTS_PER_REQUEST:
            raise InputError(f"max_ports must be 1-{MAX_PORTS_PER_REQUEST}")
        if self.rate_per_min < 1 or self.overall_per_min < 1:
            raise InputError("request rates must be at least 1 per minute")
        if not 1 <= self.max_connections_per_source <= self.max_connections:
            raise InputError("max_connections_per_source must be 1..max_connections")
        if not 1 <= self.max_connections_per_prefix <= 65536:
            raise InputError("max_connections_per_prefix must be 1-65536")
        if not PREFIX_V4_BITS[0] <= self.prefix_v4 <= PREFIX_V4_BITS[1]:
            raise InputError("prefix_v4 must be {}-{} bits".format(*PREFIX_V4_BITS))
        if not PREFIX_V6_BITS[0] <= self.prefix_v6 <= PREFIX_V6_BITS[1]:
            raise InputError("prefix_v6 must be {}-{} bits".format(*PREFIX_V6_BITS))
        if not 1 <= self.max_handshakes <= 65536:
            raise InputError("max_handshakes must be 1-65536")
        if not (math.isfinite(self.handshake_deadline_s) and 0.2 <= self.handshake_deadline_s <= 60):
            raise InputError("handshake_deadline_s must be 0.2-60 seconds")
        if not (math.isfinite(self.shed_after_s) and 0 <= self.shed_after_s <= 60):
            raise InputError("shed_after_s must be 0-60 seconds")
        if not 0.5 <= self.request_deadline_s <= 600:
            raise InputError("request_deadline_s must be 0.5-600 seconds")
        if not (math.isfinite(self.summary_interval_s) and self.summary_interval_s > 0):
            raise InputError("summary_interval_s must be a finite number of seconds above 0")
        if not 0.5 <= self.speed_max_seconds <= MAX_SECONDS:
            raise InputError(f"speed_max_seconds must be 0.5-{MAX_SECONDS:g}")
        if not 1 <= self.speed_max_bytes <= MAX_STREAM_BYTES:
            raise InputError(f"speed_max_bytes must be 1-{MAX_STREAM_BYTES}")
        if not 0 <= self.speed_max_streams <= 64:
            raise InputError("speed_max_streams must be 0-64 (0: no speed test)")
        if not 1 <= self.speed_budget_bytes_per_hour <= MAX_SPEED_BUDGET:
            raise InputError(f"speed_budget_bytes_per_hour must be 1-{MAX_SPEED_BUDGET}")


def source_prefix(address: str, v4_bits: int = 24, v6_bits: int = 56) -> str:
    """The network an address belongs to for the per-prefix cap (``"192.0.2.0/24"``).

    IPv4-mapped IPv6 addresses count as the IPv4 address they carry; anything that does not
    parse is its own bucket, so it can never share (or empty) a real prefix's slots.
    """
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"?{address[:64]}"
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    bits = v4_bits if ip.version == 4 else v6_bits
    return str(ipaddress.ip_network(f"{ip}/{bits}", strict=False))


class Slot:
    """One open connection as the table sees it."""

    __slots__ = ("address", "prefix", "handshaking", "authenticated", "abort", "open", "since")

    def __init__(self, address: str, prefix: str, handshaking: bool, abort: Callable[[], None], since: float) -> None:
        self.address, self.prefix, self.since = address, prefix, since
        self.handshaking = handshaking
        self.authenticated = False
        self.abort = abort
        self.open = True


class ConnectionTable:
    """Who holds the server's connection slots, and whom to shed when they are full.

    Caps: ``max_connections`` overall, ``max_connections_per_source`` per address,
    ``max_connections_per_prefix`` per network prefix, ``max_handshakes`` TLS connections still
    in their handshake. A newcomer that would pass a cap takes the slot of the oldest connection
    in that scope that has not shown the token (still handshaking, idle, sending only blank
    lines, or a request without the token); when there is none (every connection in the scope is
    authenticated) it is refused. Within one address or prefix the oldest must also have idled
    for ``shed_after_s``, so a flood from one source is refused at accept instead of churning
    through its own connections; the overall and handshake caps take the oldest at once, so
    whatever a flood from many prefixes does, a newcomer gets in, and stays in as long as the
    flood needs to cycle through every older connection first: a caller with the token, whose
    request follows its connection at once, is served. Only the server marks a slot
    authenticated, once a parsed request's token matched (:meth:`authenticate`).

    A full prefix is shared fairly first: a newcomer from an address holding fewer of its slots
    than another address of the prefix (by two or more) takes that address's oldest connection
    without the token at once (:meth:`_fair_share_victim`). An owner behind carrier-grade NAT,
    whose public /24 is shared with a stranger who holds its slots from a few addresses, is
    served; only a prefix held by as many addresses as it has slots, one each, leaves a newcomer
    to the patient rule.

    Memory is bounded by the caps: the table holds the open connections and nothing else (an
    address or prefix leaves the counts with its last connection).
    """

    def __init__(self, limits: Limits, max_connections: int | None = None) -> None:
        self.limits = limits
        self.max_connections = max_connections or limits.max_connections
        self.slots = 0
        self.handshakes = 0
        self.by_address: dict[str, int] = {}
        self.by_prefix: dict[str, int] = {}
        self._unauthenticated: OrderedDict[int, Slot] = OrderedDict()
        """Oldest first: the shedding order."""

    def open(
        self, address: str, abort: Callable[[], None], *, handshaking: bool = False, now: float | None = None
    ) -> tuple[Slot | None, int]:
        """A slot for a new connection (or None: refused) and how many connections were shed."""
        now = time.monotonic() if now is None else now
        lim = self.limits
        idle_since = now - lim.shed_after_s
        prefix = source_prefix(address, lim.prefix_v4, lim.prefix_v6)
        shed = 0
        # (full?, in scope?, oldest idle connection must have idled shed_after_s first?)
        scopes: list[tuple[Callable[[], bool], Callable[[Slot], bool], bool]] = [
            (lambda: self.by_address.get(address, 0) >= lim.max_connections_per_source,
             lambda s: s.address == address, True),
            (lambda: self.by_prefix.get(prefix, 0) >= lim.max_connections_per_prefix,
             lambda s: s.prefix == prefix, True),
            (lambda: self.slots >= self.max_connections, lambda s: True, False),
        ]
        if handshaking:
            scopes.append((lambda: self.handshakes >= lim.max_handshakes, lambda s: s.handshaking, False))
        for scope, (full, in_scope, patient) in enumerate(scopes):
            while full():
                victim = self._fair_share_victim(address, prefix) if scope == 1 else None
                if victim is None:
                    # Oldest first: the first in scope is the only candidate.
                    victim = next((s for s in self._unauthenticated.values() if in_scope(s)), None)
                    if victim is None or (patient and victim.since > idle_since):
                        return None, shed
                self.close(victim)
                victim.abort()
                shed += 1
        slot = Slot(address, prefix, handshaking, abort, now)
        self.slots += 1
        self.handshakes += handshaking
        self.by_address[address] = self.by_address.get(address, 0) + 1
        self.by_prefix[prefix] = self.by_prefix.get(prefix, 0) + 1
        self._unauthenticated[id(slot)] = slot
        return slot, shed

    def _fair_share_victim(self, address: str, prefix: str) -> Slot | None:
        """In a full prefix, the oldest connection without the token of the address that holds
        the most of the prefix's slots, when that address holds at least two more than
        ``address`` does: a newcomer from an address with fewer connections takes it at once.
        Addresses that hold the prefix alike (an attacker's own, shed and reconnecting) find
        none and wait for the patient rule, so they cannot churn through each other, nor
        through a connection that has just arrived from another address."""
        own = self.by_address.get(address, 0)
        victim, most = None, own + 1
        for slot in self._unauthenticated.values():  # oldest first: the oldest of the heaviest wins a tie
            held = self.by_address.get(slot.address, 0)
            if slot.prefix == prefix and held > most:
                victim, most = slot, held
        return victim

    def handshake_done(self, slot: Slot) -> None:
        if slot.open and slot.handshaking:
            slot.handshaking = False
            self.handshakes -= 1

    def authenticate(self, slot: Slot) -> None:
        """A complete request head on this connection carried the right token: it is never
        shed to make room."""
        if slot.open and not slot.authenticated:
            slot.authenticated = True
            self._unauthenticated.pop(id(slot), None)

    def close(self, slot: Slot) -> None:
        """Give the slot back (idempotent: a shed connection is closed here before its
        transport reports the loss)."""
        if not slot.open:
            return
        slot.open = False
        self.slots -= 1
        if slot.handshaking:
            self.handshakes -= 1
        self._unauthenticated.pop(id(slot), None)
        for counts, key in ((self.by_address, slot.address), (self.by_prefix, slot.prefix)):
            left = counts.get(key, 1) - 1
            if left > 0:
                counts[key] = left
            else:
                counts.pop(key, None)


class ByteBudget:
    """Bytes moved in the last hour, in one-minute buckets (at most 60 kept), against a cap."""

    BUCKET_S = 60.0
    WINDOW_S = 3600.0

    def __init__(self, per_hour: int) -> None:
        self.per_hour = per_hour
        self._buckets: deque[tuple[float, int]] = deque()
        self.reserved = 0

    def _expire(self, now: float) -> None:
        while self._buckets and now - self._buckets[0][0] >= self.WINDOW_S:
            self._buckets.popleft()

    def spent(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        self._expire(now)
        return sum(n for _, n in self._buckets)

    def available(self, now: float | None = None) -> int:
        return max(0, self.per_hour - self.spent(now) - self.reserved)

    def charge(self, nbytes: int, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self._expire(now)
        if self._buckets and now - self._buckets[-1][0] < self.BUCKET_S:
            start, n = self._buckets[-1]
            self._buckets[-1] = (start, n + nbytes)
        else:
            self._buckets.append((now, nbytes))

    def reserve(self, wanted: int, now: float | None = None) -> int:
        """Hold up to ``wanted`` bytes for a stream about to start; 0 when the budget is spent.
        Streams running at once cannot together pass the budget."""
        granted = min(wanted, self.available(now))
        self.reserved += granted
        return granted

    def settle(self, reserved: int, moved: int, now: float | None = None) -> None:
        """A stream ended: release its reservation and charge what it really moved."""
        self.reserved = max(0, self.reserved - reserved)
        self.charge(moved, now)

    def retry_after(self, now: float | None = None) -> int:
        """Whole seconds until the oldest charge leaves the window (at least 1)."""
        now = time.monotonic() if now is None else now
        self._expire(now)
        if not self._buckets:
            return 1
        return max(1, math.ceil(self._buckets[0][0] + self.WINDOW_S - now))


class RateLimiter:
    """Sliding one-minute windows: per caller address and for the whole server."""

    def __init__(self, per_peer: int, overall: int) -> None:
        self.per_peer, self.overall = per_peer, overall
        self._peers: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()

    def allow(self, peer: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        for q in (self._all, *self._peers.values()):
            while q and now - q[0] >= 60.0:
                q.popleft()
        for key in [k for k, q in self._peers.items() if not q]:
            del self._peers[key]
        q = self._peers.setdefault(peer, deque())
        if len(q) >= self.per_peer or len(self._all) >= self.overall:
            return False
        q.append(now)
        self._all.append(now)
        return True


@dataclass
class Stats:
    """Counters since start; :meth:`summary` reports what changed since the last call."""

    counts: dict[str, int] = field(default_factory=dict)
    _reported: dict[str, int] = field(default_factory=dict)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def __getitem__(self, key: str) -> int:
        return self.counts.get(key, 0)

    def summary(self) -> str | None:
        delta = {k: v - self._reported.get(k, 0) for k, v in sorted(self.counts.items())}
        delta = {k: v for k, v in delta.items() if v}
        self._reported = dict(self.counts)
        if not delta:
            return None
        return ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in delta.items())


class OutOfFiles:
    """Counts accepts that failed for want of a descriptor; says when a warning is due (the
    first at once, then at most one per ``every_s``, each with the count since the last)."""

    def __init__(self, every_s: float = 60.0) -> None:
        self.every_s = every_s
        self.pending = 0
        self.total = 0
        self._last = -math.inf

    def note(self, now: float) -> int | None:
        self.pending += 1
        self.total += 1
        return self.flush(now) if now - self._last >= self.every_s else None

    def flush(self, now: float) -> int | None:
        """The count to report now (and reset), or None when there is nothing new."""
        if not self.pending:
            return None
        count, self.pending, self._last = self.pending, 0, now
        return count
