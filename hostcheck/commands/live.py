"""Options for collecting this machine's facts (audit, facts, offer) and for reaching a probe
server (its URL, its token), and the collectors' context they make. The live-collection options
are declared once, in :func:`live_options`, which every command that collects takes.

A library's ValueError about a value given on the command line becomes a UsageError here,
prefixed with the option that carried the value.
"""

from __future__ import annotations

import functools
import inspect
import ipaddress
import os
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from hostcheck.collectors import DEFAULT_BUDGET_S, CollectContext
from hostcheck.commands.common import check_timeout
from hostcheck.errors import PortRangeError, PrivateFileError, UsageError
from hostcheck.netprobe import speedtest
from hostcheck.netprobe.http_client import Endpoint, parse_endpoint
from hostcheck.netprobe.port_range import parse_port_range
from hostcheck.netprobe.private_files import read_private
from hostcheck.netprobe.probe_protocol import MAX_TOKEN_LENGTH, TOKEN_ENV, check_token
from hostcheck.netprobe.stun_servers import parse_server

DEFAULT_SPEED_MAX_MB = speedtest.DEFAULT_MAX_BYTES // speedtest.MB
TIME_CAP_RANGE = f"{speedtest.MIN_TIME_CAP_S:g}-{speedtest.MAX_TIME_CAP_S:g}"
BYTE_CAP_RANGE = f"{speedtest.MIN_BYTE_CAP // speedtest.MB}-{speedtest.MAX_BYTE_CAP // speedtest.MB}"


def _no_argv_token(value: str | None) -> None:
    if value is not None:
        raise typer.BadParameter(
            "the token is no longer taken on the command line (every local user sees argv in ps): "
            "put it in a file for --token-file, or in the HOSTCHECK_PROBE_TOKEN environment variable"
        )


OfflineOpt = Annotated[bool, typer.Option("--offline", help="Send nothing over the network (no STUN, no probe).")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Overall time budget for collecting facts, seconds.")]
StunOpt = Annotated[list[str], typer.Option("--stun-server", help="STUN server HOST[:PORT] (repeatable); default: public servers.")]
ProbeOpt = Annotated[str | None, typer.Option("--probe", help="URL of a `hostcheck probe-server` outside your network.")]
TokenOpt = Annotated[Path | None, typer.Option("--token-file", help="File holding the probe server's token (or set HOSTCHECK_PROBE_TOKEN).")]
ArgvTokenOpt = Annotated[str | None, typer.Option("--token", hidden=True, callback=_no_argv_token, help="Refused: see --token-file.")]
InsecureHttpOpt = Annotated[bool, typer.Option("--insecure-http", help="Allow an http:// --probe URL (the token crosses the network in clear): for labs only.")]
FingerprintOpt = Annotated[str | None, typer.Option("--probe-fingerprint", help="SHA-256 fingerprint the probe server printed (pins its self-signed certificate).")]
ProbePortOpt = Annotated[list[int], typer.Option("--probe-port", min=1, max=65535, help="Port to verify from outside (repeatable).")]
PortRangeOpt = Annotated[str | None, typer.Option("--port-range", help="The forwarded port range FIRST-LAST, when the agent's own range file is absent or unreadable: its first, last and middle ports are probed.")]
PublicRangeOpt = Annotated[list[str], typer.Option("--public-range", help="CIDR to treat as public (labs).")]
SpeedSecondsOpt = Annotated[float, typer.Option("--speedtest-seconds", help=f"Time cap of the whole speed test, seconds ({TIME_CAP_RANGE}).")]
SpeedMaxMbOpt = Annotated[int, typer.Option("--speedtest-max-mb", help=f"Byte cap of the speed test, both directions together, MB ({BYTE_CAP_RANGE}).")]


def read_token(token_file: Path | None) -> str | None:
    """The probe token from --token-file or the environment; never from argv (``ps`` shows argv)."""
    if token_file is not None:
        try:
            raw = read_private(token_file, MAX_TOKEN_LENGTH)
        except PrivateFileError as exc:
            raise UsageError(f"--token-file {exc}") from None
        except OSError as exc:
            raise UsageError(f"--token-file {token_file}: {exc.strerror or exc}") from None
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError:
            raise UsageError(f"--token-file {token_file}: the token must be ASCII") from None
    else:
        text = os.environ.get(TOKEN_ENV, "")
        if not text:
            return None
    try:
        return check_token(text)
    except ValueError as exc:
        raise UsageError(f"{'--token-file' if token_file else TOKEN_ENV}: {exc}") from None


def probe_endpoint(probe: str, fingerprint: str | None) -> Endpoint:
    try:
        return parse_endpoint(probe, fingerprint)
    except ValueError as exc:
        raise UsageError(f"--probe: {exc}") from None


def refuse_cleartext(endpoint: Endpoint, insecure_http: bool) -> None:
    """Refuse a plain http:// probe URL unless --insecure-http; warn when it is allowed.

    The check comes before the token is read, let alone sent."""
    if endpoint.scheme != "http":
        return
    if not insecure_http:
        raise UsageError(
            "--probe: an http:// URL would send the probe token in clear, readable and reusable by anyone "
            "on the path; use the server's https:// URL (with --probe-fingerprint for its self-signed "
            "certificate), or pass --insecure-http in a lab"
        )
    typer.echo(
        "warning: --insecure-http: the probe token is sent in clear over http://; anyone on the path can "
        "read it and use your probe server (labs only)",
        err=True,
    )


def collect_context(offline: bool, timeout: float, stun_server: list[str], probe: str | None,
                    token_file: Path | None, probe_port: list[int], public_range: list[str],
                    probe_fingerprint: str | None = None, insecure_http: bool = False,
                    port_range: str | None = None) -> CollectContext:
    check_timeout(timeout)
    if port_range is not None:
        try:
            parse_port_range(port_range, "owner")
        except PortRangeError as exc:
            raise UsageError(f"--port-range: {exc}") from None
    if probe:
        endpoint = probe_endpoint(probe, probe_fingerprint)
        if not offline:
            refuse_cleartext(endpoint, insecure_http)
    token = read_token(token_file) if probe else None
    if probe and not token:
        raise UsageError("--probe needs the probe server's token: --token-file FILE or HOSTCHECK_PROBE_TOKEN")
    for spec in stun_server:
        try:
            parse_server(spec)
        except ValueError as exc:
            raise UsageError(f"--stun-server {spec!r}: {exc}") from exc
    for cidr in public_range:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError as exc:
            raise UsageError(f"--public-range {cidr!r}: {exc}") from exc
    return CollectContext(
        offline=offline,
        budget_s=timeout,
        stun_servers=list(stun_server),
        probe_url=probe,
        probe_token=token,
        probe_fingerprint=probe_fingerprint,
        probe_ports=list(probe_port),
        port_range=port_range,
        public_ranges=list(public_range),
    )


def speedtest_caps(enabled: bool, offline: bool, probe: str | None, seconds: float, max_mb: int) -> dict[str, Any] | None:
    """--speedtest's caps for run_speedtest, checked before any collecting; None without --speedtest."""
    if not enabled:
        return None
    if offline:
        raise UsageError("--speedtest sends bulk traffic; it cannot run with --offline")
    if not probe:
        raise UsageError("--speedtest needs --probe URL (your `hostcheck probe-server`)")
    speedtest.check_time_cap(seconds, "--speedtest-seconds")
    speedtest.check_byte_cap(max_mb * speedtest.MB, "--speedtest-max-mb")
    return {"seconds": seconds, "max_bytes": max_mb * speedtest.MB}


def add_bandwidth(facts: dict[str, Any], ctx: CollectContext, caps: dict[str, Any]) -> None:
    assert ctx.probe_url is not None and ctx.probe_token is not None
    result = speedtest.run_speedtest(ctx.probe_url, ctx.probe_token, fingerprint=ctx.probe_fingerprint, **caps)
    if isinstance(facts.get("network"), dict):
        facts["network"]["bandwidth"] = result


@dataclass(frozen=True)
class LiveOptions:
    """The live-collection options of a command, as given (see :func:`live_options`)."""

    offline: bool
    timeout: float
    stun_server: list[str]
    probe: str | None
    token_file: Path | None
    probe_fingerprint: str | None
    probe_port: list[int]
    public_range: list[str]
    insecure_http: bool
    port_range: str | None

    def context(self) -> CollectContext:
        return collect_context(self.offline, self.timeout, self.stun_server, self.probe, self.token_file,
                               self.probe_port, self.public_range, self.probe_fingerprint, self.insecure_http,
                               self.port_range)


def _option(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)


_LIVE = [
    _option("offline", OfflineOpt, False),
    _option("timeout", TimeoutOpt, DEFAULT_BUDGET_S),
    _option("stun_server", StunOpt, []),
    _option("probe", ProbeOpt, None),
    _option("token_file", TokenOpt, None),
    _option("probe_fingerprint", FingerprintOpt, None),
    _option("argv_token", ArgvTokenOpt, None),  # refused by its callback
    _option("probe_port", ProbePortOpt, []),
    _option("port_range", PortRangeOpt, None),
    _option("public_range", PublicRangeOpt, []),
    _option("insecure_http", InsecureHttpOpt, False),
]

LIVE_DEFAULTS = LiveOptions(**{p.name: p.default for p in _LIVE if p.name != "argv_token"})


def live_options(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` with the live-collection options in place of its ``live: LiveOptions``
    parameter (there in --help too); they reach it as one :class:`LiveOptions`."""
    hints = typing.get_type_hints(command, include_extras=True)
    parameters = []
    for parameter in inspect.signature(command).parameters.values():
        if parameter.name == "live":
            parameters.extend(_LIVE)
        else:
            parameters.append(parameter.replace(annotation=hints[parameter.name]))
    names = {f.name for f in fields(LiveOptions)}

    @functools.wraps(command)
    def with_live(**given: Any) -> None:
        given.pop("argv_token", None)
        live = LiveOptions(**{name: given.pop(name) for name in names})
        command(live=live, **given)

    with_live.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    with_live.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return with_live
