"""The probe server as a process: logging that keeps peers out, the open-files limit, and
starting and stopping the listening sockets (``start_server``, ``serve``)."""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import signal
import ssl
from collections.abc import Callable, Sequence
from typing import Any

from hostcheck.netprobe.probe_protocol import DEFAULT_MAX_PORTS
from hostcheck.probeserver.app import ProbeService, log
from hostcheck.probeserver.guard import GuardedServer, TlsGate
from hostcheck.probeserver.limits import DEFAULT_SPEED_BUDGET, MAX_CONCURRENT_PROBES, Limits


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
        self.service.probe_threads.shutdown(wait=False, cancel_futures=True)
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
    max_ports: int = DEFAULT_MAX_PORTS,
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
