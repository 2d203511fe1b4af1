"""The hostcheck_watch role's unit file and argument checks, through Ansible itself on this
machine (no host is changed: the template is rendered by a lookup, the checks are the role's
first task, which fails before anything else runs)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

ROLE = REPO / "roles" / "hostcheck_watch"
# The suite's virtualenv carries ansible-core; a bare `pytest` run may not have it on PATH.
_BESIDE = Path(sys.executable).parent / "ansible-playbook"
ANSIBLE_PLAYBOOK = str(_BESIDE) if _BESIDE.exists() else shutil.which("ansible-playbook")
pytestmark = pytest.mark.skipif(ANSIBLE_PLAYBOOK is None, reason="ansible-core is not installed")


def play(tmp_path: Path, extra: dict[str, object], tasks: list[dict[str, object]]) -> subprocess.CompletedProcess[str]:
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "connection": "local",
                                     "vars_files": [str(ROLE / "defaults" / "main.yml")], "tasks": tasks}]))
    (tmp_path / "vars.json").write_text(json.dumps(extra))
    assert ANSIBLE_PLAYBOOK is not None
    return subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", str(playbook), "-e", f"@{tmp_path / 'vars.json'}"],
                          capture_output=True, text=True, timeout=120, cwd=REPO,
                          env={"PATH": f"{Path(ANSIBLE_PLAYBOOK).parent}:/usr/bin:/bin", "HOME": str(tmp_path),
                               "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")})


def rendered_unit(tmp_path: Path, extra: dict[str, object]) -> str:
    out = tmp_path / "unit"
    proc = play(tmp_path, extra, [{"ansible.builtin.copy": {
        "content": "{{ lookup('ansible.builtin.template', '" + str(ROLE / "templates" / "hostcheck-watch.service.j2") + "') }}",
        "dest": str(out)}}])  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out.read_text()


def test_unit_limits_restarts_and_quotes_each_value(tmp_path: Path) -> None:
    unit = rendered_unit(tmp_path, {"hostcheck_watch_targets": ["tcp:[::1]:22", "dns:127.0.0.1"],
                                    "hostcheck_watch_stun_servers": ["stun.example.net:3478"],
                                    "hostcheck_watch_allow_more_traffic": True})
    lines = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    assert lines["StartLimitIntervalSec"] == "600" and lines["StartLimitBurst"] == "5"
    assert unit.index("StartLimitBurst") < unit.index("[Service]")  # systemd reads them in [Unit]
    argv = shlex.split(lines["ExecStart"])  # systemd's double quotes read as a shell reads them here
    assert argv[:4] == ["/usr/local/bin/hostcheck", "watch", "--db", "/var/lib/hostcheck-watch/watch.db"]
    pairs = list(zip(argv, argv[1:], strict=False))
    assert ("--target", "tcp:[::1]:22") in pairs and ("--target", "dns:127.0.0.1") in pairs
    assert ("--stun-server", "stun.example.net:3478") in pairs and "--allow-more-traffic" in argv
    assert '--target "tcp:[::1]:22"' in lines["ExecStart"]


def test_probe_settings_reach_the_unit_and_the_token_stays_out_of_it(tmp_path: Path) -> None:
    token = "probe-token-0123456789abcdef"
    plain = shlex.split(next(line for line in rendered_unit(tmp_path, {}).splitlines() if line.startswith("ExecStart=")))
    assert not any(a.startswith("--probe") or a == "--token-file" for a in plain)
    unit = rendered_unit(tmp_path, {"hostcheck_watch_probe_url": "https://probe.example.net:8470",
                                    "hostcheck_watch_probe_token": token,
                                    "hostcheck_watch_probe_fingerprint": "AB" * 32,
                                    "hostcheck_watch_probe_ports": ["40000/tcp", "40001/udp"],
                                    "hostcheck_watch_probe_every": "30m"})
    argv = shlex.split(next(line for line in unit.splitlines() if line.startswith("ExecStart=")))
    pairs = list(zip(argv, argv[1:], strict=False))
    for pair in [("--probe", "https://probe.example.net:8470"), ("--token-file", "/var/lib/hostcheck-watch/probe-token"),
                 ("--probe-fingerprint", "AB" * 32), ("--probe-port", "40000/tcp"), ("--probe-port", "40001/udp"),
                 ("--probe-every", "30m")]:
        assert pair in pairs, (pair, argv)
    assert token not in unit  # the unit file is world-readable; the token goes to its own 0600 file


@pytest.mark.parametrize("bad", [
    {"hostcheck_watch_probe_url": "http://probe.example.net:8470", "hostcheck_watch_probe_token": "t" * 20},
    {"hostcheck_watch_probe_url": "https://probe.example.net:8470"},  # no token
    {"hostcheck_watch_probe_url": "https://p.example", "hostcheck_watch_probe_token": "t" * 20,
     "hostcheck_watch_probe_ports": ["22 --db /etc/passwd"]},
    {"hostcheck_watch_probe_url": "https://p.example", "hostcheck_watch_probe_token": "t" * 20,
     "hostcheck_watch_probe_fingerprint": "not-hex"},

    {"hostcheck_watch_targets": ["tcp:1.1.1.1:443 --db /etc/passwd"]},
    {"hostcheck_watch_targets": ["dns:%H"]},
    {"hostcheck_watch_targets": ["tcp:${HOME}:1"]},
    {"hostcheck_watch_stun_servers": ['stun".example:3478']},
    {"hostcheck_watch_data_dir": "/var/lib/watch data"},
    {"hostcheck_watch_start_limit_burst": 0},
    {"hostcheck_watch_notify_kuma_url": "http://kuma.example/api/push/x"},
    {"hostcheck_watch_notify_webhook_url": "https://hooks.example/a b"},
    {"hostcheck_watch_textfile_enabled": True, "hostcheck_watch_textfile_dir": "/var/lib/%n"},
])  # fmt: skip
def test_values_that_cannot_go_into_the_unit_are_refused(tmp_path: Path, bad: dict[str, object]) -> None:
    proc = play(tmp_path, bad, [{"ansible.builtin.include_role": {"name": "hostcheck_watch", "tasks_from": "apply"}}])
    assert proc.returncode != 0
    assert "cannot go into the service unit" in proc.stdout, proc.stdout[-2000:]


def test_unit_with_the_textfile_and_notifications_names_files_never_urls(tmp_path: Path) -> None:
    secret = "https://kuma.example/api/push/S3cr3tPushToken"
    unit = rendered_unit(tmp_path, {"hostcheck_watch_textfile_enabled": True,
                                    "hostcheck_watch_notify_kuma_url": secret,
                                    "hostcheck_watch_notify_webhook_url": "https://hooks.example/h/abc"})
    lines = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    pairs = list(zip(shlex.split(lines["ExecStart"]), shlex.split(lines["ExecStart"])[1:], strict=False))
    assert ("--textfile", "/var/lib/prometheus/node-exporter") in pairs
    assert ("--notify-kuma-file", "/var/lib/hostcheck-watch/kuma-url") in pairs
    assert ("--notify-webhook-file", "/var/lib/hostcheck-watch/webhook-url") in pairs
    assert "S3cr3t" not in unit and "hooks.example" not in unit
    # The recorder may write there (ProtectSystem=strict); "-": a missing directory does not stop the unit.
    assert lines["ReadWritePaths"].split() == ["/var/lib/hostcheck-watch", "-/var/lib/prometheus/node-exporter"]
    (tmp_path / "off").mkdir()
    assert "--textfile" not in rendered_unit(tmp_path / "off", {})
