"""A local stand-in for Vast's API on 127.0.0.1, serving answers of the real shape.

No real answer could be fetched where these tests run (no internet), so the shapes are built
from Vast's own sources, as stored: the offer search from vast-docs
``api-reference/openapi/yaml/search_offers.yaml`` (request filters, the 200 example's fields)
and vast-cli ``vastai/data/offer.py`` (the field list) and ``vastai/api/offers.py`` (the
``{"offers": [...]}`` answer); the metrics from vast-docs ``api-reference/openapi/yaml/metrics_gpu.yaml``
(fields, 401 with ``{"success": false, "error", "msg"}``, 429 with ``{"detail": ...}``) and
``host/market-metrics.mdx`` ("Regular client keys will receive a 401 error"), and vast-cli
``vastai/api/metrics.py`` and ``vastai/cli/commands/metrics.py`` (the ``needs_machine`` answer,
the history's ``supply_demand``/``pricing`` arrays). Vast-docs at c624622, vast-cli at 55679830.

The server filters offers as the search asks (gpu_name, num_gpus, verified, rented, limit), so
the client's query is exercised, and records every request (path, query, body, headers) for the
tests to check what was sent. Behaviours are switched per test through ``StandIn.mode``.
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

HOST_KEY = "f" * 24 + "0123456789abcdef" + "e" * 24  # 64 hex characters, as Vast's keys are
CLIENT_KEY = "c" * 24 + "fedcba9876543210" + "d" * 24


def offer(i: int, gpu_name: str, num_gpus: int, price_per_gpu: float | None, *, verified: bool = True,
          reliability: float | None = 0.995, rented: bool = False) -> dict[str, Any]:
    """One offer with the fields of the OpenAPI example (values plausible for a home machine)."""
    return {
        "id": 10_000_000 + i, "ask_contract_id": 10_000_000 + i, "bundle_id": 900_000_000 + i, "bundled_results": None,
        "bw_nvlink": 0, "compute_cap": 860, "cpu_arch": "amd64", "cpu_cores": 32, "cpu_cores_effective": 16.0,
        "cpu_ghz": 3.5, "cpu_name": "AMD Ryzen 9 5950X 16-Core Processor", "cpu_ram": 64_000,
        "credit_discount_max": 0.0, "cuda_max_good": 12.4, "direct_port_count": 100, "disk_bw": 1800.5,
        "disk_name": "Samsung SSD 980 PRO 2TB", "disk_space": 500.0, "dlperf": 30.1,
        "dlperf_per_dphtotal": None if not price_per_gpu or not num_gpus else 30.1 / (price_per_gpu * num_gpus),
        "dph_base": None if price_per_gpu is None else round(price_per_gpu * num_gpus * 0.97, 6),
        "dph_total": None if price_per_gpu is None else round(price_per_gpu * num_gpus, 6),
        "driver_version": "550.120", "driver_vers": 550120, "duration": 2_592_000.0, "end_date": 1_893_456_000,
        "external": False, "flops_per_dphtotal": 100.0, "geolocation": "Poland, PL", "geolocode": 616,
        "gpu_arch": "nvidia", "gpu_display_active": False, "gpu_frac": 1.0, "gpu_ids": list(range(num_gpus)),
        "gpu_lanes": 16, "gpu_mem_bw": 936.2, "gpu_name": gpu_name, "gpu_ram": 24_576,
        "gpu_total_ram": 24_576 * num_gpus, "gpu_max_power": 350, "gpu_max_temp": 83, "has_avx": 1,
        "host_id": 50_000 + i, "hosting_type": 0, "hostname": None, "inet_down": 900.0, "inet_down_cost": 0.002,
        "inet_up": 400.0, "inet_up_cost": 0.002, "is_bid": False, "logo": "/static/logos/vastai_small2.png",
        "machine_id": 20_000 + i, "min_bid": None if price_per_gpu is None else round(price_per_gpu * 0.5, 6),
        "mobo_name": "X570 AORUS ELITE", "num_gpus": num_gpus, "os_version": "22.04", "pci_gen": 4.0,
        "pcie_bw": 24.1, "public_ipaddr": "203.0.113.42", "reliability": reliability, "reliability_mult": 0.99,
        "rentable": True, "rented": rented, "score": 12.3, "static_ip": True, "storage_cost": 0.1,
        "total_flops": 35.6, "verification": "verified" if verified else "unverified", "vericode": 1 if verified else 0,
        "vms_enabled": False, "webpage": None, "resource_type": "gpu",
    }


def metrics_row(gpu_name: str, **over: Any) -> dict[str, Any]:
    row = {"gpu_name": gpu_name, "total": 400, "available": 150, "rented_verified": 200, "avail_verified": 100,
           "rented_unverified": 50, "avail_unverified": 50, "usage": 62.5, "usage_30d": 55.0, "dlperf": 30.1,
           "tflops": 35.6, "price_p10": 0.15, "price_p25": 0.18, "price_median": 0.21, "price_p75": 0.25,
           "price_p90": 0.32, "tflops_per_dollar": 150.0, "dlperf_per_dollar": 140.0}
    row.update(over)
    return row


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    headers: dict[str, str]


@dataclass
class StandIn:
    port: int = 0
    mode: str = "normal"
    offers: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    history: dict[str, Any] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    rate_limited: int = 0
    """How many requests still get a 429 before the normal answer."""
    retry_after: str | None = "0"
    max_limit: int = 5_000
    """The most offers one search returns, whatever its limit asks."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _key_kind(headers: Any) -> str | None:
    auth = headers.get("Authorization") or ""
    if auth == f"Bearer {HOST_KEY}":
        return "host"
    if auth == f"Bearer {CLIENT_KEY}":
        return "client"
    return None


def _matches(o: dict[str, Any], q: dict[str, Any]) -> bool:
    for name in ("gpu_name", "num_gpus", "rented", "rentable"):
        want = q.get(name)
        if isinstance(want, dict) and "eq" in want and o.get(name) != want["eq"]:
            return False
    want = q.get("verified")
    if isinstance(want, dict) and "eq" in want and (o.get("verification") == "verified") != want["eq"]:
        return False
    return True


def serve(state: StandIn) -> tuple[ThreadingHTTPServer, threading.Thread]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, doc: Any = None, raw: bytes | None = None, headers: dict[str, str] | None = None,
                  length: int | None = None) -> None:
            body = raw if raw is not None else json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body) if length is None else length))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _handle(self, method: str) -> None:
            parts = urlsplit(self.path)
            size = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(size) if size else b""
            body = json.loads(raw) if raw else None
            state.requests.append(Request(method, parts.path, parse_qs(parts.query), body, dict(self.headers)))
            kind = _key_kind(self.headers)
            if state.rate_limited > 0:
                state.rate_limited -= 1
                headers = {"Retry-After": state.retry_after} if state.retry_after is not None else {}
                return self._send(429, {"detail": "API requests too frequent endpoint threshold=3.0"}, headers=headers)
            mode = state.mode
            if mode == "redirect":
                return self._send(302, {}, headers={"Location": "https://elsewhere.example/api/v0/bundles/"})
            if kind is None:
                return self._send(401, {"success": False, "error": "invalid_api_key",
                                        "msg": f"Invalid user key {(self.headers.get('Authorization') or '')[7:]}"})
            if parts.path.startswith("/api/v0/metrics/"):
                if kind != "host":
                    return self._send(401, {"success": False, "error": "not_a_host",
                                            "msg": "This endpoint requires a host API key"})
                if mode == "needs_machine":
                    return self._send(200, {"success": True, "gpus": [], "needs_machine": True})
                if parts.path == "/api/v0/metrics/gpu/current/":
                    return self._send(200, {"success": True, "gpus": state.metrics})
                if parts.path == "/api/v0/metrics/gpu/history/":
                    return self._send(200, {"success": True, "gpus": state.history})
            if parts.path == "/api/v0/bundles/" and method == "POST":
                if mode == "not_json":
                    return self._send(200, raw=b"<html><body>502 Bad Gateway</body></html>")
                if mode == "huge":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    chunk = b" " * 65536
                    try:
                        for _ in range(40 * 16):  # 40 MiB, more than the client reads
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:
                        pass
                    return None
                q = body if isinstance(body, dict) else {}
                found = [o for o in state.offers if _matches(o, q)]
                limit = min(int(q.get("limit") or 64), state.max_limit)
                doc = {"offers": found[:limit]}
                if mode == "truncated":
                    text = json.dumps(doc).encode()
                    self._send(200, raw=text[: len(text) // 2], length=len(text))
                    self.close_connection = True
                    return None
                if mode == "no_offers_key":
                    return self._send(200, {"success": True})
                return self._send(200, doc)
            return self._send(404, {"success": False, "error": "not_found", "msg": "no such endpoint"})

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

    server = ThreadingHTTPServer(("127.0.0.1", state.port), Handler)
    server.daemon_threads = True
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


def market_of(gpu_name: str = "RTX 3090", num_gpus: int = 1, n: int = 40, seed: int = 7) -> StandIn:
    """A market for one model: ``n`` listed offers, 3 in 4 verified, prices 0.12-0.40, and the
    metrics and history rows for it (beside two other models)."""
    rnd = random.Random(seed)
    offers = [offer(i, gpu_name, num_gpus, round(rnd.uniform(0.12, 0.40), 3), verified=i % 4 != 3,
                    reliability=rnd.choice([0.999, 0.993, 0.97, 0.9, None])) for i in range(n)]
    offers.append(offer(n, "RTX 4090", num_gpus, 0.45))
    metrics = [metrics_row(gpu_name), metrics_row("RTX 4090", price_median=0.42), metrics_row("RTX 3080")]
    now = int(time.time())
    stamps = [now - 3600 * (2 - i) for i in range(3)]
    history = {gpu_name: {"stats": {"tflops": 35.6},
                          "supply_demand": {"timestamps": stamps, "rented_verified": [200, 201, 199],
                                            "avail_verified": [100, 99, 101], "total": [400, 400, 400]},
                          "pricing": {"rented_p10": [0.16, 0.16, 0.17], "rented_median": [0.22, 0.23, 0.24],
                                      "rented_p90": [0.30, 0.31, 0.33], "avail_p10": [0.14, 0.14, 0.14],
                                      "avail_median": [0.26, 0.26, 0.27], "avail_p90": [0.38, 0.39, 0.40]}}}
    return StandIn(offers=offers, metrics=metrics, history=history)
