"""A real probe server on loopback, run in a thread of the test process (no mocks)."""

from __future__ import annotations

import asyncio
import socket
import ssl
import threading
from dataclasses import dataclass
from typing import Any

from hostcheck.probeserver.limits import Limits
from hostcheck.probeserver.server import ProbeService, RunningServer, start_server

TOKEN = "test-token-0123456789abcdef"


@dataclass
class RunningThread:
    url: str
    service: ProbeService
    server: RunningServer
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def call(self, fn: Any) -> Any:
        """Run ``fn()`` on the server's loop (its state is not thread-safe) and return the result."""

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(10)


def start_in_thread(
    limits: Limits | None = None,
    ssl_context: ssl.SSLContext | None = None,
    service: ProbeService | None = None,
    bind: str | list[str] = "127.0.0.1",
) -> RunningThread:
    """A server on ``bind`` (an address, or several on one free port; the URL names the first)."""
    port = 0 if isinstance(bind, str) else free_port()
    loop = asyncio.new_event_loop()
    ready: dict[str, Any] = {}
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)

        async def boot() -> None:
            try:
                ready["server"] = await start_server(bind, port, TOKEN, limits, ssl_context, service)
            except BaseException as exc:  # handed to the test thread
                ready["error"] = exc
            started.set()

        loop.create_task(boot())
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, daemon=True, name="probe-server-loop")
    thread.start()
    if not started.wait(10):
        raise RuntimeError("probe server did not start in 10 s")
    if "error" in ready:
        raise ready["error"]
    srv: RunningServer = ready["server"]
    scheme = "https" if ssl_context else "http"
    first = bind if isinstance(bind, str) else bind[0]
    host = f"[{first}]" if ":" in first else first
    return RunningThread(f"{scheme}://{host}:{srv.port}", srv.service, srv, loop, thread)


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port free for both TCP and UDP right now."""
    for _ in range(50):
        with socket.socket(socket.AF_INET, kind) as s:
            s.bind(("0.0.0.0", 0))
            p = s.getsockname()[1]
        other = socket.SOCK_DGRAM if kind == socket.SOCK_STREAM else socket.SOCK_STREAM
        try:
            with socket.socket(socket.AF_INET, other) as s2:
                s2.bind(("0.0.0.0", p))
            return int(p)
        except OSError:
            continue
    raise RuntimeError("no free port")
