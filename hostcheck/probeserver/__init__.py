"""The internet-facing probe server (``hostcheck probe-server``), apart from everything that
runs on the host being audited.

- ``server``: the entry points (``serve``, ``start_server``), over ``app`` (state and routes),
  ``guard`` (connection caps, deadlines, the TLS gate) and ``process`` (logs, file limits, start/stop);
- ``limits``: its caps, connection table, byte budget and counters (pure bookkeeping);
- ``speed_endpoint``: the speed test's server side; ``connectback``: the probe's one action;
- ``tls``: its certificate (self-signed and pinned, or the user's).

It depends one way on the wire formats it shares with the client,
:mod:`hostcheck.netprobe.probe_protocol` and :mod:`hostcheck.netprobe.speed_protocol`, and on
:mod:`hostcheck.netprobe.private_files`; nothing outside this package and the CLI's
``probe-server`` command imports it, so the audit never loads aiohttp.
"""
