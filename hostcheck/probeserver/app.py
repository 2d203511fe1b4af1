"""The probe server's application: its state (limits, counters) and its routes.

Owns no socket: :mod:`hostcheck.probeserver.guard` admits each connection and hands its
requests to :meth:`ProbeService.handle`; :mod:`hostcheck.probeserver.process` runs it all.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, runtime_checkable

from aiohttp import http_exceptions, web

from hostcheck.errors import ProbeRequestError
from hostcheck.models import InboundResult
from hostcheck.netprobe.probe_protocol import (
    MAX_BODY,
    bearer,
    check_token,
    normalise_peer,
    parse_probe_request,
    token_matches,
)
from hostcheck.probeserver import speed_endpoint
from hostcheck.probeserver.connectback import probe_one
from hostcheck.probeserver.limits import (
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


@runtime_checkable
class GuardedConnection(Protocol):
    """What a request's connection offers when the guard admitted it (its slot, its deadline)."""

    slot: Slot | None

    def extend_deadline(self, seconds: float) -> None: ...


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
        # Every port of every running probe at once: each waits up to its own timeout, so
        # a request's ports in turns (the default executor has a few threads per core) would
        # outlast the client's wait. Bounded like the descriptors they hold.
        self.probe_threads = ThreadPoolExecutor(MAX_CONCURRENT_PROBES * limits.max_ports, "connect-back")
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
        protocol = request.protocol if isinstance(request.protocol, GuardedConnection) else None
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
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(
            *(loop.run_in_executor(service.probe_threads, probe_one, peer, p) for p in parsed.ports)
        )
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

