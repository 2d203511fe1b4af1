"""The shipped alert rules with the field's own tools: `promtool check rules` and `promtool test
rules` (tests/prometheus/: series that reproduce each alert, and a time before it where it must
not fire), each alert's wording, and the metric list in docs/watch.md.

The metrics end to end (the recorder on a lab host, the real `prometheus-node-exporter` reading
its textfile, the real `prometheus` scraping it and loading these rules, an outage in the query
API with its cause) are in the fleet lane, tests/lanes/fleet/test_fleet_lab.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hostcheck.checks import load_registry
from hostcheck.watch.metrics import CATALOG
from hostcheck.yaml_loader import safe_load

REPO = Path(__file__).resolve().parents[3]
RULES = REPO / "hostcheck" / "watch" / "prometheus_alerts.yaml"
RULE_TESTS = REPO / "tests" / "prometheus" / "hostcheck_watch_alerts_test.yaml"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) is not installed")


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


def test_docs_watch_md_lists_what_the_code_exports() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_watch_metrics_doc.py"), "--check"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
