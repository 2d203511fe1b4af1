"""Provider agents on a real host: the audit names what a Vast-shaped agent holds, catches a
second agent, and agent_oversight records what the agent account runs through sudo.

One nspawn host (Debian 12) for the module. Nothing is downloaded from a platform and no real
installer runs: the stand-ins are shaped like the public installers, as modelled in
policies/agents/agents.yaml --

- Vast (host installer, public copy of about 2020; the sudo rules low-pe/vastai-security-hardening
  saw on 2025-10-24): system account vastai_kaalia, primary group docker, shell /bin/bash,
  home /var/lib/vastai_kaalia with update_launcher.sh; `vastai_kaalia ALL=(ALL) NOPASSWD:ALL`
  appended to /etc/sudoers; vastai.service and vast_metrics.service running as that account
  (here they only sleep); the apt-daily timers masked.
- Salad (Linux onboarding page of 2026-07-01): root services crisper and spinner, config in
  /etc/salad/crisper.ini (a dummy token).
- A human (admin, uid 1000) put in the docker group, as io.net's setup does to the
  installing user.

The audit runs twice before the role: as root (sudoers readable) and as an unprivileged
account (sudoers and the journal unreadable: those facts are unknown, with the reason). Then
agent_oversight is applied (and rerun: nothing changes), the stand-in account runs a command
through sudo, and the audit reports that the logging is on and what it ran. The Vast allowlist
is refused without the operator's statement, then applied once. Rollback restores every file
under /etc and /var/lib as it was before the role, and removes the I/O logs.
Last, vastai.service is made to fail and restart every second: the audit reports the restart
loop (AGT-1070) with systemd's own count, and the stand-in is put back; then the recorder
(`hostcheck watch --drift-every 1`) runs through another loop and its report counts the restarts.

Cost: one host, one hostcheck install, seven audits, five playbook runs: 122-153 s measured on
the 2-core machine, 240 s while other tests shared its cores (the restart loop adds 5 s, the recorder's 10 s).
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lab.nspawn import LabHost
from tests.lab.util import wait_for
from tests.lanes.profile import play
from tests.lanes.profile.test_profile_lifecycle import IDLE_NOISE

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.lab_cost(200)]

VAST_RULE = "vastai_kaalia ALL=(ALL) NOPASSWD:ALL"
STAND_INS = f"""set -e
groupadd -f docker
useradd --system --gid docker --home-dir /var/lib/vastai_kaalia --no-create-home --shell /bin/bash vastai_kaalia
mkdir -p /var/lib/vastai_kaalia
cat > /var/lib/vastai_kaalia/update_launcher.sh <<'EOF'
#!/bin/bash
# stand-in shaped like Vast's: never run by this test (the address is unreachable on purpose)
cd ~vastai_kaalia
wget -q http://127.0.0.1:9/update -O install_update.sh
chmod +x install_update.sh
./install_update.sh "$@"
EOF
chown -R vastai_kaalia:docker /var/lib/vastai_kaalia
printf '# To allow Vast.ai host daemon to administer configuration\\n{VAST_RULE}\\n' >> /etc/sudoers
visudo -c -q
for unit in vastai vast_metrics; do
cat > /etc/systemd/system/$unit.service <<EOF
[Unit]
Description=stand-in for Vast's $unit
[Service]
User=vastai_kaalia
ExecStart=/bin/sleep infinity
[Install]
WantedBy=multi-user.target
EOF
done
systemctl daemon-reload
systemctl enable --now vastai.service vast_metrics.service
systemctl mask apt-daily.timer apt-daily-upgrade.timer
usermod -aG docker admin
useradd --no-create-home --shell /usr/sbin/nologin auditor
"""
SALAD = """set -e
mkdir -p /etc/salad
printf '[matrix]\\njwt="stand-in"\\n' > /etc/salad/crisper.ini
chmod 0600 /etc/salad/crisper.ini
for unit in crisper spinner; do
printf '[Unit]\\nDescription=stand-in for Salad %s\\n[Service]\\nExecStart=/bin/sleep infinity\\n[Install]\\nWantedBy=multi-user.target\\n' $unit > /etc/systemd/system/$unit.service
done
systemctl daemon-reload
systemctl enable --now crisper.service spinner.service
"""
ENABLE = {"agent_oversight_enabled": True}
ALLOWLIST = {**ENABLE, "agent_oversight_vast_allowlist": True}


@dataclass
class Oversight:
    host: LabHost
    audits: dict[str, dict[str, Any]] = field(default_factory=dict)
    plays: dict[str, play.PlayResult] = field(default_factory=dict)
    snaps: dict[str, play.Snapshot] = field(default_factory=dict)
    probes: dict[str, Any] = field(default_factory=dict)


def audit(host: LabHost, *, user: str = "root") -> dict[str, Any]:
    command = f"{VENV}/bin/hostcheck audit --offline --format json --policy vast --policy salad-linux"
    if user != "root":
        command = f"cd / && sudo -u {user} {command}"
    result = host.sudo(command, timeout=120)
    assert result.stdout, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def owner_row(report: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(r for r in report["owner_risk"]["findings"] if r["id"] == check_id)


def finding(report: dict[str, Any], policy: str, check_id: str) -> dict[str, Any]:
    result = next(p for p in report["policies"] if p["id"] == policy)
    return next(f for f in result["findings"] if f["id"] == check_id)


@pytest.fixture(scope="module")
def oversight(lab, tmp_path_factory) -> Iterator[Oversight]:
    host = lab.start_hosts(1)[0]
    life = Oversight(host)
    tmp = tmp_path_factory.mktemp("oversight")
    playbook = play.write_playbook(tmp, "oversight.yml", ["agent_oversight"])
    try:
        install_hostcheck(host, build_wheelhouse(tmp_path_factory.mktemp("wheelhouse")))
        host.sudo(STAND_INS, check=True, timeout=60)
        life.audits["vast_root"] = audit(host)
        life.audits["vast_unprivileged"] = audit(host, user="auditor")
        host.sudo(SALAD, check=True, timeout=60)
        life.audits["two_agents"] = audit(host)

        life.snaps["before"] = play.snapshot(host)
        life.plays["converge"] = play.run_playbook(host.inventory_path, playbook, extra_vars=ENABLE)
        assert life.plays["converge"].rc == 0, life.plays["converge"].describe()
        life.plays["rerun"] = play.run_playbook(host.inventory_path, playbook, extra_vars=ENABLE)
        life.probes["dropin"] = host.sudo("cat /etc/sudoers.d/50-hostcheck-agent-oversight").stdout
        # The stand-in account uses its sudo the way the agent does: non-interactive, no tty.
        life.probes["agent_sudo"] = host.sudo("sudo -u vastai_kaalia sudo -n /usr/bin/id -u")
        life.probes["iolog"] = host.sudo("sudoreplay -d /var/log/sudo-io/vastai_kaalia -l")
        life.audits["logged"] = audit(host)

        life.plays["allowlist_refused"] = play.run_playbook(host.inventory_path, playbook, extra_vars=ALLOWLIST)
        life.probes["sudoers_after_refusal"] = host.sudo("cat /etc/sudoers").stdout
        life.plays["allowlist"] = play.run_playbook(
            host.inventory_path, playbook,
            extra_vars={**ALLOWLIST, "agent_oversight_vast_allowlist_is_a_tripwire": True})
        life.probes["allowed"] = host.sudo("sudo -u vastai_kaalia sudo -n /usr/bin/nvidia-smi -pm 1")
        life.probes["refused"] = host.sudo("sudo -u vastai_kaalia sudo -n /usr/bin/id -u")
        life.audits["allowlist"] = audit(host)

        life.plays["rollback"] = play.run_playbook(host.inventory_path, "rollback.yml")
        life.snaps["rolled_back"] = play.snapshot(host)
        life.probes["iolog_after"] = host.sudo("test -e /var/log/sudo-io && echo present || echo absent").stdout.strip()
        life.probes["agent_sudo_after"] = host.sudo("sudo -u vastai_kaalia sudo -n /usr/bin/id -u")
        yield life
    finally:
        lab.stop_hosts([host])


def test_vast_agent_root_is_in_the_headline_area_with_account_and_rule(oversight: Oversight) -> None:
    report = oversight.audits["vast_root"]
    agt = owner_row(report, "AGT-1010")
    assert agt["status"] == "warn" and agt["level"] == "medium"
    assert "the platform has root on this machine" in agt["detail"]
    assert "vastai_kaalia may run any command as root without a password" in agt["detail"]
    assert f"`{VAST_RULE.replace('NOPASSWD:ALL', 'NOPASSWD: ALL')}` (/etc/sudoers:" in agt["detail"]
    # The lab host has no desktop and no personal data: dedicated, so the agent's root rates
    # medium (OWN-1050 passes); whatever else sets the rating, the headline and the owner-risk
    # statement say that the platform gets root, and the statement names the account and rule.
    assert owner_row(report, "OWN-1050")["status"] == "pass"
    assert "installing the provider agent hands the platform root on this machine" in report["headline"]
    statement = report["owner_risk"]["statement"]
    assert "installing the provider agent hands the platform root on this machine" in statement
    assert "vastai_kaalia may run any command as root without a password: `vastai_kaalia ALL=(ALL) NOPASSWD: ALL` (/etc/sudoers:" in statement


def sudo_views(report: dict[str, Any]) -> dict[str, Any]:
    """What the AGT checks work out that the recorded sudoers grant each agent account."""
    from hostcheck.checks.agents import installed_agents
    from hostcheck.facts import from_jsonable

    agents, _ = installed_agents(from_jsonable(report["facts"]))
    return {account["name"]: account["sudo"] for agent in agents for account in agent["accounts"]}


def test_vast_agent_facts_as_root(oversight: Oversight) -> None:
    agents = oversight.audits["vast_root"]["facts"]["agents"]
    (vast,) = agents["installed"]
    assert vast["id"] == "vast"
    assert {"account vastai_kaalia", "unit vastai.service", "unit vast_metrics.service",
            "path /var/lib/vastai_kaalia"} <= set(vast["evidence"])
    (account,) = vast["accounts"]
    assert account["groups"] == ["docker"] and account["shell"] == "/bin/bash"
    assert sudo_views(oversight.audits["vast_root"])["vastai_kaalia"]["scope"] == "unrestricted"
    assert {u["name"]: (u["enabled"], u["active"]) for u in vast["units"]} == {
        "vastai.service": ("enabled", True), "vast_metrics.service": ("enabled", True)}
    assert vast["update_channel"] == ["/var/lib/vastai_kaalia/update_launcher.sh"]
    assert agents["update_units"]["apt-daily.timer"] == "masked"
    report = oversight.audits["vast_root"]
    assert owner_row(report, "AGT-1020")["status"] == "warn"
    assert finding(report, "vast", "AGT-1060")["detail"].startswith("vastai_kaalia: commands reach the journal through syslog only")


def test_unprivileged_audit_says_what_it_cannot_read(oversight: Oversight) -> None:
    """sudoers is 0440 root and the journal needs systemd-journal or adm: both unknown, with
    the reason. The docker group alone still settles that the platform has root."""
    report = oversight.audits["vast_unprivileged"]
    assert [vast["id"] for vast in report["facts"]["agents"]["installed"]] == ["vast"]
    assert "permission denied reading /etc/sudoers" in report["facts"]["agents"]["sudoers"]["files"][0]["unreadable"]
    assert "permission denied reading /etc/sudoers" in sudo_views(report)["vastai_kaalia"].reason
    assert "systemd-journal" in report["facts"]["agents"]["sudo_activity"]["$unknown"]
    agt = owner_row(report, "AGT-1010")
    assert agt["status"] == "warn"
    assert "vastai_kaalia is in the docker group (root-equivalent); its sudo rules: unknown" in agt["detail"]
    assert finding(report, "vast", "AGT-1060")["status"] == "unknown"


def test_two_agents_are_a_conflict_before_anything_breaks(oversight: Oversight) -> None:
    report = oversight.audits["two_agents"]
    assert sorted(a["id"] for a in report["facts"]["agents"]["installed"]) == ["salad", "vast"]
    # salad-linux is judged against the agents installed beside Salad's: one, Vast's
    salad = finding(report, "salad-linux", "AGT-1030")
    assert salad["status"] == "fail" and salad["severity"] == "blocker" and salad["measured"] == 1
    assert salad["detail"].startswith("conflict: Vast.ai is installed (account vastai_kaalia")
    assert "AGT-1030" in next(p for p in report["policies"] if p["id"] == "salad-linux")["blockers"]
    assert finding(report, "vast", "AGT-1030")["status"] == "warn"


def test_a_human_in_the_docker_group_is_reported(oversight: Oversight) -> None:
    row = owner_row(oversight.audits["vast_root"], "ISO-1020")
    assert row["status"] == "warn" and row["detail"] == "admin"


def test_logging_role_records_what_the_agent_ran(oversight: Oversight) -> None:
    assert "Defaults:vastai_kaalia syslog=authpriv, log_input, log_output" in oversight.probes["dropin"]
    ran = oversight.probes["agent_sudo"]
    assert ran.rc == 0 and ran.stdout.strip() == "0", ran
    listing = oversight.probes["iolog"]
    assert listing.rc == 0 and "COMMAND=/usr/bin/id -u" in listing.stdout, listing
    report = oversight.audits["logged"]
    logged = finding(report, "vast", "AGT-1060")
    assert logged["status"] == "pass" and logged["detail"].startswith("vastai_kaalia: I/O logged")
    activity = report["facts"]["agents"]["sudo_activity"]
    assert {"user": "vastai_kaalia", "command": "/usr/bin/id -u", "outcome": "ran", "count": 1} in activity["commands"]
    # only the agent's entries are counted: admin's own sudo calls (this test's) are not
    assert all(c["user"] == "vastai_kaalia" for c in activity["commands"])


def test_rerun_changes_nothing(oversight: Oversight) -> None:
    rerun = oversight.plays["rerun"]
    assert rerun.rc == 0 and rerun.stats(oversight.host.name)["changed"] == 0, rerun.changed_tasks


def test_allowlist_is_refused_without_the_operators_statement(oversight: Oversight) -> None:
    refused = oversight.plays["allowlist_refused"]
    assert refused.rc != 0 and "is a tripwire, not containment" in refused.output
    assert VAST_RULE in oversight.probes["sudoers_after_refusal"].splitlines()


def test_allowlist_is_a_tripwire_not_containment(oversight: Oversight) -> None:
    result = oversight.plays["allowlist"]
    assert result.rc == 0, result.describe()
    # nvidia-smi is not installed here: sudo allows it and then cannot find it (rc 1, not sudo's refusal)
    assert "not allowed" not in oversight.probes["allowed"].stderr
    refused = oversight.probes["refused"]
    assert refused.rc != 0 and ("a password is required" in refused.stderr or "not allowed" in refused.stderr), refused
    report = oversight.audits["allowlist"]
    sudo = sudo_views(report)["vastai_kaalia"]
    assert sudo["scope"] == "restricted" and sudo["root_giving"], sudo
    agt = owner_row(report, "AGT-1010")
    assert agt["status"] == "warn" and "can be turned into a root shell" in agt["detail"]
    refusals = [c for c in report["facts"]["agents"]["sudo_activity"]["commands"] if c["outcome"] == "refused"]
    assert any(c["command"] == "/usr/bin/id -u" for c in refusals), refusals


def test_rollback_restores_the_host_exactly(oversight: Oversight) -> None:
    assert oversight.plays["rollback"].rc == 0, oversight.plays["rollback"].describe()
    # /var/lib/sudo holds sudo's own per-user state (the lecture marks) from this test's sudo calls.
    diff = play.file_diff(oversight.snaps["before"], oversight.snaps["rolled_back"], ignore=(*IDLE_NOISE, "/var/lib/sudo"))
    assert diff == {}
    assert oversight.probes["iolog_after"] == "absent"
    assert oversight.probes["agent_sudo_after"].stdout.strip() == "0"


# vastai.service made to fail the way a broken agent does: systemd restarts it every second
# (no start limit, so it loops for as long as it is left so).
RESTART_LOOP = """set -e
mkdir -p /etc/systemd/system/vastai.service.d
printf '[Unit]\\nStartLimitIntervalSec=0\\n[Service]\\nExecStart=\\nExecStart=/bin/false\\nRestart=always\\nRestartSec=1\\n' \
  > /etc/systemd/system/vastai.service.d/restart-loop.conf
systemctl daemon-reload
systemctl restart vastai.service || true
"""
END_LOOP = ("rm -rf /etc/systemd/system/vastai.service.d && systemctl daemon-reload "
            "&& systemctl stop vastai.service && systemctl reset-failed vastai.service "
            "&& systemctl start vastai.service")
LOOP_LINE = 3  # the Vast policy's AGT-1070 threshold


def restarts(host: LabHost) -> int:
    return int(host.sudo("systemctl show -p NRestarts --value vastai.service", check=True).stdout.strip())


def test_a_restart_looping_agent_service_is_found(oversight: Oversight) -> None:
    host = oversight.host
    try:
        host.sudo(RESTART_LOOP, check=True, timeout=30)
        deadline = time.monotonic() + 30
        while restarts(host) < LOOP_LINE and time.monotonic() < deadline:
            time.sleep(0.5)
        before = restarts(host)
        assert before >= LOOP_LINE
        report = audit(host)
        after = restarts(host)
    finally:
        host.sudo(END_LOOP, timeout=30)
    row = finding(report, "vast", "AGT-1070")
    assert row["status"] == "warn" and row["severity"] == "risk", row  # a failed risk reads "warn"
    assert before <= row["measured"] <= after
    assert row["detail"].startswith(f"vastai.service restarted {row['measured']} times (")
    assert "exit-code" in row["detail"] and "journalctl -u" in row["fix"] and "kaalia.log" in row["fix"]
    (vast, *_) = [a for a in report["facts"]["agents"]["installed"] if a["id"] == "vast"]
    metrics = next(u for u in vast["units"] if u["name"] == "vast_metrics.service")
    assert metrics["restarts"] == 0 and metrics["active_state"] == "active"
    assert restarts(host) == 0  # reset-failed clears systemd's count, as an owner would after a fix


RECORDING = "/root/agent-watch.db"
RECORDER_UNIT = "hc-agent-watch"
READINGS = ("import json, sqlite3, sys; db = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True); "
            "print(json.dumps([json.loads(d)['value'] for (d,) in db.execute("
            "\"SELECT detail FROM events WHERE kind = 'drift' ORDER BY id\") if json.loads(d).get('unit') == 'vastai.service']))")


def recorded_restarts(host: LabHost) -> list[int]:
    """The NRestarts readings of vastai.service the recorder wrote (one per change), read on the host."""
    out = host.sudo(f"python3 -c {shlex.quote(READINGS)} {RECORDING}")
    return json.loads(out.stdout) if out.rc == 0 else []


def test_the_recorder_counts_a_restart_looping_agents_restarts(oversight: Oversight) -> None:
    """The real recorder on the same host reads systemd's NRestarts each second (--drift-every 1)
    while vastai.service loops; stopping the unit freezes the count, and the report's number is
    the frozen count less the one the recorder started from."""
    host = oversight.host
    try:
        start = restarts(host)
        host.sudo(f"systemd-run --unit={RECORDER_UNIT} {VENV}/bin/hostcheck watch --db {RECORDING} --interval 1 "
                  "--drift-every 1 --for 120 --target tcp:127.0.0.1:22 --allow-more-traffic", check=True)
        wait_for("the recorder's first reading", lambda: recorded_restarts(host), 30)
        assert recorded_restarts(host) == [start]
        host.sudo(RESTART_LOOP, check=True, timeout=30)
        wait_for("the restart loop", lambda: restarts(host) >= start + LOOP_LINE, 30)
        host.sudo("systemctl stop vastai.service", check=True, timeout=30)
        frozen = restarts(host)
        wait_for("the recorder's reading of the frozen count", lambda: recorded_restarts(host)[-1:] == [frozen], 30)
        host.sudo(f"systemctl stop {RECORDER_UNIT}", check=True, timeout=30)
    finally:
        host.sudo(f"systemctl stop {RECORDER_UNIT}; systemctl reset-failed {RECORDER_UNIT}", timeout=30)
        host.sudo(END_LOOP, timeout=30)
    report = json.loads(host.sudo(f"{VENV}/bin/hostcheck watch report --db {RECORDING} --format json",
                                  check=True, timeout=60).stdout)
    host.sudo(f"rm -f {RECORDING}*")
    lines = [d for d in report["drift"] if d["what"] == "restarts"]
    assert len(lines) == 1, report["drift"]
    assert lines[0]["check"] == "AGT-1070"
    assert lines[0]["text"].startswith(f"vastai.service restarted {frozen - start} times during the recording"), lines
    assert lines[0]["text"].endswith(f"(systemd's NRestarts {frozen})"), lines
