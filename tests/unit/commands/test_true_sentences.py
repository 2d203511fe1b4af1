"""Sentences that were false for the machine they described, each held to what is true of it:
driver advice on a machine with no NVIDIA GPU, steps counted but never listed, a sudo hint that
fails after the README's install, owner-risk sentences that claim more than was found, Docker
said absent where only its daemon is, a platform count above a table of another size, an empty
table, a cause that fills the screen."""

from __future__ import annotations

import json
from typing import Any

from hostcheck.checks import load_registry
from hostcheck.models import UnknownGroup
from hostcheck.render.table import _short_cause
from tests.helpers import SNAPSHOTS, run_cli

ENV = {"COLUMNS": "80", "XDG_CONFIG_HOME": "/nonexistent"}
NO_NVIDIA = ("gpu-less-live", "macbook-pro-intel-monterey", "mac-mini-m2-sonoma", "no-nvidia-desktop")


def report(name: str, *args: str) -> dict[str, Any]:
    proc = run_cli("audit", "--facts", str(SNAPSHOTS / f"{name}.json"), "-f", "json", *args, env=ENV)
    assert proc.returncode in (0, 3, 4), proc.stderr
    return json.loads(proc.stdout)


def text(name: str, *args: str) -> str:
    return run_cli("audit", "--facts", str(SNAPSHOTS / f"{name}.json"), *args, env=ENV).stdout


def flat(value: str) -> str:
    return " ".join(value.split())


def test_no_driver_advice_where_there_is_no_nvidia_gpu() -> None:
    for name in NO_NVIDIA:
        answer = report(name)["answer"]
        said = flat(json.dumps(answer))
        assert "install the driver" not in said, name
        assert any(g["cause"].startswith("no NVIDIA GPU on this machine") and not g["then"]
                   for g in answer["unknowns"]), name
        # No step claims to clear a GPU check: no role or setting installs a GPU.
        assert not [s for s in answer["plan"] + answer["later"] if any(c.startswith("GPU-") for c in s["clears"])], name
    # A machine with an NVIDIA GPU keeps the driver's own advice where NVML is missing.
    assert "no NVIDIA GPU on this machine" not in flat(json.dumps(report("reference-laptop")["answer"]))


def test_steps_held_back_are_listed_and_claim_platforms_only_where_they_would() -> None:
    for name in ("gpu-less-live", "macbook-pro-intel-monterey"):
        answer = report(name)["answer"]
        assert answer["later"], name
        assert "would" not in answer["plan_note"] and "no platform accepts this machine even then" in answer["plan_note"]
        details = flat(text(name, "--details"))
        for step in answer["later"]:
            assert step["action"] in details, (name, step["action"])
        assert "step(s)" not in details
    dedicated = report("ubuntu-desktop-dedicated")["answer"]
    won = [p for step in dedicated["later"] for p in step["unlocks"]]
    assert won and f"would then make {', '.join(won)} accept" in dedicated["plan_note"]
    assert dedicated["plan_note"].startswith(f"{len(dedicated['later'])} more steps")


def test_the_root_hint_runs_where_the_readme_installs_hostcheck() -> None:
    """sudo's PATH lacks ~/.local/bin: the hint names the binary the shell finds."""
    answer = report("reference-laptop")["answer"]
    root = [g for g in answer["unknowns"] if g["cause"] == "reading them needs root"]
    assert root and root[0]["then"] == 'run `sudo "$(command -v hostcheck)" audit`'
    for snapshot in SNAPSHOTS.glob("*.json"):
        assert "`sudo hostcheck" not in text(snapshot.stem, "--details"), snapshot.stem


def test_owner_risk_says_what_was_found_and_only_that() -> None:
    dedicated = report("ubuntu-desktop-dedicated")
    own = {r["id"]: r for r in dedicated["owner_risk"]["findings"]}
    assert own["OWN-1010"]["status"] == "pass"  # no credentials were found ...
    assert "personal accounts and credentials" not in dedicated["owner_risk"]["statement"]  # ... so none are claimed
    # HIGH rests on the display manager alone: the headline says so.
    assert "display manager gdm3 installed" in dedicated["headline"]
    # Unknown owner risk: what could not be ruled out, never "not seen: No ...".
    unknown = report("macbook-pro-intel-monterey")["answer"]["owner_risk"]
    assert "could not rule out:" in unknown and "not seen: No" not in unknown


def test_no_docker_daemon_is_said_as_such() -> None:
    live = report("gpu-less-live")  # root, the docker client present, no daemon socket
    assert "containers can reach" not in live["headline"]
    said = flat(text("gpu-less-live", "--details"))
    assert "Docker is not installed" not in said and "no Docker daemon runs here" in said


def test_steps_name_the_ansible_profile_and_the_obstacle_names_its_platforms() -> None:
    live = report("gpu-less-live")
    assert live["answer"]["plan"][0]["action"].startswith("role firewall (")
    screen = text("gpu-less-live")
    assert "What to do, in order (roles of the Ansible host profile: docs/roles.md):" in screen
    assert "First obstacle (salad-linux, tensordock):" in live["headline"] and " of 3 platforms" not in live["headline"]


def test_counts_of_one_are_singular() -> None:
    registry = load_registry()
    sockets = next(meta for meta in registry.values() if meta.unit == "sockets")
    assert "found 1 socket" in sockets.line(1, 0) and "1 sockets" not in sockets.line(1, 0)
    assert "(>= 1 GPU)" in registry["GPU-1010"].line(0, 1) and "found 0 GPUs" in registry["GPU-1010"].line(0, 1)
    details = flat(text("dedicated-4090", "--details"))
    assert "found no personal data found" not in details and "(s)" not in details


def test_a_policy_that_cannot_apply_gets_no_empty_table() -> None:
    screen = text("macbook-pro-intel-monterey", "--policy", "vast")
    assert "verdict" not in screen and "Cannot apply" in screen


def test_a_long_cause_takes_two_lines_on_the_first_screen() -> None:
    evidence = "; ".join(f"hop {n} 100.64.0.{n} answered from the carrier's range" for n in range(12))
    group = UnknownGroup(cause=f"could not be determined: {evidence}", checks=["NET-1030", "NET-1040"], then="")
    lines = _short_cause(group, 80)
    assert len(lines) <= 2 and all(len(line) <= 80 for line in lines)
    assert "NET-1030" in " ".join(lines)


def test_earnings_on_a_machine_with_no_gpu_prices_nothing() -> None:
    proc = run_cli("earnings", "--facts", str(SNAPSHOTS / "gpu-less-live.json"), "--electricity", "0.3", "--price",
                   "0.2", "--occupancy", "50", "-f", "json", env=ENV)
    earned = json.loads(proc.stdout)
    assert earned["machine"]["gpus"] == 0 and earned["platforms"] == []
    assert "no working NVIDIA GPU" in earned["headline"]
    # Priced anyway with --gpus: Salad's verdict is that of the policy that applies (salad-linux).
    proc = run_cli("earnings", "--facts", str(SNAPSHOTS / "gpu-less-live.json"), "--electricity", "0.3", "--price",
                   "0.2", "--occupancy", "50", "--gpus", "1", "--wall-idle-w", "50", "--wall-load-w", "200",
                   "--platform", "salad", "-f", "json", env=ENV)
    salad = json.loads(proc.stdout)["platforms"][0]
    assert salad["audit_verdict"].startswith("salad-linux:"), salad["audit_verdict"]
