"""The probe server's connection guard: every connection is admitted by the caps, cut off at
its deadline, and (behind TLS) held to a short handshake before aiohttp parses a byte of it."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any, cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from hostcheck.netprobe.probe_protocol import normalise_peer
from hostcheck.probeserver.app import ProbeService
from hostcheck.probeserver.limits import Slot


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

