"""The probe server's throughput endpoints (wire format: :mod:`speed_protocol`).

Served by :class:`~hostcheck.probeserver.server.ProbeService` (which imports this module;
this module needs of it only what :class:`SpeedHost` names), so they sit behind the same
token check, rate limits, connection caps and deadlines as ``/probe``; a stream also ends at
its own time and byte caps, and at most ``speed_max_streams`` run at once. All streams together
move at most ``speed_budget_bytes_per_hour`` in any hour (both directions, counted on the wire:
compressed bodies are refused before this point); past it the answer is 429 with
``Retry-After``, and a stream that starts near the end of the budget is cut to what is left.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from typing import Protocol

from aiohttp import web

from hostcheck.errors import SpeedParamError
from hostcheck.netprobe.speed_protocol import DOWNLOAD_PATH, SAMPLE_EVERY_S, UPLOAD_PATH, parse_params
from hostcheck.probeserver.limits import ByteBudget, Limits, Stats

BLOCK = 256 * 1024
DRAIN_S = 2.0
DRAIN_MAX_BYTES = 64 * 1024 * 1024
"""What an upload may still send after the server's answer before the connection is closed."""
_PAYLOAD = os.urandom(BLOCK)  # incompressible, made once


class SpeedHost(Protocol):
    """What a stream needs of the server that runs it."""

    limits: Limits
    budget: ByteBudget
    stats: Stats
    speed_streams: int

    def _refuse(self, status: int, message: str, retry_after: int | None = None) -> web.Response: ...


SpeedRoute = Callable[[SpeedHost, web.BaseRequest, str], Awaitable[web.StreamResponse]]


def routes() -> dict[tuple[str, str], SpeedRoute]:
    """The speed-test routes, keyed by (method, path)."""
    return {("GET", DOWNLOAD_PATH): _admitted(_download), ("POST", UPLOAD_PATH): _admitted(_upload)}


def route_deadlines(limits: Limits) -> dict[str, float]:
    """A stream may outlive the request deadline by its own length plus a margin to finish."""
    grace = limits.speed_max_seconds + DRAIN_S + 5.0
    return {DOWNLOAD_PATH: grace, UPLOAD_PATH: grace}


class Moved:
    """Bytes a stream has moved so far (read by the budget even when the stream fails)."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


Stream = Callable[[SpeedHost, web.BaseRequest, float, int, Moved], Awaitable[web.StreamResponse]]


def _admitted(stream: Stream) -> SpeedRoute:
    """A handler that admits a stream (valid caps, budget left, a free stream slot), holds its
    slot and its share of the budget while ``stream`` runs, then charges what it moved."""

    async def handler(service: SpeedHost, request: web.BaseRequest, _peer: str) -> web.StreamResponse:
        try:
            seconds, nbytes = parse_params(
                request.query, service.limits.speed_max_seconds, service.limits.speed_max_bytes
            )
        except SpeedParamError as exc:
            return service._refuse(400, str(exc))
        if service.budget.available() <= 0:
            return service._refuse(
                429, "the speed-test byte budget for this hour is spent", retry_after=service.budget.retry_after()
            )
        if service.speed_streams >= service.limits.speed_max_streams:
            return service._refuse(503, "busy: too many speed-test streams; try again shortly")
        granted = service.budget.reserve(nbytes)
        moved = Moved()
        service.speed_streams += 1
        try:
            return await stream(service, request, seconds, granted, moved)
        finally:
            service.speed_streams -= 1
            service.budget.settle(granted, moved.n)

    return handler


async def _download(
    service: SpeedHost, request: web.BaseRequest, seconds: float, nbytes: int, moved: Moved
) -> web.StreamResponse:
    loop = asyncio.get_running_loop()
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    response.force_close()
    await response.prepare(request)
    end = loop.time() + seconds
    sent = 0
    view = memoryview(_PAYLOAD)
    while sent < nbytes and loop.time() < end:
        chunk = view[: min(BLOCK, nbytes - sent)]
        await response.write(chunk)
        sent += len(chunk)
        moved.n = sent
    await response.write_eof()
    service.stats.add("speed_bytes_sent", sent)
    service.stats.add("speed_streams")
    return response


async def _upload(
    service: SpeedHost, request: web.BaseRequest, seconds: float, nbytes: int, moved: Moved
) -> web.StreamResponse:
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    received = 0
    samples: list[list[float]] = []
    last_sample = -1.0
    while received < nbytes:
        left = end - loop.time()
        if left <= 0:
            break
        try:
            chunk = await asyncio.wait_for(request.content.readany(), left)
        except TimeoutError:
            break
        if not chunk:
            break
        received += len(chunk)
        moved.n = received
        now = loop.time()
        if now - last_sample >= SAMPLE_EVERY_S:
            samples.append([round(now, 6), received])
            last_sample = now
    if samples and samples[-1][1] != received:
        samples.append([round(loop.time(), 6), received])
    service.stats.add("speed_bytes_received", received)
    service.stats.add("speed_streams")
    # Answer at once, whatever the client still has in flight: the test ends on the
    # server's clock. Then read and drop the rest for a moment, because closing with
    # unread data resets the connection and can destroy the answer before it is read.
    body = json.dumps({"received": received, "samples": samples}).encode()
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = len(body)
    response.force_close()
    await response.prepare(request)
    await response.write(body)
    await response.write_eof()
    drain_end = loop.time() + DRAIN_S
    drained = 0
    while (left := drain_end - loop.time()) > 0 and drained < DRAIN_MAX_BYTES:
        try:
            chunk = await asyncio.wait_for(request.content.readany(), left)
        except (TimeoutError, ConnectionError):
            break
        if not chunk:
            break
        drained += len(chunk)
        moved.n = received + drained
    return response
