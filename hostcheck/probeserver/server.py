"""The probe server: run outside the LAN, it connects back to its caller (only).

Only a connection from outside can prove that a forwarded port reaches the host, so
``hostcheck probe-server`` runs on a machine outside the LAN (a small VPS) and
``hostcheck audit --probe URL`` asks it to connect back (wire format:
:mod:`hostcheck.netprobe.probe_protocol`). It also answers the speed test
(:mod:`hostcheck.probeserver.speed_endpoint`) under the same token and limits.

Built on aiohttp's low-level server: a maintained asyncio HTTP stack (aio-libs, security
releases, strict request parser) that needs no thread per connection and lets one small
guard own every connection's life, which is what the limits below need. The routes are few
enough that no web framework is wanted.

Rules, in the order a request meets them:

- a connection is counted from the moment it is accepted, before any TLS handshake: at most
  ``max_connections`` at once, ``max_connections_per_source`` from one address,
  ``max_connections_per_prefix`` from one network prefix (IPv4 /24, IPv6 /56 by default) and
  ``max_handshakes`` still in their TLS handshake, which must end within
  ``handshake_deadline_s``. A newcomer past a cap displaces the oldest connection in that
  scope that has not shown the token yet (see :class:`~hostcheck.probeserver.limits.ConnectionTable`),
  so idle and half-open connections cannot keep a caller with the token out;
- every connection has a deadline for the whole request (headers, body and answer), so a
  client trickling bytes is cut off however slowly it sends; headers are bounded in count
  and size;
- the token is checked first: a wrong token is answered 401 and counted, and nothing is
  charged to anyone's budget, so a flood of wrong tokens cannot lock out the real one;
- a compressed body is refused (400): the server never inflates what a caller sends;
- then per-caller and overall requests-per-minute limits (429), and concurrent probes (503);
- it connects back only to the address the request came from (the TCP peer), never to an
  address the request names; ``X-Forwarded-For`` and the like are ignored;
- logs carry counts and statuses only: no token, nonce or address, and no traceback (which
  would carry the peer). Failed authentications and shed connections appear in a periodic
  summary; running out of file descriptors is a warning with a count, at most once a minute.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import signal
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from aiohttp import http_exceptions, web
from aiohttp.web_protocol import RequestHandler

from hostcheck.models import InboundResult
from hostcheck.netprobe.probe_protocol import (
    MAX_BODY,
    ProbeRequestError,
    bearer,
    check_token,
    normalise_peer,
    parse_probe_request,
    token_matches,
)
from hostcheck.probeserver import speed_endpoint
from hostcheck.probeserver.connectback import probe_one
from hostcheck.probeserver.limits import (
    DEFAULT_SPEED_BUDGET,
    MAX_CONCURRENT_PROBES,
    ByteBudget,
    ConnectionTable,
    Limits,
    OutOfFiles,
    RateLimiter,
    Slot,
    Stats,
)

log = logging.getLogger("hostcheck.probe_server")

Route = Callable[["ProbeService", web.BaseRequest, str], Awaitable[web.StreamResponse]]


class ProbeService:
    """The state of one server: limits, counters, routes. Owns no socket."""

    def __init__(self, token: str, limits: Limits, max_connections: int | None = None) -> None:
        self.token = check_token(token)
        self.limits = limits
        self.limiter = RateLimiter(limits.rate_per_min, limits.overall_per_min)
        self.stats = Stats()
        self.table = ConnectionTable(limits, max_connections)
        self.budget = ByteBudget(limits.speed_budget_bytes_per_hour)
        self.out_of_files = OutOfFiles()
        self.probes_running = 0
        self.routes: dict[tuple[str, str], Route] = {("POST", "/probe"): _probe_route}
        self.route_deadlines: dict[str, float] = {}
        """Routes whose answer may take longer than the request deadline (the speed test)."""
        self.speed_streams = 0
        if limits.speed_max_streams > 0:
            self.routes.update(speed_endpoint.routes())
            self.route_deadlines.update(speed_endpoint.route_deadlines(limits))

    # -- connections ---------------------------------------------------------------------
    def admit(self, source: str, abort: Callable[[], None], *, handshaking: bool = False) -> Slot | None:
        slot, shed = self.table.open(source, abort, handshaking=handshaking)
        if shed:
            self.stats.add("connections_shed", shed)
        if slot is None:
            self.stats.add("connections_over_cap")
        return slot

    def note_out_of_files(self, err: int) -> None:
        """accept() failed for want of a file descriptor: a warning, at most once a minute."""
        self.stats.add("accepts_out_of_files")
        due = self.out_of_files.note(time.monotonic())
        if due is not None:
            self._warn_out_of_files(due, err)

    def flush_out_of_files(self) -> None:
        due = self.out_of_files.flush(time.monotonic())
        if due is not None:
            self._warn_out_of_files(due, errno.EMFILE)

    def _warn_out_of_files(self, count: int, err: int) -> None:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        what = "the system's file table is full" if err == errno.ENFILE else f"open-files limit {soft} reached"
        log.warning(
            "out of file descriptors (%s): %d connection(s) could not be accepted since the last "
            "such warning (%d in all), %d open; raise LimitNOFILE= / ulimit -n or lower --max-connections",
            what, count, self.out_of_files.total, self.table.slots,
        )

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
        protocol = request.protocol if isinstance(request.protocol, GuardedHandler) else None
        if protocol is not None and protocol.slot is not None:
            # The one place a slot becomes unsheddable: a parsed request head whose token
            # matched. Bytes on the wire prove nothing (the parser skips blank lines, and a
            # complete head may carry no token or a wrong one), and a request without the
            # token is answered above and its connection closed, never kept.
            self.table.authenticate(protocol.slot)
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            # Never inflated: a small compressed body would cost memory and CPU out of all
            # proportion, and the speed test counts what crossed the wire.
            return self._refuse(400, "compressed request bodies are not accepted; send it without Content-Encoding")
        peer = _peer_of(request)
        if peer is None:
            return self._refuse(400, "no peer address")
        if not self.limiter.allow(peer):
            return self._refuse(429, "too many requests; try again in a minute", retry_after=60)
        extra = self.route_deadlines.get(request.path)
        if extra is not None and protocol is not None:
            protocol.extend_deadline(extra)
        try:
            return await route(self, request, peer)
        except http_exceptions.HttpProcessingError:
            # The body broke its own framing (bad chunking, short of its Content-Length).
            return self._refuse(400, "malformed request body")

    def _refuse(self, status: int, message: str, retry_after: int | None = None) -> web.Response:
        self.stats.add(f"refused_{status}")
        response = _json(status, {"error": message})
        if retry_after is not None:
            response.headers["Retry-After"] = str(retry_after)
        return response


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
        sum(r["result"] == InboundResult.REACHABLE for r in results),
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
    the whole-request deadline. Behind TLS the slot was taken at accept by :class:`TlsGate`."""

    service: ProbeService
    slot: Slot | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._guard_timer: asyncio.TimerHandle | None = None
        tcp = cast(asyncio.Transport, transport)  # a stream server's connections are transports
        self._guard_transport = tcp
        if self.slot is None:
            self.slot = self.service.admit(_source_key(transport.get_extra_info("peername")), tcp.abort)
        if self.slot is None or not self.slot.open:
            self._guard_rejected = True
            tcp.abort()
            return
        self._guard_rejected = False
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
        if self.slot is not None:
            self.service.table.close(self.slot)
        super().connection_lost(exc)


class TlsGate(asyncio.Protocol):
    """A TLS connection from accept to the end of its handshake.

    It takes the connection's slot at once (so a handshake that never finishes holds one, and
    can be shed for a caller with the token), runs the handshake under its own short deadline,
    then hands the decrypted stream to a :class:`GuardedHandler`. Bytes that arrive between the
    handshake's end and the hand-over are kept and passed on.
    """

    MAX_EARLY = 256 * 1024

    def __init__(self, server: GuardedServer, context: ssl.SSLContext) -> None:
        self.server, self.context = server, context
        self.service = server.service
        self.slot: Slot | None = None
        self.handler: GuardedHandler | None = None
        self._early: list[bytes] = []
        self._early_size = 0
        self._eof = False
        self._task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tcp = cast(asyncio.Transport, transport)
        self.slot = self.service.admit(
            _source_key(transport.get_extra_info("peername")), tcp.abort, handshaking=True
        )
        if self.slot is None:
            tcp.abort()
            return
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self.service.limits.handshake_deadline_s, self._expire, tcp)
        self._task = loop.create_task(self._handshake(tcp, self.slot))

    def _expire(self, tcp: asyncio.Transport) -> None:
        # Only the deadline is counted: a client that gives up on our certificate (no pin, a
        # wrong one) is an ordinary refusal that never reached the server's rules.
        self.service.stats.add("tls_handshake_deadlines")
        tcp.abort()

    async def _handshake(self, tcp: asyncio.Transport, slot: Slot) -> None:
        loop = asyncio.get_running_loop()
        try:
            tls = await loop.start_tls(
                tcp, self, self.context, server_side=True,
                ssl_handshake_timeout=self.service.limits.handshake_deadline_s + 1.0,
            )
        except (OSError, ssl.SSLError, TimeoutError, EOFError):
            self._deadline.cancel()
            self.service.table.close(slot)
            tcp.abort()
            return
        self._deadline.cancel()
        if tls is None or not slot.open:
            self.service.table.close(slot)
            tcp.abort()
            return
        self.service.table.handshake_done(slot)
        handler = self.server()
        handler.slot = slot
        self.handler = handler
        tls.set_protocol(handler)
        handler.connection_made(tls)
        for chunk in self._early:
            handler.data_received(chunk)
        self._early = []
        if self._eof:
            handler.eof_received()

    def data_received(self, data: bytes) -> None:
        if self.handler is not None:
            self.handler.data_received(data)
            return
        self._early.append(data)
        self._early_size += len(data)
        if self._early_size > self.MAX_EARLY and self.slot is not None:
            self.slot.abort()

    def eof_received(self) -> bool | None:
        if self.handler is not None:
            self.handler.eof_received()
            return None
        self._eof = True
        return True

    def connection_lost(self, exc: BaseException | None) -> None:
        if self.handler is not None:
            self.handler.connection_lost(exc)
        elif self.slot is not None:
            self.service.table.close(self.slot)


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
            max_headers=32,
            auto_decompress=False,
        )
        self.service = service

    def __call__(self) -> GuardedHandler:
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


OUT_OF_FILES = (errno.EMFILE, errno.ENFILE)


def _exception_handler(service: ProbeService) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # The default handler prints the context (transport, protocol, peer) and a traceback.
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in OUT_OF_FILES:
            service.note_out_of_files(exc.errno)
            return
        log.debug("event loop: %s", type(exc).__name__ if exc else "error")

    return handle


FD_RESERVE = 16
"""Descriptors the server needs besides its connections: listening sockets, the event loop,
logging, the standard streams."""
ACCEPT_BURST = 32
"""The listen backlog, which is also how many connections asyncio accepts in one go before the
caps can shed any: up to two such bursts are open beyond the caps for a moment."""


def connection_capacity(limits: Limits) -> int:
    """How many connections the open-files limit leaves room for (at most ``max_connections``):
    each connection is one descriptor, each running connect-back probe one per port."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return limits.max_connections
    room = soft - FD_RESERVE - 2 * ACCEPT_BURST - MAX_CONCURRENT_PROBES * limits.max_ports
    return min(limits.max_connections, room)


def raise_files_limit(limits: Limits) -> None:
    """Raise the soft open-files limit as far as the connections and probes need (within the
    hard limit): the soft limit a service starts with may be below what ``--max-connections``
    and the probes need."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = limits.max_connections + FD_RESERVE + 2 * ACCEPT_BURST + MAX_CONCURRENT_PROBES * limits.max_ports
    if soft != resource.RLIM_INFINITY and soft < need:
        target = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass


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
        self.service.flush_out_of_files()
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
    bind: str | Sequence[str],
    port: int,
    token: str,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    service: ProbeService | None = None,
) -> RunningServer:
    """Start serving on ``bind:port`` (0 picks a free port) in the running event loop; ``bind``
    may list several addresses (then give a port: 0 would pick one per address)."""
    scrub_library_logs()
    loop = asyncio.get_running_loop()
    if service is None:
        limits = limits or Limits()
        capacity = connection_capacity(limits)
        if capacity < min(8, limits.max_connections):
            raise OSError(errno.EMFILE, f"the open-files limit leaves room for only {max(capacity, 0)} connections")
        if capacity < limits.max_connections:
            log.warning(
                "the open-files limit leaves room for %d connections: serving at most %d (not %d)",
                capacity, capacity, limits.max_connections,
            )
        service = ProbeService(token, limits, capacity)
    loop.set_exception_handler(_exception_handler(service))
    handler_factory = GuardedServer(service)
    protocol_factory: Callable[[], asyncio.BaseProtocol] = handler_factory
    if ssl_context is not None:
        context = ssl_context
        protocol_factory = lambda: TlsGate(handler_factory, context)  # noqa: E731
    server = await loop.create_server(
        protocol_factory,
        bind,
        port,
        reuse_address=True,
        backlog=ACCEPT_BURST,
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
    speed_budget_bytes_per_hour: int = DEFAULT_SPEED_BUDGET,
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    fingerprint: str | None = None,
) -> None:
    """Run the probe server until SIGINT/SIGTERM (blocking)."""
    limits = limits or Limits(
        max_ports=max_ports,
        rate_per_min=rate_per_min,
        overall_per_min=max(300, rate_per_min * 10),
        speed_budget_bytes_per_hour=speed_budget_bytes_per_hour,
    )

    raise_files_limit(limits)

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
