"""The owner's inputs for ``hostcheck earnings``: flags and the per-user config file, checked.

Every value is checked here, before any money is computed: a negative, zero, NaN or absurd
price, a fee over 100 %, an occupancy outside 0-100 %, a month outside 1-12, each raise
:class:`EarningsInputError` with the field named (the CLI turns it into exit code 2). The config
file itself is read by :mod:`hostcheck.earnings.config`.

The config file lives at ``$XDG_CONFIG_HOME/hostcheck/earnings.toml`` (or ``earnings.yaml``),
``~/.config`` when the variable is unset. Its keys are the long option names with ``_`` for
``-`` (``electricity = "07-23=0.32,23-07=0.18"``, ``price = 0.25``); flags win over the file.
Money is in one currency throughout (``currency`` labels it). The "absurd" bounds on money are
set for a dollar-sized unit and scaled by the currency's magnitude from a sourced table
(constants.yaml ``currencies``: 200 for the yen, 2000 for the won); a currency not in the table
gets no upper bound on money, only positive and finite, and the report says so.

A missing required field (the electricity price, the occupancy, a fuel price for gas or oil
heating, the years to spread a hardware value over) raises :class:`EarningsMissingError`, a
subclass, after every field that was given has been checked: ``hostcheck earnings`` stops on it
(exit 2), the audit's closing line says what is missing.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hostcheck.earnings.model import HEATING_KINDS, Cooling, Heating, Owner, Tariff
from hostcheck.errors import EarningsInputError, EarningsMissingError

MAX_CONFIG_BYTES = 64 << 10
CONFIG_NAMES = ("earnings.toml", "earnings.yaml", "earnings.yml")
CONFIG_SHOWN = f"$XDG_CONFIG_HOME/hostcheck/{CONFIG_NAMES[0]}"
"""The per-user config file as help texts name it (:func:`config_path` looks for each of CONFIG_NAMES there)."""

# Field -> (lowest, highest (allowed itself), lowest allowed itself?, what it is). Bounds well past
# any real figure: a price above them is a typo (a missing decimal point), not a tariff. The
# money fields' highest is for a dollar-sized unit, scaled by the currency's magnitude.
BOUNDS: dict[str, tuple[float, float, bool, str]] = {
    "price": (0.0, 100.0, False, "price per GPU-hour"),
    "min_bid": (0.0, 100.0, False, "minimum bid per GPU-hour"),
    "electricity": (0.0, 10.0, False, "electricity price per kWh"),
    "fuel_price": (0.0, 10.0, False, "fuel price per kWh of gas or oil"),
    "occupancy": (0.0, 100.0, True, "occupancy in % of hours rented"),
    "fee": (0.0, 100.0, True, "platform fee in %"),
    "heat_share": (0.0, 100.0, True, "share of the heat that displaces heating, %"),
    "cooling_share": (0.0, 100.0, True, "share of the heat the air conditioning removes, %"),
    "heat_pump_spf": (0.0, 10.0, False, "heat pump seasonal performance factor"),
    "boiler_efficiency": (0.0, 100.0, False, "boiler efficiency in %"),
    "cooling_cop": (0.0, 15.0, False, "air conditioning COP"),
    "hardware_value": (0.0, 1_000_000.0, True, "hardware value"),
    "remaining_life_years": (0.0, 30.0, False, "remaining life in years"),
    "baseline_w": (0.0, 20_000.0, True, "watts the machine would draw anyway"),
    "wall_idle_w": (0.0, 20_000.0, False, "wall watts while idle"),
    "wall_load_w": (0.0, 20_000.0, False, "wall watts under load"),
    "tax": (0.0, 100.0, True, "tax rate in %"),
    "other_income": (0.0, 1_000_000.0, True, "other income per month"),
}
MONEY = frozenset(("price", "min_bid", "electricity", "fuel_price", "hardware_value", "other_income"))
TEXT_KEYS = ("currency", "heating", "heating_months", "cooling_months")
# Currency symbols the label may be; the yen sign stands for the larger of JPY and CNY (looser bounds).
SYMBOLS = {"$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
CONFIG_KEYS = frozenset((*BOUNDS, *TEXT_KEYS, "platform_price", "gpus"))


def option_name(key: str) -> str:
    return "--" + key.replace("_", "-")


MAX_MAGNITUDE = 2**53
"""No figure here comes near it in any currency; every integer up to it converts to a float exactly."""


def check_number_shape(value: Any, name: str, what: str = "") -> float:
    """A finite number (not a bool, not an integer too large to be one), or EarningsInputError."""
    said = f" ({what})" if what else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EarningsInputError(f"{name}: must be a number{said}, not {_clip(value)}")
    if isinstance(value, int) and abs(value) > MAX_MAGNITUDE:
        raise EarningsInputError(f"{name}: the number {_clip(value)} is out of range{said}")
    number = float(value)
    if not math.isfinite(number):
        raise EarningsInputError(f"{name}: must be a finite number{said}, not {value!r}")
    return number


def _clip(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:40]}... ({len(text)} characters)"


@dataclass(frozen=True)
class Money:
    """The currency's label and the factor the money bounds are scaled by (None: no upper bound)."""

    label: str = "USD"
    scale: float | None = 1.0


def check_number(key: str, value: Any, where: str | None = None, money: Money = Money()) -> float:
    """A finite number inside the field's bounds, or EarningsInputError naming the field."""
    name = where or option_name(key)
    low, high, low_ok, what = BOUNDS[key]
    number = check_number_shape(value, name, what)
    unit = ""
    if key in MONEY:
        unit = f" {money.label}"
        high = MAX_MAGNITUDE if money.scale is None else high * money.scale
    if number < low or (number == low and not low_ok) or number > high:
        lo = f"{'at least' if low_ok else 'above'} {low:g}"
        hi = "" if high == MAX_MAGNITUDE else f" and at most {high:g}{unit}"
        raise EarningsInputError(f"{name}: {what} must be {lo}{hi}, not {value!r}")
    return number


PERCENT_KEYS = frozenset(key for key, bounds in BOUNDS.items() if bounds[1] == 100.0 and "%" in bounds[3])


def parse_percent(text: str, where: str) -> float:
    """``40`` or ``40%`` (a trailing percent sign, spaces allowed): 40 %."""
    number = text.strip().removesuffix("%").strip()
    try:
        return check_number_shape(float(number), where)
    except ValueError:
        raise EarningsInputError(f"{where}: a percentage such as 40 or 40%, not {_clip(text)}") from None


def currency_money(label: Any, constants: Any, where: str = "--currency") -> Money:
    """The checked currency label and its bounds' factor from the constants' table."""
    if not isinstance(label, str) or not re.fullmatch(r"[A-Za-z$€£¥]{1,8}", label):
        raise EarningsInputError(f"{where}: a currency code such as USD or EUR, not {label!r}")
    return Money(label, constants.currency_scale(SYMBOLS.get(label, label.upper())))


_HOUR_PRICE = re.compile(r"^\s*(\d{1,2})\s*-\s*(\d{1,2})\s*=\s*([^,]+?)\s*$")


def parse_tariff(value: Any, where: str = "--electricity", money: Money = Money()) -> Tariff:
    """A flat price (``0.30``) or a schedule ``HH-HH=PRICE,...`` covering the 24 hours once."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Tariff.flat(check_number("electricity", value, where, money))
    if not isinstance(value, str) or not value.strip():
        raise EarningsInputError(f"{where}: must be a price per kWh or a schedule such as 07-23=0.32,23-07=0.18")
    text = value.strip()
    if "=" not in text:
        try:
            number = float(text)
        except ValueError:
            raise EarningsInputError(f"{where}: {text[:60]!r} is neither a price nor a schedule "
                                     "such as 07-23=0.32,23-07=0.18") from None
        return Tariff.flat(check_number("electricity", number, where, money))
    periods = []
    covered = [0] * 24
    for part in text.split(","):
        match = _HOUR_PRICE.match(part)
        if not match:
            raise EarningsInputError(f"{where}: {part.strip()[:40]!r} is not HH-HH=PRICE (e.g. 23-07=0.18)")
        start, end = int(match.group(1)), int(match.group(2))
        for hour in (start, end):
            if not 0 <= hour <= 24:
                raise EarningsInputError(f"{where}: hour {hour} is out of range (0-24)")
        try:
            price = float(match.group(3))
        except ValueError:
            raise EarningsInputError(f"{where}: price {match.group(3)[:20]!r} is not a number") from None
        price = check_number("electricity", price, where, money)
        start, end = start % 24, end % 24
        for i in range(Tariff.hours(start, end)):
            covered[(start + i) % 24] += 1
        periods.append((start, end, price))
    if any(count != 1 for count in covered):
        gaps = [h for h, c in enumerate(covered) if c == 0]
        twice = [h for h, c in enumerate(covered) if c > 1]
        said = f"hours {gaps} are not covered" if gaps else f"hours {twice} are covered twice"
        raise EarningsInputError(f"{where}: the schedule must cover each hour of the day once; {said}")
    return Tariff(tuple(periods))


def parse_months(value: Any, where: str) -> frozenset[int]:
    """``10-4`` (October to April, wrapping), ``6,7,8``, ``11-2,7`` or an empty string (none)."""
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise EarningsInputError(f"{where}: must be months such as 10-4 or 6,7,8, not {value!r}")
    months: set[int] = set()
    for part in filter(None, (p.strip() for p in value.split(","))):
        bounds = [b.strip() for b in part.split("-")]
        if len(bounds) > 2 or not all(b.isascii() and b.isdigit() for b in bounds):
            raise EarningsInputError(f"{where}: {part[:20]!r} is not a month (1-12) or a range such as 10-4")
        numbers = [int(b) for b in bounds]
        for number in numbers:
            if not 1 <= number <= 12:
                raise EarningsInputError(f"{where}: month {number} is out of range (1-12)")
        first, last = numbers[0], numbers[-1]
        span = (last - first) % 12 + 1
        months.update((first - 1 + i) % 12 + 1 for i in range(span))
    return frozenset(months)


def config_path() -> Path | None:
    """The per-user config file, if one exists."""
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "hostcheck"
    for name in CONFIG_NAMES:
        candidate = base / name
        if candidate.exists():
            return candidate
    return None


def config_where(path: Path, lines: dict[str, int], key: str) -> str:
    """``FILE: line N: key`` (the line when it is known) for a message about one field."""
    line = lines.get(key) or lines.get(key.split(".", 1)[0])
    return f"{path}: line {line}: {key}" if line else f"{path}: {key}"


@dataclass(frozen=True)
class Given:
    """Checked owner inputs, and which defaults were used (for the constants table)."""

    owner: Owner
    currency: str
    money_bounded: bool  # False: the currency is not in the table, so money has no upper bound
    platform_price: dict[str, float]
    fee: float | None  # a share 0-1 the owner gave, replacing the data file's
    min_bid: float | None
    wall_idle_w: float | None
    wall_load_w: float | None
    gpus: int | None
    defaults_used: tuple[str, ...]
    config: Path | None
    warnings: tuple[str, ...] = ()  # said on stderr: a value that is valid but likely not what was meant


def build(values: dict[str, Any], constants: Any, config: Path | None = None) -> Given:
    """Owner inputs from merged flag and config values (None: not given). Every field given is
    checked first (EarningsInputError); then a missing required one raises EarningsMissingError."""
    lines: dict[str, int] = values.get("_config_lines") or {}
    from_config = values.get("_from_config", ())

    def where(key: str) -> str:
        return config_where(config, lines, key) if config is not None and key in from_config else option_name(key)

    money = currency_money(values.get("currency") or "USD", constants, where("currency"))

    def num(key: str) -> float | None:
        value = values.get(key)
        if isinstance(value, str) and key in PERCENT_KEYS:
            value = parse_percent(value, where(key))
        return None if value is None else check_number(key, value, where(key), money)

    used: list[str] = []
    for key in BOUNDS:  # every number given is checked, used in this run or not
        if key != "electricity":
            num(key)

    def default(key: str, constant: str) -> float:
        value = num(key)
        if value is None:
            used.append(constant)
            return constants.number(constant)
        return value

    missing: list[tuple[str, str]] = []
    tariff = None
    if values.get("electricity") is None:
        missing.append(("--electricity", "your electricity price per kWh, e.g. 0.30, or a day/night schedule "
                                         "such as 07-23=0.32,23-07=0.18"))
    else:
        tariff = parse_tariff(values["electricity"], where("electricity"), money)
    occupancy = num("occupancy")
    warnings = []
    if occupancy is not None and 0 < occupancy < 1:
        warnings.append(f"{where('occupancy')} {occupancy:g} is {occupancy:g} % of the hours rented: did you mean "
                        f"{occupancy * 100:g} %? (occupancy is in %: 40 and 40% both mean 40 %)")
    if occupancy is None:
        missing.append(("--occupancy", "the share of hours you expect it rented, 0-100; Vast's market page "
                                       "shows '% rented' per GPU model"))
    kind = values.get("heating") or "none"
    if kind not in HEATING_KINDS:
        raise EarningsInputError(f"{where('heating')}: must be one of {', '.join(HEATING_KINDS)}, not {kind!r}")
    fuel_price = num("fuel_price")
    if kind in ("gas", "oil") and fuel_price is None:
        missing.append(("--fuel-price", f"{kind} heating needs the price per kWh of {kind}"))
    heating_months = frozenset[int]()
    raw_months = values.get("heating_months")
    if raw_months is not None:
        heating_months = parse_months(raw_months, where("heating_months"))
    elif kind != "none":
        used.append("heating_months")
        heating_months = parse_months(constants.constants["heating_months"].value, "constants.yaml: heating_months")
    if kind == "none":
        heating_months = frozenset()
    cooling_months = parse_months(values.get("cooling_months") or "", where("cooling_months"))
    overlap = sorted(heating_months & cooling_months)
    if overlap:
        raise EarningsInputError(f"{where('cooling_months')}: months {overlap} are also heating months")
    tax = num("tax") or 0.0
    if tax >= 100:
        raise EarningsInputError(f"{where('tax')}: must be below 100 %")
    life = num("remaining_life_years")
    value = num("hardware_value") or 0.0
    if value and life is None:
        missing.append(("--remaining-life-years", "--hardware-value needs the years of use left to spread it over"))
    wall_idle, wall_load = num("wall_idle_w"), num("wall_load_w")
    if wall_idle is not None and wall_load is not None and wall_idle > wall_load:
        raise EarningsInputError(f"{where('wall_idle_w')}: {wall_idle:g} W idle is more than {wall_load:g} W "
                                 "under load")
    gpus = values.get("gpus")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= 64):
        raise EarningsInputError(f"{where('gpus')}: must be a whole number 1-64, not {gpus!r}")
    fee = num("fee")

    def price_where(name: str) -> str:
        if config is not None and f"platform_price.{name}" in lines and "platform_price" in from_config:
            return config_where(config, lines, f"platform_price.{name}")
        return f"--platform-price {name}"

    platform_price = {str(k): check_number("price", v, price_where(str(k)), money)
                      for k, v in (values.get("platform_price") or {}).items()}
    if missing:
        raise EarningsMissingError(missing, config)
    assert tariff is not None and occupancy is not None
    heating = Heating(
        kind=kind, months=heating_months,
        share=default("heat_share", "heat_share_pct") / 100 if kind != "none" else 0.0,
        spf=default("heat_pump_spf", "heat_pump_spf") if kind == "heat-pump" else constants.number("heat_pump_spf"),
        boiler_efficiency=(default("boiler_efficiency", "boiler_efficiency_pct") if kind in ("gas", "oil")
                           else constants.number("boiler_efficiency_pct")) / 100,
        fuel_price=fuel_price,
    )
    cooling = Cooling(
        months=cooling_months,
        cop=default("cooling_cop", "cooling_cop") if cooling_months else constants.number("cooling_cop"),
        share=(default("cooling_share", "cooling_share_pct") if cooling_months else 100.0) / 100,
    )
    owner = Owner(
        tariff=tariff, occupancy=occupancy / 100, price=num("price"), heating=heating, cooling=cooling,
        hardware_value=value, life_years=life or 4.0, baseline_w=num("baseline_w") or 0.0, tax=tax / 100,
        other_income=num("other_income") or 0.0, hours_per_month=constants.number("hours_per_month"),
    )
    return Given(owner=owner, currency=money.label, money_bounded=money.scale is not None,
                 platform_price=platform_price, fee=None if fee is None else fee / 100, min_bid=num("min_bid"),
                 wall_idle_w=wall_idle, wall_load_w=wall_load, gpus=gpus, defaults_used=tuple(dict.fromkeys(used)),
                 config=config, warnings=tuple(warnings))


def parse_platform_prices(specs: list[str]) -> dict[str, float]:
    """``--platform-price vast=0.30`` (repeatable)."""
    out: dict[str, float] = {}
    for spec in specs:
        name, sep, price = spec.partition("=")
        if not sep or not name.strip():
            raise EarningsInputError(f"--platform-price: {spec[:40]!r} is not PLATFORM=PRICE (e.g. vast=0.30)")
        try:
            number = float(price)
        except ValueError:
            raise EarningsInputError(f"--platform-price: {price[:20]!r} is not a number") from None
        # Its bounds depend on the currency: build() checks them.
        out[name.strip()] = check_number_shape(number, f"--platform-price {name.strip()}")
    return out
