"""The generated Ansible inventory reaches the lab hosts as the roles will use it.

Roles are run with ``ansible-playbook -i host.inventory_path``; if the inventory's user,
become, key or ssh arguments are wrong, every role test fails for a reason that has nothing
to do with the role.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.nspawn, pytest.mark.root, pytest.mark.ansible]

VENV_BIN = Path(sys.executable).parent


def ansible(inventory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ['PATH']}", ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(VENV_BIN / "ansible"), "-i", str(inventory), "--one-line", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def one_line_results(output: str) -> dict[str, str]:
    """``--one-line`` output: ``host | STATUS => {json}`` or ``host | STATUS | rc=0 | (stdout) ...``."""
    return {line.split(" | ", 1)[0]: line.split(" | ", 1)[1] for line in output.splitlines() if " | " in line}


def test_inventory_become_and_facts(lab_hosts):
    """One ad-hoc run over the session inventory: both hosts answer, become gives root, and
    Ansible sees a container (roles skip kernel-only tasks on that fact)."""
    hosts = lab_hosts(2)
    inventory = hosts[0].lab.inventory_path
    # the session inventory also lists hosts of other fixtures (shared_lab_host): limit to ours
    names = ",".join(h.name for h in hosts)
    result = ansible(inventory, names, "-m", "ansible.builtin.setup", "-a", "gather_subset=!all,virtual")
    assert result.returncode == 0, result.stdout + result.stderr
    outcomes = one_line_results(result.stdout)
    assert set(outcomes) == {h.name for h in hosts}
    for name, outcome in outcomes.items():
        facts = json.loads(outcome.split(" => ", 1)[1])["ansible_facts"]
        assert facts["ansible_virtualization_type"] == "container", name
    whoami = ansible(hosts[0].inventory_path, "lab", "-m", "ansible.builtin.command", "-a", "id -u")
    assert whoami.returncode == 0, whoami.stdout + whoami.stderr
    assert one_line_results(whoami.stdout)[hosts[0].name].endswith("(stdout) 0"), whoami.stdout
