"""The recorder's public-address sampler (when STUN servers are configured): every
``every``-th sample, a STUN Binding to the first server that answers gives the address the
host is seen from, recorded when it changes, and a CGNAT re-check of that address against the
one this host sends from (a shared RFC 6598 address on either side is carrier-grade NAT).
"""

from __future__ import annotations

import time

from hostcheck.watch.sampler import Sink, Tick

STUN_DEADLINE_S = 3.0


class PublicAddress:
    name = "stun"

    def __init__(self, servers: list[str], every: int, public_ranges: list[str]) -> None:
        self.servers = servers
        self.every = every
        self.public_ranges = public_ranges  # reserved ranges to count as public (labs)
        self.address: str | None = None
        self.cgnat: str | None = None

    def sample(self, tick: Tick, out: Sink) -> None:
        if not self.servers or tick.count % max(1, self.every):
            return
        from hostcheck.netprobe.cgnat import cgnat_verdict, local_address_signal, stun_signal
        from hostcheck.netprobe.stun_client import stun_binding
        from hostcheck.netprobe.stun_servers import parse_server

        for spec in self.servers:
            try:
                host, port = parse_server(spec)
                result = stun_binding((host, port), deadline=time.monotonic() + STUN_DEADLINE_S)
            except (OSError, ValueError) as exc:
                out.log(f"STUN {spec}: {exc}")
                continue
            if result.mapped is None:
                continue
            mapped = result.mapped[0]
            if mapped != self.address:
                previous = self.address if self.address is not None else out.writer.get_meta("public_address")
                out.event("public_address", {"address": mapped, "previous": previous, "server": spec})
                out.writer.set_meta("public_address", mapped)
                self.address = mapped
            signals = [stun_signal(result.mapped, result.local, spec, result.error, self.public_ranges),
                       local_address_signal(result.local[0] if result.local else None, self.public_ranges)]
            verdict = str(cgnat_verdict(signals))
            if verdict != self.cgnat:
                out.event("cgnat", {"verdict": verdict, "previous": self.cgnat,
                                    "evidence": [sig["evidence"] for sig in signals]})
                self.cgnat = verdict
            return
