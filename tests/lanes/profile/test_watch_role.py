"""The hostcheck_watch role on a real systemd host: check mode changes nothing, the service runs
as the unprivileged journal-group account and is started once (no restart on the first run), a
rerun changes nothing; under the unit's own ProtectKernelTunables=yes the recorder keys the
running boot as the container's journal does (not by the host kernel's id it reads); a clean reboot and an
unclean stop (``systemctl reboot -ff``: reboot(2) at once, no service stopped, no journal
flushed, as a power cut or hard reset looks from inside) are told apart in the report; rollback
removes the service, the account and the recording.

hostcheck is installed from this tree into the host (wheels built here, installed offline).
The host's journal is made persistent first, so the boot list has the earlier boots.
Cost: one nspawn host, ~10 s install, four plays of 20-35 s, two reboots: ~230 s cold.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lab.nspawn import LabHost
from tests.lab.util import wait_for
from tests.lanes.profile import play

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.lab_cost(230)]

DB = "/var/lib/hostcheck-watch/watch.db"
VARS = {
    "hostcheck_watch_enabled": True,
    "hostcheck_watch_command": f"{VENV}/bin/hostcheck",
    "hostcheck_watch_interval_s": 1,
    "hostcheck_watch_allow_more_traffic": True,  # one sample a second: far above the 4 KiB a minute
    # Targets inside the host itself: the lab has no internet, and these tests need none.
    "hostcheck_watch_targets": ["tcp:127.0.0.1:22", "tcp:[::1]:22", "dns:127.0.0.1"],
    # A probe server that is not there (a closed port on the host itself): the recorder must
    # start with the token file the role wrote, and record the failed check, not stop.
    "hostcheck_watch_probe_url": "https://127.0.0.1:9",
    "hostcheck_watch_probe_token": "lab-probe-token-0123456789abcdef",
    "hostcheck_watch_probe_ports": ["22/tcp"],
    "hostcheck_watch_probe_every": "5m",
}
TOKEN_FILE = "/var/lib/hostcheck-watch/probe-token"


@dataclass
class Watched:
    host: LabHost
    plays: dict[str, play.PlayResult] = field(default_factory=dict)
    probes: dict[str, Any] = field(default_factory=dict)


def samples(host: LabHost) -> int:
    out = host.sudo(f"{VENV}/bin/python -c \"import sqlite3; print(sqlite3.connect('file:{DB}?mode=ro', uri=True)"
                    f".execute('select count(*) from samples').fetchone()[0])\"")
    return int(out.stdout.strip() or 0) if out.rc == 0 else 0


def query(host: LabHost, sql: str) -> list[list[Any]]:
    """Rows of a read-only query on the recorder's database."""
    script = f"import json, sqlite3; print(json.dumps(sqlite3.connect('file:{DB}?mode=ro', uri=True).execute({sql!r}).fetchall()))"
    out = host.sudo(f"{VENV}/bin/python -c {json.dumps(script)}")
    return json.loads(out.stdout) if out.rc == 0 and out.stdout.strip() else []


@pytest.fixture(scope="module")
def watched(lab, tmp_path_factory) -> Iterator[Watched]:
    host = lab.start_hosts(1)[0]
    life = Watched(host)
    tmp = tmp_path_factory.mktemp("watch-role")
    playbook = play.write_playbook(tmp, "watch.yml", ["hostcheck_watch"], vars_=VARS)
    rollback = tmp / "watch-rollback.yml"
    rollback.write_text(json.dumps([{
        "name": "Roll back hostcheck_watch", "hosts": "all", "become": True,
        "tasks": [{"name": "Roll back", "ansible.builtin.include_role": {"name": "hostcheck_watch", "tasks_from": "rollback.yml"}}],
    }]))  # fmt: skip
    try:
        install_hostcheck(host, build_wheelhouse(tmp / "wheels"))
        host.sudo("mkdir -p /var/log/journal && systemd-tmpfiles --create --prefix /var/log/journal && "
                  "journalctl --flush", check=True)
        life.probes["users_before"] = host.sudo("getent passwd hostcheck-watch").rc
        life.plays["check"] = play.run_playbook(host.inventory_path, playbook, check=True)
        life.probes["after_check"] = host.sudo("getent passwd hostcheck-watch; test -e /etc/systemd/system/hostcheck-watch.service").rc
        life.plays["converge"] = play.run_playbook(host.inventory_path, playbook)
        life.plays["rerun"] = play.run_playbook(host.inventory_path, playbook)
        life.probes["unit"] = host.sudo("systemctl show -p User,SupplementaryGroups,ActiveState,StartLimitBurst,"
                                        "StartLimitIntervalUSec hostcheck-watch").stdout
        life.probes["groups"] = host.sudo("id -nG hostcheck-watch").stdout.split()
        life.probes["token_file"] = host.sudo(f"stat -c '%a %U' {TOKEN_FILE}").stdout.strip()
        life.probes["service_log"] = host.sudo("journalctl -u hostcheck-watch -n 20 --no-pager").stdout
        wait_for("samples before the clean reboot", lambda: samples(host) >= 3, 60)
        life.probes["runs_before_reboot"] = query(host, "select kind, count(*) from events where kind like 'recorder_%' group by kind")
        life.probes["boot_ids"] = {
            "recorder": query(host, "select boot_id from samples order by rowid desc limit 1"),
            "current_boot": query(host, "select boot_id from boots where last_t is null"),
            # The journal's own view, read by root outside any sandbox.
            "journal": json.loads(host.sudo("journalctl --list-boots -o json --no-pager").stdout or "[]"),
            "proc": host.sudo("cat /proc/sys/kernel/random/boot_id").stdout.strip().replace("-", ""),
            # What a unit under the role's own ProtectKernelTunables=yes reads from /proc.
            "sandboxed": host.sudo("systemd-run --wait --pipe -q -p ProtectKernelTunables=yes -p User=hostcheck-watch "
                                   "cat /proc/sys/kernel/random/boot_id").stdout.strip().replace("-", ""),
        }
        host.reboot()
        wait_for("samples after the clean reboot", lambda: samples(host) >= 3 + 3, 60)
        # Unclean: reboot(2) straight away, nothing stopped, nothing flushed.
        before = host.boots()
        host.close_ssh_masters()
        host.sudo("systemctl reboot -ff", timeout=15)
        wait_for("the host to come back", lambda: host.boots() > before, 60)
        host.wait_ssh(60)
        host.wait_booted(60)
        wait_for("samples after the unclean stop", lambda: samples(host) >= 9, 60)
        time.sleep(2)
        report = host.sudo(f"{VENV}/bin/hostcheck watch report --db {DB} --format json", timeout=60)
        life.probes["report"] = json.loads(report.stdout) if report.rc == 0 else report.stdout + report.stderr
        life.plays["rollback"] = play.run_playbook(host.inventory_path, rollback)
        life.probes["after_rollback"] = host.sudo(
            "getent passwd hostcheck-watch; getent group hostcheck-watch; test -e /etc/systemd/system/hostcheck-watch.service;"
            f" test -e {DB}; test -e {TOKEN_FILE}; test -e /var/lib/hostcheck-watch; systemctl is-active hostcheck-watch"
        ).stdout  # fmt: skip
        life.probes["leftovers"] = host.sudo(
            "getent passwd hostcheck-watch || getent group hostcheck-watch || ls /etc/systemd/system/hostcheck-watch.service "
            "|| ls -d /var/lib/hostcheck-watch").rc
        for name, result in life.plays.items():
            print(f"{name}: rc={result.rc} {result.seconds:.1f}s")
        yield life
    finally:
        lab.stop_hosts([host])


def test_check_mode_changes_nothing(watched: Watched) -> None:
    assert watched.plays["check"].rc == 0, watched.plays["check"].describe()
    assert watched.probes["users_before"] != 0 and watched.probes["after_check"] != 0


def test_converge_then_rerun_changes_nothing(watched: Watched) -> None:
    assert watched.plays["converge"].rc == 0, watched.plays["converge"].describe()
    rerun = watched.plays["rerun"]
    assert rerun.rc == 0 and rerun.stats(watched.host.name)["changed"] == 0, rerun.describe()


def test_service_runs_unprivileged_in_the_journal_group(watched: Watched) -> None:
    unit = watched.probes["unit"]
    assert "User=hostcheck-watch" in unit and "SupplementaryGroups=systemd-journal" in unit
    assert "ActiveState=active" in unit  # the quoted ExecStart started it
    assert "StartLimitBurst=5" in unit and "StartLimitIntervalUSec=10min" in unit
    assert "systemd-journal" in watched.probes["groups"] and "sudo" not in watched.probes["groups"]
    assert watched.probes["token_file"] == "600 hostcheck-watch"


def test_a_probe_server_that_does_not_answer_is_recorded_not_fatal(watched: Watched) -> None:
    report = watched.probes["report"]
    assert isinstance(report, dict), report
    checks = [e for e in report["events"] if e["kind"] == "inbound"]
    assert checks and all(e["detail"]["probed"] is False and e["detail"]["reason"] for e in checks), checks


def test_role_starts_the_recorder_once(watched: Watched) -> None:
    # Converge and rerun: one start, no stop (a restart right after the first start would add
    # a recorder_stop and a second recorder_start).
    assert sorted(map(tuple, watched.probes["runs_before_reboot"])) == [("recorder_start", 1)], watched.probes


def test_boot_id_is_the_journals_under_the_units_sandbox(watched: Watched) -> None:
    ids = watched.probes["boot_ids"]
    newest = max(ids["journal"], key=lambda b: b["last_entry"])["boot_id"] if ids["journal"] else None
    # nspawn gives the container a boot id of its own; the role's ProtectKernelTunables=yes
    # hides it from the unit, which reads the host kernel's (what the recorder must not use).
    assert ids["proc"] == newest and ids["sandboxed"] != newest, ids
    assert ids["recorder"] == [[newest]] and ids["current_boot"] == [[newest]], ids


def test_clean_reboot_and_unclean_stop_are_told_apart(watched: Watched) -> None:
    report = watched.probes["report"]
    assert isinstance(report, dict), report
    causes = [o["cause"] for o in report["outages"]]
    assert causes == ["reboot", "power"], report["outages"]
    # The container's journal keeps each boot under the id the recorder keys it by, so the
    # journal's own records tell the two apart: a shutdown record, and none.
    assert "shutdown record in the journal" in report["outages"][0]["note"], report["outages"]
    assert "no shutdown record" in report["outages"][1]["note"], report["outages"]


def test_rollback_removes_service_account_and_data(watched: Watched) -> None:
    assert watched.plays["rollback"].rc == 0, watched.plays["rollback"].describe()
    assert watched.probes["leftovers"] != 0, watched.probes["after_rollback"]
