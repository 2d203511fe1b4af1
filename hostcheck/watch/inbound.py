"""The recorder's forwarded-port sampler (opt-in): the ports checked from outside by the
owner's probe server, at most once every ``every_s``; each check is one HTTPS request and one
connection per port, and its answer one ``inbound`` event.
"""

from __future__ import annotations

from hostcheck.watch.sampler import Sink, Tick

PROBE_TIMEOUT_S = 10.0


class InboundProbe:
    name = "inbound"

    def __init__(self, url: str | None, token: str | None, fingerprint: str | None,
                 ports: list[tuple[int, str]], every_s: float) -> None:
        self.url, self.token, self.fingerprint = url, token, fingerprint
        self.ports = ports
        self.every_s = every_s
        self.next_mono: float | None = None

    def sample(self, tick: Tick, out: Sink) -> None:
        if self.url is None or self.token is None:
            return
        if self.next_mono is not None and tick.mono < self.next_mono:
            return
        self.next_mono = tick.mono + self.every_s
        from hostcheck.netprobe.probe_client import request_probe

        answer = request_probe(self.url, self.token, self.ports, timeout=PROBE_TIMEOUT_S, fingerprint=self.fingerprint)
        ports = [{"port": p["port"], "proto": p["proto"], "result": str(p["result"]), "detail": p["detail"]}
                 for p in answer.get("ports", [])]
        out.event("inbound", {"probed": bool(answer.get("probed")), "reason": answer.get("reason"), "ports": ports})
