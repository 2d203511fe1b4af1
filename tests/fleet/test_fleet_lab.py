"""The fleet on 5 real lab hosts: audited through playbooks/audit.yml, read with `hostcheck fleet`.

Deliberate differences: `bare` (and `gone`) never get the profile; after the first audit
`drifted` starts a service listening on all interfaces and `gone` is switched off. The table
and the diff must name exactly those differences and nothing else. Docker is left out of the
profile here (docker_host_enabled=false): it is exercised in tests/profile, and five engines
would not fit the 2-core CI machine's time. Two steady profiled hosts are enough to show that identical
hosts read the same; each more host only adds a converge (bench/fleet.py measures scale).

The profiled hosts also run the reliability rehearsal recorder (hostcheck_watch, with the
textfile metrics): after the second audit playbooks/watch-report.yml collects every host's
recording, and `hostcheck fleet watch` shows the three side by side, the two without one first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lab.steps import Steps
from tests.profile.play import playbook_step

pytestmark = [pytest.mark.nspawn, pytest.mark.root, pytest.mark.ansible, pytest.mark.fleet, pytest.mark.lab_cost(390)]

ROLES = ["bare", "drifted", "gone", "steady1", "steady2"]
PROFILED = ("drifted", "steady1", "steady2")
"""`gone` only has to answer the first audit and be missing from the second: the profile adds
nothing to that but a converge."""


@dataclass
class Fleet:
    names: dict[str, str]  # role in this test -> lab host name
    before: Path
    after: Path
    watch: Path
    audit_seconds: list[float]
    metrics: str  # a profiled host's textfile metrics
    after_rollback: str  # what is left of the recorder on a host whose hostcheck_watch was rolled back


def _inventory(path: Path, hosts: list[Any]) -> Path:
    lines = ["[lab]"]
    for host in hosts:
        lines += [line for line in host.inventory_path.read_text().splitlines() if line and not line.startswith("[")]
    path.write_text("\n".join(lines) + "\n")
    return path


# --offline: a lab host must not try the public STUN servers (no test reaches the internet).
AUDIT_EXTRA_ARGS = ["--offline"]


# Step budgets: at least 3x a cold run on the 2-core CI machine (README's Tests section).
BUDGET = {"boot": 240, "install hostcheck": 600, "converge": 1200, "audit": 600, "drift": 120, "watch report": 300,
          "watch rollback": 300}
WATCH_VARS = {
    "hostcheck_watch_enabled": True,
    "hostcheck_watch_command": f"{VENV}/bin/hostcheck",
    "hostcheck_watch_interval_s": 1,
    "hostcheck_watch_allow_more_traffic": True,  # one sample a second
    "hostcheck_watch_targets": ["tcp:127.0.0.1:22", "tcp:[::1]:22"],  # the host itself: no internet here
    "hostcheck_watch_textfile_enabled": True,
}


def _audit(steps: Steps, name: str, inventory: Path, into: Path) -> float:
    # The second audit has a switched-off host: it costs one SSH connect timeout (nspawn hosts
    # answer in well under a second; the suite's default of 60 s is for the TCG VM).
    result = playbook_step(steps, name, BUDGET["audit"], inventory, "audit.yml",
                           extra_vars={"audit_report_dir": str(into), "audit_extra_args": AUDIT_EXTRA_ARGS,
                                       "ansible_ssh_timeout": 10})
    assert result.rc == 0, result.tail()
    return result.seconds


@pytest.fixture(scope="module")
def fleet(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("fleet")
    steps = Steps("fleet")
    with steps.step("boot", BUDGET["boot"]):
        hosts = lab.start_hosts(len(ROLES))
    by_role = dict(zip(ROLES, hosts, strict=False))
    try:
        with steps.step("install hostcheck", BUDGET["install hostcheck"]):
            wheelhouse = build_wheelhouse(work / "wheels")

            def install(host: Any) -> None:
                install_hostcheck(host, wheelhouse)
                host.sudo(f"ln -sf {VENV}/bin/hostcheck /usr/local/bin/hostcheck", check=True)

            with ThreadPoolExecutor(len(hosts)) as pool:
                list(pool.map(install, hosts))
        everyone = _inventory(work / "all.ini", hosts)
        profiled = _inventory(work / "profiled.ini", [h for r, h in by_role.items() if r in PROFILED])
        converge = playbook_step(steps, "converge", BUDGET["converge"], profiled, "site.yml",
                                 extra_vars={"docker_host_enabled": False, **WATCH_VARS})
        assert converge.rc == 0, converge.tail()

        before, after = work / "before", work / "after"
        seconds = [_audit(steps, "first audit", everyone, before)]
        with steps.step("drift", BUDGET["drift"]):
            by_role["drifted"].sudo(
                "systemd-run --unit=hc-fleet-extra python3 -m http.server --bind 0.0.0.0 8080", check=True)
            by_role["drifted"].sudo(
                "for i in $(seq 50); do ss -ltn | grep -q ':8080 ' && exit 0; sleep 0.1; done; exit 1", check=True)
            lab.stop_hosts([by_role["gone"]])
        seconds.append(_audit(steps, "second audit", everyone, after))
        watch = work / "watch"
        report = playbook_step(steps, "watch report", BUDGET["watch report"], everyone, "watch-report.yml",
                               extra_vars={"watch_report_dir": str(watch), "watch_report_hostcheck": f"{VENV}/bin/hostcheck",
                                           "ansible_ssh_timeout": 10})
        assert report.rc == 0, report.tail()
        metrics = by_role["steady1"].sudo("cat /var/lib/prometheus/node-exporter/hostcheck_watch.prom").stdout
        rollback = work / "watch-rollback.yml"
        rollback.write_text(json.dumps([{"name": "Roll back hostcheck_watch", "hosts": "all", "become": True, "tasks": [
            {"name": "Roll back", "ansible.builtin.include_role": {"name": "hostcheck_watch", "tasks_from": "rollback.yml"}}]}]))
        rolled = playbook_step(steps, "watch rollback", BUDGET["watch rollback"],
                               _inventory(work / "steady2.ini", [by_role["steady2"]]), rollback)
        assert rolled.rc == 0, rolled.tail()
        left = by_role["steady2"].sudo("ls -d /var/lib/prometheus /var/lib/hostcheck-watch "
                                       "/etc/systemd/system/hostcheck-watch.service 2>/dev/null; true").stdout
        yield Fleet({r: h.name for r, h in by_role.items()}, before, after, watch, seconds, metrics, left)
    finally:
        lab.stop_hosts([h for r, h in by_role.items() if r != "gone"])


def _hostcheck(*args: str) -> dict[str, Any] | list[Any]:
    proc = subprocess.run([sys.executable, "-m", "hostcheck.cli", *args, "--format", "json"],
                          capture_output=True, text=True, timeout=60)
    # 4: feasible, but the owner risk is high or unknown (a lab host audited offline may be)
    assert proc.returncode in (0, 4), proc.stderr
    return json.loads(proc.stdout)


def _comparable(row: dict[str, Any]) -> Any:
    return {pid: (r["verdict"], r["blockers"]) for pid, r in row["policies"].items()}, row["owner_risk"]


def test_every_host_reported_in_the_first_audit(fleet: Fleet) -> None:
    index = json.loads((fleet.before / "index.json").read_text())
    assert sorted(row["host"] for row in index) == sorted(fleet.names.values())
    assert all(row["report"] for row in index), index


def test_fleet_table_names_exactly_the_differences(fleet: Fleet) -> None:
    data = _hostcheck("fleet", str(fleet.after), "--policy", "dedicated-host")
    rows = {row["host"]: row for row in data["hosts"]}
    name = fleet.names
    # Unreachable first, then the host failing the hygiene policy the worst.
    assert data["hosts"][0]["host"] == name["gone"]
    assert rows[name["gone"]]["reachable"] is False and "unreachable" in rows[name["gone"]]["reason"]

    profiled = [rows[name[r]] for r in ("steady1", "steady2")]
    reference = _comparable(profiled[0])
    assert all(_comparable(row) == reference for row in profiled), "identically profiled hosts must read the same"

    bare = rows[name["bare"]]["policies"]["dedicated-host"]
    assert "NET-1010" in bare["blockers"]  # no firewall without the profile
    assert _comparable(rows[name["bare"]]) != reference

    drifted = _hostcheck("audit", "--facts", str(fleet.after / f"{name['drifted']}.json"), "--policy", "dedicated-host")
    steady = _hostcheck("audit", "--facts", str(fleet.after / f"{name['steady1']}.json"), "--policy", "dedicated-host")
    assert set(drifted["policies"][0]["risks"]) - set(steady["policies"][0]["risks"]) == {"OWN-1040"}


def test_fleet_diff_names_exactly_the_drift(fleet: Fleet) -> None:
    changes = {item["host"]: item["changes"] for item in _hostcheck("fleet", "diff", str(fleet.before), str(fleet.after))}
    name = fleet.names
    assert set(changes) == {name["drifted"], name["gone"]}
    assert [c["kind"] for c in changes[name["gone"]]] == ["reachability"]
    drift = {(c["kind"], c.get("check"), c["detail"] if c["kind"].endswith("listening") else None) for c in changes[name["drifted"]]}
    assert ("new_listening", None, "tcp/8080 on 0.0.0.0") in drift
    assert {c.get("check") for c in changes[name["drifted"]] if c["kind"] == "finding_regressed"} == {"OWN-1040"}
    assert not [c for c in changes[name["drifted"]] if c["kind"] == "closed_listening"]


def test_fleet_watch_shows_the_recordings_side_by_side(fleet: Fleet) -> None:
    data = _hostcheck("fleet", "watch", str(fleet.watch))
    assert isinstance(data, dict)
    rows = data["hosts"]
    name = fleet.names
    # No recording first (bare never got the recorder; gone is off), then the recorded hosts.
    assert {r["host"] for r in rows[:2]} == {name["bare"], name["gone"]}
    assert all(r["readable"] is False and r["reason"] for r in rows[:2])
    recorded = rows[2:]
    assert sorted(r["host"] for r in recorded) == sorted(name[r] for r in PROFILED)
    for row in recorded:
        assert row["readable"] and row["observed_days"] > 0 and row["uptime"] is not None, row
        assert set(row["platforms"]) == {"runpod", "vast", "ionet"}, row


def test_profiled_hosts_write_the_textfile_metrics(fleet: Fleet) -> None:
    lines = dict(line.rsplit(" ", 1) for line in fleet.metrics.splitlines() if line and not line.startswith("#"))
    assert lines["hostcheck_watch_up"] == "1"
    assert float(lines["hostcheck_watch_samples_total"]) >= 1


def test_rollback_removes_the_recorder_and_its_textfile(fleet: Fleet) -> None:
    # /var/lib/prometheus did not exist before the profile: the role created it for the
    # textfile directory, and rollback removes both with the metrics file.
    assert fleet.after_rollback.strip() == ""
