"""One bounded HTTP(S) exchange with the probe server, as its clients need it.

- TLS is verified against the system's CAs, or, with a pinned fingerprint, against that
  fingerprint alone (checked before a byte of the request, and so the token, is sent);
- redirects are never followed (``http.client`` has no such logic), so ``Authorization``
  goes to the one server named and nowhere else; a 3xx is an error saying so;
- every socket operation has a timeout and answers are read up to a size limit.

Imports only the standard library: the audit never loads the server's HTTP stack.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import urlsplit

from hostcheck.errors import ServerError

FINGERPRINT_RE = re.compile(r"^(?:sha256:)?((?:[0-9a-f]{2}:?){31}[0-9a-f]{2})$", re.IGNORECASE)


@dataclass(frozen=True)
class Endpoint:
    scheme: str
    host: str
    port: int
    base_path: str
    fingerprint: bytes | None = None


def parse_fingerprint(text: str) -> bytes:
    """``SHA256:AB:CD:...`` (or bare hex, any case) to the 32 digest bytes; ValueError otherwise."""
    m = FINGERPRINT_RE.match(text.strip())
    if not m:
        raise ValueError("a SHA-256 fingerprint is 64 hex digits, optionally 'SHA256:' and colons")
    return bytes.fromhex(m.group(1).replace(":", ""))


def parse_endpoint(url: str, fingerprint: str | None = None) -> Endpoint:
    """Validate a probe server URL; ValueError saying why it is not usable."""
    if not isinstance(url, str) or len(url) > 2048:
        raise ValueError("probe URL must be a string of at most 2048 characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"probe URL must start with http:// or https:// (got {url[:40]!r})")
    if not parts.hostname:
        raise ValueError("probe URL has no host")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError("probe URL must not carry credentials, a query or a fragment")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise ValueError(f"probe URL port: {exc}") from None
    pin = parse_fingerprint(fingerprint) if fingerprint else None
    if pin is not None and parts.scheme != "https":
        raise ValueError("a certificate fingerprint needs an https:// probe URL")
    return Endpoint(parts.scheme, parts.hostname, port, parts.path.rstrip("/"), pin)


def connect(ep: Endpoint, timeout: float) -> http.client.HTTPConnection:
    """An open connection to ``ep``, its certificate checked; ServerError otherwise."""
    conn: http.client.HTTPConnection
    if ep.scheme == "https":
        if ep.fingerprint is not None:
            # Pinned: the fingerprint is the whole trust decision (a self-signed certificate
            # has no CA and no meaningful name), so chain and name checks are off.
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx = ssl.create_default_context()
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        conn = http.client.HTTPSConnection(ep.host, ep.port, timeout=timeout, context=ctx)
    else:
        conn = http.client.HTTPConnection(ep.host, ep.port, timeout=timeout)
    try:
        conn.connect()
    except ssl.SSLCertVerificationError as exc:
        conn.close()
        raise ServerError(
            f"certificate not trusted ({exc.verify_message}); for a self-signed probe server "
            "pass the fingerprint it printed with --probe-fingerprint"
        ) from None
    except (OSError, ssl.SSLError) as exc:
        conn.close()
        raise ServerError(f"probe server not reachable: {_why(exc)}") from None
    if ep.fingerprint is not None:
        assert isinstance(conn.sock, ssl.SSLSocket)
        der = conn.sock.getpeercert(binary_form=True) or b""
        if hashlib.sha256(der).digest() != ep.fingerprint:
            conn.close()
            raise ServerError("certificate fingerprint does not match --probe-fingerprint: refused")
    return conn


def check_status(resp: http.client.HTTPResponse, limit: int = 4096) -> None:
    """ServerError for anything but 200 (redirects included: never followed)."""
    if resp.status == 200:
        return
    if 300 <= resp.status < 400:
        raise ServerError(f"probe server answered with a redirect (HTTP {resp.status}); not followed")
    detail = ""
    try:
        import json

        detail = str(json.loads(resp.read(limit)).get("error", ""))[:200]
    except (ValueError, AttributeError, OSError, http.client.HTTPException):
        pass
    raise ServerError(f"probe server refused the request: HTTP {resp.status} {detail}".rstrip())


def _why(exc: BaseException) -> str:
    if isinstance(exc, socket.timeout):
        return "timed out"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
