"""A real HTTP(S) server standing in for Uptime Kuma's push endpoint and a webhook: it records
each request (method, path, body, content type) and answers as its mode says.

In this process (``Receiver(...)``), or as a process of its own where it must listen in another
network namespace (a lab network's hub): ``python -m tests.webhook_receiver HOST CERT KEY LOG``
serves HTTPS on HOST, prints its port, appends each request to LOG as a JSON line, and stops when
its standard input closes.
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class Receiver:
    """Answers as ``mode`` says: ok (200), fail (500), redirect (302 to itself), hang (never answers);
    after ``delay_s`` seconds (a slow receiver)."""

    def __init__(self, mode: str = "ok", host: str = "127.0.0.1", tls: ssl.SSLContext | None = None,
                 log: Path | None = None, delay_s: float = 0.0) -> None:
        self.mode = mode
        self.requests: list[dict[str, Any]] = []
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = {"method": self.command, "path": self.path, "body": body, "type": self.headers.get("Content-Type")}
                receiver.requests.append(request)
                if log is not None:
                    with log.open("a") as handle:
                        handle.write(json.dumps({**request, "body": body.decode(errors="replace")}) + "\n")
                if receiver.mode == "hang":
                    receiver.release.wait(30)
                    return
                receiver.release.wait(delay_s)
                status = {"ok": 200, "fail": 500, "redirect": 302}[receiver.mode]
                self.send_response(status)
                if status == 302:
                    self.send_header("Location", self.path)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            do_GET = do_POST = _handle

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def main(argv: list[str]) -> None:
    host, cert, key, log = argv
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    receiver = Receiver(host=host, tls=tls, log=Path(log))
    print(receiver.port, flush=True)
    sys.stdin.read()
    receiver.close()


if __name__ == "__main__":
    main(sys.argv[1:])
