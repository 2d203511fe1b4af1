"""Command line: `hostcheck audit | facts | policies | explain | probe-server | speedtest | offer | earnings | fleet | watch`.

Heavy modules (collectors, psutil, NVML, docker, rich rendering) are imported inside the
commands so that `hostcheck --help` stays fast. Data goes to stdout, diagnostics to stderr.

Kept whole: only option parsing and wiring live here (the work is in the modules each
command imports), and one file keeps the commands' shared options consistent.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from hostcheck import __version__
from hostcheck.cli_common import FORMATS
from hostcheck.cli_common import collect_live as _collect_live
from hostcheck.cli_common import die as _die
from hostcheck.cli_common import emit as _emit
from hostcheck.exit_codes import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NOT_MEASURED,
    EXIT_OK,
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Is this machine fit, and safe, to rent out its GPU? A read-only audit against "
    "each platform's published requirements. Exit codes: 0 a requested policy is feasible, "
    "3 none is (--strict: any is not), 4 feasible but the owner risk is high or unknown "
    "(--accept-owner-risk turns that into 0), 2 usage or input error, 1 internal error.",
)

MAX_TIMEOUT_S = 3600


class UsageError(Exception):
    """Bad input from the user: a clear message and exit code 2 (EXIT_USAGE)."""


def _check_output(output: Path | None) -> None:
    """Refuse an output path that will never be written before spending time on the work."""
    if output is None:
        return
    from hostcheck.safeio import OutputRefused, plan_output

    try:
        plan_output(output)
    except OutputRefused as exc:
        raise UsageError(f"--output {output}: {exc.strerror}") from None


def _version(value: bool) -> None:
    if value:
        typer.echo(f"hostcheck {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def main_options(
    version: Annotated[
        bool | None, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = None,
) -> None:
    """hostcheck: read-only feasibility and risk audit of a GPU host."""


def _read_token(token_file: Path | None) -> str | None:
    """The probe token from --token-file or the environment; never from argv (``ps`` shows argv)."""
    import os

    from hostcheck.netprobe.probe_protocol import MAX_TOKEN_LENGTH, TOKEN_ENV, check_token

    if token_file is not None:
        import stat

        try:
            # O_NONBLOCK: a FIFO without a writer must not hang us before the check below.
            fd = os.open(token_file, os.O_RDONLY | os.O_NONBLOCK)
            with open(fd, "rb") as fh:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise UsageError(f"--token-file {token_file}: not a regular file")
                _check_private(token_file, st, "--token-file")
                raw = fh.read(MAX_TOKEN_LENGTH + 2)
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


def _check_private(path: Path, st: Any, what: str) -> None:
    """Refuse a secret that others could read or replace, as ssh does with keys."""
    from hostcheck.netprobe.private_files import PrivateFileError, check_private

    try:
        check_private(path, st)
    except PrivateFileError as exc:
        raise UsageError(f"{what} {exc}") from None


def _check_probe_url(probe: str, fingerprint: str | None, insecure_http: bool) -> None:
    """Refuse a plain http:// probe URL unless --insecure-http; warn when it is allowed.

    The check comes before the token is read, let alone sent."""
    from hostcheck.netprobe.http_client import parse_endpoint

    try:
        ep = parse_endpoint(probe, fingerprint)
    except ValueError as exc:
        raise UsageError(f"--probe: {exc}") from None
    if ep.scheme != "http":
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


def _no_argv_token(value: str | None) -> None:
    if value is not None:
        raise typer.BadParameter(
            "the token is no longer taken on the command line (every local user sees argv in ps): "
            "put it in a file for --token-file, or in the HOSTCHECK_PROBE_TOKEN environment variable"
        )


def _context(offline: bool, timeout: float, stun_server: list[str], probe: str | None, token_file: Path | None,
             probe_port: list[int], public_range: list[str], probe_fingerprint: str | None = None,
             insecure_http: bool = False) -> Any:
    from hostcheck.collectors import CollectContext

    if not math.isfinite(timeout) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise UsageError(f"--timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S}, not {timeout}")
    if probe and not offline:
        _check_probe_url(probe, probe_fingerprint, insecure_http)
    token = _read_token(token_file) if probe else None
    if probe and not token:
        raise UsageError("--probe needs the probe server's token: --token-file FILE or HOSTCHECK_PROBE_TOKEN")
    if probe:
        from hostcheck.netprobe.http_client import parse_endpoint

        try:
            parse_endpoint(probe, probe_fingerprint)
        except ValueError as exc:
            raise UsageError(f"--probe: {exc}") from None
    import ipaddress

    from hostcheck.netprobe.stun_servers import parse_server

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
        public_ranges=list(public_range),
    )


def _speedtest_args(enabled: bool, offline: bool, probe: str | None, seconds: float, max_mb: int) -> dict[str, Any] | None:
    import math

    if not enabled:
        return None
    if offline:
        raise UsageError("--speedtest sends bulk traffic; it cannot run with --offline")
    if not probe:
        raise UsageError("--speedtest needs --probe URL (your `hostcheck probe-server`)")
    if not math.isfinite(seconds) or not 3 <= seconds <= 60:
        raise UsageError("--speedtest-seconds must be 3-60")
    if not 1 <= max_mb <= 20000:
        raise UsageError("--speedtest-max-mb must be 1-20000")
    return {"seconds": seconds, "max_bytes": max_mb * 1_000_000}


def _add_bandwidth(facts: dict[str, Any], ctx: Any, args: dict[str, Any]) -> None:
    from hostcheck.netprobe.speedtest import run_speedtest

    result = run_speedtest(ctx.probe_url, ctx.probe_token, fingerprint=ctx.probe_fingerprint, **args)
    if isinstance(facts.get("network"), dict):
        facts["network"]["bandwidth"] = result


OfflineOpt = Annotated[bool, typer.Option("--offline", help="Send nothing over the network (no STUN, no probe).")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Overall time budget for collecting facts, seconds.")]
StunOpt = Annotated[list[str], typer.Option("--stun-server", help="STUN server HOST[:PORT] (repeatable); default: public servers.")]
ProbeOpt = Annotated[str | None, typer.Option("--probe", help="URL of a `hostcheck probe-server` outside your network.")]
TokenOpt = Annotated[Path | None, typer.Option("--token-file", help="File holding the probe server's token (or set HOSTCHECK_PROBE_TOKEN).")]
ArgvTokenOpt = Annotated[str | None, typer.Option("--token", hidden=True, callback=_no_argv_token, help="Refused: see --token-file.")]
InsecureHttpOpt = Annotated[bool, typer.Option("--insecure-http", help="Allow an http:// --probe URL (the token crosses the network in clear): for labs only.")]
FingerprintOpt = Annotated[str | None, typer.Option("--probe-fingerprint", help="SHA-256 fingerprint the probe server printed (pins its self-signed certificate).")]
ProbePortOpt = Annotated[list[int], typer.Option("--probe-port", min=1, max=65535, help="Port to verify from outside (repeatable).")]
PublicRangeOpt = Annotated[list[str], typer.Option("--public-range", help="CIDR to treat as public (labs).")]
SpeedSecondsOpt = Annotated[float, typer.Option("--speedtest-seconds", help="Time cap of the whole speed test, seconds (3-60).")]
SpeedMaxMbOpt = Annotated[int, typer.Option("--speedtest-max-mb", help="Byte cap of the speed test, both directions together, MB (1-20000).")]
OutputOpt = Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout ('-': stdout). A regular file is replaced atomically; a device or FIFO is written through; anything else is refused.")]
RedactOpt = Annotated[bool, typer.Option("--redact", help="Remove IP/MAC addresses, serials, GPU UUIDs, host and user names.")]
AgentSinceOpt = Annotated[str | None, typer.Option(
    "--agent-since", help="Summarise what provider-agent accounts ran through sudo since this ISO 8601 date or time (UTC unless given; default: 7 days ago).")]


def _agent_since(text: str | None) -> float | None:
    """--agent-since as epoch seconds; a bad value is a usage error (exit 2)."""
    import datetime as dt
    import time

    if text is None:
        return None
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise UsageError(f"--agent-since {text!r}: not an ISO 8601 date or time (e.g. 2026-12-01 or 2026-12-01T08:00)") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    epoch = when.timestamp()
    if not 0 < epoch <= time.time():
        raise UsageError(f"--agent-since {text!r}: must lie in the past")
    return epoch


@app.command()
def audit(
    policy: Annotated[list[str], typer.Option("--policy", "-p", help="Policy name or YAML file (repeatable); default: all shipped.")] = [],  # noqa: B006
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json | markdown")] = "table",
    output: OutputOpt = None,
    facts_file: Annotated[Path | None, typer.Option("--facts", help="Judge a saved facts snapshot instead of this machine.")] = None,
    redact_output: RedactOpt = False,
    offline: OfflineOpt = False,
    timeout: TimeoutOpt = 10.0,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 3 when any requested policy is not feasible.")] = False,
    accept_owner_risk: Annotated[bool, typer.Option(
        "--accept-owner-risk",
        help="Exit 0 even when the owner risk is high or unknown (you accept what hosting exposes).",
    )] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show passed requirements too.")] = False,
    stun_server: StunOpt = [],  # noqa: B006
    probe: ProbeOpt = None,
    token_file: TokenOpt = None,
    probe_fingerprint: FingerprintOpt = None,
    argv_token: ArgvTokenOpt = None,
    probe_port: ProbePortOpt = [],  # noqa: B006
    public_range: PublicRangeOpt = [],  # noqa: B006
    speedtest: Annotated[bool, typer.Option("--speedtest", help="Also measure bandwidth against the --probe server (opt-in: bulk traffic, capped by --speedtest-seconds/--speedtest-max-mb).")] = False,
    speedtest_seconds: SpeedSecondsOpt = 10.0,
    speedtest_max_mb: SpeedMaxMbOpt = 1000,
    insecure_http: InsecureHttpOpt = False,
    watch_db: Annotated[Path | None, typer.Option("--watch-db", help="A `hostcheck watch` database to judge uptime from (default /var/lib/hostcheck-watch/watch.db when present).")] = None,
    agent_since: AgentSinceOpt = None,
    price: Annotated[float | None, typer.Option("--price", help="Your price per GPU-hour: the report ends with net per month per feasible platform (see `hostcheck earnings`).")] = None,
    electricity: Annotated[str | None, typer.Option("--electricity", help="Electricity per kWh (0.30) or HH-HH=PRICE,... for those lines.")] = None,
    occupancy: Annotated[float | None, typer.Option("--occupancy", help="Share of hours rented, 0-100 %, for those lines.")] = None,
    earnings_config: Annotated[Path | None, typer.Option("--earnings-config", help="Earnings config file (default: $XDG_CONFIG_HOME/hostcheck/earnings.toml if present).")] = None,
) -> None:
    """Collect facts (or read --facts), judge them against policies, print the report."""
    from hostcheck.facts import FactsError, load_snapshot
    from hostcheck.policy import PolicyError, resolve_policies
    from hostcheck.render import render
    from hostcheck.report import build_report, exit_code

    if fmt not in FORMATS:
        _die(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    try:
        _check_output(output)
        policies = resolve_policies(policy)
        if facts_file is not None and speedtest:
            raise UsageError("--speedtest measures this machine's line; it cannot be combined with --facts")
        if facts_file is not None and watch_db is not None:
            raise UsageError("--watch-db adds this machine's recording; it cannot be combined with --facts")
        if facts_file is not None:
            facts = load_snapshot(facts_file)
        else:
            ctx = _context(offline, timeout, stun_server, probe, token_file, probe_port, public_range, probe_fingerprint,
                           insecure_http)
            ctx.watch_db = None if watch_db is None else str(watch_db)
            ctx.agent_since = _agent_since(agent_since)
            speed_args = _speedtest_args(speedtest, offline, probe, speedtest_seconds, speedtest_max_mb)
            facts = _collect_live(ctx, show_progress=fmt == "table" and sys.stderr.isatty() and output is None)
            if speed_args is not None:
                _add_bandwidth(facts, ctx, speed_args)
    except (PolicyError, FactsError, UsageError) as exc:
        _die(str(exc))
    report = build_report(facts, policies)
    code = exit_code(report, strict=strict, accept_owner_risk=accept_owner_risk)
    if redact_output:
        from hostcheck.redact import redacted_report

        report, changed = redacted_report(facts, policies, report, servers=[*([probe] if probe else []), *stun_server])
        if changed:
            typer.echo(f"hostcheck: warning: redaction changed the outcome of {', '.join(changed)}; "
                       "judge the unredacted facts for the real verdicts", err=True)
    color = fmt == "table" and output is None and sys.stdout.isatty()
    text = render(report, fmt, verbose=verbose, color=color)
    if fmt != "json":
        text += _earnings_tail(report, facts, price, electricity, occupancy, earnings_config, fmt)
    _emit(text, output, private=not redact_output)
    raise typer.Exit(code)


def _earnings_tail(report: dict[str, Any], facts: dict[str, Any], price: float | None, electricity: str | None,
                   occupancy: float | None, config: Path | None, fmt: str) -> str:
    """The audit's closing earnings lines, when the owner gave prices (flags or the config file)."""
    from hostcheck.earnings.command import EarningsInputError, EconomicsDataError, audit_lines, merged_values
    from hostcheck.earnings.inputs import config_path
    from hostcheck.render.escape import escape_text

    flags = {"price": price, "electricity": electricity, "occupancy": occupancy}
    if all(v is None for v in flags.values()) and config is None and config_path() is None:
        return ""
    try:
        values, path = merged_values(flags, config)
        lines = audit_lines(report, facts, values, path)
    except (EarningsInputError, EconomicsDataError) as exc:
        _die(str(exc))
    bullet = "- " if fmt == "markdown" else ""
    head = "\n## Earnings\n\n" if fmt == "markdown" else "\n"
    return head + "".join(f"{bullet}{escape_text(line)}\n" for line in lines)


@app.command()
def facts(
    output: OutputOpt = None,
    redact_output: RedactOpt = False,
    offline: OfflineOpt = False,
    timeout: TimeoutOpt = 10.0,
    stun_server: StunOpt = [],  # noqa: B006
    probe: ProbeOpt = None,
    token_file: TokenOpt = None,
    probe_fingerprint: FingerprintOpt = None,
    argv_token: ArgvTokenOpt = None,
    probe_port: ProbePortOpt = [],  # noqa: B006
    public_range: PublicRangeOpt = [],  # noqa: B006
    insecure_http: InsecureHttpOpt = False,
    agent_since: AgentSinceOpt = None,
    upgrade: Annotated[Path | None, typer.Option(
        "--upgrade", help="Bring this saved facts file (or JSON report) to today's facts format instead of "
        "collecting: what the older format did not record becomes unknown with the reason.")] = None,
) -> None:
    """Print the raw facts as JSON (attach it to a forum post or ticket; judge it later with --facts)."""
    from hostcheck.facts import FactsError, load_snapshot, to_jsonable
    from hostcheck.safeio import dumps

    if upgrade is not None:
        try:
            _check_output(output)
            data = to_jsonable(load_snapshot(upgrade))
        except (UsageError, FactsError) as exc:
            _die(str(exc))
    else:
        try:
            _check_output(output)
            ctx = _context(offline, timeout, stun_server, probe, token_file, probe_port, public_range,
                           probe_fingerprint, insecure_http)
            ctx.agent_since = _agent_since(agent_since)
        except UsageError as exc:
            _die(str(exc))
        data = to_jsonable(_collect_live(ctx, show_progress=False))
    if redact_output:
        from hostcheck.redact import Redactor, redact_facts

        redactor = Redactor()
        for server in [*([probe] if probe else []), *stun_server]:
            redactor.learn_server(server)
        data = redact_facts(data, redactor)
    _emit(dumps(data, indent=2) + "\n", output, private=not redact_output)


@app.command()
def policies(
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json")] = "table",
) -> None:
    """List the shipped policies with their sources."""
    from hostcheck.policy import PolicyError, load_shipped, shipped_policy_names

    try:
        loaded = [load_shipped(name) for name in shipped_policy_names()]
    except PolicyError as exc:
        _die(str(exc), EXIT_INTERNAL)
    if fmt == "json":
        rows = [
            {
                "id": p.id, "title": p.title, "platform": p.platform, "kind": p.kind, "summary": p.summary,
                "follows": p.follows,
                "sources": sorted({(r.source.title, r.source.url, r.source.checked) for r in p.requirements}),
            }
            for p in loaded
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    for p in loaded:
        typer.echo(f"{p.id:16} {p.title}  [{len(p.requirements)} requirements, {p.kind}]")
        seen = set()
        for r in p.requirements:
            if r.source.url not in seen:
                seen.add(r.source.url)
                typer.echo(f"{'':16}   source: {r.source.title} <{r.source.url}> (checked {r.source.checked})")


def _explain_agent(agent_id: str) -> None:
    from hostcheck.agents import load_catalog
    from hostcheck.render.escape import escape_text

    def terminal_safe(text: str) -> str:
        return "\n".join(escape_text(line) for line in text.split("\n"))

    catalog = load_catalog()
    agent = catalog.get(agent_id)
    if agent is None:
        _die(f"unknown agent {agent_id!r}")
    typer.echo(terminal_safe(f"{agent.platform} host agent ({agent.id}): what it takes on your machine, and why"))
    typer.echo(terminal_safe(f"Modelled on: {agent.modelled}"))
    keys: list[str] = []
    for take in agent.takes:
        typer.echo(terminal_safe(f"\n  - {take.what}\n    why: {take.why}\n    source: [{take.source}]"))
        keys.append(take.source)
    channel = agent.update_channel
    kind = "fetches and runs code from the platform" if channel.remote_code else "no self-fetching code channel"
    typer.echo(terminal_safe(f"\nUpdates ({kind}):\n  {channel.text.strip()}\n  source: [{channel.source}]"))
    keys.append(channel.source)
    typer.echo(terminal_safe(f"\nRuns its workloads on ({agent.engine.kind}):\n  {agent.engine.text}\n"
                             f"  source: [{agent.engine.source}]"))
    keys.append(agent.engine.source)
    if agent.conflict and agent.conflict_source:
        heading = "Alone on the machine" if agent.exclusive else "What it changes under other agents"
        typer.echo(terminal_safe(f"\n{heading}:\n  {agent.conflict}\n  source: [{agent.conflict_source}]"))
        keys.append(agent.conflict_source)
    recognised = [*agent.accounts, *agent.units, *agent.paths, *agent.packages, *(f"container {c}" for c in agent.containers)]
    typer.echo(terminal_safe(f"\nRecognised by: {', '.join(recognised)}"))
    typer.echo("\nSources:")
    for key in dict.fromkeys(keys):
        source = catalog.sources[key]
        typer.echo(terminal_safe(f"  [{key}] {source.title} (checked {source.checked})\n    <{source.url}>"))
        if source.note:
            typer.echo(terminal_safe(f"    {source.note.strip()}"))
    typer.echo("\nChecks: AGT-1010 (root), AGT-1020 (update channel), AGT-1030 (conflicting agents), AGT-1040 (ECC), "
               "AGT-1050 (updates), AGT-1060 (sudo logging), OWN-1050 (root on a personal machine)")


@app.command()
def explain(check_id: Annotated[str, typer.Argument(
        help="A check id, e.g. GPU-1050, or a provider agent: vast, salad, ionet, tensordock (or 'agents' for all).")]) -> None:
    """Why a check matters, how it is measured, the fix, and which policies use it with what threshold;
    or, for a provider agent, what it takes on the machine and why, with sources."""
    from hostcheck.agents import load_catalog
    from hostcheck.checks import load_registry
    from hostcheck.policy import load_shipped, shipped_policy_names

    agent_ids = [a.id for a in load_catalog().agents]
    if check_id.lower() == "agents":
        for number, agent_id in enumerate(agent_ids):
            if number:
                typer.echo("\n" + "-" * 72 + "\n")
            _explain_agent(agent_id)
        return
    if check_id.lower() in agent_ids:
        _explain_agent(check_id.lower())
        return
    registry = load_registry()
    meta = registry.get(check_id.upper())
    if meta is None:
        _die(f"unknown check id {check_id!r}; ids look like GPU-1050 (see `hostcheck explain --help`)")
    typer.echo(f"{meta.id}  {meta.title}  ({meta.family})")
    typer.echo(f"\nWhy it matters:\n  {meta.why}\n\nHow to fix:\n  {meta.fix}")
    if meta.fix_role:
        typer.echo(f"  Ansible profile: {meta.fix_role}")
    typer.echo("\nUsed by:")
    for name in shipped_policy_names():
        for req in load_shipped(name).requirements:
            if req.check == meta.id:
                need = f"{meta.op} {req.threshold} {meta.unit}".strip() if req.threshold is not None else meta.op
                weight = f"{req.level} risk" if req.level else req.severity
                typer.echo(f"  {name:16} {weight:11} {need:22} {req.source.title} ({req.source.checked})")
                typer.echo(f"  {'':16} <{req.source.url}>")
                if req.note:
                    typer.echo(f"  {'':16} {req.note}")


@app.command("probe-server")
def probe_server(
    token_file: TokenOpt = None,
    argv_token: ArgvTokenOpt = None,
    bind: Annotated[str, typer.Option("--bind", help="Address to listen on.")] = "0.0.0.0",
    port: Annotated[int, typer.Option("--port", help="TCP port for probe requests.")] = 8470,
    max_ports: Annotated[int, typer.Option("--max-ports", help="Most ports one request may ask for (1-256).")] = 16,
    rate_per_min: Annotated[int, typer.Option("--rate", help="Authenticated requests per caller per minute.")] = 30,
    max_connections: Annotated[int, typer.Option("--max-connections", help="Concurrent connections, all callers together.")] = 64,
    max_per_address: Annotated[int, typer.Option("--max-per-address", help="Concurrent connections from one address.")] = 8,
    max_per_prefix: Annotated[int, typer.Option("--max-per-prefix", help="Concurrent connections from one network prefix (see --prefix-v4/--prefix-v6).")] = 16,
    prefix_v4: Annotated[int, typer.Option("--prefix-v4", help="IPv4 prefix length that counts as one caller for --max-per-prefix (8-32).")] = 24,
    prefix_v6: Annotated[int, typer.Option("--prefix-v6", help="IPv6 prefix length that counts as one caller for --max-per-prefix (16-128).")] = 56,
    max_handshakes: Annotated[int, typer.Option("--max-handshakes", help="TLS connections still in their handshake, all callers together.")] = 16,
    handshake_deadline: Annotated[float, typer.Option("--handshake-deadline", help="Seconds a TLS handshake may take.")] = 3.0,
    request_deadline: Annotated[float, typer.Option("--request-deadline", help="Seconds a whole request may take.")] = 10.0,
    summary_interval: Annotated[float, typer.Option("--summary-interval", help="Seconds between log summaries.")] = 300.0,
    tls_cert: Annotated[Path | None, typer.Option("--tls-cert", help="Certificate (PEM) to serve; with --tls-key.")] = None,
    tls_key: Annotated[Path | None, typer.Option("--tls-key", help="Private key (PEM) of --tls-cert.")] = None,
    state_dir: Annotated[Path | None, typer.Option("--state-dir", help="Where the self-signed certificate is kept (default ~/.local/state/hostcheck).")] = None,
    insecure_http: Annotated[bool, typer.Option("--insecure-http", help="Plain HTTP (the token crosses the network in clear): for labs only.")] = False,
    speed_streams: Annotated[int, typer.Option("--speed-streams", help="Speed-test streams at once, all callers (0: no speed test).")] = 8,
    speed_budget_mb: Annotated[int, typer.Option("--speed-budget-mb", help="MB the token's speed tests may move in any hour, both directions (429 past it).")] = 4000,
) -> None:
    """Run on a machine OUTSIDE your network: connects back to the caller (only) on the ports it names."""
    import logging
    import math

    try:
        token = _read_token(token_file)
    except UsageError as exc:
        _die(str(exc))
    if token is None:
        _die("the probe server needs a token: --token-file FILE or the HOSTCHECK_PROBE_TOKEN environment variable")
    if not 1 <= port <= 65535:
        _die("--port must be 1-65535")
    if not (math.isfinite(request_deadline) and math.isfinite(summary_interval) and math.isfinite(handshake_deadline)):
        _die("--request-deadline, --handshake-deadline and --summary-interval must be finite numbers")
    if (tls_cert is None) != (tls_key is None):
        _die("--tls-cert and --tls-key go together")
    if insecure_http and tls_cert is not None:
        _die("--insecure-http and --tls-cert exclude each other")
    from hostcheck.probeserver.limits import Limits
    from hostcheck.probeserver.server import serve

    try:
        limits = Limits(
            max_ports=max_ports,
            rate_per_min=rate_per_min,
            overall_per_min=max(300, rate_per_min * 10),
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
            speed_budget_bytes_per_hour=speed_budget_mb * 1_000_000,
        )
    except ValueError as exc:
        _die(str(exc))
    ssl_context, fingerprint = None, None
    if not insecure_http:
        from hostcheck.netprobe.private_files import PrivateFileError
        from hostcheck.probeserver import tls

        try:
            if tls_cert is None or tls_key is None:
                import os

                base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
                tls_cert, tls_key = tls.ensure_self_signed(state_dir or base / "hostcheck")
                fingerprint = tls.fingerprint_of_pem_file(tls_cert)
            ssl_context = tls.server_context(tls_cert, tls_key)
        except PrivateFileError as exc:
            _die(f"TLS: {exc}")
        except (OSError, ValueError) as exc:
            _die(f"TLS: {getattr(exc, 'strerror', None) or exc}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    try:
        serve(bind, port, token, limits=limits, ssl_context=ssl_context, fingerprint=fingerprint)
    except OSError as exc:
        _die(f"cannot listen on port {port}: {exc.strerror or exc}")


@app.command("speedtest")
def speedtest_command(
    probe: Annotated[str, typer.Option("--probe", help="URL of your `hostcheck probe-server` (it serves the speed test too).")],
    token_file: TokenOpt = None,
    probe_fingerprint: FingerprintOpt = None,
    argv_token: ArgvTokenOpt = None,
    seconds: Annotated[float, typer.Option("--seconds", help="Time cap of the whole test, seconds (3-60).")] = 10.0,
    max_mb: Annotated[int, typer.Option("--max-mb", help="Byte cap, both directions together, MB (1-20000).")] = 1000,
    streams: Annotated[int, typer.Option("--streams", help="Parallel TCP streams per direction (1-8).")] = 4,
    output: OutputOpt = None,
    insecure_http: InsecureHttpOpt = False,
) -> None:
    """Measure download, upload, latency and jitter against your probe server; print the
    `network.bandwidth` facts as JSON. Opt-in: it moves up to --max-mb of traffic."""
    from hostcheck.netprobe.http_client import parse_endpoint
    from hostcheck.netprobe.speedtest import run_speedtest

    try:
        _check_output(output)
        _check_probe_url(probe, probe_fingerprint, insecure_http)
        token = _read_token(token_file)
        if token is None:
            raise UsageError("the speed test needs the probe server's token: --token-file FILE or HOSTCHECK_PROBE_TOKEN")
        args = _speedtest_args(True, False, probe, seconds, max_mb)
        assert args is not None
        if not 1 <= streams <= 8:
            raise UsageError("--streams must be 1-8")
        parse_endpoint(probe, probe_fingerprint)
    except UsageError as exc:
        _die(str(exc))
    except ValueError as exc:
        _die(f"--probe: {exc}")
    result = run_speedtest(probe, token, fingerprint=probe_fingerprint, streams=streams, **args)
    _emit(json.dumps(result, indent=2) + "\n", output)
    raise typer.Exit(EXIT_OK if result.get("measured") else EXIT_NOT_MEASURED)


@app.command()
def offer(
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json | markdown")] = "table",
    output: OutputOpt = None,
    facts_file: Annotated[Path | None, typer.Option("--facts", help="Preview from a saved facts snapshot (measures nothing).")] = None,
    no_disk_bw: Annotated[bool, typer.Option("--no-disk-bw", help="Do not measure disk_bw (writes nothing).")] = False,
    disk_dir: Annotated[Path | None, typer.Option("--disk-dir", help="Measure disk_bw in this directory instead of Docker's data root (the output says so).")] = None,
    disk_size_mib: Annotated[int, typer.Option("--disk-size-mib", help="Size of the disk_bw test file, MiB (64-1024).")] = 256,
    power_seconds: Annotated[float, typer.Option("--power-seconds", help="Sample power at idle for this long, seconds (0: no sampling, at most 60).")] = 2.0,
    wall_idle_w: Annotated[float | None, typer.Option("--wall-idle-w", help="Your wall-socket (smart plug) reading at idle, watts.")] = None,
    wall_load_w: Annotated[float | None, typer.Option("--wall-load-w", help="Your wall-socket (smart plug) reading under GPU load, watts.")] = None,
    offline: OfflineOpt = False,
    timeout: TimeoutOpt = 10.0,
    stun_server: StunOpt = [],  # noqa: B006
    probe: ProbeOpt = None,
    token_file: TokenOpt = None,
    probe_fingerprint: FingerprintOpt = None,
    argv_token: ArgvTokenOpt = None,
    probe_port: ProbePortOpt = [],  # noqa: B006
    public_range: PublicRangeOpt = [],  # noqa: B006
    speedtest: Annotated[bool, typer.Option("--speedtest", help="Also measure inet_down/inet_up against the --probe server (bulk traffic, capped).")] = False,
    speedtest_seconds: SpeedSecondsOpt = 10.0,
    speedtest_max_mb: SpeedMaxMbOpt = 1000,
) -> None:
    """The offer a Vast renter would see: Vast's fields, each labelled measured, from the system, or
    not measurable before listing, with Vast's definition and source; and the power hosting draws.

    NOT read-only: measuring disk_bw writes a test file (--disk-size-mib, 256 MiB by default) in
    Docker's data root (or its nearest existing parent), runs Vast's fio read job on it for about a
    second, and removes it, also on failure or timeout. --no-disk-bw writes nothing. `hostcheck
    audit` never does this. Needs fio (`sudo apt install fio`)."""
    from hostcheck.facts import FactsError, load_snapshot
    from hostcheck.measure.offer import build_offer
    from hostcheck.measure.power import check_wall_reading, estimate_power
    from hostcheck.render.offer import render_offer

    if fmt not in FORMATS:
        _die(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    try:
        check_wall_reading(wall_idle_w, "--wall-idle-w")
        check_wall_reading(wall_load_w, "--wall-load-w")
        if not math.isfinite(power_seconds) or not 0 <= power_seconds <= 60:
            raise UsageError(f"--power-seconds must be 0-60, not {power_seconds}")
        if not 64 <= disk_size_mib <= 1024:
            raise UsageError(f"--disk-size-mib must be 64-1024, not {disk_size_mib}")
        if disk_dir is not None and not disk_dir.is_dir():
            raise UsageError(f"--disk-dir {disk_dir}: not an existing directory")
        if facts_file is not None and (speedtest or disk_dir is not None):
            raise UsageError("--speedtest and --disk-dir measure this machine; they cannot be combined with --facts")
        if facts_file is not None:
            facts = load_snapshot(facts_file)
        else:
            ctx = _context(offline, timeout, stun_server, probe, token_file, probe_port, public_range, probe_fingerprint)
            speed_args = _speedtest_args(speedtest, offline, probe, speedtest_seconds, speedtest_max_mb)
            facts = _collect_live(ctx, show_progress=False)
            if speed_args is not None:
                _add_bandwidth(facts, ctx, speed_args)
    except ValueError as exc:  # a bad wall reading (FactsError is a ValueError too)
        _die(str(exc))
    except (FactsError, UsageError) as exc:
        _die(str(exc))
    live = facts_file is None
    power = estimate_power(facts, sample_seconds=power_seconds if live else 0.0,
                           wall_idle_w=wall_idle_w, wall_load_w=wall_load_w)
    disk = None
    if live and not no_disk_bw:
        disk = _measure_disk_bw(facts, disk_dir, disk_size_mib)
    hint = "judging a snapshot (--facts); run `hostcheck offer` on the machine" if not live else "--no-disk-bw"
    _emit(render_offer(build_offer(facts, disk=disk, power=power, disk_hint=hint), fmt), output)


def _measure_disk_bw(facts: dict[str, Any], disk_dir: Path | None, size_mib: int) -> Any:
    from hostcheck.collectors.disk_bw import measure_disk_bw, target_directory
    from hostcheck.facts import Unknown

    if disk_dir is not None:
        where: Any = (str(disk_dir), f"in {disk_dir} as asked (--disk-dir), not necessarily Docker's data root")
    else:
        storage = facts.get("storage")
        docker_root = storage.get("docker_root") if isinstance(storage, dict) else storage
        path = docker_root.get("path") if isinstance(docker_root, dict) else docker_root
        where = target_directory(path if isinstance(path, (str, Unknown)) else Unknown("not collected"))
    if isinstance(where, Unknown):
        from hostcheck.collectors.disk_bw import DiskBandwidth

        return DiskBandwidth(where, None, "")
    return measure_disk_bw(where[0], where[1], size_mib=size_mib)


@app.command()
def fleet(
    paths: Annotated[list[Path], typer.Argument(help="Report directories or files; or: diff OLD_DIR NEW_DIR.")],
    policy: Annotated[list[str], typer.Option("--policy", "-p", help="Policies to show (repeatable); the first sorts failing hosts first.")] = [],  # noqa: B006
    sort: Annotated[str, typer.Option("--sort", help="host | score | vram (after failing hosts).")] = "host",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json | markdown")] = "table",
    output: OutputOpt = None,
    redact_output: Annotated[bool, typer.Option("--redact", help="Replace host names (the host column too), addresses and user names, as `audit --redact` does.")] = False,
) -> None:
    """One table across many hosts' reports (`hostcheck fleet DIR`), or drift between two audits
    (`hostcheck fleet diff OLD_DIR NEW_DIR`)."""
    from hostcheck.fleet import (
        FleetError,
        all_policy_ids,
        diff_fleets,
        errors,
        fleet_rows,
        load_fleet,
        redact_entries,
        sort_rows,
    )
    from hostcheck.render.fleet import drift_text, fleet_table
    from hostcheck.safeio import dumps

    if fmt not in FORMATS:
        _die(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if sort not in ("host", "score", "vram"):
        _die(f"--sort must be host, score or vram, not {sort!r}")
    is_diff = bool(paths) and str(paths[0]) == "diff"
    try:
        _check_output(output)
    except UsageError as exc:
        _die(str(exc))
    try:
        if is_diff:
            if len(paths) != 3:
                _die("usage: hostcheck fleet diff OLD_DIR NEW_DIR")
            old, new = load_fleet([paths[1]]), load_fleet([paths[2]])
            if redact_output:
                redact_entries(old + new)
            changes = diff_fleets(old, new)
            text = dumps(changes, indent=2) + "\n" if fmt == "json" else drift_text(changes, markdown=fmt == "markdown")
            _emit(text, output, private=not redact_output)
            entries = old + new
        else:
            entries = load_fleet(paths)
            if redact_output:
                redact_entries(entries)
    except FleetError as exc:
        _die(_redacted_message(str(exc), paths) if redact_output else str(exc))
    if not is_diff:
        ids = list(policy) or all_policy_ids(entries)
        rows = sort_rows(fleet_rows(entries, ids), ids[0] if policy else None, sort)
        if fmt == "json":
            _emit(dumps({"policies": ids, "hosts": rows}, indent=2) + "\n", output, private=not redact_output)
        else:
            _emit(fleet_table(rows, ids, markdown=fmt == "markdown"), output, private=not redact_output)
    problems = errors(entries)
    if problems:
        # The view is complete for every other host; the exit code still says input was bad.
        _die(f"{len(problems)} report(s) could not be used (their rows say why): {'; '.join(problems)}")


def _redacted_message(text: str, paths: list[Path]) -> str:
    """A fleet error about reports not read yet: the host names are those of the report files."""
    from hostcheck.redact import Redactor

    redactor = Redactor()
    for path in paths[1:] if paths and str(paths[0]) == "diff" else paths:
        try:
            reports = sorted(path.glob("*.json"))[:10000] if path.is_dir() else [path]
        except OSError:
            reports = [path]
        for report in reports:
            if report.name != "index.json":
                redactor.learn_host(report.stem, own=True)
    return redactor.scrub(text)


def _add_watch() -> None:
    from hostcheck.watch.cli import watch_app

    app.add_typer(watch_app, name="watch")


_add_watch()


# `hostcheck earnings`: its options live in hostcheck/earnings/cli.py (one module per command family).
from hostcheck.earnings.cli import earnings as _earnings  # noqa: E402

app.command("earnings", short_help="Will it earn? Net per month per platform, break-even price and occupancy, heat credit.")(_earnings)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("hostcheck: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except SystemExit:
        raise
    except Exception as exc:  # the last line of defence: a clear message and exit 1
        typer.echo(f"hostcheck: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
