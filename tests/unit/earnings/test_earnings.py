"""`hostcheck earnings`: the money, checked against the formula written out here.

Every expected figure below is computed in the test from the formula in the research notes
(economics §7): R = N·P·U·H·(1−φ) + S, K = H·[U·W_load + (1−U)·W_idle]/1000 (above the baseline),
C_e = K·E, D = V·U·H/(L·8760), Net₀ = (R − C_e − D)(1 − t), plus the heat credit K·f·c_heat in
heating months and minus the air-conditioning penalty K·g·E/COP in cooling months. The power
figures the formula is fed come from the snapshot (the measurement module's estimate) or from the
wall readings the test gives; no expected value is copied from the program's output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from hostcheck.earnings.estimate import run
from hostcheck.facts import load_snapshot
from tests.helpers import REPO, SNAPSHOTS, hostcheck, run_cli

H = 730.0  # hours per month (constants.yaml)


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The owner's own ~/.config/hostcheck/earnings.toml must never leak into a test.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def flags_only(**values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"wall_idle_w": 50, "wall_load_w": 450, "electricity": 0.30, "price": 0.25,
                            "occupancy": 50, "fee": 0}
    base.update(values)
    report, code = run(base, facts=None, source="flags", platforms=["vast"])
    assert code == 0
    return report


def platform(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in report["platforms"] if p["platform"] == name)


def net0(*, n: int = 1, p: float, u: float, fee: float, idle: float, load: float, e: float, baseline: float = 0.0,
         value: float = 0.0, life: float = 4.0, tax: float = 0.0, other: float = 0.0) -> tuple[float, float]:
    """(Net₀ per month, K extra kWh) written out from the notes' formula."""
    revenue = n * p * u * H * (1 - fee) + other
    k = H * (u * max(load - baseline, 0) + (1 - u) * max(idle - baseline, 0)) / 1000
    depreciation = value * u * H / (life * 8760)
    return (revenue - k * e - depreciation) * (1 - tax), k


def test_flat_tariff_net_break_even_and_occupancy() -> None:
    report = flags_only()
    vast = platform(report, "vast")
    expected, k = net0(p=0.25, u=0.5, fee=0, idle=50, load=450, e=0.30)
    year = vast["seasons"]["year"]
    assert year["net_per_month"]["worst"] == pytest.approx(expected, abs=0.01)
    assert vast["at_given"]["extra_kwh"] == pytest.approx(k, abs=0.01)
    # Break-even price: revenue N·P·U·H equals the electricity K·E.
    assert year["break_even_price"]["worst"] == pytest.approx(k * 0.30 / (0.5 * H), abs=1e-4)
    # Break-even occupancy: net is linear in U between U=0 and U=1.
    at0, _ = net0(p=0.25, u=0.0, fee=0, idle=50, load=450, e=0.30)
    at1, _ = net0(p=0.25, u=1.0, fee=0, idle=50, load=450, e=0.30)
    assert year["break_even_occupancy_pct"]["worst"] == pytest.approx(100 * -at0 / (at1 - at0), abs=0.1)
    assert report["power"]["wall_load"]["provenance"] == "given"


def test_day_night_tariff_uses_the_hour_weighted_price_and_the_dearest_hour_for_the_min_bid() -> None:
    report = flags_only(electricity="07-23=0.32,23-07=0.18", min_bid=0.10)
    mean = (16 * 0.32 + 8 * 0.18) / 24
    expected, _ = net0(p=0.25, u=0.5, fee=0, idle=50, load=450, e=mean)
    vast = platform(report, "vast")
    assert vast["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(expected, abs=0.01)
    floor = 450 / 1 / 1000 * 0.32
    assert vast["min_bid"]["floor_per_gpu_hour"] == pytest.approx(floor, abs=1e-4)
    assert vast["min_bid"]["covers"] is (0.10 >= floor)


@pytest.mark.parametrize("occupancy", [0, 100])
def test_zero_and_full_occupancy(occupancy: float) -> None:
    u = occupancy / 100
    vast = platform(flags_only(occupancy=occupancy), "vast")
    expected, _ = net0(p=0.25, u=u, fee=0, idle=50, load=450, e=0.30)
    assert vast["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(expected, abs=0.01)
    if occupancy == 0:
        # Nothing rented: no price breaks even (the idle draw is paid whatever the price).
        assert vast["seasons"]["year"]["break_even_price"]["worst"] is None
        assert expected == pytest.approx(-H * 50 / 1000 * 0.30)


@pytest.mark.parametrize(("kind", "extra", "cost_per_kwh_heat"), [
    ("resistive", {}, 0.30),
    ("heat-pump", {}, 0.30 / 2.80),
    ("heat-pump", {"heat_pump_spf": 3.5}, 0.30 / 3.5),
    ("gas", {"fuel_price": 0.08}, 0.08 / 0.84),
    ("oil", {"fuel_price": 0.11, "boiler_efficiency": 80}, 0.11 / 0.80),
])
def test_every_heating_kind_credits_the_displaced_heating(kind: str, extra: dict[str, Any],
                                                          cost_per_kwh_heat: float) -> None:
    report = flags_only(heating=kind, heating_months="11-2", heat_share=60, **extra)
    vast = platform(report, "vast")
    base, k = net0(p=0.25, u=0.5, fee=0, idle=50, load=450, e=0.30)
    credit = k * 0.60 * cost_per_kwh_heat
    assert vast["seasons"]["winter"]["months"] == 4
    assert vast["seasons"]["winter"]["net_per_month"]["worst"] == pytest.approx(base + credit, abs=0.01)
    assert vast["seasons"]["other"]["net_per_month"]["worst"] == pytest.approx(base, abs=0.01)
    year = (4 * (base + credit) + 8 * base) / 12
    assert vast["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(year, abs=0.01)


def test_no_heating_gives_no_credit() -> None:
    report = flags_only(heating="none", heating_months="1-12")
    vast = platform(report, "vast")
    assert "winter" not in vast["seasons"]
    assert vast["at_given"]["heat_credit"] == 0


def test_summer_air_conditioning_costs_the_heat_removal() -> None:
    report = flags_only(cooling_months="6-8", cooling_cop=3.0, cooling_share=80)
    vast = platform(report, "vast")
    base, k = net0(p=0.25, u=0.5, fee=0, idle=50, load=450, e=0.30)
    penalty = k * 0.80 * 0.30 / 3.0
    assert vast["seasons"]["summer"]["net_per_month"]["worst"] == pytest.approx(base - penalty, abs=0.01)
    # Default COP 3.9 is labelled an inference in the output.
    default = flags_only(cooling_months="7")
    cop = next(c for c in default["constants"] if c["name"] == "cooling_cop")
    assert cop["value"] == 3.9 and cop["inference"] and cop["used_default"] and cop["source"]["url"]


def test_baseline_depreciation_tax_and_other_income() -> None:
    report = flags_only(baseline_w=80, hardware_value=900, remaining_life_years=3, tax=20, other_income=5)
    expected, _ = net0(p=0.25, u=0.5, fee=0, idle=50, load=450, e=0.30, baseline=80, value=900, life=3, tax=0.2,
                       other=5)
    assert platform(report, "vast")["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(expected, abs=0.01)


def test_platform_without_a_published_fee_is_shown_over_its_range() -> None:
    report, _ = run({"wall_idle_w": 50, "wall_load_w": 450, "electricity": 0.30, "price": 0.25, "occupancy": 50},
                    facts=None, source="flags", platforms=["tensordock", "ionet"])
    td = platform(report, "tensordock")
    assert td["fee"]["status"] == "not-published" and (td["fee"]["low_pct"], td["fee"]["high_pct"]) == (0, 30)
    worst, _ = net0(p=0.25, u=0.5, fee=0.30, idle=50, load=450, e=0.30)
    best, _ = net0(p=0.25, u=0.5, fee=0.0, idle=50, load=450, e=0.30)
    assert td["seasons"]["year"]["net_per_month"] == pytest.approx({"worst": worst, "best": best}, abs=0.01)
    # io.net's pages disagree: 0 % on earnings paid in $IO (the coin page) up to 0.25 % + 2 % in USDC
    # (the tokenomics page): the range spans both.
    io = platform(report, "ionet")
    assert io["fee"]["status"] == "conflicting" and (io["fee"]["low_pct"], io["fee"]["high_pct"]) == (0, 0.25 + 2)
    worst, _ = net0(p=0.25, u=0.5, fee=0.0225, idle=50, load=450, e=0.30)
    best, _ = net0(p=0.25, u=0.5, fee=0.0, idle=50, load=450, e=0.30)
    assert io["seasons"]["year"]["net_per_month"] == pytest.approx({"worst": worst, "best": best}, abs=0.01)


def test_a_rate_the_platform_shows_net_of_its_fee_is_not_charged_the_fee_again() -> None:
    # Salad shows hosts the rate they earn (pricing.rate: net-of-fee): the fee range of a platform
    # that publishes none must not be taken from it a second time.
    from hostcheck.earnings.data import load_platform

    assert load_platform("salad").pricing.rate == "net-of-fee"
    report, _ = run({"wall_idle_w": 50, "wall_load_w": 300, "electricity": 0.30, "price": 0.20, "occupancy": 50},
                    facts=None, source="flags", platforms=["salad"])
    salad = platform(report, "salad")
    assert salad["rate"] == "net-of-fee"
    assert (salad["fee"]["status"], salad["fee"]["low_pct"], salad["fee"]["high_pct"]) == ("net-rate", 0, 0)
    expected, _ = net0(p=0.20, u=0.5, fee=0.0, idle=50, load=300, e=0.30)
    assert salad["seasons"]["year"]["net_per_month"] == pytest.approx({"worst": expected, "best": expected}, abs=0.01)
    # A fee the owner gives still applies (a rate that is not the one Salad shows).
    report, _ = run({"wall_idle_w": 50, "wall_load_w": 300, "electricity": 0.30, "price": 0.20, "occupancy": 50,
                     "fee": 10}, facts=None, source="flags", platforms=["salad"])
    expected, _ = net0(p=0.20, u=0.5, fee=0.10, idle=50, load=300, e=0.30)
    assert platform(report, "salad")["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(expected, abs=0.01)


def test_sensitivity_table_cells_follow_the_formula() -> None:
    vast = platform(flags_only(), "vast")
    sens = vast["sensitivity"]
    for i, u in enumerate(sens["occupancy_pct"]):
        for j, p in enumerate(sens["price_per_gpu_hour"]):
            expected, _ = net0(p=p, u=u / 100, fee=0, idle=50, load=450, e=0.30)
            assert sens["net_per_month"][i][j] == pytest.approx(expected, abs=0.01)


def test_reference_laptop_headline_still_says_do_not_host() -> None:
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    report, code = run({"electricity": 0.30, "price": 0.10, "occupancy": 30}, facts=facts,
                       source="reference-laptop.json", platforms=[])
    assert code == 4  # as the audit's: owner risk high, whatever it earns
    assert report["headline"].startswith("Do not host on this machine as it is")
    assert report["machine"]["owner_risk"] == "high"
    # The 45 W cap (of 125 W default) is the GPU's upper bound under load.
    assert report["power"]["gpu_load"]["watts"] == 45.0
    assert report["power"]["gpu_load"]["provenance"] == "estimated"
    idle, load = report["power"]["wall_idle"]["watts"], report["power"]["wall_load"]["watts"]
    td = platform(report, "tensordock")
    worst, _ = net0(p=0.10, u=0.3, fee=0.30, idle=idle, load=load, e=0.30)
    assert td["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(worst, abs=0.02)
    # Platforms the audit says cannot apply (runpod is closed, salad needs Windows) are not priced.
    assert {p["platform"] for p in report["platforms"]}.isdisjoint({"runpod", "salad", "darkbloom"})


def test_an_idle_reading_above_the_estimated_load_is_used_as_given() -> None:
    # The laptop's draw under load is estimated at (45 + 15 + 8) / 0.88 W; the owner's plug reads
    # 200 W idle. The reading is used as given, the draw under load is at least that, and it says so.
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    report, _ = run({"wall_idle_w": 200, "electricity": 0.3, "price": 0.1, "occupancy": 30}, facts=facts,
                    source="reference-laptop.json", platforms=["tensordock"])
    assert report["power"]["wall_idle"] == {"watts": 200.0, "provenance": "given", "how": report["power"]["wall_idle"]["how"]}
    assert (report["power"]["wall_load"]["watts"], report["power"]["wall_load"]["provenance"]) == (200.0, "estimated")
    td = platform(report, "tensordock")
    worst, k = net0(p=0.1, u=0.3, fee=0.30, idle=200, load=200, e=0.3)
    assert td["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(worst, abs=0.01)
    assert td["at_given"]["extra_kwh"] == pytest.approx(k, abs=0.01)  # 730 h x 200 W, whatever the occupancy
    assert any("taken as 200 W" in note for note in report["notes"])


def test_unknown_power_does_not_hide_the_owner_risk_exit() -> None:
    from hostcheck.facts import Unknown

    # The reference laptop (owner risk high) with its power limit unreadable: no money figure
    # (that alone is exit 3), and the owner-risk exit 4 comes first, as `--help` lists them.
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    facts["gpu"]["devices"][0]["power_limit_w"] = Unknown("test: the power limit could not be read")
    report, code = run({"electricity": 0.30, "price": 0.10, "occupancy": 30}, facts=facts, source="x", platforms=[])
    assert not report["power_known"] and report["machine"]["owner_risk"] == "high"
    assert code == 4
    _, help_text = _cli(["earnings", "--help"])
    order = [line.split()[0] for line in help_text.splitlines() if line.strip()[:2] in ("4 ", "3 ", "0 ")]
    assert order == ["4", "3", "0"]


def test_the_headline_quotes_money_only_for_a_platform_the_audit_finds_feasible() -> None:
    facts = load_snapshot(SNAPSHOTS / "reference-laptop.json")
    # Vast is not feasible for the laptop; at 5.00 per GPU-hour it would out-earn io.net, and
    # the headline still quotes io.net (feasible with risks).
    report, _ = run({"electricity": 0.30, "price": 0.10, "occupancy": 30, "platform_price": {"vast": 5.0}},
                    facts=facts, source="x", platforms=["vast", "ionet"])
    assert platform(report, "vast")["audit_verdict"].endswith(": not feasible")
    assert "Money: io.net nets" in report["headline"] and "Vast" not in report["headline"].split("Money:")[1]
    # With only infeasible platforms, none is quoted, and the table marks them.
    from hostcheck.render.earnings import render_earnings

    report, _ = run({"electricity": 0.30, "price": 5.0, "occupancy": 30}, facts=facts, source="x", platforms=["vast"])
    assert "no platform shown is feasible" in report["headline"] and "nets" not in report["headline"]
    assert "not feasible for this machine as it is (the audit)" in render_earnings(report, details=True)


def test_multi_gpu_box_counts_every_gpu() -> None:
    facts = load_snapshot(SNAPSHOTS / "tensordock-4x4090-server.json")
    report, _ = run({"electricity": 0.25, "price": 0.40, "occupancy": 60, "fee": 10}, facts=facts,
                    source="tensordock-4x4090-server.json", platforms=["tensordock", "vast"])
    assert report["machine"]["gpus"] == 4
    idle, load = report["power"]["wall_idle"]["watts"], report["power"]["wall_load"]["watts"]
    td = platform(report, "tensordock")
    expected, _ = net0(n=4, p=0.40, u=0.6, fee=0.10, idle=idle, load=load, e=0.25)
    assert td["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(expected, abs=0.02)
    assert td["at_given"]["revenue"] == pytest.approx(4 * 0.40 * 0.6 * H * 0.9, abs=0.01)
    # Vast's minimum-bid floor is per GPU: the power under load split over four GPUs.
    assert platform(report, "vast")["min_bid"]["floor_per_gpu_hour"] == pytest.approx(load / 4 / 1000 * 0.25, abs=1e-4)


def test_unknown_power_is_unknown_never_zero() -> None:
    facts = load_snapshot(SNAPSHOTS / "no-nvidia-desktop.json")
    report, code = run({"electricity": 0.30, "price": 0.25, "occupancy": 50}, facts=facts, source="x", platforms=[])
    # 3 (no money figure) unless the owner-risk exit comes first.
    assert code == (4 if report["machine"]["owner_risk"] in ("high", "unknown") else 3)
    assert not report["power_known"]
    assert "--wall-load-w" in report["headline"]
    assert all(p["seasons"] is None for p in report["platforms"])
    assert report["power"]["wall_load"]["watts"] is None
    # Given a wall reading, the same machine is priced (as one with a GPU: the audit counts none).
    report, code = run({"electricity": 0.30, "price": 0.25, "occupancy": 50, "wall_idle_w": 40, "wall_load_w": 200,
                        "gpus": 1},
                       facts=facts, source="x", platforms=["quickpod"])
    assert code == (4 if report["machine"]["owner_risk"] in ("high", "unknown") else 0)
    assert report["power_known"]
    expected, _ = net0(p=0.25, u=0.5, fee=0.30, idle=40, load=200, e=0.30)
    assert platform(report, "quickpod")["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(expected, abs=0.01)


def test_json_output_matches_the_shipped_schema() -> None:
    schema = json.loads((REPO / "hostcheck" / "schema" / "earnings-v1.json").read_text())
    proc = run_cli("earnings", "--facts", str(SNAPSHOTS / "rtx3090-vram-in-use.json"), "--electricity", "0.3",
                   "--price", "0.22", "--occupancy", "50", "--heating", "gas", "--fuel-price", "0.08",
                   "--cooling-months", "7", "--format", "json", env={"XDG_CONFIG_HOME": "/nonexistent"})
    # The audit's own exit code: feasible on some platforms with owner risk LOW gives 0.
    audit = run_cli("audit", "--facts", str(SNAPSHOTS / "rtx3090-vram-in-use.json"), "--offline",
                    env={"XDG_CONFIG_HOME": "/nonexistent"})
    assert proc.returncode == audit.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    jsonschema.validate(report, schema)
    assert report["earnings_version"] == 1


def test_markdown_has_the_chart_in_a_code_block() -> None:
    from hostcheck.render.earnings import render_earnings

    text = render_earnings(flags_only(heating="resistive", cooling_months="6-8"), markdown=True, details=True)
    block = text.split("```\n", 2)[1]
    assert "W = winter" in block and "S = summer" in block and "█" in block


# ------------------------------------------------------------------ the audit's closing lines


def test_audit_ends_with_earnings_lines_but_keeps_the_owner_risk_headline() -> None:
    env = {"XDG_CONFIG_HOME": "/nonexistent"}
    args = ("audit", "--facts", str(SNAPSHOTS / "reference-laptop.json"))
    plain = run_cli(*args, env=env)
    priced = run_cli(*args, "--price", "0.10", "--electricity", "0.30", "--occupancy", "30", env=env)
    assert priced.returncode == plain.returncode == 4  # earnings never change the exit code
    assert "Do not host on this machine as it is" in priced.stdout
    lines = [line for line in priced.stdout.splitlines() if line.startswith("Earnings on ")]
    assert {line.split(" (")[0] for line in lines} == {"Earnings on io.net"}  # the one platform feasible
    assert "Owner risk is HIGH: earnings do not change the headline" in priced.stdout
    assert "Earnings" not in plain.stdout


def test_audit_reads_the_per_user_config_file(tmp_path: Path) -> None:
    folder = tmp_path / "hostcheck"
    folder.mkdir()
    (folder / "earnings.toml").write_text('electricity = "07-23=0.32,23-07=0.18"\nprice = 0.22\noccupancy = 50\n')
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "rtx3090-vram-in-use.json"), "--format", "markdown",
                   env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert "## Earnings" in proc.stdout
    assert "- Earnings on Vast.ai (vast: feasible with risks): net " in proc.stdout
    (folder / "earnings.toml").write_text("price = [1, 2]\n")
    bad = run_cli("audit", "--facts", str(SNAPSHOTS / "rtx3090-vram-in-use.json"),
                  env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert bad.returncode == 2 and "earnings.toml: line 1: price: must be a number" in bad.stderr


def test_an_incomplete_config_still_prints_the_audit_and_says_what_is_missing(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": "/nonexistent"}
    args = ("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"))
    plain = run_cli(*args, env=env)
    config = tmp_path / "earnings.toml"
    config.write_text("price = 0.22\n")
    for extra in (("--earnings-config", str(config)), ("--price", "0.22")):
        proc = run_cli(*args, *extra, env=env)
        assert proc.returncode == plain.returncode, proc.stderr  # the money part never changes the exit code
        assert proc.stdout.startswith(plain.stdout)  # the whole report, then the closing line
        closing = proc.stdout[len(plain.stdout):].strip()
        assert closing.startswith("Earnings: not computed, missing") and "--electricity" in closing
        assert "--occupancy" in closing and "--price" not in closing.split("missing", 1)[1]
    assert str(config) in run_cli(*args, "--earnings-config", str(config), env=env).stdout
    # `hostcheck earnings` itself stops on it, naming both fields.
    code, output = _cli(["earnings", "--config", str(config), "--wall-idle-w", "50", "--wall-load-w", "450"])
    assert code == 2 and "--electricity" in output and "--occupancy" in output
    # A wrong value (not a missing one) stops the audit before it collects anything: exit 2.
    bad = run_cli(*args, "--price", "-1", env=env)
    assert bad.returncode == 2 and bad.stdout == "" and "--price" in bad.stderr


def _scale(code: str) -> float:
    """The bounds' factor written out: units per US dollar from the table's rates per euro,
    rounded up to 1, 2 or 5 x 10^n, never below 1."""
    import math

    from hostcheck.earnings.data import load_constants

    rates = load_constants().currencies.per_eur
    per_usd = rates[code] / rates["USD"]
    if per_usd <= 1:
        return 1.0
    power = 10 ** math.floor(math.log10(per_usd))
    return min(step * power for step in (1, 2, 5, 10) if step * power >= per_usd)


def test_the_price_bounds_follow_the_currency() -> None:
    jpy = _scale("JPY")
    assert jpy >= 100  # a yen is about a hundredth of a dollar or less
    # Yen-sized prices that the dollar bounds (100 per GPU-hour, 10 per kWh) would refuse.
    report, code = run({"wall_idle_w": 50, "wall_load_w": 450, "electricity": 31, "price": 150, "occupancy": 50,
                        "fee": 0, "currency": "JPY"}, facts=None, source="flags", platforms=["vast"])
    assert code == 0 and report["currency"] == "JPY"
    expected, _ = net0(p=150, u=0.5, fee=0, idle=50, load=450, e=31)
    assert platform(report, "vast")["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(expected, abs=0.01)
    # The bound scales: 100 x the factor is the largest price accepted, in yen and behind the yen sign.
    for label in ("JPY", "¥"):
        ok, _ = _cli([*BASE, "--currency", label, "--price", f"{100 * jpy:g}", "--electricity", "31"])
        assert ok == 0
        code, output = _cli([*BASE, "--currency", label, "--price", f"{100 * jpy + 1:g}", "--electricity", "31"])
        assert code == 2 and f"at most {100 * jpy:g} {label}" in output
    # Dollar-sized currencies keep the dollar bounds.
    assert _scale("EUR") == _scale("GBP") == 1.0
    code, output = _cli([*BASE, "--currency", "EUR", "--price", "150"])
    assert code == 2 and "at most 100 EUR" in output


def test_a_currency_not_in_the_table_is_unbounded_above_and_says_so() -> None:
    report, code = run({"wall_idle_w": 50, "wall_load_w": 450, "electricity": 2500, "price": 90000, "occupancy": 50,
                        "fee": 0, "currency": "VND"}, facts=None, source="flags", platforms=["vast"])
    assert code == 0
    assert any("VND is not in hostcheck's table of currencies" in note for note in report["notes"])
    expected, _ = net0(p=90000, u=0.5, fee=0, idle=50, load=450, e=2500)
    assert platform(report, "vast")["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(expected, abs=0.5)
    code, output = _cli([*BASE, "--currency", "VND", "--price", "-5"])
    assert code == 2 and "--price" in output


# ------------------------------------------------------------------ bad input: exit 2, the field named


BASE = ["earnings", "--wall-idle-w", "50", "--wall-load-w", "450", "--electricity", "0.30", "--price", "0.25",
        "--occupancy", "50"]


def _cli(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    from typer.testing import CliRunner

    from hostcheck.cli import app

    result = CliRunner().invoke(app, args, env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.output


def _replace(option: str, value: str) -> list[str]:
    args = list(BASE)
    if option in args:
        args[args.index(option) + 1] = value
        return args
    return [*args, option, value]


@pytest.mark.parametrize(("option", "value", "named"), [
    ("--price", "-0.2", "--price"),
    ("--price", "0", "--price"),
    ("--price", "nan", "--price"),
    ("--price", "2500", "--price"),
    ("--electricity", "-1", "--electricity"),
    ("--electricity", "inf", "--electricity"),
    ("--electricity", "07-23=0.32", "--electricity"),
    ("--electricity", "07-23=0.32,22-07=0.18", "--electricity"),
    ("--electricity", "07-25=0.3,1-7=0.2", "--electricity"),
    ("--electricity", "cheap", "--electricity"),
    ("--fee", "101", "--fee"),
    ("--fee", "-5", "--fee"),
    ("--occupancy", "-1", "--occupancy"),
    ("--occupancy", "100.5", "--occupancy"),
    ("--heating-months", "13", "--heating-months"),
    ("--heating-months", "0-3", "--heating-months"),
    ("--cooling-months", "jan", "--cooling-months"),
    ("--heating", "fireplace", "--heating"),
    ("--heat-share", "140", "--heat-share"),
    ("--cooling-cop", "0", "--cooling-cop"),
    ("--remaining-life-years", "0", "--remaining-life-years"),
    ("--wall-idle-w", "900", "--wall-idle-w"),
    ("--tax", "100", "--tax"),
    ("--platform", "nosuch", "--platform"),
    ("--platform-price", "vast:0.3", "--platform-price"),
    ("--min-bid", "-1", "--min-bid"),
])
def test_bad_input_exits_2_naming_the_field(option: str, value: str, named: str) -> None:
    code, output = _cli(_replace(option, value))
    assert code == 2, output
    assert f"error: {named}" in output


def test_gas_heating_needs_a_fuel_price_and_months_may_not_be_both() -> None:
    code, output = _cli([*BASE, "--heating", "gas"])
    assert code == 2 and "--fuel-price" in output
    code, output = _cli([*BASE, "--heating", "resistive", "--heating-months", "10-4", "--cooling-months", "4-8"])
    assert code == 2 and "--cooling-months" in output and "[4]" in output


@pytest.mark.parametrize(("name", "text", "named"), [
    ("earnings.toml", "price: 0.3\n", "not valid TOML"),
    ("earnings.toml", "prise = 0.3\n", "prise: unknown key"),
    ("earnings.toml", 'occupancy = "half"\n', "occupancy: must be a number"),
    ("earnings.yaml", "- 1\n- 2\n", "must be a table of keys"),
    ("earnings.yaml", "price: [\n", "not valid YAML"),
    ("earnings.toml", "[platform_price]\nvast = -1\n", "platform_price.vast"),
])
def test_a_config_file_that_is_not_what_it_claims_exits_2(tmp_path: Path, name: str, text: str, named: str) -> None:
    (tmp_path / "hostcheck").mkdir()
    (tmp_path / "hostcheck" / name).write_text(text)
    code, output = _cli(BASE, env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert code == 2 and named in output and name in output


_DIGITS = "9" * 5000  # past Python's 4300-digit limit for converting a string to an integer


@pytest.mark.parametrize(("name", "text", "named"), [
    ("earnings.toml", f"electricity = 0.3\nprice = {_DIGITS}\n", "line 2: price: the number has more digits"),
    ("earnings.toml", f"price = {'9' * 400}\n", "line 1: price: the number 999"),
    ("earnings.toml", f"price = {'[' * 3000}{']' * 3000}\n", "not valid TOML: nested too deeply"),
    ("earnings.toml", "occupancy = 50\n\n[platform_price]\nvast = true\n", "line 4: platform_price.vast: must be a number"),
    ("earnings.yaml", f"electricity: 0.3\nprice: {_DIGITS}\n", "line 2: price: the integer"),
    ("earnings.yaml", "price: 0.2\nprice: 0.3\n", "line 2: duplicate key 'price'"),
    ("earnings.yaml", "occupancy: 50\nprice: [1, 2\n  : :\n", "line 3 column"),
    ("earnings.yaml", "occupancy: 50\nprice: 2026-02-30\n", "line 2: price: '2026-02-30' is not a real date"),
    ("earnings.yaml", "occupancy: 50\ncolour: red\n", "line 2: colour: unknown key"),
    ("earnings.yaml", "occupancy: 50\nplatform_price:\n  vast: cheap\n", "line 3: platform_price.vast: must be a number"),
])
def test_every_config_parse_failure_names_file_line_and_field(tmp_path: Path, name: str, text: str,
                                                              named: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, output = _cli([*BASE, "--config", str(path)])
    assert code == 2 and f"{path}: {named}" in output.replace("\n", " "), output
    # The audit reads the same file the same way (--earnings-config): exit 2, never "internal error".
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / "dedicated-4090.json"), "--earnings-config", str(path))
    assert proc.returncode == 2 and f"{path}: {named}" in proc.stderr and "internal error" not in proc.stderr


def test_the_real_process_exits_2_without_a_traceback() -> None:
    proc = hostcheck(*_replace("--occupancy", "250"), env={"XDG_CONFIG_HOME": "/nonexistent"})
    assert proc.returncode == 2
    assert "--occupancy" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------ the data files


def test_every_platform_file_cites_dated_sources_and_ranges_what_is_not_published() -> None:
    from hostcheck.earnings.data import load_all_platforms, load_constants

    docs = load_all_platforms()
    assert {d.platform for d in docs} >= {"vast", "salad", "ionet", "runpod", "tensordock", "quickpod", "darkbloom"}
    for doc in docs:
        assert doc.sources and all(s.url.startswith("https://") and s.checked for s in doc.sources.values())
        # Every payout caveat cites a source of its own (a key of the file's sources).
        assert all(c.source in doc.sources for c in doc.payout.caveats)
        if doc.fee.status != "published":
            low, high = doc.fee.bounds
            assert low < high and doc.fee.why
    constants = load_constants()
    assert constants.number("heat_pump_spf") == 2.80
    assert constants.number("boiler_efficiency_pct") == 84
    assert constants.constants["cooling_cop"].inference


@pytest.mark.parametrize(("change", "named"), [
    (("  set_by: host\n", "  set_by: host\n  colour: red\n"), "pricing.colour: unknown key"),
    (("range_pct: [0, 30]", "range_pct: [0, 130]"), "fee.range_pct"),
    (("amount: 20", "amount: true"), "payout.minimum.amount: must be a number"),
    (("  source: vast-payment\n", "  source: nowhere\n"), "'nowhere' is not a key of 'sources'"),
    (("status: not-published", "status: secret"), "fee.status"),
    (("platform: vast", "platform: other"), "must match the file name"),
    (("  rate: before-fee\n", "  rate: net-of-fee\n"), "pricing: a rate shown net of the fee is one the platform sets"),
    (("  rate: before-fee\n", "  rate: gross\n"), "pricing.rate"),
    (("      source: vast-taxes\n", "      source: nowhere\n"), "payout.caveats[0].source 'nowhere' is not a key"),
    (("      source: vast-taxes\n", ""), "payout.caveats[0].source: missing required key"),
])
def test_a_bad_platform_file_names_file_and_field(change: tuple[str, str], named: str) -> None:
    from hostcheck.earnings.data import parse_platform
    from hostcheck.errors import EconomicsDataError

    text = (REPO / "policies" / "economics" / "vast.yaml").read_text()
    assert change[0] in text
    path = "policies/economics/vast.yaml"
    with pytest.raises(EconomicsDataError) as err:
        parse_platform(text.replace(change[0], change[1], 1), path)
    assert path in str(err.value) and named in str(err.value)


# ------------------------------------------------------------------ the docs and --help examples


def _doc_examples() -> list[tuple[str, list[str]]]:
    """docs/earnings.md's output examples (the marker format every doc example uses)."""
    text = (REPO / "docs" / "earnings.md").read_text()
    examples = []
    for block in text.split("<!-- example: ")[1:]:
        command, body = block.split(" -->\n", 1)
        lines = body.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
        assert lines[0] == f"$ {command}"
        examples.append((command, lines[1:]))
    return examples


@pytest.mark.parametrize(("command", "shown"), _doc_examples(), ids=lambda v: v[:60] if isinstance(v, str) else "")
def test_the_doc_examples_are_what_the_command_prints(command: str, shown: list[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import shlex

    monkeypatch.chdir(REPO)
    code, output = _cli(shlex.split(command)[1:], env={"COLUMNS": "80"})
    printed = output.splitlines()
    assert printed == shown, "docs/earnings.md shows other output than the command prints"
    assert code == (4 if printed[2].startswith("Do not host") else 0)


def test_help_shows_the_worked_example_and_its_arithmetic_holds() -> None:
    code, output = _cli(["earnings", "--help"])
    assert code == 0
    assert "hostcheck earnings --wall-idle-w 50 --wall-load-w 450 --electricity 0.30" in output
    assert "tests/snapshots/reference-laptop.json" in output and "rtx3090" in output
    # The help's arithmetic, from the formula: R − K·E with K = H·(U·450 + (1−U)·50)/1000.
    k = H * (0.5 * 450 + 0.5 * 50) / 1000
    assert f"{k:g} kWh" in output and f"net 91.25 - {k * 0.30:.2f} = {0.25 * 0.5 * H - k * 0.30:.2f}" in output
    vast = platform(flags_only(), "vast")
    assert vast["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(0.25 * 0.5 * H - k * 0.30, abs=0.01)


def test_unknown_idle_draw_is_shown_as_a_range_from_zero_to_the_load() -> None:
    report, code = run({"wall_load_w": 300, "electricity": 0.30, "price": 0.25, "occupancy": 40, "fee": 0},
                       facts=None, source="flags", platforms=["vast"])
    assert code == 0 and report["power"]["wall_idle"]["provenance"] == "unknown"
    worst, _ = net0(p=0.25, u=0.4, fee=0, idle=300, load=300, e=0.30)
    best, _ = net0(p=0.25, u=0.4, fee=0, idle=0, load=300, e=0.30)
    assert platform(report, "vast")["seasons"]["year"]["net_per_month"] == pytest.approx(
        {"worst": worst, "best": best}, abs=0.01)
    assert any("idle draw unknown" in note for note in report["notes"])


def test_a_yaml_config_file_is_read_and_flags_win(tmp_path: Path) -> None:
    (tmp_path / "hostcheck").mkdir()
    (tmp_path / "hostcheck" / "earnings.yaml").write_text(
        "electricity: 07-23=0.32,23-07=0.18\nprice: 0.30\noccupancy: 50\nwall_idle_w: 50\nwall_load_w: 450\n"
        "fee: 0\nplatform_price: {vast: 0.25}\n")
    code, output = _cli(["earnings", "--occupancy", "40", "--platform", "vast", "--format", "json"],
                        env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert code == 0, output
    report = json.loads(output)
    vast = platform(report, "vast")
    assert vast["price_per_gpu_hour"] == 0.25 and vast["price_from"] == "--platform-price"
    mean = (16 * 0.32 + 8 * 0.18) / 24
    expected, _ = net0(p=0.25, u=0.4, fee=0, idle=50, load=450, e=mean)
    assert vast["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(expected, abs=0.01)
    assert report["inputs"]["config_file"].endswith("earnings.yaml")


def test_on_this_machine_without_readings_it_is_bounded_and_never_a_silent_zero() -> None:
    proc = run_cli("earnings", "--electricity", "0.3", "--price", "0.2", "--occupancy", "40", "--timeout", "5",
                   "--format", "json", env={"XDG_CONFIG_HOME": "/nonexistent"})
    assert proc.returncode in (0, 3, 4), proc.stderr
    report = json.loads(proc.stdout)
    if not report["power_known"]:  # no NVIDIA GPU here: unknown, and it asks for the wall reading
        assert report["power"]["wall_load"]["watts"] is None and "--wall-load-w" in report["headline"]
        assert all(p["seasons"] is None for p in report["platforms"])
    else:
        assert report["power"]["wall_load"]["watts"] > 0


def test_audit_without_a_price_gives_the_break_even_price() -> None:
    code, output = _cli(["audit", "--facts", str(SNAPSHOTS / "tensordock-4x4090-server.json"), "--electricity", "0.25",
                         "--occupancy", "60"], env={"XDG_CONFIG_HOME": "/nonexistent"})
    lines = [line for line in output.splitlines() if line.startswith("Earnings on ")]
    assert lines and all(": break-even " in line and "per GPU-hour at 60 % occupancy" in line for line in lines)
    # Feasible, owner risk LOW: the audit's own exit code, 0; the earnings lines change nothing.
    audit_code, _ = _cli(["audit", "--facts", str(SNAPSHOTS / "tensordock-4x4090-server.json")],
                         env={"XDG_CONFIG_HOME": "/nonexistent"})
    assert code == audit_code == 0
