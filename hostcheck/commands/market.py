"""The ``hostcheck market`` command's options (listed in hostcheck.cli.COMMANDS), and the
market read that ``hostcheck earnings --market`` shares.

Only option parsing and wiring live here; the work is in :mod:`hostcheck.market`.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from hostcheck.collectors import DEFAULT_BUDGET_S, CollectContext
from hostcheck.commands.common import (
    DEFAULT_FORMAT,
    FormatName,
    OutputOpt,
    check_output,
    check_timeout,
    collect_live,
    emit,
    format_option,
)
from hostcheck.errors import UsageError
from hostcheck.exit_codes import EXIT_NOT_MEASURED
from hostcheck.render.formats import Kind, render

MAX_GPUS = 64
MAX_GPU_NAME = 60

KeyFileOpt = Annotated[Path | None, typer.Option("--key-file", help="File holding your Vast API key (private, chmod 600); default: VAST_API_KEY, then vast-cli's ~/.config/vastai/vast_api_key.")]
MarketUrlOpt = Annotated[str | None, typer.Option("--market-url", help="The API's base URL (default: VAST_URL, then https://console.vast.ai).")]

market_app = typer.Typer(
    add_completion=False,
    rich_markup_mode=None,
    invoke_without_command=True,
    help="What Vast's market pays for this GPU now: the share rented, the prices rented machines "
    "charge, the comparable offers listed and where your price stands. Online, with your Vast API "
    "key; `hostcheck market report --db DB` shows the trend of recorded snapshots.",
)


def gpu_from_facts(facts: dict[str, Any]) -> tuple[str, int, str | None]:
    """The model (Vast's spelling: 'RTX 3090') and count the facts list; the most common model
    when they are mixed, with the line that says so. UsageError when the facts list no GPU."""
    from hostcheck.knowledge.gpu_models import normalise

    gpu = facts.get("gpu")
    devices = gpu.get("devices") if isinstance(gpu, dict) else None
    names = [normalise(d["name"]) for d in devices or [] if isinstance(d, dict) and isinstance(d.get("name"), str)]
    if not names:
        raise UsageError("the facts list no GPU by name: give --gpu NAME (as Vast spells it: 'RTX 3090') and --gpus N")
    counts = Counter(names).most_common()
    name, count = counts[0]
    note = None
    if len(counts) > 1:
        note = (f"the machine has {', '.join(f'{n} x{c}' for n, c in counts)}: the market is read for {name} x{count}"
                " (give --gpu and --gpus for another)")
    return name, count, note


def check_gpu_args(gpu: str | None, gpus: int | None) -> None:
    if gpu is not None and (not gpu.strip() or len(gpu) > MAX_GPU_NAME or not gpu.isprintable()):
        raise UsageError(f"--gpu: a GPU model name as Vast spells it ('RTX 3090'), at most {MAX_GPU_NAME} characters")
    if gpus is not None and not 1 <= gpus <= MAX_GPUS:
        raise UsageError(f"--gpus: 1-{MAX_GPUS}, not {gpus}")


def make_client(key_file: Path | None, market_url: str | None, timeout: float) -> Any:
    """The client, or None with no key anywhere. UsageError for a bad key file or URL."""
    from hostcheck.market.client import DEFAULT_BASE_URL, URL_ENV, VastClient, parse_base_url
    from hostcheck.market.keys import find_key

    if market_url is not None:
        base = parse_base_url(market_url, "--market-url")
    elif os.environ.get(URL_ENV):
        base = parse_base_url(os.environ[URL_ENV], URL_ENV)
    else:
        base = parse_base_url(DEFAULT_BASE_URL, "the default URL")
    key = find_key(key_file)
    if key is None:
        return None
    return VastClient(base, key, timeout_s=min(timeout, 60.0))


def no_key_lines(gpu_name: str, num_gpus: int) -> list[str]:
    from hostcheck.market.keys import HOW_TO_GET_A_KEY

    return [f"no Vast API key found: the market was not read. With one, hostcheck reads Vast's market metrics "
            f"for {gpu_name} (the share rented, utilisation, prices of rented machines) and searches the offers "
            f"of {num_gpus}-GPU {gpu_name} machines, verified and unverified.", f"To read it: {HOW_TO_GET_A_KEY}."]


def read_market(client: Any, gpu_name: str, num_gpus: int, owner_price: float | None) -> dict[str, Any]:
    """One snapshot, summarised. Raises hostcheck.market.client.MarketError."""
    from hostcheck.market.summary import summarise
    from hostcheck.market.vast import take_snapshot

    return summarise(take_snapshot(client, gpu_name, num_gpus), owner_price)


def _say(message: str) -> None:
    from hostcheck.render.escape import escape_text

    typer.echo(f"hostcheck market: {escape_text(message)}", err=True)


@market_app.callback()
def market(
    ctx: typer.Context,
    facts_file: Annotated[Path | None, typer.Option("--facts", help="A facts snapshot (hostcheck facts) for the GPU model and count.")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="GPU model as Vast spells it ('RTX 3090'), instead of the facts'.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs per machine to compare with (default: from the facts).")] = None,
    price: Annotated[float | None, typer.Option("--price", help="Your price per GPU-hour, to see where it stands.")] = None,
    key_file: KeyFileOpt = None,
    market_url: MarketUrlOpt = None,
    record_db: Annotated[Path | None, typer.Option("--record", help="Append the snapshot to this SQLite database (at most one per model and count every 5 minutes).")] = None,
    fmt: Annotated[FormatName, format_option(Kind.MARKET)] = DEFAULT_FORMAT,
    output: OutputOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per request to the market (and for collecting facts).")] = DEFAULT_BUDGET_S,
) -> None:
    """What the market pays for this GPU (a snapshot, not a forecast)."""
    if ctx.invoked_subcommand is not None:
        return
    from hostcheck.market.client import MarketError
    from hostcheck.market.store import MIN_INTERVAL_S, inspect_file, last_taken, record

    check_timeout(timeout)
    check_output(output)
    check_gpu_args(gpu, gpus)
    if price is not None and not (math.isfinite(price) and 0 < price <= 100):
        raise UsageError(f"--price: a price per GPU-hour above 0 and at most 100, not {price}")
    if record_db is not None:
        # A file that is not ours, or a folder that is not there, is refused before any request.
        if not inspect_file(record_db) and not record_db.parent.is_dir():
            raise UsageError(f"--record {record_db}: the folder {record_db.parent} does not exist")
    client = make_client(key_file, market_url, timeout)
    if gpu is not None and gpus is not None:
        name, count, note = gpu.strip(), gpus, None
    else:
        from hostcheck.facts import load_snapshot

        facts = load_snapshot(facts_file) if facts_file is not None else \
            collect_live(CollectContext(offline=True, budget_s=timeout), show_progress=False)
        name, count, note = gpu_from_facts(facts)
        name, count = (gpu.strip() if gpu else name), (gpus or count)
    if note:
        _say(note)
    if client is None:
        for line in no_key_lines(name, count):
            _say(line)
        raise typer.Exit(EXIT_NOT_MEASURED)
    if record_db is not None:
        last = last_taken(record_db, name, count)
        if last is not None and time.time() - last < MIN_INTERVAL_S:
            _say(f"the last snapshot of {name} x{count} in {record_db} is {time.time() - last:.0f} s old; Vast refreshes "
                 f"its market metrics every {MIN_INTERVAL_S / 60:g} minutes: not queried again")
            raise typer.Exit(0)
    try:
        summary = read_market(client, name, count, price)
    except MarketError as exc:
        _say(f"the market could not be read: {exc}; nothing recorded")
        raise typer.Exit(EXIT_NOT_MEASURED) from None
    if record_db is not None:
        record(record_db, summary)
        _say(f"recorded into {record_db}")
    emit(render(Kind.MARKET, summary, fmt), output)
    sys.stdout.flush()


@market_app.command("report")
def report(
    db: Annotated[Path, typer.Option("--db", help="The database `hostcheck market --record DB` wrote.")],
    gpu: Annotated[str | None, typer.Option("--gpu", help="Only this GPU model.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="Only machines with this many GPUs.")] = None,
    days: Annotated[float | None, typer.Option("--days", help="Only the last N days.")] = None,
    fmt: Annotated[FormatName, format_option(Kind.MARKET_TREND)] = DEFAULT_FORMAT,
    output: OutputOpt = None,
) -> None:
    """The trend of rented share and prices over the recorded days."""
    from hostcheck.market.store import read_rows
    from hostcheck.market.trend import trend
    from hostcheck.render.views import MarketTrendView

    check_output(output)
    check_gpu_args(gpu, gpus)
    if days is not None and not (math.isfinite(days) and days > 0):
        raise UsageError("--days must be above 0")
    rows = read_rows(db, gpu, gpus, since=None if days is None else time.time() - days * 86400)
    models = trend(rows)
    emit(render(Kind.MARKET_TREND, MarketTrendView(models, str(db)), fmt), output)


def earnings_market(values: dict[str, Any], facts: dict[str, Any] | None, key_file: Path | None,
                    market_url: str | None, timeout: float,
                    platforms: list[str]) -> tuple[dict[str, Any], tuple[dict[str, Any], dict[str, bool], bool] | None, list[str]]:
    """For ``hostcheck earnings --market``: the values with the market's figures filled in, the
    snapshot with what was taken from it (None when it could not be read: said on stderr, and
    earnings stay on the owner's figures), and the platforms to show (Vast alone unless named)."""
    from hostcheck.earnings.market import PLATFORM, fill
    from hostcheck.market.client import MarketError
    from hostcheck.render.escape import escape_text

    def warn(message: str) -> None:
        typer.echo(f"hostcheck earnings: warning: {escape_text(message)}", err=True)

    if facts is None:
        raise UsageError("--market reads the GPU model from the facts: give --facts FILE, or leave out the wall "
                         "readings so this machine's facts are collected")
    name, count, note = gpu_from_facts(facts)
    if values.get("gpus") is not None:
        count = int(values["gpus"])
    if note:
        warn(note)
    client = make_client(key_file, market_url, timeout)
    if client is None:
        for line in no_key_lines(name, count):
            warn(line)
        warn("the earnings below use your own figures only")
        return values, None, platforms
    owner_price = (values.get("platform_price") or {}).get(PLATFORM, values.get("price"))
    try:
        summary = read_market(client, name, count, owner_price)
    except MarketError as exc:
        warn(f"the market could not be read: {exc}; the earnings below use your own figures only")
        return values, None, platforms
    filled, used = fill(values, summary)
    return filled, (summary, used, not platforms), platforms or [PLATFORM]
