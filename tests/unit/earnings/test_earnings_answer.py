"""`hostcheck earnings` says one true thing per figure: no platform singled out that cannot take
the machine, no estimate beside a figure the owner gave, "not published" said once, occupancy
read as a percentage, lines wrapped to the terminal, a bad output target refused before any work.

Expected values are written out from the rules here (the platforms' audit policies for what each
takes, the formula of tests/unit/earnings/test_earnings.py for money), never copied from the program's output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hostcheck.earnings.estimate import run
from hostcheck.facts import load_snapshot
from hostcheck.policy import load_shipped
from hostcheck.render.earnings import render_earnings
from tests.helpers import SNAPSHOTS, run_cli

H = 730.0
FLAGS: dict[str, Any] = {"wall_idle_w": 50, "wall_load_w": 450, "electricity": 0.30, "price": 0.25, "occupancy": 50}
CLI_FLAGS = ["--wall-idle-w", "50", "--wall-load-w", "450", "--electricity", "0.30", "--price", "0.25"]


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


def takes(policy_ids: list[str]) -> set[str]:
    """What a platform takes, from its audit policies' requirements (the rule, written out):
    PLAT-1010 closed; SYS-1060 Apple Silicon; an OS list of Windows only: NVIDIA on Windows;
    else NVIDIA on Linux."""
    out = set()
    for pid in policy_ids:
        req = {r.check: r.threshold for r in load_shipped(pid).requirements}
        if "PLAT-1010" in req:
            out.add("closed to new hosts")
        elif "SYS-1060" in req:
            out.add("Apple Silicon")
        elif req.get("SYS-1050") and all(str(t).startswith("windows") for t in req["SYS-1050"]):
            out.add("NVIDIA on Windows")
        else:
            out.add("NVIDIA on Linux")
    return out


def net_per_month(fee: float) -> float:
    k = H * (0.5 * 450 + 0.5 * 50) / 1000
    return 1 * 0.25 * 0.5 * H * (1 - fee) - k * 0.30


def test_without_facts_platforms_are_grouped_and_none_is_singled_out() -> None:
    report, _ = run(FLAGS, facts=None, source="flags", platforms=[])
    by_name = {p["platform"]: p for p in report["platforms"]}
    assert set(by_name["darkbloom"]["accepts"]) == takes(["darkbloom"]) == {"Apple Silicon"}
    assert set(by_name["runpod"]["accepts"]) == {"closed to new hosts"}
    assert set(by_name["salad"]["accepts"]) == takes(["salad", "salad-linux"]) == {"NVIDIA on Windows", "NVIDIA on Linux"}
    headline = report["headline"]
    assert headline.startswith("Not audited (no facts)")
    # Darkbloom is quoted only for Apple Silicon, never as the money figure for an NVIDIA box.
    nvidia = headline.split("NVIDIA on Linux: ", 1)[1].split(";", 1)[0]
    assert "Darkbloom" not in nvidia and "Apple Silicon: Darkbloom" in headline
    # The NVIDIA-on-Linux figure is the best net among those platforms, at the worst-case fee
    # range's best end: io.net publishes 0-2.25 %, Salad's rate is net (0 %): both 36.50 at best.
    best = max(net_per_month(0.0), net_per_month(0.0225))
    assert f"{best:,.2f} USD" in nvidia
    # A closed platform gets no table, one line instead.
    runpod = by_name["runpod"]
    assert runpod["priced"] is False and runpod["seasons"] is None and runpod["sensitivity"] is None
    text = render_earnings(report, width=80, details=True)
    section = text.split("\nRunpod community cloud\n", 1)[1].split("\n\n", 1)[0]
    assert section.startswith("Closed to new hosts: not priced") and "net" not in section
    assert "Runpod" not in headline


def test_a_closed_platform_named_by_the_owner_is_priced() -> None:
    report, _ = run({**FLAGS, "fee": 0}, facts=None, source="flags", platforms=["runpod"])
    runpod = report["platforms"][0]
    assert runpod["priced"] is True
    assert runpod["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(net_per_month(0.0), abs=0.01)


def test_with_facts_only_platforms_the_audit_does_not_rule_out() -> None:
    facts = load_snapshot(SNAPSHOTS / "rtx3090-vram-in-use.json")
    report, _ = run(FLAGS, facts=facts, source="x", platforms=[])
    names = {p["platform"] for p in report["platforms"]}
    # A Linux NVIDIA box: Darkbloom (Apple Silicon only) and Runpod (closed) cannot apply.
    assert "darkbloom" not in names and "runpod" not in names
    assert "Darkbloom" not in report["headline"]


def test_given_wall_readings_are_not_shown_beside_estimates_of_their_parts() -> None:
    report, _ = run(FLAGS, facts=None, source="flags", platforms=["vast"])
    assert set(report["power"]) == {"wall_idle", "wall_load"}
    assert all(report["power"][k]["provenance"] == "given" for k in report["power"])
    text = render_earnings(report, width=80, details=True)
    assert "rest of the system" not in text and "estimated" not in text.split("\nPower\n")[1].split("\n\n")[0]
    # One reading given: the other is estimated from the parts, which are then shown.
    facts = load_snapshot(SNAPSHOTS / "rtx3090-vram-in-use.json")
    one, _ = run({**FLAGS, "wall_idle_w": None}, facts=facts, source="x", platforms=["vast"])
    assert "rest_of_system" in one["power"]


def test_not_published_is_said_once_per_payout() -> None:
    report, _ = run(FLAGS, facts=None, source="flags", platforms=["quickpod"])
    payout = report["platforms"][0]["payout"]
    unpublished = [k for k in ("minimum", "form", "currency", "schedule", "expiry") if payout[k] == "not published"]
    assert unpublished  # Quickpod publishes none of them
    line = next(line for line in render_earnings(report, width=160, details=True).splitlines() if line.startswith("payout:"))
    assert line.count("not published") == 1 and line.endswith(f"not published: {', '.join(unpublished)}")


@pytest.mark.parametrize("given", ["40", "40%", "40 %"])
def test_occupancy_40_and_40_percent_are_the_same(given: str) -> None:
    proc = run_cli("earnings", *CLI_FLAGS, "--occupancy", given, "--platform", "vast", "--fee", "0",
                   "--format", "json", env={"XDG_CONFIG_HOME": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    import json

    report = json.loads(proc.stdout)
    assert report["inputs"]["occupancy_pct"] == 40
    k = H * (0.4 * 450 + 0.6 * 50) / 1000
    assert report["platforms"][0]["seasons"]["year"]["net_per_month"]["worst"] == pytest.approx(0.25 * 0.4 * H - k * 0.30, abs=0.01)
    assert "did you mean" not in proc.stderr


def test_occupancy_below_one_warns() -> None:
    proc = run_cli("earnings", *CLI_FLAGS, "--occupancy", "0.4", "--platform", "vast", env={"XDG_CONFIG_HOME": "/nonexistent"})
    assert proc.returncode == 0, proc.stderr
    assert "--occupancy 0.4 is 0.4 % of the hours rented: did you mean 40 %?" in proc.stderr
    assert "occupancy 0.4 %" in proc.stdout  # taken as given: 0.4 %
    bad = run_cli("earnings", *CLI_FLAGS, "--occupancy", "forty", env={"XDG_CONFIG_HOME": "/nonexistent"})
    assert bad.returncode == 2 and bad.stdout == "" and "--occupancy" in bad.stderr


@pytest.mark.parametrize("columns", [40, 80, 120])
def test_every_line_fits_the_terminal(columns: int) -> None:
    proc = run_cli("earnings", *CLI_FLAGS, "--occupancy", "50", env={"XDG_CONFIG_HOME": "/nonexistent",
                                                                       "COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    too_wide = [line for line in lines if len(line) > columns and " " in line.strip()]
    assert not too_wide, too_wide  # (a URL longer than the line is the one word left whole)
    assert not [line for line in lines if line != line.rstrip()]
    # The headline is wrapped like the rest: no line of it is longer than the terminal.
    assert len(lines[2]) <= columns


@pytest.mark.parametrize("command", [["earnings", *CLI_FLAGS, "--occupancy", "50"],
                                     ["offer", "--facts", str(SNAPSHOTS / "reference-laptop.json")]])
def test_a_bad_output_target_is_refused_before_anything_is_computed(command: list[str], tmp_path: Path) -> None:
    proc = run_cli(*command, "-o", str(tmp_path), env={"XDG_CONFIG_HOME": "/nonexistent"})
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"--output {tmp_path}: {tmp_path} is a directory" in proc.stderr
