"""playbooks/audit.yml: the fleet audit. Two lab hosts with hostcheck installed and one host
that does not answer; the play runs `hostcheck audit --format json` on every host in parallel,
saves each report on this machine, and writes index.json where the dead host is recorded as
unreachable instead of disappearing. `hostcheck fleet` then reads the folder as it would after
a real fleet audit."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lanes.profile import play

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root]


def test_audit_playbook_collects_reports_and_records_the_unreachable(lab_hosts, tmp_path) -> None:
    hosts = lab_hosts(2)
    wheelhouse = build_wheelhouse(tmp_path / "wheelhouse")
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda h: install_hostcheck(h, wheelhouse), hosts))
    ghost = hosts[0].inventory_line().replace(f"{hosts[0].name} ansible_host={hosts[0].ip}",
                                              "ghost ansible_host=10.77.250.2", 1)
    inventory = tmp_path / "fleet.ini"
    inventory.write_text("[lab]\n" + "\n".join([h.inventory_line() for h in hosts] + [ghost]) + "\n")
    reports = tmp_path / "reports"

    result = play.run_playbook(inventory, "audit.yml", extra_vars={
        "audit_report_dir": str(reports), "audit_hostcheck": f"{VENV}/bin/hostcheck",
        "audit_policy": "dedicated-host", "audit_extra_args": ["--offline", "--timeout", "60"],
        "ansible_ssh_timeout": 10})

    # The play tolerates a dead host (ignore_unreachable): it runs on and records it.
    assert result.rc == 0, result.describe()
    assert result.stats("ghost")["ignored"] == 1, result.describe()
    for host in hosts:
        assert result.stats(host.name)["failed"] == 0, result.describe()
    index = json.loads((reports / "index.json").read_text())
    rows = {row["host"]: row for row in index}
    assert set(rows) == {"ghost", *(h.name for h in hosts)}
    assert rows["ghost"]["status"] == "unreachable" and rows["ghost"]["report"] is None
    assert rows["ghost"]["message"], "the reason is kept"
    for host in hosts:
        row = rows[host.name]
        assert row["status"] in ("no-blocker", "blockers") and row["rc"] in (0, 3), row
        report = json.loads((reports / row["report"]).read_text())
        assert report["report_version"] and report["policies"][0]["id"] == "dedicated-host"

    fleet = subprocess.run([str(play.VENV_BIN / "hostcheck"), "fleet", str(reports), "--format", "json"],
                           capture_output=True, text=True, timeout=60)
    assert fleet.returncode == 0, fleet.stderr
    seen = {row["host"]: row for row in json.loads(fleet.stdout)["hosts"]}
    assert seen["ghost"]["reachable"] is False
    assert all(seen[h.name].get("reachable", True) is not False for h in hosts)
