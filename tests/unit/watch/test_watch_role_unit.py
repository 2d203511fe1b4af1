"""The hostcheck_watch role's unit file and argument checks, through Ansible itself on this
machine (no host is changed: the template is rendered by a lookup, the checks are the role's
first task, which fails before anything else runs).

One ansible-playbook run serves the whole module: each case is an inventory host of its own
(connection local, its settings as host variables), so Ansible runs the cases side by side and
each gets its own variables, as a separate run per case would."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.helpers import REPO

ROLE = REPO / "roles" / "hostcheck_watch"
# The suite's virtualenv carries ansible-core; a bare `pytest` run may not have it on PATH.
_BESIDE = Path(sys.executable).parent / "ansible-playbook"
ANSIBLE_PLAYBOOK = str(_BESIDE) if _BESIDE.exists() else shutil.which("ansible-playbook")
pytestmark = pytest.mark.skipif(ANSIBLE_PLAYBOOK is None, reason="ansible-core is not installed")

PROBE_TOKEN = "probe-token-0123456789abcdef"
KUMA_SECRET = "https://kuma.example/api/push/S3cr3tPushToken"

# The unit rendered with each of these settings (over the role's defaults).
RENDERED: dict[str, dict[str, object]] = {
    "defaults": {},
    "quoting": {"hostcheck_watch_targets": ["tcp:[::1]:22", "dns:127.0.0.1"],
                "hostcheck_watch_stun_servers": ["stun.example.net:3478"],
                "hostcheck_watch_allow_more_traffic": True},
    "probe": {"hostcheck_watch_probe_url": "https://probe.example.net:8470",
              "hostcheck_watch_probe_token": PROBE_TOKEN,
              "hostcheck_watch_probe_fingerprint": "AB" * 32,
              "hostcheck_watch_probe_ports": ["40000/tcp", "40001/udp"],
              "hostcheck_watch_probe_every": "30m"},
    "textfile": {"hostcheck_watch_textfile_enabled": True,
                 "hostcheck_watch_notify_kuma_url": KUMA_SECRET,
                 "hostcheck_watch_notify_webhook_url": "https://hooks.example/h/abc"},
}  # fmt: skip

# Settings the role's first check must refuse, each applied on its own.
REFUSED: list[dict[str, object]] = [
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
]  # fmt: skip


@dataclass(frozen=True)
class RoleRun:
    proc: subprocess.CompletedProcess[str]
    units: Path  # one rendered unit per RENDERED case, named after it
    results: Path  # each refused case's last task result, as JSON (Ansible's tree callback)

    def unit(self, case: str) -> str:
        path = self.units / case
        assert path.exists(), self.proc.stdout[-2000:] + self.proc.stderr[-2000:]
        return path.read_text()


@pytest.fixture(scope="module")
def role_run(tmp_path_factory: pytest.TempPathFactory) -> RoleRun:
    tmp = tmp_path_factory.mktemp("watch-role")
    units, results = tmp / "units", tmp / "results"
    units.mkdir()
    local = {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}
    inventory = {"all": {"children": {
        # The template lookup has no role around it: the role's defaults come in as group
        # variables, below each host's own.
        "render": {"vars": yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
                   "hosts": {case: {**local, **settings} for case, settings in RENDERED.items()}},
        "refuse": {"hosts": {f"bad{i}": {**local, **settings} for i, settings in enumerate(REFUSED)}},
    }}}  # fmt: skip
    template = str(ROLE / "templates" / "hostcheck-watch.service.j2")
    playbook = [
        {"hosts": "render", "gather_facts": False, "tasks": [{"ansible.builtin.copy": {
            "content": "{{ lookup('ansible.builtin.template', '" + template + "') }}",
            "dest": f"{units}/{{{{ inventory_hostname }}}}"}}]},
        {"hosts": "refuse", "gather_facts": False,
         "tasks": [{"ansible.builtin.include_role": {"name": "hostcheck_watch", "tasks_from": "apply"}}]},
    ]  # fmt: skip
    (tmp / "inventory.json").write_text(json.dumps(inventory))
    (tmp / "play.yml").write_text(json.dumps(playbook))
    assert ANSIBLE_PLAYBOOK is not None
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp / "inventory.json"), str(tmp / "play.yml")],
                          capture_output=True, text=True, timeout=300, cwd=REPO,
                          env={"PATH": f"{Path(ANSIBLE_PLAYBOOK).parent}:/usr/bin:/bin", "HOME": str(tmp),
                               "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
                               "ANSIBLE_CALLBACKS_ENABLED": "ansible.builtin.tree",
                               "ANSIBLE_CALLBACK_TREE_DIR": str(results)})
    return RoleRun(proc, units, results)


def test_unit_limits_restarts_and_quotes_each_value(role_run: RoleRun) -> None:
    unit = role_run.unit("quoting")
    lines = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    assert lines["StartLimitIntervalSec"] == "600" and lines["StartLimitBurst"] == "5"
    assert unit.index("StartLimitBurst") < unit.index("[Service]")  # systemd reads them in [Unit]
    argv = shlex.split(lines["ExecStart"])  # systemd's double quotes read as a shell reads them here
    assert argv[:4] == ["/usr/local/bin/hostcheck", "watch", "--db", "/var/lib/hostcheck-watch/watch.db"]
    pairs = list(zip(argv, argv[1:], strict=False))
    assert ("--target", "tcp:[::1]:22") in pairs and ("--target", "dns:127.0.0.1") in pairs
    assert ("--stun-server", "stun.example.net:3478") in pairs and "--allow-more-traffic" in argv
    assert '--target "tcp:[::1]:22"' in lines["ExecStart"]


def test_probe_settings_reach_the_unit_and_the_token_stays_out_of_it(role_run: RoleRun) -> None:
    plain = shlex.split(next(line for line in role_run.unit("defaults").splitlines() if line.startswith("ExecStart=")))
    assert not any(a.startswith("--probe") or a == "--token-file" for a in plain)
    unit = role_run.unit("probe")
    argv = shlex.split(next(line for line in unit.splitlines() if line.startswith("ExecStart=")))
    pairs = list(zip(argv, argv[1:], strict=False))
    for pair in [("--probe", "https://probe.example.net:8470"), ("--token-file", "/var/lib/hostcheck-watch/probe-token"),
                 ("--probe-fingerprint", "AB" * 32), ("--probe-port", "40000/tcp"), ("--probe-port", "40001/udp"),
                 ("--probe-every", "30m")]:
        assert pair in pairs, (pair, argv)
    assert PROBE_TOKEN not in unit  # the unit file is world-readable; the token goes to its own 0600 file


@pytest.mark.parametrize("bad", [f"bad{i}" for i in range(len(REFUSED))])
def test_values_that_cannot_go_into_the_unit_are_refused(role_run: RoleRun, bad: str) -> None:
    assert role_run.proc.returncode != 0
    recap = re.search(rf"^{bad}\s+:.* failed=(\d+)", role_run.proc.stdout, re.MULTILINE)
    assert recap is not None and recap.group(1) == "1", role_run.proc.stdout[-2000:]
    result = json.loads((role_run.results / bad).read_text())  # the task its host stopped at
    assert result["evaluated_to"] is False and "cannot go into the service unit" in result["msg"], result
    assert any(name in result["assertion"] for name in REFUSED[int(bad[3:])]), result  # refused for its own value


def test_unit_with_the_textfile_and_notifications_names_files_never_urls(role_run: RoleRun) -> None:
    unit = role_run.unit("textfile")
    lines = dict(line.split("=", 1) for line in unit.splitlines() if "=" in line and not line.startswith("#"))
    pairs = list(zip(shlex.split(lines["ExecStart"]), shlex.split(lines["ExecStart"])[1:], strict=False))
    assert ("--textfile", "/var/lib/prometheus/node-exporter") in pairs
    assert ("--notify-kuma-file", "/var/lib/hostcheck-watch/kuma-url") in pairs
    assert ("--notify-webhook-file", "/var/lib/hostcheck-watch/webhook-url") in pairs
    assert "S3cr3t" not in unit and "hooks.example" not in unit
    # The recorder may write there (ProtectSystem=strict); "-": a missing directory does not stop the unit.
    assert lines["ReadWritePaths"].split() == ["/var/lib/hostcheck-watch", "-/var/lib/prometheus/node-exporter"]
    assert "--textfile" not in role_run.unit("defaults")
