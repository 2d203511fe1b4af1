"""The shipped alert rules and the metrics end to end with the field's own tools.

- `promtool check rules` and `promtool test rules` (tests/prometheus/: series that reproduce
  each alert, and a time before it where it must not fire);
- the real recorder (`hostcheck watch --textfile`, a child process) sampling a DNS responder on
  loopback, the real `prometheus-node-exporter` reading its textfile directory, and the real
  `prometheus` scraping that and loading the rules: the responder stops answering, and the
  outage is in Prometheus's query API within two samples, with its cause; once it answers
  again the outage's count and length are there, against the recording's own samples.

Everything listens on 127.0.0.1 on ports the test picks; nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.recording.store import read_recording
from hostcheck.watch.metrics import CATALOG
from hostcheck.yaml_loader import safe_load
from tests.watch_fixtures import DnsResponder

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "hostcheck" / "watch" / "prometheus_alerts.yaml"
RULE_TESTS = REPO / "tests" / "prometheus" / "hostcheck_watch_alerts_test.yaml"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
NODE_EXPORTER = shutil.which("prometheus-node-exporter")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) is not installed")
INTERVAL_S = 1.0
SCRAPE_S = 1.0


def alerts() -> list[dict[str, Any]]:
    return [r for g in safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r]


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    proc = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"{len(alerts())} rules found" in proc.stdout


@needs_promtool
def test_promtool_unit_tests_reproduce_each_alert() -> None:
    proc = subprocess.run([PROMTOOL, "test", "rules", str(RULE_TESTS)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tested = {t["alertname"] for case in safe_load(RULE_TESTS.read_text())["tests"] for t in case["alert_rule_test"]
              if t.get("exp_alerts")}
    assert tested == {a["alert"] for a in alerts()}, "every alert fires in a unit test"


def test_each_alert_says_what_happened_and_where_to_read_more() -> None:
    registry = load_registry()
    names = {m.name for m in CATALOG}
    for alert in alerts():
        annotations = alert["annotations"]
        assert annotations["summary"] and "{{ $labels.instance }}" in annotations["summary"], alert["alert"]
        ids = re.findall(r"hostcheck explain ([A-Z]+-\d+)", annotations["runbook"])
        assert ids and all(i in registry for i in ids), alert["alert"]
        used = set(re.findall(r"hostcheck_watch_[a-z_]+", alert["expr"]))
        assert used and used <= names, (alert["alert"], used - names)


def test_the_cli_prints_the_shipped_rules() -> None:
    proc = subprocess.run([sys.executable, "-m", "hostcheck.cli", "watch", "alert-rules"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == RULES.read_text()


# ------------------------------------------------------------------ end to end, on loopback


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, probe: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = probe()
        except OSError:
            result = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


class Stack:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.textfile = work / "textfile"
        self.textfile.mkdir()
        self.db = work / "watch.db"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.dns = DnsResponder()
        self.node_port, self.prom_port = free_port(), free_port()

    def start(self, name: str, argv: list[str]) -> None:
        log = open(self.work / f"{name}.log", "wb")
        self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.work))

    def query(self, expr: str) -> dict[frozenset[tuple[str, str]], float]:
        url = f"http://127.0.0.1:{self.prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as resp:
            data = json.load(resp)
        assert data["status"] == "success", data
        return {frozenset((k, v) for k, v in r["metric"].items() if k not in ("instance", "job")): float(r["value"][1])
                for r in data["data"]["result"]}

    def one(self, expr: str) -> float | None:
        values = list(self.query(expr).values())
        return values[0] if len(values) == 1 else None

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.dns.close()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    if not (PROMETHEUS and NODE_EXPORTER):
        pytest.skip("prometheus and prometheus-node-exporter (Debian packages) are not installed")
    s = Stack(tmp_path)
    try:
        s.start("node_exporter", [NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
                                  f"--collector.textfile.directory={s.textfile}",
                                  f"--web.listen-address=127.0.0.1:{s.node_port}"])
        config = tmp_path / "prometheus.yml"
        config.write_text(json.dumps({
            "global": {"scrape_interval": f"{SCRAPE_S:g}s", "evaluation_interval": f"{SCRAPE_S:g}s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": "node", "static_configs": [{"targets": [f"127.0.0.1:{s.node_port}"]}]}],
        }))
        s.start("prometheus", [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{s.prom_port}"])
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        s.procs.append(subprocess.Popen(
            [sys.executable, "-m", "hostcheck.cli", "watch", "--db", str(s.db), "--interval", f"{INTERVAL_S:g}",
             "--target", f"dns:127.0.0.1:{s.dns.port}", "--probe-timeout", "0.3", "--allow-more-traffic",
             "--journal-file", str(tmp_path / "none.journal"), "--textfile", str(s.textfile)],
            stdout=subprocess.DEVNULL, stderr=open(tmp_path / "recorder.log", "wb"), env=env))
        yield s
    finally:
        s.close()


def test_an_outage_reaches_prometheus_within_two_samples(stack: Stack) -> None:
    wait_for("Prometheus to scrape the recorder's metrics", lambda: stack.one("hostcheck_watch_up") == 1, 60)
    rules = json.load(urllib.request.urlopen(f"http://127.0.0.1:{stack.prom_port}/api/v1/rules", timeout=5))
    assert len(rules["data"]["groups"][0]["rules"]) == len(alerts()), "Prometheus loaded the shipped rules"

    written = int(stack.one("hostcheck_watch_samples_total") or 0)
    stack.dns.muted = True  # every target stops answering: a network outage
    seen = wait_for("the outage in Prometheus", lambda: stack.query('hostcheck_watch_state{cause="network"} == 1'), 20)
    assert seen
    # Samples are counted from the one Prometheus had before the cut: the outage shows within two more.
    assert (stack.one("hostcheck_watch_samples_total") or 0) <= written + 2 + SCRAPE_S / INTERVAL_S
    assert stack.one("hostcheck_watch_up") == 0
    time.sleep(2 * INTERVAL_S)
    stack.dns.muted = False
    wait_for("the host up again", lambda: stack.one("hostcheck_watch_up") == 1, 20)
    wait_for("the outage counted", lambda: stack.one('hostcheck_watch_window_outages{window="1d",cause="network"}') == 1, 20)

    # The rule: the outage runs from the first sample that found every target failing to the
    # next sample that found one answering (placed on the boot clock).
    recording = read_recording(stack.db)
    samples = sorted(recording.samples, key=lambda s: s.boottime)
    first_down = next(i for i, s in enumerate(samples) if s.net_ok == 0)
    back_up = next(i for i in range(first_down, len(samples)) if samples[i].net_ok > 0)
    expected = samples[back_up].boottime - samples[first_down].boottime
    down = stack.one('hostcheck_watch_window_down_seconds{window="1d",cause="network"}')
    assert down == pytest.approx(expected, abs=1e-3)
    assert stack.one('hostcheck_watch_window_outages{window="30d",cause="power"}') == 0
    assert stack.one('hostcheck_watch_platform_threshold_ratio{rule="runpod"}') == 0.98
    assert stack.one('hostcheck_watch_platform_verdict{rule="runpod",verdict="unknown"}') == 1
    last = stack.one("hostcheck_watch_last_sample_timestamp_seconds")
    assert last is not None and abs(time.time() - last) < 5 * INTERVAL_S + SCRAPE_S


def test_docs_watch_md_lists_what_the_code_exports() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_watch_metrics_doc.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
