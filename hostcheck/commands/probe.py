"""``hostcheck probe-server`` (run outside your network) and ``hostcheck speedtest`` (against it)."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from hostcheck.commands.common import OutputOpt, check_output, die, emit
from hostcheck.commands.live import (
    BYTE_CAP_RANGE,
    DEFAULT_SPEED_MAX_MB,
    TIME_CAP_RANGE,
    ArgvTokenOpt,
    FingerprintOpt,
    InsecureHttpOpt,
    TokenOpt,
    probe_endpoint,
    read_token,
    refuse_cleartext,
)
from hostcheck.errors import UsageError
from hostcheck.exit_codes import EXIT_NOT_MEASURED, EXIT_OK
from hostcheck.netprobe import speedtest as speed
from hostcheck.probeserver.limits import MAX_PORTS_PER_REQUEST, PREFIX_V4_BITS, PREFIX_V6_BITS, Limits

DEFAULT_PORT = 8470
DEFAULT_LIMITS = Limits()


def probe_server(
    token_file: TokenOpt = None,
    argv_token: ArgvTokenOpt = None,
    bind: Annotated[str, typer.Option("--bind", help="Address to listen on.")] = "0.0.0.0",
    port: Annotated[int, typer.Option("--port", help="TCP port for probe requests.")] = DEFAULT_PORT,
    max_ports: Annotated[int, typer.Option("--max-ports", help=f"Most ports one request may ask for (1-{MAX_PORTS_PER_REQUEST}).")] = DEFAULT_LIMITS.max_ports,
    rate_per_min: Annotated[int, typer.Option("--rate", help="Authenticated requests per caller per minute.")] = DEFAULT_LIMITS.rate_per_min,
    max_connections: Annotated[int, typer.Option("--max-connections", help="Concurrent connections, all callers together.")] = DEFAULT_LIMITS.max_connections,
    max_per_address: Annotated[int, typer.Option("--max-per-address", help="Concurrent connections from one address.")] = DEFAULT_LIMITS.max_connections_per_source,
    max_per_prefix: Annotated[int, typer.Option("--max-per-prefix", help="Concurrent connections from one network prefix (see --prefix-v4/--prefix-v6).")] = DEFAULT_LIMITS.max_connections_per_prefix,
    prefix_v4: Annotated[int, typer.Option("--prefix-v4", help="IPv4 prefix length that counts as one caller for --max-per-prefix ({}-{}).".format(*PREFIX_V4_BITS))] = DEFAULT_LIMITS.prefix_v4,
    prefix_v6: Annotated[int, typer.Option("--prefix-v6", help="IPv6 prefix length that counts as one caller for --max-per-prefix ({}-{}).".format(*PREFIX_V6_BITS))] = DEFAULT_LIMITS.prefix_v6,
    max_handshakes: Annotated[int, typer.Option("--max-handshakes", help="TLS connections still in their handshake, all callers together.")] = DEFAULT_LIMITS.max_handshakes,
    handshake_deadline: Annotated[float, typer.Option("--handshake-deadline", help="Seconds a TLS handshake may take.")] = DEFAULT_LIMITS.handshake_deadline_s,
    request_deadline: Annotated[float, typer.Option("--request-deadline", help="Seconds a whole request may take.")] = DEFAULT_LIMITS.request_deadline_s,
    summary_interval: Annotated[float, typer.Option("--summary-interval", help="Seconds between log summaries.")] = DEFAULT_LIMITS.summary_interval_s,
    tls_cert: Annotated[Path | None, typer.Option("--tls-cert", help="Certificate (PEM) to serve; with --tls-key.")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="Private key (PEM) of --tls-cert.")] = None,
    state_dir: Annotated[Path | None, typer.Option("--state-dir", help="Where the self-signed certificate is kept (default ~/.local/state/hostcheck).")] = None,
    insecure_http: Annotated[bool, typer.Option("--insecure-http", help="Plain HTTP (the token crosses the network in clear): for labs only.")] = False,
    speed_streams: Annotated[int, typer.Option("--speed-streams", help="Speed-test streams at once, all callers (0: no speed test).")] = DEFAULT_LIMITS.speed_max_streams,
    speed_budget_mb: Annotated[int, typer.Option("--speed-budget-mb", help="MB the token's speed tests may move in any hour, both directions (429 past it).")] = DEFAULT_LIMITS.speed_budget_bytes_per_hour // speed.MB,
) -> None:
    """Run on a machine OUTSIDE your network: connects back to the caller (only) on the ports it names."""
    from hostcheck.errors import PrivateFileError
    from hostcheck.probeserver import tls
    from hostcheck.probeserver.server import serve

    token = read_token(token_file)
    if token is None:
        raise UsageError("the probe server needs a token: --token-file FILE or the HOSTCHECK_PROBE_TOKEN environment variable")
    if not 1 <= port <= 65535:
        raise UsageError("--port must be 1-65535")
    if (tls_cert is None) != (tls_key is None):
        raise UsageError("--tls-cert and --tls-key go together")
    if insecure_http and tls_cert is not None:
        raise UsageError("--insecure-http and --tls-cert exclude each other")
    limits = Limits(
        max_ports=max_ports,
        rate_per_min=rate_per_min,
        overall_per_min=max(DEFAULT_LIMITS.overall_per_min, rate_per_min * 10),
        max_connections=max_connections,
        max_connections_per_source=min(max_per_address, max(1, max_connections)),
        max_connections_per_prefix=max_per_prefix,
        prefix_v4=prefix_v4,
        prefix_v6=prefix_v6,
        max_handshakes=max_handshakes,
        handshake_deadline_s=handshake_deadline,
        request_deadline_s=request_deadline,
        summary_interval_s=summary_interval,
        speed_max_streams=speed_streams,
        speed_budget_bytes_per_hour=speed_budget_mb * speed.MB,
    )
    ssl_context, fingerprint = None, None
    if not insecure_http:
        try:
            if tls_cert is None or tls_key is None:
                base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
                tls_cert, tls_key = tls.ensure_self_signed(state_dir or base / "hostcheck")
                fingerprint = tls.fingerprint_of_pem_file(tls_cert)
            ssl_context = tls.server_context(tls_cert, tls_key)
        except PrivateFileError as exc:
            raise UsageError(f"TLS: {exc}") from None
        except (OSError, ValueError) as exc:
            raise UsageError(f"TLS: {getattr(exc, 'strerror', None) or exc}") from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        serve(bind, port, token, limits=limits, ssl_context=ssl_context, fingerprint=fingerprint)
    except OSError as exc:
        die(f"cannot listen on port {port}: {exc.strerror or exc}")


def speedtest(
    probe: Annotated[str, typer.Option("--probe", help="URL of your `hostcheck probe-server` (it serves the speed test too).")],
    token_file: TokenOpt = None,
    probe_fingerprint: FingerprintOpt = None,
    argv_token: ArgvTokenOpt = None,
    seconds: Annotated[float, typer.Option("--seconds", help=f"Time cap of the whole test, seconds ({TIME_CAP_RANGE}).")] = speed.DEFAULT_SECONDS,
    max_mb: Annotated[int, typer.Option("--max-mb", help=f"Byte cap, both directions together, MB ({BYTE_CAP_RANGE}).")] = DEFAULT_SPEED_MAX_MB,
    streams: Annotated[int, typer.Option("--streams", help=f"Parallel TCP streams per direction (1-{speed.MAX_STREAMS}).")] = speed.DEFAULT_STREAMS,
    output: OutputOpt = None,
    insecure_http: InsecureHttpOpt = False,
) -> None:
    """Measure download, upload, latency and jitter against your probe server; print the
    `network.bandwidth` facts as JSON. Opt-in: it moves up to --max-mb of traffic."""
    check_output(output)
    refuse_cleartext(probe_endpoint(probe, probe_fingerprint), insecure_http)
    token = read_token(token_file)
    if token is None:
        raise UsageError("the speed test needs the probe server's token: --token-file FILE or HOSTCHECK_PROBE_TOKEN")
    speed.check_time_cap(seconds, "--seconds")
    speed.check_byte_cap(max_mb * speed.MB, "--max-mb")
    speed.check_streams(streams, "--streams")
    result = speed.run_speedtest(probe, token, fingerprint=probe_fingerprint, seconds=seconds,
                                 max_bytes=max_mb * speed.MB, streams=streams)
    emit(json.dumps(result, indent=2) + "\n", output)
    raise typer.Exit(EXIT_OK if result.get("measured") else EXIT_NOT_MEASURED)
