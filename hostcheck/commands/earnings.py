"""The ``hostcheck earnings`` command's options (listed in hostcheck.cli.COMMANDS).

Only option parsing lives here; the work is in :mod:`hostcheck.earnings.estimate`.
"""

from __future__ import annotations

import functools
import math
import sys
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
    command_text,
    die,
    emit,
    format_option,
)
from hostcheck.commands.market import KeyFileOpt, MarketUrlOpt
from hostcheck.earnings.inputs import CONFIG_SHOWN
from hostcheck.earnings.model import HEATING_KINDS
from hostcheck.errors import UsageError
from hostcheck.exit_codes import earnings_help_text
from hostcheck.render.formats import Kind

MAX_SAMPLE_SECONDS = 30.0

HELP = f"""Net money per month per platform: electricity (flat or day/night), your price per
GPU-hour, occupancy, the platform's fee and payout rules (sourced data files), depreciation,
the winter heat credit and the summer air-conditioning penalty. Power comes from --facts (a
snapshot), this machine, or your wall-socket readings; each figure says measured, estimated,
given or unknown. With --market (online, your Vast API key), Vast's market gives the price and
occupancy you did not give, labelled with its time (docs/market.md).

\b
{earnings_help_text()}

\b
Worked example (flags only, no audit): a 1-GPU box drawing 50 W idle and 450 W rented,
electricity 0.30/kWh, 0.25 per GPU-hour, rented 50 % of the time, fee 0 %:
  hostcheck earnings --wall-idle-w 50 --wall-load-w 450 --electricity 0.30 \\
      --price 0.25 --occupancy 50 --fee 0 --platform vast
  H = 730 h; extra energy K = 730 x (0.5 x 450 + 0.5 x 50) / 1000 = 182.5 kWh
  electricity 182.5 x 0.30 = 54.75; revenue 1 x 0.25 x 0.5 x 730 = 91.25
  net 91.25 - 54.75 = 36.50 a month; break-even 54.75 / (0.5 x 730) = 0.150 per GPU-hour;
  break-even occupancy 10.95 / (10.95 + 83.95) = 11.5 % (net at 0 % and at 100 %: -10.95, 83.95)

\b
The reference laptop (RTX 3080 Ti Laptop capped at 45 W, a personal machine) from a snapshot,
day/night tariff, heat pump in winter, air conditioning in summer:
  hostcheck earnings --facts tests/snapshots/reference-laptop.json \\
      --electricity 07-23=0.32,23-07=0.18 --price 0.10 --occupancy 30 \\
      --heating heat-pump --cooling-months 6-8
The headline is still the audit's: do not host on this machine as it is (owner risk HIGH).

\b
A dedicated RTX 3090 box, gas boiler heating, 800 of hardware over 3 years:
  hostcheck earnings --facts tests/snapshots/rtx3090-vram-in-use.json \\
      --electricity 0.30 --price 0.22 --occupancy 50 --heating gas --fuel-price 0.08 \\
      --hardware-value 800 --remaining-life-years 3

Defaults (heat-pump SPF 2.80, boiler 84 %, cooling COP 3.9 [inference], heat share 70 %
[inference], heating months 10-4 [inference]) come from policies/economics/constants.yaml,
each with its source; --details lists those it used. Options can also be set in
{CONFIG_SHOWN} (keys: the option names with _ for -)."""


def earnings(
    electricity: Annotated[str | None, typer.Option("--electricity", help="Price per kWh (0.30) or a schedule HH-HH=PRICE,... covering 24 h (07-23=0.32,23-07=0.18).")] = None,
    price: Annotated[float | None, typer.Option("--price", help="Your price per GPU-hour (every platform), or the rate the platform shows you.")] = None,
    platform_price: Annotated[list[str], typer.Option("--platform-price", help="PLATFORM=PRICE for one platform (repeatable).")] = [],  # noqa: B006
    occupancy: Annotated[str | None, typer.Option("--occupancy", help="Share of hours rented, 0-100 % (40 and 40% both mean 40 %).")] = None,
    fee: Annotated[str | None, typer.Option("--fee", help="Platform fee 0-100 % (5 or 5%), replacing the data file's (published or range).")] = None,
    platform: Annotated[list[str], typer.Option("--platform", help="Platform to show (repeatable); default: all that can apply.")] = [],  # noqa: B006
    facts_file: Annotated[Path | None, typer.Option("--facts", help="A facts snapshot (hostcheck facts) instead of this machine.")] = None,
    wall_idle_w: Annotated[float | None, typer.Option("--wall-idle-w", help="Your wall-socket reading while idle, W.")] = None,
    wall_load_w: Annotated[float | None, typer.Option("--wall-load-w", help="Your wall-socket reading under a GPU load, W.")] = None,
    gpus: Annotated[int | None, typer.Option("--gpus", help="GPUs rented out (default: from the facts, else 1).")] = None,
    sample_seconds: Annotated[float, typer.Option("--sample-seconds", help=f"Sample this machine's power for this long (0-{MAX_SAMPLE_SECONDS:g} s; 0: from facts only).")] = 0.0,
    heating: Annotated[str | None, typer.Option("--heating", help=" | ".join(HEATING_KINDS))] = None,
    heating_months: Annotated[str | None, typer.Option("--heating-months", help="Months heated, e.g. 10-4 or 11,12,1,2.")] = None,
    heat_share: Annotated[float | None, typer.Option("--heat-share", help="Share of the machine's heat that replaces heating, %.")] = None,
    heat_pump_spf: Annotated[float | None, typer.Option("--heat-pump-spf", help="Heat pump seasonal performance factor.")] = None,
    boiler_efficiency: Annotated[float | None, typer.Option("--boiler-efficiency", help="Gas or oil boiler efficiency, %.")] = None,
    fuel_price: Annotated[float | None, typer.Option("--fuel-price", help="Gas or oil price per kWh of fuel.")] = None,
    cooling_months: Annotated[str | None, typer.Option("--cooling-months", help="Months air-conditioned, e.g. 6-8.")] = None,
    cooling_cop: Annotated[float | None, typer.Option("--cooling-cop", help="Air conditioning COP.")] = None,
    cooling_share: Annotated[float | None, typer.Option("--cooling-share", help="Share of the machine's heat the AC removes, %.")] = None,
    hardware_value: Annotated[float | None, typer.Option("--hardware-value", help="What the hardware is worth now (depreciation).")] = None,
    remaining_life_years: Annotated[float | None, typer.Option("--remaining-life-years", help="Years of round-the-clock use left in it.")] = None,
    baseline_w: Annotated[float | None, typer.Option("--baseline-w", help="Watts the machine would draw anyway (not charged to hosting).")] = None,
    tax: Annotated[float | None, typer.Option("--tax", help="Tax rate on the net, %.")] = None,
    other_income: Annotated[float | None, typer.Option("--other-income", help="Storage and bandwidth income per month.")] = None,
    min_bid: Annotated[float | None, typer.Option("--min-bid", help="Your Vast interruptible minimum bid per GPU-hour (checked against the power cost).")] = None,
    currency: Annotated[str | None, typer.Option("--currency", help="Label of the money (default USD); one currency throughout.")] = None,
    config: Annotated[Path | None, typer.Option("--config", help=f"Config file (default: {CONFIG_SHOWN} if present).")] = None,
    no_config: Annotated[bool, typer.Option("--no-config", help="Ignore the per-user config file.")] = False,
    fmt: Annotated[FormatName, format_option(Kind.EARNINGS)] = DEFAULT_FORMAT,
    output: OutputOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Time budget for collecting this machine's facts, seconds.")] = DEFAULT_BUDGET_S,
    market: Annotated[bool, typer.Option("--market", help="Read Vast's market (online, your Vast API key) for the price and occupancy you did not give.")] = False,
    key_file: KeyFileOpt = None,
    market_url: MarketUrlOpt = None,
    details: Annotated[bool, typer.Option("--details", help="Also how each figure was derived: power, constants, each season, the sensitivity table, the chart, payout terms and sources.")] = False,
) -> None:
    from hostcheck.earnings.data import load_constants
    from hostcheck.earnings.estimate import merged_values, run
    from hostcheck.earnings.inputs import build, parse_percent, parse_platform_prices
    from hostcheck.errors import EconomicsDataError
    from hostcheck.exit_codes import EXIT_INTERNAL
    from hostcheck.facts import load_snapshot

    flags: dict[str, Any] = {
        "electricity": electricity, "price": price, "occupancy": occupancy, "fee": fee, "heating": heating,
        "heating_months": heating_months, "heat_share": heat_share, "heat_pump_spf": heat_pump_spf,
        "boiler_efficiency": boiler_efficiency, "fuel_price": fuel_price, "cooling_months": cooling_months,
        "cooling_cop": cooling_cop, "cooling_share": cooling_share, "hardware_value": hardware_value,
        "remaining_life_years": remaining_life_years, "baseline_w": baseline_w, "tax": tax,
        "other_income": other_income, "min_bid": min_bid, "currency": currency, "wall_idle_w": wall_idle_w,
        "wall_load_w": wall_load_w, "gpus": gpus,
    }
    if not math.isfinite(sample_seconds) or not 0 <= sample_seconds <= MAX_SAMPLE_SECONDS:
        raise UsageError(f"--sample-seconds: must be 0-{MAX_SAMPLE_SECONDS:g}, not {sample_seconds}")
    check_timeout(timeout)
    check_output(output)
    try:
        for key, where in (("occupancy", "--occupancy"), ("fee", "--fee")):
            if flags[key] is not None:
                flags[key] = parse_percent(flags[key], where)
        if platform_price:
            flags["platform_price"] = parse_platform_prices(platform_price)
        values, path = merged_values(flags, config, use_config=not no_config)
        if "platform_price" in values and "platform_price" in flags and path is not None:
            values["platform_price"] = {**load_platform_prices(path), **flags["platform_price"]}
        # With --market the occupancy may come from the market: a stand-in lets the check run now.
        checked = {**values, "occupancy": 50.0} if market and values.get("occupancy") is None else values
        given = build(checked, load_constants(), path)  # bad input fails before any collecting or sampling
        for warning in given.warnings:
            typer.echo(f"hostcheck earnings: warning: {warning}", err=True)
        facts = None
        source = "flags"
        if facts_file is not None:
            facts = load_snapshot(facts_file)
            source = str(facts_file)
        elif values.get("wall_idle_w") is None or values.get("wall_load_w") is None:
            facts = collect_live(CollectContext(offline=True, budget_s=timeout), show_progress=False)
            source = "this machine"
        sampler = None
        if facts_file is None and sample_seconds:
            from hostcheck.collectors.power_draw import sample_power

            sampler = functools.partial(sample_power, sample_seconds)
        snapshot = None
        if market:
            from hostcheck.commands.market import earnings_market

            values, snapshot, platform = earnings_market(values, facts, key_file, market_url, timeout, list(platform))
        report, code = run(values, facts=facts, source=source, platforms=list(platform), power_sampler=sampler,
                           config=path)
        if snapshot is not None:
            from hostcheck.earnings.market import mark

            mark(report, *snapshot, values)
    except EconomicsDataError as exc:  # a shipped data file that does not load is a bug, not the user's input
        die(str(exc), EXIT_INTERNAL)
    from hostcheck.render.formats import Options, render

    emit(render(Kind.EARNINGS, report, fmt, Options(details=details, command=command_text())), output)
    sys.stdout.flush()
    raise typer.Exit(code)


def load_platform_prices(path: Path) -> dict[str, float]:
    from hostcheck.earnings.config import load_config

    return dict(load_config(path).get("platform_price") or {})


earnings.__doc__ = HELP
