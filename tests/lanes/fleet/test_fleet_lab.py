"""The fleet on 5 real lab hosts: audited through playbooks/audit.yml, read with `hostcheck fleet`.

Deliberate differences: `bare` (and `gone`) never get the profile; after the first audit
`drifted` starts a service listening on all interfaces and `gone` is switched off. The table
and the diff must name exactly those differences and nothing else. Docker is left out of the
profile here (docker_host_enabled=false), and so are host_baseline's own settings
(play.BASELINE_PROVEN_ELSEWHERE): both are exercised in tests/lanes/profile, and three full converges
would not fit the 2-core CI machine's time. Two steady profiled hosts are enough to show that identical
hosts read the same; each more host only adds a converge (bench/fleet.py measures scale).

The profiled hosts also run the reliability rehearsal recorder (hostcheck_watch, with the
textfile metrics): after the second audit playbooks/watch-report.yml collects every host's
recording, and `hostcheck fleet watch` shows the three side by side, the two without one first.

Then `steady2` is watched the way an operator would (tests/lanes/fleet/scrape.py): hostcheck_watch with
node_exporter opted in and notifications to a webhook and an Uptime Kuma push URL (check mode,
converge, a rerun that changes nothing), the real `prometheus` scraping that node_exporter, and an
outage made on the host: Prometheus's query API has it with its cause within two samples, the
shipped outage alert goes pending, and the receiver gets one start and one end. Its rollback then
removes the recorder and what the node_exporter install added.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hostcheck.recording.store import Sample, read_recording
from tests.lab.hostcheck_install import VENV, build_wheelhouse, install_hostcheck
from tests.lab.steps import Steps
from tests.lab.util import wait_for
from tests.lanes.fleet import scrape
from tests.lanes.profile.play import BASELINE_PROVEN_ELSEWHERE, PlayResult, playbook_step
from tests.unit.watch.test_watch_alerts import alerts

pytestmark = [pytest.mark.nspawn, pytest.mark.root, pytest.mark.ansible, pytest.mark.fleet, pytest.mark.lab_cost(390)]

ROLES = ["bare", "drifted", "gone", "steady1", "steady2"]
PROFILED = ("drifted", "steady1", "steady2")
"""`gone` only has to answer the first audit and be missing from the second: the profile adds
nothing to that but a converge."""


@dataclass
class Scraped:
    """steady2 with node_exporter and notifications, under an outage (see the module docstring)."""

    check: PlayResult
    converge: PlayResult
    rerun: PlayResult
    after_check: str  # the package's and the unit's state after the check-mode run
    after_converge: str
    rules_loaded: int
    samples_before_cut: float
    samples_at_seen: float
    during: dict[str, Any]  # what Prometheus answered while the host was down
    after: dict[str, Any]  # once it was up again
    samples: list[Sample]  # the host's recording, read after the outage
    requests: list[dict[str, Any]]  # what the receiver got


@dataclass
class Fleet:
    names: dict[str, str]  # role in this test -> lab host name
    before: Path
    after: Path
    watch: Path
    audit_seconds: list[float]
    metrics: str  # a profiled host's textfile metrics
    after_rollback: str  # what is left of the recorder (and node_exporter) on a host whose hostcheck_watch was rolled back
    scraped: Scraped


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
          "watch rollback": 300, "webhook receiver": 60, "node_exporter check": 300, "node_exporter converge": 300,
          "node_exporter rerun": 300, "outage": 120}
INTERVAL_S = 1
WATCH_VARS = {
    "hostcheck_watch_enabled": True,
    "hostcheck_watch_command": f"{VENV}/bin/hostcheck",
    "hostcheck_watch_interval_s": INTERVAL_S,
    "hostcheck_watch_allow_more_traffic": True,  # one sample a second
    "hostcheck_watch_targets": ["tcp:127.0.0.1:22", "tcp:[::1]:22"],  # the host itself: no internet here
    "hostcheck_watch_textfile_enabled": True,
}


SCRAPE_S = 1.0
EXPORTER = "prometheus-node-exporter"  # hostcheck_watch_node_exporter_package's default
EXPORTER_STATE = (f"dpkg-query -W -f='${{Status}}\\n' {EXPORTER} 2>/dev/null || echo not-installed; "
                  f"systemctl is-active {EXPORTER}.service; true")


def _watch_playbook(path: Path, name: str, body: dict[str, Any]) -> Path:
    # hostcheck_watch reads no facts: gathering them would only cost each run seconds.
    path.write_text(json.dumps([{"name": name, "hosts": "all", "become": True, "gather_facts": False, **body}]))
    return path


def _watch_with_prometheus(steps: Steps, lab: Any, host: Any, work: Path) -> Scraped:
    with steps.step("webhook receiver", BUDGET["webhook receiver"]):
        ca, cert, key = scrape.webhook_certificate(work, host.gateway)
        scrape.trust(host, ca)
        receiver = scrape.WebhookReceiver(lab, host.gateway, cert, key, work / "webhook.jsonl")
    prometheus = None
    try:
        playbook = _watch_playbook(work / "watch-node-exporter.yml", "Apply hostcheck_watch", {"roles": ["hostcheck_watch"]})
        opted_in = {**WATCH_VARS, "hostcheck_watch_node_exporter_install": True,
                    "hostcheck_watch_notify_webhook_url": f"{receiver.url}/hook",
                    "hostcheck_watch_notify_kuma_url": f"{receiver.url}/api/push/labPushToken?status=up&msg=OK&ping="}
        inventory = host.inventory_path
        check = playbook_step(steps, "node_exporter check", BUDGET["node_exporter check"], inventory, playbook,
                              extra_vars=opted_in, check=True)
        after_check = host.sudo(EXPORTER_STATE).stdout
        converge = playbook_step(steps, "node_exporter converge", BUDGET["node_exporter converge"], inventory, playbook,
                                 extra_vars=opted_in)
        after_converge = host.sudo(EXPORTER_STATE).stdout
        rerun = playbook_step(steps, "node_exporter rerun", BUDGET["node_exporter rerun"], inventory, playbook,
                              extra_vars=opted_in)
        assert converge.rc == 0, converge.tail()

        with steps.step("outage", BUDGET["outage"]):
            prometheus = scrape.Prometheus(host, work, SCRAPE_S)
            wait_for("Prometheus to scrape the recorder's metrics", lambda: prometheus.one("hostcheck_watch_up") == 1, 60)
            rules = sum(len(g["rules"]) for g in prometheus.api("rules")["groups"])
            before_cut = prometheus.one("hostcheck_watch_samples_total") or 0
            scrape.cut_network(host)
            try:
                # The sample count of the first scrape that has the outage with its cause.
                seen = wait_for("the outage in Prometheus", lambda: prometheus.one(
                    'hostcheck_watch_samples_total and on (instance) hostcheck_watch_state{cause="network"} == 1'), 20)
                during = {"up": prometheus.one("hostcheck_watch_up"),
                          "pending": wait_for("the outage alert", lambda: prometheus.query(
                              'ALERTS{alertname="HostcheckOutage",alertstate="pending"}'), 20)}
            finally:
                scrape.restore_network(host)
            wait_for("the host up again", lambda: prometheus.one("hostcheck_watch_up") == 1, 20)
            window = 'hostcheck_watch_window_{}{{window="{}",cause="{}"}}'
            wait_for("the outage counted", lambda: prometheus.one(window.format("outages", "1d", "network")) == 1, 20)
            after = {q: prometheus.one(q) for q in (
                window.format("outages", "1d", "network"), window.format("down_seconds", "1d", "network"),
                window.format("outages", "30d", "power"), 'hostcheck_watch_platform_threshold_ratio{rule="runpod"}',
                "hostcheck_watch_last_sample_timestamp_seconds")}
            after["now"] = time.time()
            samples = read_recording(scrape.copy_recording(host, "/var/lib/hostcheck-watch/watch.db",
                                                           work / "steady2-watch.db")).samples
            wait_for("the outage's end at the webhook",
                     lambda: any(json.loads(r["body"] or "{}").get("event") == "outage_end"
                                 for r in receiver.requests() if r["method"] == "POST"), 30)
    finally:
        if prometheus is not None:
            prometheus.close()
        receiver.close()
    return Scraped(check, converge, rerun, after_check, after_converge, rules, before_cut, seen, during, after,
                   samples, receiver.requests())


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
                                 extra_vars={"docker_host_enabled": False, **BASELINE_PROVEN_ELSEWHERE, **WATCH_VARS})
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
        scraped = _watch_with_prometheus(steps, lab, by_role["steady2"], work)
        rollback = _watch_playbook(work / "watch-rollback.yml", "Roll back hostcheck_watch", {"tasks": [
            {"name": "Roll back", "ansible.builtin.include_role": {"name": "hostcheck_watch", "tasks_from": "rollback.yml"}}]})
        rolled = playbook_step(steps, "watch rollback", BUDGET["watch rollback"],
                               _inventory(work / "steady2.ini", [by_role["steady2"]]), rollback)
        assert rolled.rc == 0, rolled.tail()
        left = by_role["steady2"].sudo("ls -d /var/lib/prometheus /var/lib/hostcheck-watch "
                                       "/etc/systemd/system/hostcheck-watch.service 2>/dev/null; "
                                       f"dpkg-query -W -f='${{Status}}\\n' {EXPORTER} 2>/dev/null | grep -v ' not-installed$'; "
                                       "getent passwd prometheus; true").stdout
        yield Fleet({r: h.name for r, h in by_role.items()}, before, after, watch, seconds, metrics, left, scraped)
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


def test_node_exporter_opt_in_checks_then_installs_then_changes_nothing(fleet: Fleet) -> None:
    scraped = fleet.scraped
    assert scraped.check.rc == 0, scraped.check.tail()
    assert scraped.check.stats(fleet.names["steady2"])["changed"] > 0
    package, unit = scraped.after_check.splitlines()
    assert package.endswith("not-installed") and unit == "inactive", "check mode installs and starts nothing"
    assert scraped.converge.rc == 0, scraped.converge.tail()
    assert "hostcheck_watch : Install node_exporter from the distribution" in scraped.converge.changed_tasks
    assert scraped.after_converge.splitlines() == ["install ok installed", "active"]
    assert scraped.rerun.rc == 0, scraped.rerun.tail()
    assert scraped.rerun.stats(fleet.names["steady2"])["changed"] == 0, scraped.rerun.changed_tasks


def test_an_outage_reaches_prometheus_with_its_cause_within_two_samples(fleet: Fleet) -> None:
    scraped = fleet.scraped
    assert scraped.rules_loaded == len(alerts()), "Prometheus loaded the shipped rules"
    # Counted from the sample Prometheus had before the cut: the outage shows within two more.
    assert scraped.samples_at_seen <= scraped.samples_before_cut + 2 + SCRAPE_S / INTERVAL_S
    assert scraped.during["up"] == 0
    assert [dict(labels)["cause"] for labels in scraped.during["pending"]] == ["network"]

    # The rule: the outage runs from the first sample that found every target failing to the
    # next sample that found one answering (placed on the boot clock).
    samples = sorted(scraped.samples, key=lambda s: s.boottime)
    first_down = next(i for i, s in enumerate(samples) if s.net_ok == 0)
    back_up = next(i for i in range(first_down, len(samples)) if samples[i].net_ok > 0)
    after = scraped.after
    assert after['hostcheck_watch_window_down_seconds{window="1d",cause="network"}'] == pytest.approx(
        samples[back_up].boottime - samples[first_down].boottime, abs=1e-3)
    # The converge restarted the recorder: a clean stop, not a power outage.
    assert after['hostcheck_watch_window_outages{window="30d",cause="power"}'] == 0
    assert after['hostcheck_watch_platform_threshold_ratio{rule="runpod"}'] == 0.98
    assert abs(after["now"] - after["hostcheck_watch_last_sample_timestamp_seconds"]) < 5 * INTERVAL_S + SCRAPE_S


def test_the_webhook_and_kuma_get_one_start_and_one_end(fleet: Fleet) -> None:
    scraped = fleet.scraped
    hooks = [json.loads(r["body"]) for r in scraped.requests if r["method"] == "POST"]
    assert [h["event"] for h in hooks] == ["recorder_start", "outage_start", "outage_end"]
    start, end = hooks[1], hooks[2]
    assert hooks[0]["detail"]["previous_stop"].startswith("a clean stop"), "the converge restarted the recorder"
    assert start["status"] == "down" and start["detail"] == {"cause": "network"}
    assert start["host"] == fleet.names["steady2"]
    # Its length, on the wall clock, from the first failing sample to the first answering one.
    samples = scraped.samples
    first_down = next(i for i, s in enumerate(samples) if s.net_ok == 0)
    back_up = next(i for i in range(first_down, len(samples)) if samples[i].net_ok > 0)
    assert end["status"] == "up"
    assert end["detail"] == {"cause": "network", "seconds": round(samples[back_up].t - samples[first_down].t, 1)}
    pushes = [urllib.parse.urlsplit(r["path"]) for r in scraped.requests if r["method"] == "GET"]
    assert {p.path for p in pushes} == {"/api/push/labPushToken"}
    assert [urllib.parse.parse_qs(p.query)["status"] for p in pushes] == [["up"], ["down"], ["up"]]


def test_rollback_removes_the_recorder_its_textfile_and_node_exporter(fleet: Fleet) -> None:
    # /var/lib/prometheus did not exist before the profile: the role created it for the
    # textfile directory, and rollback removes both with the metrics file; the node_exporter
    # package and the account its install added are gone with them.
    assert fleet.after_rollback.strip() == ""
