"""The probe server's limits (what one caller and all callers may ask) and its counters.

Pure bookkeeping, no sockets: the server (:mod:`hostcheck.netprobe.probe_server`) consults it
before doing any work for a request.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from hostcheck.netprobe.speed_protocol import DEFAULT_STREAM_BYTES, MAX_SECONDS, MAX_STREAM_BYTES

MAX_CONCURRENT_PROBES = 4


@dataclass(frozen=True)
class Limits:
    max_ports: int = 16
    rate_per_min: int = 30
    """Authenticated requests per caller per minute."""
    overall_per_min: int = 300
    max_connections: int = 64
    max_connections_per_source: int = 8
    request_deadline_s: float = 10.0
    """A whole request, from the first byte of the connection to the last of the answer."""
    summary_interval_s: float = 300.0
    speed_max_seconds: float = 15.0
    """Longest speed-test stream."""
    speed_max_bytes: int = DEFAULT_STREAM_BYTES
    """Most bytes one speed-test stream may move."""
    speed_max_streams: int = 8
    """Speed-test streams at once, all callers together."""

    def __post_init__(self) -> None:
        if not 1 <= self.max_ports <= 256:
            raise ValueError("max_ports must be 1-256")
        if self.rate_per_min < 1 or self.overall_per_min < 1:
            raise ValueError("request rates must be at least 1 per minute")
        if not 1 <= self.max_connections_per_source <= self.max_connections:
            raise ValueError("max_connections_per_source must be 1..max_connections")
        if not 0.5 <= self.request_deadline_s <= 600:
            raise ValueError("request_deadline_s must be 0.5-600 seconds")
        if self.summary_interval_s <= 0:
            raise ValueError("summary_interval_s must be positive")
        if not 0.5 <= self.speed_max_seconds <= MAX_SECONDS:
            raise ValueError(f"speed_max_seconds must be 0.5-{MAX_SECONDS:g}")
        if not 1 <= self.speed_max_bytes <= MAX_STREAM_BYTES:
            raise ValueError(f"speed_max_bytes must be 1-{MAX_STREAM_BYTES}")
        if not 0 <= self.speed_max_streams <= 64:
            raise ValueError("speed_max_streams must be 0-64 (0: no speed test)")


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
