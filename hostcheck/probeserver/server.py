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

The code lives in three modules along those seams: :mod:`~hostcheck.probeserver.app` (state
and routes), :mod:`~hostcheck.probeserver.guard` (connections, deadlines, TLS) and
:mod:`~hostcheck.probeserver.process` (logging, file limits, start and stop).
"""

from hostcheck.probeserver.app import ProbeService
from hostcheck.probeserver.process import RunningServer, serve, start_server

__all__ = ["ProbeService", "RunningServer", "serve", "start_server"]
