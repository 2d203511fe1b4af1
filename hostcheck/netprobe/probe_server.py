"""The probe server: run outside the LAN, it connects back to its caller (only).

Only a connection from outside can prove that a forwarded port reaches the host, so
``hostcheck probe-server`` runs on a machine outside the LAN (a small VPS) and
``hostcheck audit --probe URL`` asks it to connect back (wire format:
:mod:`hostcheck.netprobe.probe_protocol`). It also answers the speed test
(:mod:`hostcheck.netprobe.speed_endpoint`) under the same token and limits.

Built on aiohttp's low-level server: a maintained asyncio HTTP stack (aio-libs, security
releases, strict request parser) that needs no thread per connection and lets one small
guard own every connection's life, which is what the limits below need. The routes are few
enough that no web framework is wanted.

Rules, in the order a request meets them:

- at most ``max_connections`` connections at once, and ``max_connections_per_source`` from
  one address; one over is closed at once;
- every connection has a deadline for the whole request (headers, body and answer), so a
  client trickling bytes is cut off however slowly it sends;
- the token is checked first: a wrong token is answered 401 and counted, and nothing is
  charged to anyone's budget, so a flood of wrong tokens cannot lock out the real one;
- then per-caller and overall requests-per-minute limits (429), and concurrent probes (503);
- it connects back only to the address the request came from (the TCP peer), never to an
  address the request names; ``X-Forwarded-For`` and the like are ignored;
- logs carry counts and statuses only: no token, nonce or address, and no traceback (which
  would carry the peer). Failed authentications appear in a periodic summary.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from hostcheck.netprobe import speed_endpoint
from hostcheck.netprobe.connectback import probe_one
from hostcheck.netprobe.probe_limits import MAX_CONCURRENT_PROBES, Limits, RateLimiter, Stats
from hostcheck.netprobe.probe_protocol import (
    MAX_BODY,
    ProbeRequestError,
    bearer,
    check_token,
    normalise_peer,
    parse_probe_request,
    token_matches,
)

log = logging.getLogger("hostcheck.probe_server")

Route = Callable[["ProbeService", web.BaseRequest, str], Awaitable[web.StreamResponse]]


class ProbeService:
    """The state of one server: limits, counters, routes. Owns no socket."""

    def __init__(self, token: str, limits: Limits) -> None:
        self.token = check_token(token)
        self.limits = limits
        self.limiter = RateLimiter(limits.rate_per_min, limits.overall_per_min)
        self.stats = Stats()
        self.connections: dict[str, int] = {}
        self.open_connections = 0
        self.probes_running = 0
        self.routes: dict[tuple[str, str], Route] = {("POST", "/probe"): _probe_route}
        self.route_deadlines: dict[str, float] = {}
        """Routes whose answer may take longer than the request deadline (the speed test)."""
        self.speed_streams = 0
        if limits.speed_max_streams > 0:
            speed_endpoint.register(self)

    # -- connections ---------------------------------------------------------------------
    def admit(self, source: str) -> bool:
        if self.open_connections >= self.limits.max_connections:
            self.stats.add("connections_over_cap")
            return False
        if self.connections.get(source, 0) >= self.limits.max_connections_per_source:
            self.stats.add("connections_over_cap")
            return False
        self.open_connections += 1
        self.connections[source] = self.connections.get(source, 0) + 1
        return True

    def release(self, source: str) -> None:
        self.open_connections -= 1
        left = self.connections.get(source, 1) - 1
        if left > 0:
            self.connections[source] = left
        else:
            self.connections.pop(source, None)

    # -- requests ------------------------------------------------------------------------
    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        response = await self._dispatch(request)
        # One request per connection: the deadline below is then the request's deadline.
        response.force_close()
        return response

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.method == "GET" and request.path == "/health":
            return _json(200, {"ok": True})
        route = self.routes.get((request.method, request.path))
        if route is None:
            return self._refuse(404, "not found")
        if not token_matches(bearer(request.headers.get("Authorization")), self.token):
            self.stats.add("failed_authentications")
            return self._refuse(401, "missing or wrong token")
        peer = _peer_of(request)
        if peer is None:
            return self._refuse(400, "no peer address")
        if not self.limiter.allow(peer):
            return self._refuse(429, "too many requests; try again in a minute")
        extra = self.route_deadlines.get(request.path)
        if extra is not None and isinstance(request.protocol, GuardedHandler):
            request.protocol.extend_deadline(extra)
        return await route(self, request, peer)

    def _refuse(self, status: int, message: str) -> web.Response:
        self.stats.add(f"refused_{status}")
        return _json(status, {"error": message})


async def _probe_route(service: ProbeService, request: web.BaseRequest, peer: str) -> web.StreamResponse:
    if request.content_length is None or not 0 <= request.content_length <= MAX_BODY:
        return service._refuse(400, f"Content-Length must be 0-{MAX_BODY}")
    body = await request.content.read(MAX_BODY + 1)
    try:
        parsed = parse_probe_request(body, max_ports=service.limits.max_ports)
    except ProbeRequestError as exc:
        return service._refuse(400, str(exc))
    if service.probes_running >= MAX_CONCURRENT_PROBES:
        return service._refuse(503, "busy; try again shortly")
    service.probes_running += 1
    try:
        results = await asyncio.gather(*(asyncio.to_thread(probe_one, peer, p) for p in parsed.ports))
    finally:
        service.probes_running -= 1
    service.stats.add("probes")
    log.info(
        "probe done: %d tcp, %d udp port(s), %d reachable",
        sum(p.proto == "tcp" for p in parsed.ports),
        sum(p.proto == "udp" for p in parsed.ports),
        sum(r["result"] == "reachable" for r in results),
    )
    return _json(200, {"peer": peer, "results": list(results)})


def _peer_of(request: web.BaseRequest) -> str | None:
    transport = request.transport
    peername = transport.get_extra_info("peername") if transport is not None else None
    if not peername:
        return None
    try:
        return normalise_peer(str(peername[0]))
    except ValueError:
        return None


def _json(status: int, body: dict[str, Any]) -> web.Response:
    return web.json_response(body, status=status)


class GuardedHandler(RequestHandler):
    """aiohttp's per-connection protocol, admitted by the connection caps and cut off at
    the whole-request deadline."""

    service: ProbeService

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._guard_source: str | None = None
        self._guard_timer: asyncio.TimerHandle | None = None
        peername = transport.get_extra_info("peername")
        source = _source_key(peername)
        tcp = cast(asyncio.Transport, transport)  # a stream server's connections are transports
        if not self.service.admit(source):
            self._guard_rejected = True
            tcp.abort()
            return
        self._guard_rejected = False
        self._guard_source = source
        self._guard_transport = tcp
        self._guard_timer = self._loop.call_later(self.service.limits.request_deadline_s, self._expire)
        super().connection_made(transport)

    def extend_deadline(self, seconds: float) -> None:
        if self._guard_timer is not None:
            self._guard_timer.cancel()
            self._guard_timer = self._loop.call_later(seconds, self._expire)

    def _expire(self) -> None:
        self._guard_timer = None
        self.service.stats.add("request_deadlines")
        self._guard_transport.abort()

    def connection_lost(self, exc: BaseException | None) -> None:
        if getattr(self, "_guard_rejected", True):
            return
        if self._guard_timer is not None:
            self._guard_timer.cancel()
            self._guard_timer = None
        if self._guard_source is not None:
            self.service.release(self._guard_source)
            self._guard_source = None
        super().connection_lost(exc)


def _source_key(peername: Any) -> str:
    try:
        return normalise_peer(str(peername[0]))
    except (TypeError, IndexError, ValueError):
        return "?"


class GuardedServer(web.Server):
    def __init__(self, service: ProbeService) -> None:
        super().__init__(
            service.handle,
            handler_cancellation=True,
            access_log=None,
            max_line_size=4096,
            max_field_size=4096,
        )
        self.service = service

    def __call__(self) -> RequestHandler:
        handler = GuardedHandler(self, loop=self._loop, **self._kwargs)
        handler.service = self.service
        return handler


class _Scrub(logging.Filter):
    """Library log records (aiohttp, asyncio) keep only their level and the exception's type.

    Their messages and tracebacks may carry the peer's address; our own lines never do.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        kind = type(record.exc_info[1]).__name__ if record.exc_info and record.exc_info[1] else None
        record.msg = f"{record.name}: connection error" + (f" ({kind})" if kind else "")
        record.args = ()
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


def scrub_library_logs() -> None:
    for name in ("aiohttp", "aiohttp.server", "aiohttp.access", "aiohttp.web", "aiohttp.internal", "asyncio"):
        lg = logging.getLogger(name)
        if not any(isinstance(f, _Scrub) for f in lg.filters):
            lg.addFilter(_Scrub())


def _loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    # The default handler prints the context (transport, protocol, peer) and a traceback.
    exc = context.get("exception")
    log.debug("event loop: %s", type(exc).__name__ if exc else "error")


class RunningServer:
    """A started server: its port, its service (counters) and how to stop it."""

    def __init__(self, service: ProbeService, server: asyncio.Server, tls: bool) -> None:
        self.service, self._server, self.tls = service, server, tls
        self.port = int(server.sockets[0].getsockname()[1])
        self._summary: asyncio.Task[None] | None = None

    async def start_summaries(self) -> None:
        self._summary = asyncio.create_task(self._summaries())

    async def _summaries(self) -> None:
        while True:
            await asyncio.sleep(self.service.limits.summary_interval_s)
            self.log_summary()

    def log_summary(self) -> None:
        text = self.service.stats.summary()
        if text:
            log.warning("summary: %s", text)

    async def close(self) -> None:
        if self._summary is not None:
            self._summary.cancel()
        self._server.close()
        await self._server.wait_closed()
        self.log_summary()


async def start_server(
    bind: str,
    port: int,
    token: str,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    service: ProbeService | None = None,
) -> RunningServer:
    """Start serving on ``bind:port`` (0 picks a free port) in the running event loop."""
    scrub_library_logs()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(_loop_exception_handler)
    service = service or ProbeService(token, limits or Limits())
    handler_factory = GuardedServer(service)
    server = await loop.create_server(
        handler_factory,
        bind,
        port,
        ssl=ssl_context,
        reuse_address=True,
        backlog=128,
        ssl_handshake_timeout=service.limits.request_deadline_s if ssl_context else None,
    )
    running = RunningServer(service, server, tls=ssl_context is not None)
    await running.start_summaries()
    return running


def serve(
    bind: str,
    port: int,
    token: str,
    *,
    max_ports: int = 16,
    rate_per_min: int = 30,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    fingerprint: str | None = None,
) -> None:
    """Run the probe server until SIGINT/SIGTERM (blocking)."""
    limits = limits or Limits(
        max_ports=max_ports, rate_per_min=rate_per_min, overall_per_min=max(300, rate_per_min * 10)
    )

    async def main() -> None:
        running = await start_server(bind, port, token, limits, ssl_context)
        scheme = "https" if ssl_context else "http (no TLS: the token crosses the network in clear)"
        log.warning(
            "hostcheck probe server listening on port %d, %s (max %d ports/request, %d requests/min per caller)",
            running.port,
            scheme,
            limits.max_ports,
            limits.rate_per_min,
        )
        if fingerprint:
            log.warning("certificate fingerprint (give it to clients as --probe-fingerprint): %s", fingerprint)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await running.close()

    asyncio.run(main())
