"""The platforms' fee and payout rules and the default constants: data files with sources.

``policies/economics/<platform>.yaml`` (shipped as ``hostcheck/policies/economics``) says, per
platform, who sets the price, the fee (a published share, or a range where none is published
or the platform's pages disagree), the payout's minimum, form, currency, schedule and expiry,
each with its source and the date it was read. ``constants.yaml`` holds the labelled defaults
(heat-pump SPF, boiler efficiency, cooling COP, ...). Both are validated as strictly as the
policies: an unknown key, a wrong type or a missing source is an error naming file, line and field.
"""

from __future__ import annotations

import math
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from hostcheck.errors import EconomicsDataError
from hostcheck.models import SourceEntry, Text
from hostcheck.policy import _field, _Lines, refuse_yaml_bombs
from hostcheck.yaml_loader import LOADER

CONSTANTS_FILE = "constants"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _number(value: Any) -> Any:
    # YAML's `true` or a quoted "20" is not a number in a data file about money.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"must be a number, not {value!r}")
    return value


Number = Annotated[float, BeforeValidator(_number), Field(allow_inf_nan=False)]
Percent = Annotated[Number, Field(ge=0, le=100)]
NotPublished = Literal["not-published"]


DataSource = SourceEntry
"""A cited page: the one source format of policies and data files (hostcheck.models.SourceEntry)."""


class Pricing(_Strict):
    set_by: Literal["host", "platform"]
    rate: Literal["before-fee", "net-of-fee"] = Field(
        description="before-fee: the platform's fee is taken from the price the owner enters; net-of-fee: the "
                    "platform sets the rate and shows hosts what they earn, so no fee is taken from it again")
    note: Text
    source: Text

    @model_validator(mode="after")
    def _net_rate_is_platform_set(self) -> Pricing:
        if self.rate == "net-of-fee" and self.set_by != "platform":
            raise ValueError("a rate shown net of the fee is one the platform sets (set_by: platform)")
        return self


class Fee(_Strict):
    status: Literal["published", "not-published", "conflicting"]
    pct: Percent | None = Field(None, description="the published share (status published only)")
    range_pct: tuple[Percent, Percent] | None = Field(None, description="low and high end where not published or conflicting")
    why: Text
    source: Text

    @model_validator(mode="after")
    def _shape(self) -> Fee:
        if self.status == "published":
            if self.pct is None or self.range_pct is not None:
                raise ValueError("a published fee gives pct and no range_pct")
        else:
            if self.range_pct is None or self.pct is not None:
                raise ValueError(f"a {self.status} fee gives range_pct [low, high] and no pct")
            if self.range_pct[0] > self.range_pct[1]:
                raise ValueError("range_pct must be [low, high] with low <= high")
        return self

    @property
    def bounds(self) -> tuple[float, float]:
        """(low, high) share in percent; equal ends when published."""
        if self.pct is not None:
            return (self.pct, self.pct)
        assert self.range_pct is not None
        return self.range_pct


class Minimum(_Strict):
    amount: Annotated[Number, Field(gt=0)]
    currency: Text


class Caveat(_Strict):
    """One thing about being paid that the money figures leave out, with its own source."""

    text: Text
    source: Text


class Payout(_Strict):
    minimum: Minimum | NotPublished
    form: Literal["cash", "store-credit", "token", "not-published"]
    currency: Text
    schedule: Text
    expiry: Text
    caveats: list[Caveat]
    source: Text


class MinBid(_Strict):
    note: Text
    source: Text


class PlatformDocument(_Strict):
    """One ``policies/economics/<platform>.yaml``."""

    model_config = ConfigDict(title="hostcheck platform economics, format 1")

    format: Literal[1]
    platform: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*$")]
    title: Text
    policies: list[Text] = Field(min_length=1, description="the audit policies this platform's verdict comes from")
    sources: dict[str, DataSource] = Field(min_length=1)
    pricing: Pricing
    fee: Fee
    payout: Payout
    min_bid: MinBid | None = None

    @model_validator(mode="after")
    def _sources_cited(self) -> PlatformDocument:
        cited = [("pricing", self.pricing.source), ("fee", self.fee.source), ("payout", self.payout.source),
                 ("min_bid", self.min_bid.source if self.min_bid else None),
                 *((f"payout.caveats[{i}]", c.source) for i, c in enumerate(self.payout.caveats))]
        for where, key in cited:
            if key is not None and key not in self.sources:
                raise ValueError(f"{where}.source {key!r} is not a key of 'sources'")
        return self

    def source(self, key: str) -> DataSource:
        return self.sources[key]


class Constant(_Strict):
    value: Number | Text
    unit: Text
    option: Text | None = None
    source: Text
    inference: Annotated[bool, Field(strict=True)] = False
    note: Text


CurrencyCode = Annotated[str, Field(pattern=r"^[A-Z]{3}$")]


class CurrencyTable(_Strict):
    """Exchange rates as read (units of each currency per euro), only for the order of magnitude
    of a currency's unit: the bounds on prices are set for a dollar-sized unit and scaled by it."""

    source: Text
    note: Text
    per_eur: dict[CurrencyCode, Annotated[Number, Field(gt=0)]] = Field(min_length=2)

    @model_validator(mode="after")
    def _anchored(self) -> CurrencyTable:
        if self.per_eur.get("EUR") != 1 or "USD" not in self.per_eur:
            raise ValueError("per_eur must hold EUR: 1 and a USD rate")
        return self

    def per_usd(self, code: str) -> float | None:
        rate = self.per_eur.get(code)
        return None if rate is None else rate / self.per_eur["USD"]


def magnitude(units_per_usd: float) -> float:
    """The factor the dollar-sized bounds are scaled by: units per US dollar rounded up to 1, 2 or
    5 x 10^n, never below 1. Rounding up keeps the bounds loose as rates drift."""
    if units_per_usd <= 1:
        return 1.0
    power = 10.0 ** math.floor(math.log10(units_per_usd))
    return next(step * power for step in (1, 2, 5, 10) if units_per_usd <= step * power * (1 + 1e-9))


class ConstantsDocument(_Strict):
    model_config = ConfigDict(title="hostcheck earnings constants, format 1")

    format: Literal[1]
    sources: dict[str, DataSource] = Field(min_length=1)
    constants: dict[str, Constant] = Field(min_length=1)
    currencies: CurrencyTable

    @model_validator(mode="after")
    def _sources_cited(self) -> ConstantsDocument:
        for name, constant in self.constants.items():
            if constant.source not in self.sources:
                raise ValueError(f"constants.{name}.source {constant.source!r} is not a key of 'sources'")
        if self.currencies.source not in self.sources:
            raise ValueError(f"currencies.source {self.currencies.source!r} is not a key of 'sources'")
        return self

    def currency_scale(self, code: str) -> float | None:
        """The bounds' factor for a currency code (upper case), or None when it is not in the table."""
        per_usd = self.currencies.per_usd(code)
        return None if per_usd is None else magnitude(per_usd)

    def number(self, name: str) -> float:
        value = self.constants[name].value
        if isinstance(value, str):
            raise EconomicsDataError(f"constants.yaml: constants.{name}: must be a number, not {value!r}")
        return float(value)


REQUIRED_CONSTANTS = ("hours_per_month", "heat_pump_spf", "boiler_efficiency_pct", "cooling_cop",
                      "heat_share_pct", "cooling_share_pct", "heating_months")


def _reason(error: Any) -> str:
    kind, value = error["type"], error.get("input")
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "missing":
        return "missing required key"
    if kind == "value_error":
        return str((error.get("ctx") or {}).get("error", error["msg"]))
    return f"{error['msg'][0].lower()}{error['msg'][1:]}, not {value!r}"


def _parse(text: str, path: str, model: type[BaseModel]) -> Any:
    lines = _Lines()
    try:
        refuse_yaml_bombs(text, EconomicsDataError)
        node = yaml.compose(text, Loader=LOADER)
        data = None if node is None else lines.build(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        raise EconomicsDataError(f"{path}: {where}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except ValueError as exc:  # PolicyError from the shared YAML guard
        raise EconomicsDataError(f"{path}: {exc}") from None
    except RecursionError:
        raise EconomicsDataError(f"{path}: nested too deeply") from None
    if not isinstance(data, dict):
        raise EconomicsDataError(f"{path}: must be a mapping of keys, not {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        messages: list[str] = []
        for error in exc.errors():
            # Union members and validators add tags such as "Minimum" or "literal['x']" to the path.
            loc = tuple(part for part in error["loc"]
                        if not (isinstance(part, str) and (part[:1].isupper() or "[" in part or part.startswith("function-"))))
            message = f"{path}: line {lines.at(loc)}: {_field(loc) or 'file'}: {_reason(error)}"
            if not any(m.split(": ")[:3] == message.split(": ")[:3] for m in messages):
                messages.append(message)
        raise EconomicsDataError("\n".join(messages)) from None


def parse_platform(text: str, path: str) -> PlatformDocument:
    doc: PlatformDocument = _parse(text, path, PlatformDocument)
    expected = Path(path).stem
    if Path(path).suffix == ".yaml" and doc.platform != expected:
        raise EconomicsDataError(f"{path}: platform: {doc.platform!r} must match the file name {expected!r}")
    return doc


def parse_constants(text: str, path: str) -> ConstantsDocument:
    doc: ConstantsDocument = _parse(text, path, ConstantsDocument)
    missing = [name for name in REQUIRED_CONSTANTS if name not in doc.constants]
    if missing:
        raise EconomicsDataError(f"{path}: constants: missing {', '.join(missing)}")
    return doc


def _folder() -> Any:
    return resources.files("hostcheck") / "policies" / "economics"


def shipped_platform_names() -> list[str]:
    return sorted(p.name[:-5] for p in _folder().iterdir()
                  if p.name.endswith(".yaml") and p.name != f"{CONSTANTS_FILE}.yaml")


@lru_cache(maxsize=32)
def load_platform(name: str) -> PlatformDocument:
    entry = _folder() / f"{name}.yaml"
    if not entry.is_file():
        raise EconomicsDataError(f"no platform data named {name!r} (shipped: {', '.join(shipped_platform_names())})")
    return parse_platform(entry.read_text(encoding="utf-8"), f"policies/economics/{name}.yaml")


@lru_cache(maxsize=1)
def load_constants() -> ConstantsDocument:
    entry = _folder() / f"{CONSTANTS_FILE}.yaml"
    return parse_constants(entry.read_text(encoding="utf-8"), f"policies/economics/{CONSTANTS_FILE}.yaml")


def load_all_platforms() -> list[PlatformDocument]:
    return [load_platform(name) for name in shipped_platform_names()]
