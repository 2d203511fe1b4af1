"""Network reachability probes (used by ``hostcheck.collectors.reachability``).

- ``stun_codec``: STUN codec (RFC 5389/8489 + RFC 5780 attributes), strict decoding.
- ``stun_client``: bounded STUN transactions over plain UDP sockets (ICMP errors end them at once).
- ``discovery``: RFC 5780 NAT mapping/filtering/hairpinning discovery (``discover_nat``),
  falling back past dead servers, and the mapping from two plain servers on one socket.
- ``gateway``: the router's WAN address by NAT-PMP and UPnP IGD (read-only queries).
- ``hops``: unprivileged TTL-limited UDP hop probe (IP_RECVERR).
- ``cgnat``: CGNAT / double-NAT signals from the raw evidence, and the verdicts (pure).
- ``stun_servers``: ``HOST[:PORT]`` parsing and bounded name resolution.
- ``probe_protocol``, ``speed_protocol``: the wire formats shared with the probe server
  (:mod:`hostcheck.probeserver`, a package of its own), pure.
- ``probe_client``: its client (``request_probe``) over ``http_client`` (standard library only);
  ``speedtest``: the speed test's client; ``private_files``: secrets on disk must be private.
"""
