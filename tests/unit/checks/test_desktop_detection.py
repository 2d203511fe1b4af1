"""SYS-1120 ("a server install") decides "desktop" from what a desktop installs or runs: a
display manager, desktop session entries, a graphical session. Not from the default target:
systemd ships default.target linked to graphical.target, so a stock Debian or Ubuntu server
boots to it (shown on the real Debian 12 lab rootfs below)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.collectors.accounts import display_manager
from hostcheck.collectors.system import desktop_sessions
from hostcheck.facts import Unknown, load_snapshot
from hostcheck.judge import run_check
from tests.helpers import SNAPSHOTS, audit_json, policy_result
from tests.lab.rootfs import Rootfs

SERVER_INSTALL = load_registry()["SYS-1120"]


def judge(facts: dict[str, Any]) -> tuple[str, Any, str]:
    outcome = run_check(SERVER_INSTALL, facts, None)
    return str(outcome.status), outcome.measured, outcome.detail


def server_facts(**changes: Any) -> dict[str, Any]:
    facts = copy.deepcopy(load_snapshot(SNAPSHOTS / "dedicated-4090.json"))
    for path, value in changes.items():
        section, key = path.split("__")
        facts[section][key] = value
    return facts


@pytest.mark.nspawn
def test_stock_debian_12_boots_to_graphical_target_and_is_a_server(lab_rootfs: Rootfs) -> None:
    """The lab's debootstrap rootfs is a stock Debian 12 with no desktop installed."""
    root = str(lab_rootfs.base)
    assert os.readlink(lab_rootfs.base / "lib/systemd/system/default.target") == "graphical.target"
    assert not (lab_rootfs.base / "etc/systemd/system/default.target").exists()  # nobody changed it
    sessions = desktop_sessions("Linux", root)
    manager = display_manager([], root)
    assert sessions == [] and manager is None
    facts = server_facts(system__default_target="graphical.target", system__desktop_sessions=sessions,
                         isolation__display_manager=manager, isolation__graphical_session=False)
    assert judge(facts) == ("pass", "server", "no display manager, no desktop session installed or running; "
                                               "boots to graphical.target")


def test_desktop_evidence_comes_from_the_installed_tree(tmp_path: Path) -> None:
    (tmp_path / "usr/share/xsessions").mkdir(parents=True)
    (tmp_path / "usr/share/wayland-sessions").mkdir(parents=True)
    (tmp_path / "usr/share/xsessions/plasmax11.desktop").write_text("[Desktop Entry]\n")
    (tmp_path / "usr/share/wayland-sessions/plasma.desktop").write_text("[Desktop Entry]\n")
    (tmp_path / "usr/share/wayland-sessions/README").write_text("not a session\n")
    assert desktop_sessions("Linux", str(tmp_path)) == ["plasma", "plasmax11"]
    (tmp_path / "etc/X11").mkdir(parents=True)
    (tmp_path / "etc/X11/default-display-manager").write_text("/usr/sbin/sddm\n")
    assert display_manager([], str(tmp_path)) == "sddm"
    (tmp_path / "etc/systemd/system").mkdir(parents=True)
    (tmp_path / "etc/systemd/system/display-manager.service").symlink_to("/lib/systemd/system/gdm3.service")
    assert display_manager([], str(tmp_path)) == "gdm"  # the enabled unit wins over the recorded choice
    on_mac = desktop_sessions("Darwin", str(tmp_path))  # macOS has its desktop built in: not a list
    assert isinstance(on_mac, Unknown) and "none to list here" in on_mac.reason


CASES = [
    ("graphical.target alone is a server",
     {"system__default_target": "graphical.target", "system__desktop_sessions": []}, "pass", "server"),
    ("a display manager is a desktop",
     {"system__default_target": "multi-user.target", "isolation__display_manager": "sddm"}, "fail", "desktop"),
    ("desktop sessions installed are a desktop",
     {"system__desktop_sessions": ["gnome", "ubuntu"]}, "fail", "desktop"),
    ("a running graphical session is a desktop", {"isolation__graphical_session": True}, "fail", "desktop"),
]


@pytest.mark.parametrize(("case", "changes", "status", "measured"), CASES, ids=[c[0] for c in CASES])
def test_desktop_or_server(case: str, changes: dict[str, Any], status: str, measured: str) -> None:
    got = judge(server_facts(**changes))
    assert got[:2] == (status, measured), got


def test_a_snapshot_without_the_fact_is_unknown_with_the_reason() -> None:
    facts = server_facts()
    del facts["system"]["desktop_sessions"]
    status, measured, detail = judge(facts)
    assert (status, measured) == ("unknown", None)
    assert detail == "system.desktop_sessions: system has no 'desktop_sessions' (not collected)"
    facts["isolation"]["display_manager"] = "gdm3"  # other evidence still decides
    assert judge(facts)[:2] == ("fail", "desktop")


def _snapshot_kind(path: Path) -> str:
    data = json.loads(path.read_text())
    return "desktop" if data["isolation"].get("display_manager") else "server"


@pytest.mark.parametrize("name", ["reference-laptop", "ubuntu-desktop-dedicated", "no-nvidia-desktop",
                                  "laptop-3070-on-battery"])
def test_desktop_snapshots_stay_desktops(name: str) -> None:
    assert _snapshot_kind(SNAPSHOTS / f"{name}.json") == "desktop"
    _, report = audit_json("--facts", str(SNAPSHOTS / f"{name}.json"), "-p", "vast")
    finding = next(f for f in policy_result(report, "vast")["findings"] if f["id"] == "SYS-1120")
    assert (finding["status"], finding["measured"]) == ("warn", "desktop")
    assert "display manager" in finding["detail"]


def test_a_mac_at_its_login_window_has_no_graphical_session(tmp_path: Path) -> None:
    """macOS gives /dev/console to the logged-in user, to root at the login window."""
    from hostcheck.collectors.accounts import macos_console_session

    console = tmp_path / "console"
    console.write_text("")
    os.chown(console, 0, 0)
    assert macos_console_session(str(console)) is False
    os.chown(console, 501, 20)  # the first macOS user account
    assert macos_console_session(str(console)) is True
    assert not macos_console_session(str(tmp_path / "absent"))  # Unknown, never a "no"
    assert "cannot stat" in macos_console_session(str(tmp_path / "absent")).reason  # type: ignore[union-attr]
