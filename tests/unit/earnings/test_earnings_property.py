"""Properties of the earnings model over random inputs: net rises with the price; it rises with
occupancy exactly when the price is above the marginal cost of a rented hour (and falls below it);
the heat credit is never negative and the AC penalty never a gain; and no input, however odd,
ends in a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hostcheck.earnings import model as m
from hostcheck.models import Report

prices = st.floats(min_value=0.001, max_value=5, allow_nan=False)
shares = st.floats(min_value=0, max_value=1, allow_nan=False)
watts = st.floats(min_value=1, max_value=3000, allow_nan=False)
kinds = st.sampled_from(m.HEATING_KINDS)


@st.composite
def cases(draw: st.DrawFn) -> tuple[m.Owner, m.Power, float]:
    idle = draw(watts)
    load = idle + draw(st.floats(min_value=0, max_value=3000, allow_nan=False))
    kind = draw(kinds)
    owner = m.Owner(
        tariff=m.Tariff.flat(draw(st.floats(min_value=0.01, max_value=2, allow_nan=False))),
        occupancy=draw(shares), price=draw(prices),
        heating=m.Heating(kind=kind, months=frozenset({1, 2, 12}), share=draw(shares),
                          spf=draw(st.floats(min_value=1, max_value=6)), boiler_efficiency=draw(st.floats(0.5, 1)),
                          fuel_price=draw(st.floats(0.01, 1))),
        cooling=m.Cooling(months=frozenset({6, 7}), cop=draw(st.floats(1, 8)), share=draw(shares)),
        hardware_value=draw(st.floats(0, 5000)), life_years=draw(st.floats(0.5, 10)),
        baseline_w=draw(st.floats(0, 500)), tax=draw(st.floats(0, 0.6)), other_income=draw(st.floats(0, 50)),
    )
    power = m.Power(idle_w=idle, load_w=load, gpus=draw(st.integers(1, 8)))
    return owner, power, draw(st.floats(0, 0.99))


@settings(max_examples=300, deadline=None)
@given(cases(), prices, prices, st.sampled_from(("winter", "summer", "other", "year")))
def test_net_never_falls_when_the_price_rises(case: tuple[m.Owner, m.Power, float], p1: float, p2: float,
                                              season: str) -> None:
    owner, power, fee = case
    low, high = sorted((p1, p2))
    assert m.net(owner, power, fee=fee, season=season, price=high) >= m.net(owner, power, fee=fee, season=season,
                                                                             price=low) - 1e-9


def marginal_cost_per_gpu_hour(owner: m.Owner, power: m.Power, fee: float) -> float:
    """The price at which one more rented hour neither gains nor loses, written out apart from
    the model (heat terms left aside: the cases' season is "other")."""
    extra_w = max(power.load_w - owner.baseline_w, 0.0) - max(power.idle_w - owner.baseline_w, 0.0)
    per_hour = extra_w / 1000 * owner.tariff.mean
    if owner.hardware_value:
        per_hour += owner.hardware_value / (owner.life_years * m.HOURS_PER_YEAR)
    return per_hour / (power.gpus * (1 - fee))


@settings(max_examples=300, deadline=None)
@given(cases(), shares, shares)
def test_net_follows_occupancy_by_the_sign_of_price_minus_marginal_cost(case: tuple[m.Owner, m.Power, float],
                                                                          u1: float, u2: float) -> None:
    owner, power, fee = case
    low, high = sorted((u1, u2))
    marginal = marginal_cost_per_gpu_hour(owner, power, fee)
    gain = m.net(owner, power, fee=fee, season="other", occupancy=high) - m.net(
        owner, power, fee=fee, season="other", occupancy=low)
    assert owner.price is not None
    if owner.price >= marginal:
        assert gain >= -1e-9
    else:
        assert gain <= 1e-9


@settings(max_examples=300, deadline=None)
@given(cases())
def test_heat_credit_is_never_negative_and_the_ac_penalty_never_a_gain(case: tuple[m.Owner, m.Power, float]) -> None:
    owner, power, fee = case
    winter = m.month(owner, power, fee=fee, season="winter")
    summer = m.month(owner, power, fee=fee, season="summer")
    other = m.month(owner, power, fee=fee, season="other")
    assert winter.heat_credit >= 0 and summer.cooling_penalty >= 0
    assert winter.net >= other.net - 1e-9 >= summer.net - 2e-9
    assert winter.extra_kwh >= 0


@settings(max_examples=200, deadline=None)
@given(cases())
def test_break_even_price_really_breaks_even(case: tuple[m.Owner, m.Power, float]) -> None:
    owner, power, fee = case
    price = m.break_even_price(owner, power, fee=fee, season="year")
    if price is not None and price > 0:
        # Relative to the largest amount of money involved (gross revenue, electricity, wear, heat
        # credit, other income): the zero is their difference, so float rounding scales with them.
        pieces = [m.month(owner, power, fee=fee, season=s, price=price) for s in ("winter", "summer", "other")]
        amounts = [abs(x) for p in pieces for x in (p.revenue, p.electricity, p.depreciation, p.heat_credit,
                                                      p.cooling_penalty)]
        scale = max(1.0, price * power.gpus * owner.hours_per_month * owner.occupancy, owner.other_income, *amounts)
        assert m.net(owner, power, fee=fee, season="year", price=price) == pytest.approx(0, abs=1e-9 * scale + 1e-6)
    elif price == 0:
        assert m.net(owner, power, fee=fee, season="year", price=0.0) >= -1e-9


text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
numberish = st.one_of(text, st.floats(allow_nan=True, allow_infinity=True).map(str),
                      st.integers(-10**6, 10**6).map(str))
OPTIONS = ("--electricity", "--price", "--occupancy", "--fee", "--heating", "--heating-months", "--cooling-months",
           "--heat-share", "--fuel-price", "--wall-idle-w", "--wall-load-w", "--gpus", "--platform-price",
           "--hardware-value", "--remaining-life-years", "--baseline-w", "--tax", "--min-bid", "--currency")


@pytest.fixture(scope="module")
def config_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("xdg")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(OPTIONS), numberish), max_size=5))
def test_no_input_ends_in_a_traceback(config_home: Path, options: list[tuple[str, str]]) -> None:
    from typer.testing import CliRunner

    from hostcheck.cli import app

    args = ["earnings", "--wall-idle-w", "50", "--wall-load-w", "400", "--electricity", "0.3", "--price", "0.2",
            "--occupancy", "40", "--format", "json"]
    for option, value in options:
        args += [option, value]
    result = CliRunner().invoke(app, args, env={"XDG_CONFIG_HOME": str(config_home)})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 2, 3), result.output
    assert "Traceback" not in result.output


junk = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(), text),
                    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(text, inner, max_size=3)),
                    max_leaves=8)


@pytest.fixture(scope="module")
def laptop() -> tuple[dict, Report]:
    from hostcheck.facts import load_snapshot
    from hostcheck.policy import resolve_policies
    from hostcheck.report import build_report
    from tests.helpers import SNAPSHOTS

    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    return facts, build_report(facts, resolve_policies([]))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(("gpu", "power", "system")), junk,
       st.one_of(st.none(), st.sampled_from(("name", "power_limit_w", "power_draw_w", "index"))))
def test_hostile_facts_never_crash_the_money(laptop: tuple[dict, Report], section: str, value: object,
                                             device_key: str | None) -> None:
    import copy

    from hostcheck.earnings.estimate import run

    facts, report = laptop
    facts = copy.deepcopy(facts)
    if device_key is None:
        facts[section] = value
    else:
        facts["gpu"]["devices"][0][device_key] = value
    result, code = run({"electricity": 0.3, "price": 0.2, "occupancy": 40}, facts=facts, source="x", platforms=[],
                       audit_report=report)
    assert code in (0, 3, 4)
    for p in result["platforms"]:
        if p["seasons"]:
            assert p["seasons"]["year"]["net_per_month"]["worst"] is not None


config_text = st.one_of(
    text,
    st.builds(lambda key, value: f"{key} = {value}\n", st.sampled_from(("price", "occupancy", "electricity", "fee",
                                                                        "platform_price", "gpus", "currency")),
              st.one_of(numberish, st.integers().map(str), st.just("9" * 5000), st.just("[" * 400 + "]" * 400))),
    st.builds(lambda key, value: f"{key}: {value}\n", st.sampled_from(("price", "occupancy", "electricity", "tax")),
              st.one_of(numberish, st.just("9" * 5000), st.just("2026-02-30"), st.just("&a [1]"), st.just("{x: *a}"))),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.sampled_from(("earnings.toml", "earnings.yaml")), config_text)
def test_no_config_file_ends_in_a_traceback(tmp_path_factory: pytest.TempPathFactory, name: str, body: str) -> None:
    from typer.testing import CliRunner

    from hostcheck.cli import app

    home = tmp_path_factory.mktemp("xdg")
    (home / "hostcheck").mkdir()
    (home / "hostcheck" / name).write_text(body, encoding="utf-8")
    args = ["earnings", "--wall-idle-w", "50", "--wall-load-w", "400", "--electricity", "0.3", "--price", "0.2",
            "--occupancy", "40", "--format", "json"]
    result = CliRunner().invoke(app, args, env={"XDG_CONFIG_HOME": str(home)})
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert name in result.output  # the file is named
