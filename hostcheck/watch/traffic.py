"""What `hostcheck watch` sends and receives on the network, and the bound it keeps.

The bytes per exchange are measured by bench/watch.py (2026-12-03): each kind of exchange
alone, repeated, in a network namespace of its own, counted on its loopback interface (every
packet both ways, IP and TCP/UDP headers included): a TCP connect-and-close, a DNS query
answered with six address records, a STUN Binding, one forwarded port checked through a
probe server over TLS (the TLS handshake, the request, the connect-back). The recorder's
per-minute figure is those bytes times how often each happens. The issue's bound is a few
kilobytes a minute: above LIMIT_BYTES_PER_MIN the recorder refuses to start unless the owner
asks for more with --allow-more-traffic.
"""

from __future__ import annotations

from hostcheck.watch.probes import Target

LIMIT_BYTES_PER_MIN = 4096
MEASURED_BYTES = {
    "tcp": 328,  # SYN, SYN-ACK, ACK, FIN, ACK, FIN, ACK
    "dns": 210,  # query for example.com and an answer with six A records
    "stun": 124,  # one Binding request and its success response
    "probe_port": 3771,  # one port checked through the probe server over TLS (mostly the TLS handshake)
}


def bytes_per_minute(
    interval_s: float,
    targets: list[Target],
    stun_servers: int = 0,
    stun_every: int = 5,
    probe_ports: int = 0,
    probe_every_s: float = 3600.0,
) -> float:
    """The recorder's network bytes a minute with these settings (from the measured exchanges)."""
    per_sample = float(sum(MEASURED_BYTES[t.kind] for t in targets))
    if stun_servers:
        per_sample += MEASURED_BYTES["stun"] / max(1, stun_every)  # one server answers; the others are fallbacks
    per_minute = per_sample * 60.0 / interval_s
    if probe_ports:
        per_minute += probe_ports * MEASURED_BYTES["probe_port"] * 60.0 / probe_every_s
    return per_minute


def check(per_minute: float, allowed: bool) -> str | None:
    """None when within the bound (or allowed past it); else the reason to refuse."""
    if per_minute <= LIMIT_BYTES_PER_MIN or allowed:
        return None
    return (
        f"these settings would send and receive about {per_minute / 1024:.1f} KiB a minute, above the "
        f"{LIMIT_BYTES_PER_MIN / 1024:g} KiB a minute the recorder keeps to: sample less often (--interval), "
        "probe fewer targets or forwarded ports less often, or pass --allow-more-traffic"
    )
