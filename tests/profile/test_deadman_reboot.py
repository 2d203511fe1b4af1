"""The firewall's dead-man switch across a reboot: a ruleset that shuts out the machine
applying it is loaded, the run loses the host, and the host is restarted inside the dead-man
window (from its console: SSH is shut out). The transient timer dies with the boot, so what
comes back must be the persistent ruleset from before the change, and SSH with it: the role
writes the persistent file and the boot unit only after the run has confirmed access.
"""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.lab.util import wait_for
from tests.profile import play

pytestmark = [pytest.mark.nspawn, pytest.mark.ansible, pytest.mark.root, pytest.mark.lab_cost(120)]

# Long enough that the timer cannot be what lets the run back in.
DEADMAN_SECONDS = 600


def test_reboot_inside_the_deadman_window_boots_the_previous_ruleset(lab_host, tmp_path) -> None:
    host = lab_host
    firewall_only = play.write_playbook(tmp_path, "firewall.yml", ["firewall"])
    good = play.run_playbook(host.inventory_path, firewall_only)
    assert good.rc == 0, good.describe()
    table = host.sudo("nft list table inet hostcheck").stdout
    config = host.sudo("cat /etc/hostcheck/firewall.nft").stdout
    assert "policy drop" in table

    started = time.monotonic()
    bad = play.run_playbook(host.inventory_path, firewall_only,
                            extra_vars={"firewall_admin_ranges": ["192.0.2.0/24"],
                                        "firewall_deadman_seconds": DEADMAN_SECONDS, "ansible_ssh_timeout": 5})
    assert bad.rc != 0 and bad.stats(host.name)["unreachable"] == 1, bad.describe()
    host.close_ssh_masters()
    assert host.run("true", timeout=8).rc != 0, "the bad ruleset must really shut SSH out"

    # Restart from the console, as an owner at the keyboard would.
    boots = host.boots()
    subprocess.run(["nsenter", "-t", str(host.leader_pid()), "-a", "systemctl", "reboot"],
                   capture_output=True, timeout=30, check=False)
    wait_for(f"{host.name} to restart", lambda: host.boots() > boots, 120)
    host.wait_ssh(120)
    assert time.monotonic() - started < DEADMAN_SECONDS, "the timer, not the reboot, may have restored it"

    assert host.sudo("nft list table inet hostcheck").stdout == table
    assert host.sudo("cat /etc/hostcheck/firewall.nft").stdout == config
    assert host.sudo("systemctl is-active hostcheck-firewall.service").stdout.strip() == "active"
    assert "dead-man switch fired" not in host.sudo("journalctl -t hostcheck-firewall --no-pager").stdout
    again = play.run_playbook(host.inventory_path, firewall_only)
    assert again.rc == 0 and again.stats(host.name)["changed"] == 0, again.changed_tasks
